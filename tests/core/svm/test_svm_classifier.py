"""svm_classifier: hard margin, KKT after SMO, multiclass strategies, Platt, Pegasos, sklearn parity."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn import datasets
from sklearn.svm import SVC, LinearSVC

from core.context import FitCancelled, FitContext
from core.kernels import build_kernel
from core.model_selection import StratifiedKFold
from core.params import ParamError
from core.svm._smo import KernelRows, solve_smo, solve_smo_batch
from core.svm.svm_classifier import SVMClassifier
from core.validation import NotFittedError


def _standardise(Xtr, Xte):
    mu, sd = Xtr.mean(0), Xtr.std(0)
    sd[sd == 0] = 1.0
    return (Xtr - mu) / sd, (Xte - mu) / sd


def _blobs(n=60, gap=4.0, seed=0):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(size=(n // 2, 2)) + gap / 2, rng.normal(size=(n // 2, 2)) - gap / 2])
    y = np.array([1] * (n // 2) + [-1] * (n // 2))
    return X, y


# ---- [Passerini §11]: hard margin ---------------------------------------------------------------------
@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly"])
def test_hard_margin_on_separable_data(kernel):
    X, y = _blobs(gap=6.0)
    clf = SVMClassifier(C=1e6, kernel=kernel, tol=1e-5, coef0=1.0).fit(X, y)
    yf = np.where(y == clf.classes_[1], 1, -1) * clf.decision_function(X)
    assert (yf >= 1 - 1e-3).all()
    # free support vectors (0 < alpha < C) lie exactly on the margin
    alpha = np.abs(clf.dual_coef_[0])
    free = alpha < 1e6 * (1 - 1e-9)
    assert free.any()
    np.testing.assert_allclose(yf[clf.support_][free], 1.0, atol=1e-3)
    # non-support vectors have no influence: refitting on the SVs only gives the same function
    clf2 = SVMClassifier(
        C=1e6,
        kernel=kernel,
        tol=1e-5,
        coef0=1.0,
        gamma=clf._kernel.__dict__.get("gamma", 1.0) if kernel != "linear" else "scale",
    ).fit(X[clf.support_], y[clf.support_])
    np.testing.assert_allclose(clf2.decision_function(X), clf.decision_function(X), atol=5e-3)


def test_hard_margin_linear_matches_geometry():
    X = np.array([[0.0, 0.0], [1.0, 1.0], [3.0, 3.0], [4.0, 3.0]])
    y = np.array([-1, -1, 1, 1])
    clf = SVMClassifier(C=1e8, kernel="linear", tol=1e-8).fit(X, y)
    # max-margin separator between (1,1) and (3,3): w = (0.5, 0.5), b = -2, margin 1/||w|| = sqrt(2)
    np.testing.assert_allclose(clf.coef_[0], [0.5, 0.5], atol=1e-6)
    np.testing.assert_allclose(clf.intercept_[0], -2.0, atol=1e-6)
    assert sorted(clf.support_.tolist()) == [1, 2]


# ---- KKT conditions after SMO ([Passerini eq. 11.15-11.16]) ------------------------------------------
@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly", "sigmoid", "rbf+linear"])
def test_kkt_conditions_after_smo(kernel):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(120, 4))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.3 * rng.normal(size=120) > 0.5, 1.0, -1.0)
    C = 2.0
    k = build_kernel(kernel, gamma=0.2, coef0=0.5).resolved(X)
    tol = 1e-4
    res = solve_smo(KernelRows(k, X), y, -np.ones(120), np.full(120, C), tol=tol)
    assert res.converged
    a = res.alpha
    assert (a >= 0).all() and (a <= C).all()
    assert abs(a @ y) < 1e-10
    f = k(X) @ (a * y) - res.rho
    yf = y * f
    free = (a > 1e-12) & (a < C - 1e-12)
    assert (yf[a <= 1e-12] >= 1 - 2 * tol).all()
    np.testing.assert_allclose(yf[free], 1.0, atol=2 * tol)
    assert (yf[a >= C - 1e-12] <= 1 + 2 * tol).all()


def test_batched_smo_equals_sequential():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(90, 3))
    codes = rng.integers(0, 3, size=90)
    X[:, 0] += codes
    k = build_kernel("rbf", gamma=0.5)
    K = k(X)
    problems = []
    for i, j in [(0, 1), (0, 2), (1, 2)]:
        idx = np.flatnonzero((codes == i) | (codes == j))
        problems.append((idx, np.where(codes[idx] == i, 1.0, -1.0), np.full(idx.size, 1.5)))
    batch = solve_smo_batch(K, problems, tol=1e-6)
    for (idx, yb, c), r in zip(problems, batch, strict=True):
        seq = solve_smo(KernelRows(k, X, index=idx), yb, -np.ones(idx.size), c, tol=1e-6)
        np.testing.assert_allclose(r.alpha, seq.alpha, atol=1e-4)
        assert r.rho == pytest.approx(seq.rho, abs=1e-4)


def test_lru_kernel_cache_gives_same_solution_as_dense():
    X, y = _blobs(n=80, gap=1.0, seed=3)
    yb = y.astype(float)
    k = build_kernel("rbf", gamma=0.5)
    dense = solve_smo(KernelRows(k, X), yb, -np.ones(80), np.ones(80), tol=1e-6)
    rows = KernelRows(k, X, cache_mb=8 * 80 * 10 / 1e6)  # room for 10 rows only
    assert rows.dense is None
    lru = solve_smo(rows, yb, -np.ones(80), np.ones(80), tol=1e-6)
    assert rows.misses > 0 and rows.hits > 0
    np.testing.assert_allclose(lru.alpha, dense.alpha, atol=1e-4)
    clf = SVMClassifier(cache_size=0.01).fit(X, y)
    ref = SVMClassifier().fit(X, y)
    np.testing.assert_allclose(clf.decision_function(X), ref.decision_function(X), atol=1e-4)


# ---- sklearn parity under the same folds ---------------------------------------------------------------
def _digits_subsample():
    X, y = datasets.load_digits(return_X_y=True)
    idx = np.random.default_rng(0).permutation(len(y))[:600]
    return X[idx], y[idx]


DATASETS = {
    "iris": lambda: datasets.load_iris(return_X_y=True),
    "wine": lambda: datasets.load_wine(return_X_y=True),
    "breast_cancer": lambda: datasets.load_breast_cancer(return_X_y=True),
    "digits600": _digits_subsample,
}


@pytest.mark.parametrize("data", list(DATASETS))
@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly"])
def test_parity_with_sklearn_svc(data, kernel):
    X, y = DATASETS[data]()
    ours_acc, ref_acc = [], []
    for tr, te in StratifiedKFold(3, shuffle=True, random_state=0).split(X, y):
        Xtr, Xte = _standardise(X[tr], X[te])
        ours = SVMClassifier(kernel=kernel).fit(Xtr, y[tr])
        ref = SVC(kernel=kernel).fit(Xtr, y[tr])
        ours_acc.append(ours.score(Xte, y[te]))
        ref_acc.append(ref.score(Xte, y[te]))
        # same optimum: support sets and decision values agree closely
        assert abs(ours.support_.size - ref.support_.size) <= max(2, 0.02 * ref.support_.size)
        if len(ours.classes_) == 2:
            np.testing.assert_allclose(ours.decision_function(Xte), ref.decision_function(Xte), atol=0.05)
    assert abs(np.mean(ours_acc) - np.mean(ref_acc)) <= 0.01


def test_dual_coef_layout_and_intercepts_match_sklearn():
    X, y = datasets.load_wine(return_X_y=True)  # (iris has duplicate rows: alphas may split between them)
    X = (X - X.mean(0)) / X.std(0)
    ours = SVMClassifier(kernel="rbf", tol=1e-6).fit(X, y)
    ref = SVC(kernel="rbf", tol=1e-6).fit(X, y)
    np.testing.assert_array_equal(ours.support_, ref.support_)
    np.testing.assert_array_equal(ours.n_support_, ref.n_support_)
    np.testing.assert_allclose(ours.dual_coef_, ref.dual_coef_, atol=1e-3)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, atol=1e-3)
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X), atol=1e-3)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
    ours_ovo = SVMClassifier(decision_function_shape="ovo", tol=1e-6).fit(X, y)
    ref_ovo = SVC(decision_function_shape="ovo", tol=1e-6).fit(X, y)
    np.testing.assert_allclose(ours_ovo.decision_function(X), ref_ovo.decision_function(X), atol=1e-3)


def test_binary_sign_convention_matches_sklearn():
    X, y = datasets.load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    ours = SVMClassifier(kernel="linear", tol=1e-5).fit(X, y)
    ref = SVC(kernel="linear", tol=1e-5).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=2e-3)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, atol=2e-3)


def test_class_weight_and_sample_weight_match_sklearn():
    X, y = datasets.load_wine(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    w = np.random.default_rng(0).uniform(0.2, 3.0, size=len(y))
    for cw_ours, cw_ref in [("balanced", "balanced"), ({"0": 3.0, "2": 0.5}, {0: 3.0, 2: 0.5})]:
        ours = SVMClassifier(C=0.5, class_weight=cw_ours, tol=1e-6).fit(X, y, sample_weight=w)
        ref = SVC(C=0.5, class_weight=cw_ref, tol=1e-6).fit(X, y, sample_weight=w)
        np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X), atol=2e-3)
    # integer sample weights == repeating rows
    rep = np.random.default_rng(1).integers(1, 3, size=len(y))
    a = SVMClassifier(gamma=0.1, tol=1e-7).fit(X, y, sample_weight=rep.astype(float))
    b = SVMClassifier(gamma=0.1, tol=1e-7).fit(np.repeat(X, rep, axis=0), np.repeat(y, rep))
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), atol=1e-4)


def test_class_weight_unknown_label_is_param_error():
    X, y = _blobs()
    with pytest.raises(ParamError) as info:
        SVMClassifier(class_weight={"7": 2.0}).fit(X, y)
    assert info.value.param == "class_weight"


def test_one_vs_rest_strategy():
    X, y = datasets.load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    clf = SVMClassifier(multi_class="ovr").fit(X, y)
    dec = clf.decision_function(X)
    assert dec.shape == (150, 3)
    assert clf.score(X, y) > 0.95
    # each column is the binary class-vs-rest SVM
    for c in range(3):
        ref = SVC().fit(X, (y == c).astype(int))
        np.testing.assert_allclose(dec[:, c], ref.decision_function(X), atol=2e-3)


def test_string_labels_and_composite_kernels():
    X, y = datasets.load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    for kernel in [
        "rbf+linear",
        "0.5*rbf*poly",
        "cosine(poly)",
        {"sum": [{"name": "rbf", "gamma": 0.1}, {"name": "linear"}]},
    ]:
        clf = SVMClassifier(kernel=kernel, coef0=1.0).fit(X, labels)
        assert set(clf.predict(X)) <= set(labels)
        assert clf.score(X, labels) > 0.9


def test_precomputed_composite_matches_sklearn_callable_kernel():
    X, y = datasets.load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    k = build_kernel("rbf+linear", gamma=0.05)
    ours = SVMClassifier(kernel="rbf+linear", gamma=0.05, tol=1e-5).fit(X, y)
    ref = SVC(kernel="precomputed", tol=1e-5).fit(k(X), y)
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(k(X)), atol=2e-3)


# ---- Platt scaling -----------------------------------------------------------------------------------------
def test_platt_probabilities_close_to_libsvm():
    X, y = datasets.load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    ours = SVMClassifier(probability=True, random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ref = SVC(probability=True, random_state=0).fit(X, y)
        P_ref = ref.predict_proba(X)
    P = ours.predict_proba(X)
    np.testing.assert_allclose(P.sum(1), 1.0)
    # different CV folds -> not identical, but close
    assert np.abs(P - P_ref).mean() < 0.03
    assert (ours.probA_ < 0).all()


def test_binary_platt_is_monotone_in_decision():
    X, y = datasets.load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    clf = SVMClassifier(probability=True, random_state=0).fit(X, y)
    d = clf.decision_function(X)
    p1 = clf.predict_proba(X)[:, 1]
    order = np.argsort(d)
    assert (np.diff(p1[order]) >= -1e-12).all()
    assert ((p1 > 0.5) == (d > 0)).mean() > 0.97


def test_predict_proba_requires_probability():
    X, y = _blobs()
    clf = SVMClassifier().fit(X, y)
    assert not hasattr(clf, "predict_proba")  # callers (service evaluation) fall back to predict
    with pytest.raises(AttributeError, match="probability=True"):
        clf.predict_proba(X)
    assert SVMClassifier.capabilities()["predict_proba"]
    fitted = SVMClassifier(probability=True, random_state=0).fit(X, y)
    assert hasattr(fitted, "predict_proba")
    with pytest.raises(NotFittedError):
        SVMClassifier(probability=True).predict_proba(X)


# ---- Pegasos -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("data", list(DATASETS))
def test_pegasos_parity_with_linear_svc(data):
    # same objective as LinearSVC(loss="hinge") (bias regularised, one-vs-rest): after the Newton
    # refinement both reach its optimum, so accuracies agree both ways and predictions coincide
    X, y = DATASETS[data]()
    ours_acc, ref_acc, agree = [], [], []
    for tr, te in StratifiedKFold(3, shuffle=True, random_state=0).split(X, y):
        Xtr, Xte = _standardise(X[tr], X[te])
        ours = SVMClassifier(kernel="linear", solver="pegasos", multi_class="ovr", random_state=0).fit(
            Xtr, y[tr]
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = LinearSVC(loss="hinge", max_iter=20000).fit(Xtr, y[tr])
        ours_acc.append(ours.score(Xte, y[te]))
        ref_acc.append(ref.score(Xte, y[te]))
        agree.append(np.mean(ours.predict(Xte) == ref.predict(Xte)))
    assert abs(np.mean(ours_acc) - np.mean(ref_acc)) <= 0.01
    assert np.mean(agree) >= 0.98


def _hinge_primal(X, yb, w, b, u):
    # 1/2 (||w||^2 + b^2) + sum_i u_i hinge_i  (bias regularised, as documented)
    return 0.5 * (w @ w + b * b) + u @ np.maximum(0, 1 - yb * (X @ w + b))


def _hinge_dual_bound(X, yb, u):
    """A dual-feasible point (L-BFGS-B on the box-constrained dual): D(a) <= min primal (weak duality)."""
    from scipy.optimize import minimize

    Z = np.column_stack([X, np.ones(len(X))]) * yb[:, None]

    def f(a):
        v = Z.T @ a
        return 0.5 * v @ v - a.sum(), Z @ v - 1.0

    res = minimize(f, np.zeros(len(yb)), jac=True, method="L-BFGS-B", bounds=list(zip(0 * u, u, strict=True)),
                   options={"maxiter": 5000, "gtol": 1e-10, "ftol": 0.0})
    return -res.fun


def test_pegasos_reaches_the_hinge_optimum_duality_gap():
    X, y = datasets.load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    yb = np.where(y == 1, 1.0, -1.0)
    u = np.ones(len(y))
    peg = SVMClassifier(kernel="linear", solver="pegasos", random_state=0).fit(X, y)
    primal = _hinge_primal(X, yb, peg.coef_[0], peg.intercept_[0], u)
    lower = _hinge_dual_bound(X, yb, u)
    assert lower <= primal <= lower * (1 + 1e-6)
    # the stochastic phase alone is far from it (what the refinement is for)
    from core.svm._pegasos import pegasos

    w, b, _ = pegasos(X, yb, u, 1.0, n_epochs=10, rng=np.random.default_rng(0), refine=False)
    assert _hinge_primal(X, yb, w, b, u) > 1.01 * primal
    ref = LinearSVC(loss="hinge", max_iter=200000, tol=1e-8).fit(X, y)
    assert primal <= _hinge_primal(X, yb, ref.coef_[0], ref.intercept_[0], u) * (1 + 1e-6)


def test_pegasos_sample_weight_equals_duplication():
    X, y = datasets.load_wine(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    y = (y == 1).astype(int)
    sw = np.ones(len(y))
    sw[::3] = 2.0
    a = SVMClassifier(kernel="linear", solver="pegasos", C=0.5, random_state=0).fit(X, y, sample_weight=sw)
    Xd, yd = np.vstack([X, X[::3]]), np.r_[y, y[::3]]
    b = SVMClassifier(kernel="linear", solver="pegasos", C=0.5, random_state=0).fit(Xd, yd)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-4, atol=1e-5)


def test_pegasos_requires_linear_kernel():
    X, y = _blobs()
    with pytest.raises(ParamError) as info:
        SVMClassifier(solver="pegasos", kernel="rbf").fit(X, y)
    assert info.value.param == "solver"


# ---- progress and cancellation ---------------------------------------------------------------------------
def test_progress_per_problem_and_cancellation():
    X, y = DATASETS["iris"]()
    seen = []
    ctx = FitContext(on_progress=lambda f, m: seen.append((f, m)), min_interval=0.0)
    SVMClassifier(multi_class="ovr", cache_size=1e-3).fit(X, y, ctx=ctx)  # sequential path: per problem
    assert seen[-1][0] == pytest.approx(1.0)
    assert sum("problem" in m for _, m in seen) == 3
    seen.clear()
    ctx = FitContext(on_progress=lambda f, m: seen.append((f, m)), min_interval=0.0)
    SVMClassifier(probability=True, C=100.0).fit(X, y, ctx=ctx)  # batched path: every 50 iterations + stages
    fractions = [f for f, _ in seen]
    assert fractions[-1] == pytest.approx(1.0)
    assert len(fractions) >= 3 and fractions == sorted(fractions)
    calls = {"n": 0}

    def cancel_later():
        calls["n"] += 1
        return calls["n"] > 2

    clf = SVMClassifier(C=1e3, cache_size=1e-3, multi_class="ovr")
    with pytest.raises(FitCancelled):
        clf.fit(X, y, ctx=FitContext(is_cancelled=cancel_later, cancel_interval=0.0))
    assert not hasattr(clf, "classes_")


def _libsvm_coupling(r, k):
    """LIBSVM's multiclass_probability (iterative), one sample: r[i][j] = P(i | i or j)."""
    Q = np.zeros((k, k))
    for t in range(k):
        for j in range(k):
            if j != t:
                Q[t, t] += r[j][t] ** 2
                Q[t, j] = -r[j][t] * r[t][j]
    p = np.full(k, 1.0 / k)
    for _ in range(max(100, k)):
        Qp = Q @ p
        pQp = p @ Qp
        if np.abs(Qp - pQp).max() < 1e-9:
            break
        for t in range(k):
            diff = (-Qp[t] + pQp) / Q[t, t]
            p[t] += diff
            pQp = (pQp + diff * (diff * Q[t, t] + 2 * Qp[t])) / (1 + diff) ** 2
            Qp = (Qp + diff * Q[t]) / (1 + diff)
            p /= 1 + diff
    return p


def test_pairwise_coupling_matches_libsvm_iteration():
    from core.svm.probability import pairwise_coupling

    rng = np.random.default_rng(0)
    k = 4
    pi, pj = np.triu_indices(k, 1)
    R = rng.uniform(0.05, 0.95, size=(20, len(pi)))
    P = pairwise_coupling(R, k)
    for s in range(20):
        r = np.zeros((k, k))
        r[pi, pj] = R[s]
        r[pj, pi] = 1 - R[s]
        np.testing.assert_allclose(P[s], _libsvm_coupling(r, k), atol=1e-6)
    # consistent pairwise probabilities are recovered exactly
    p_true = rng.dirichlet(np.ones(k), size=5)
    R = p_true[:, pi] / (p_true[:, pi] + p_true[:, pj])
    np.testing.assert_allclose(pairwise_coupling(R, k), p_true, atol=1e-6)


def test_cosine_and_sigmoid_kernels_match_sklearn():
    X, y = datasets.load_wine(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    k = build_kernel("cosine(poly)", gamma=0.1, degree=2, coef0=1.0)
    ours = SVMClassifier(kernel="cosine(poly)", gamma=0.1, degree=2, coef0=1.0, tol=1e-5).fit(X, y)
    ref = SVC(kernel="precomputed", tol=1e-5).fit(k(X), y)
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(k(X)), atol=2e-3)
    ours = SVMClassifier(kernel="sigmoid", gamma=0.01, coef0=0.0, tol=1e-5).fit(X, y)
    ref = SVC(kernel="sigmoid", gamma=0.01, coef0=0.0, tol=1e-5).fit(X, y)
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X), atol=2e-3)


def test_ovr_probabilities():
    X, y = datasets.load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    clf = SVMClassifier(multi_class="ovr", probability=True, random_state=0).fit(X, y)
    P = clf.predict_proba(X)
    np.testing.assert_allclose(P.sum(1), 1.0)
    assert clf.probA_.shape == (3,)
    assert (P.argmax(1) == y).mean() > 0.9


def test_refit_drops_attributes_of_the_previous_fit():
    X, y = _blobs()
    clf = SVMClassifier(kernel="linear", probability=True, random_state=0).fit(X, y)
    assert hasattr(clf, "coef_") and hasattr(clf, "probA_")
    clf.set_params(kernel="rbf", probability=False).fit(X, y)
    assert not hasattr(clf, "coef_") and not hasattr(clf, "probA_")
    assert not hasattr(clf, "predict_proba")


def test_pegasos_multi_column_equals_single_problem():
    from core.svm._pegasos import pegasos, pegasos_multi

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = np.where(X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=300) > 0, 1.0, -1.0)
    s = rng.uniform(0.5, 2.0, size=300)
    w, b, ep = pegasos(X, y, s, 2.0, n_epochs=20, tol=1e-6, rng=np.random.default_rng(5))
    W, B, ep2 = pegasos_multi(
        X, y[:, None], s[:, None], 2.0, n_epochs=20, tol=1e-6, rng=np.random.default_rng(5)
    )
    np.testing.assert_allclose(W[0], w, rtol=1e-10, atol=1e-12)
    assert B[0] == pytest.approx(b) and ep == ep2
