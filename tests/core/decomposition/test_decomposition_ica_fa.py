"""ica (FastICA) and factor_analysis: source recovery, EM monotonicity, scikit-learn parity."""

import numpy as np
import pytest
from sklearn.datasets import load_digits, load_iris, load_wine
from sklearn.decomposition import FactorAnalysis as SkFA
from sklearn.decomposition import FastICA as SkICA
from sklearn.preprocessing import StandardScaler

from core.context import FitContext
from core.decomposition.factor_analysis import FactorAnalysis
from core.decomposition.ica import FastICA


def _proj(V):
    Q, _ = np.linalg.qr(np.asarray(V).T)
    return Q @ Q.T


def _unit_rows(C):
    return C / np.linalg.norm(C, axis=1, keepdims=True)


def _match_up_to_sign_and_order(A, B):
    """max over rows of 1 - |cos| between each row of A and its best partner in B."""
    M = np.abs(_unit_rows(A) @ _unit_rows(B).T)
    assert sorted(np.argmax(M, axis=1)) == list(range(len(A)))  # a permutation
    return float(np.max(1.0 - M.max(axis=1)))


def _cocktail(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 8, n)
    S = np.c_[np.sin(2 * t), np.sign(np.sin(3 * t)), 2.0 * (t % 1.0) - 1.0]  # sine, square, sawtooth
    S += 0.02 * rng.normal(size=S.shape)
    A = np.array([[1.0, 1.0, 1.0], [0.5, 2.0, 1.0], [1.5, 1.0, 2.0]])
    return S @ A.T, S


@pytest.mark.parametrize("algorithm", ["parallel", "deflation"])
@pytest.mark.parametrize("fun", ["logcosh", "exp", "cube"])
def test_ica_recovers_sources(algorithm, fun):
    X, S = _cocktail()
    ica = FastICA(n_components=3, algorithm=algorithm, fun=fun, random_state=0, max_iter=500).fit(X)
    est = ica.transform(X)
    C = np.abs(np.corrcoef(est.T, S.T)[:3, 3:])
    assert np.all(C.max(axis=1) > 0.99)
    np.testing.assert_allclose(est.std(axis=0), 1.0, atol=1e-10)  # unit-variance whitening
    np.testing.assert_allclose(ica.inverse_transform(est), X, atol=1e-8)


@pytest.mark.parametrize(
    "fun,data",
    [(f, d) for f in ("logcosh", "exp", "cube") for d in ("cocktail", "iris")]
    # wine: logcosh and cube only; with exp both implementations converge but FastICA on real
    # data has several fixed points and the two random starts reach different ones
    + [("logcosh", "wine"), ("cube", "wine")],
)
def test_ica_unmixing_matches_sklearn_up_to_sign_and_order(fun, data):
    if data == "cocktail":
        X = _cocktail()[0]
    else:
        X = (load_iris if data == "iris" else load_wine)().data
        X = StandardScaler().fit_transform(X)[:, :4]
    kw = dict(fun=fun, tol=1e-12, max_iter=3000)
    ours = FastICA(random_state=0, **kw).fit(X)
    ref = SkICA(random_state=0, **kw).fit(X)
    if data != "cocktail" and (ours.n_iter_ >= 3000 or ref.n_iter_ >= 3000):
        pytest.skip("no convergence on this real dataset")
    assert _match_up_to_sign_and_order(ours.components_, ref.components_) < 1e-6


def test_ica_sign_convention_and_progress():
    X, _ = _cocktail(500)
    seen = []
    ctx = FitContext(on_progress=lambda f, m: seen.append(m), min_interval=0.0)
    ica = FastICA(random_state=0).fit(X, ctx=ctx)
    V = ica.components_
    assert np.all(V[np.arange(3), np.argmax(np.abs(V), axis=1)] > 0)
    assert sum("change" in m for m in seen) == ica.n_iter_
    a = FastICA(random_state=3).fit(X).components_
    b = FastICA(random_state=3).fit(X).components_
    np.testing.assert_array_equal(a, b)


# -- factor analysis --------------------------------------------------------------------
def _fa_data(name):
    if name == "wine":
        return StandardScaler().fit_transform(load_wine().data)
    return load_digits().data[:600]


@pytest.mark.parametrize("data", ["wine", "digits"])
def test_fa_em_log_likelihood_never_decreases(data):
    X = _fa_data(data)
    fa = FactorAnalysis(n_components=3, solver="em", tol=0.0, max_iter=150).fit(X)
    ll = fa.loglike_
    assert ll.size == 150
    assert np.all(np.diff(ll) >= -1e-9 * np.abs(ll[1:]))
    # loglike_ agrees with the fitted model's score_samples
    assert ll[-1] == pytest.approx(fa.score_samples(X).sum(), rel=1e-6)


# digits is left out of the scikit-learn parity: its near-constant pixels make the SVD
# iterations slow to converge (scikit-learn needs ~25 s on a loaded 2-core machine)
@pytest.mark.parametrize("data", ["wine"])
@pytest.mark.parametrize("solver", ["svd", "em"])
def test_fa_subspace_matches_sklearn(data, solver):
    X = _fa_data(data)
    ref = SkFA(n_components=2, tol=1e-10, max_iter=20000, svd_method="lapack").fit(X)
    ours = FactorAnalysis(n_components=2, solver=solver, tol=1e-10, max_iter=20000).fit(X)
    np.testing.assert_allclose(_proj(ours.components_), _proj(ref.components_), atol=1e-6)
    np.testing.assert_allclose(ours.get_covariance(), ref.get_covariance(), atol=1e-3)
    np.testing.assert_allclose(ours.score_samples(X), ref.score_samples(X), rtol=1e-4)
    # posterior means agree up to the sign of each factor (our sign convention)
    Za, Zb = ours.transform(X), ref.transform(X)
    if solver == "svd":
        np.testing.assert_allclose(np.abs(Za), np.abs(Zb), atol=1e-5)


def test_fa_recovers_a_low_rank_model_and_precision():
    rng = np.random.default_rng(0)
    L = rng.normal(size=(8, 2))
    psi = rng.uniform(0.1, 0.5, size=8)
    X = rng.normal(size=(4000, 2)) @ L.T + rng.normal(size=(4000, 8)) * np.sqrt(psi)
    fa = FactorAnalysis(n_components=2, tol=1e-6).fit(X)
    np.testing.assert_allclose(fa.noise_variance_, psi, atol=0.05)
    np.testing.assert_allclose(_proj(fa.components_), _proj(L.T), atol=0.05)
    np.testing.assert_allclose(fa.get_precision() @ fa.get_covariance(), np.eye(8), atol=1e-8)


def test_ica_whitening_options_match_sklearn():
    X, S = _cocktail(1000)
    kw = dict(whiten="arbitrary-variance", random_state=0, tol=1e-12, max_iter=2000)
    ours = FastICA(**kw).fit(X)
    ref = SkICA(**kw).fit(X)
    assert _match_up_to_sign_and_order(ours.components_, ref.components_) < 1e-6
    np.testing.assert_allclose(ours.transform(X).std(axis=0), ref.transform(X).std(axis=0), rtol=1e-6)
    # whiten=False on already-white data still separates the sources
    Xc = X - X.mean(0)
    Xw = Xc @ np.linalg.inv(np.linalg.cholesky(np.cov(Xc.T))).T
    est = FastICA(whiten=False, random_state=0).fit(Xw).transform(Xw)
    assert np.all(np.abs(np.corrcoef(est.T, S.T)[:3, 3:]).max(axis=1) > 0.99)


def _digits_informative(n=300):
    X = load_digits().data[:n]
    return X[:, X.std(axis=0) > 0]  # constant pixels carry no factor


@pytest.mark.parametrize("data", ["iris", "digits"])
def test_fa_subspace_matches_sklearn_on_iris_and_digits(data):
    """Completes the iris/wine/digits parity of the issue (wine: test_fa_subspace_matches_sklearn).

    scikit-learn's SVD iterations on standardised iris stop at max_iter without meeting tol, but the
    subspace both reach is the same; digits uses 300 rows and its non-constant pixels to stay fast.
    """
    import warnings

    X = StandardScaler().fit_transform(load_iris().data) if data == "iris" else _digits_informative()
    max_iter = 2000 if data == "iris" else 20000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn's ConvergenceWarning on iris
        ref = SkFA(n_components=2, tol=1e-10, max_iter=max_iter, svd_method="lapack").fit(X)
    ours = FactorAnalysis(n_components=2, solver="svd", tol=1e-10, max_iter=max_iter).fit(X)
    np.testing.assert_allclose(_proj(ours.components_), _proj(ref.components_), atol=1e-6)


@pytest.mark.parametrize("fun", ["logcosh", "cube"])
def test_ica_unmixing_matches_sklearn_on_digits(fun):
    """Digits reduced to 6 principal components (FastICA on 61 raw pixels is ill-posed: many are
    near-constant). With fun="exp" both libraries converge to different fixed points, as on wine."""
    from sklearn.decomposition import PCA as SkPCA

    X = load_digits().data
    X = StandardScaler().fit_transform(X[:, X.std(axis=0) > 0])
    Xr = SkPCA(6, random_state=0).fit_transform(X)
    kw = dict(fun=fun, tol=1e-12, max_iter=3000)
    ours = FastICA(random_state=0, **kw).fit(Xr)
    ref = SkICA(random_state=0, **kw).fit(Xr)
    assert ours.n_iter_ < 3000 and ref.n_iter_ < 3000
    assert _match_up_to_sign_and_order(ours.components_, ref.components_) < 1e-6


@pytest.mark.parametrize("data", ["iris", "wine4"])
@pytest.mark.parametrize("k", [1, 2])
def test_fa_defaults_match_sklearn_defaults_on_four_features(data, k):
    """Default parameters on both sides (tol=1e-2 on the log-likelihood): the ML solution of iris is a
    Heywood case (a noise variance tends to 0), so the likelihood creeps up for thousands of steps and
    where tol stops depends on the step: EM stopped with loadings ~7% from scikit-learn's."""
    X = load_iris().data if data == "iris" else load_wine().data[:, :4]
    ref = SkFA(n_components=k).fit(X)
    ours = FactorAnalysis(n_components=k).fit(X)
    assert ours.n_iter_ == ref.n_iter_
    WA, WB = ours.components_.T @ ours.components_, ref.components_.T @ ref.components_
    assert np.linalg.norm(WA - WB) <= 1e-8 * np.linalg.norm(WB)
    np.testing.assert_allclose(ours.noise_variance_, ref.noise_variance_, rtol=1e-8)
