"""poisson_regression, perceptron, least_squares_classifier: mathematics and sklearn parity."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, load_iris, load_wine
from sklearn.linear_model import LinearRegression as SkLinear
from sklearn.linear_model import Perceptron as SkPerceptron
from sklearn.linear_model import PoissonRegressor, RidgeClassifier
from sklearn.multiclass import OneVsOneClassifier
from sklearn.preprocessing import StandardScaler

from core import registry
from core.model_selection.split import KFold, StratifiedKFold
from core.validation import DataError

Poisson = registry.get("poisson_regression")
Perceptron = registry.get("perceptron")
LSC = registry.get("least_squares_classifier")


def _scaled(loader, n=None):
    X, y = loader(return_X_y=True)
    if n is not None:
        idx = np.random.default_rng(0).permutation(len(y))[:n]
        X, y = X[idx], y[idx]
    return np.nan_to_num(StandardScaler().fit_transform(X)), y


def _counts(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, rng.poisson(np.exp(0.5 + X @ np.array([0.4, -0.3, 0.2, 0.0]))).astype(float)


# ------------------------------------------------------------------ poisson
@pytest.mark.parametrize("alpha", [0.0, 0.01, 1.0])
@pytest.mark.parametrize("solver", ["newton", "lbfgs"])
def test_poisson_coefficients_match_sklearn(alpha, solver):
    X, y = _counts()
    ours = Poisson(alpha=alpha, solver=solver, tol=1e-10, max_iter=1000).fit(X, y)
    ref = PoissonRegressor(alpha=alpha, solver="newton-cholesky", tol=1e-10, max_iter=1000).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-4)


def test_poisson_unpenalised_score_equations():
    # MLE of the canonical-link GLM: X^T (y - mu) = 0 and sum(y - mu) = 0
    X, y = _counts(seed=1)
    m = Poisson(alpha=0.0, tol=1e-12).fit(X, y)
    r = y - m.predict(X)
    np.testing.assert_allclose(X.T @ r, 0.0, atol=1e-8)
    assert abs(r.sum()) < 1e-8
    assert m.n_iter_ < 20


def test_poisson_sample_weight_and_diabetes_parity():
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(y))
    ours = Poisson(alpha=0.1, tol=1e-10).fit(X, y, sample_weight=w)
    ref = PoissonRegressor(alpha=0.1, solver="newton-cholesky", tol=1e-10).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-4, atol=1e-6)
    a, b = [], []
    for tr, te in KFold(5, shuffle=True, random_state=0).split(X):
        a.append(Poisson(alpha=0.01).fit(X[tr], y[tr]).score(X[te], y[te]))
        ref_pred = PoissonRegressor(alpha=0.01).fit(X[tr], y[tr]).predict(X[te])  # its score() is D^2
        b.append(1 - np.sum((y[te] - ref_pred) ** 2) / np.sum((y[te] - y[te].mean()) ** 2))
    assert abs(np.mean(a) - np.mean(b)) < 0.02


def test_poisson_rejects_negative_targets():
    X, y = _counts()
    y[0] = -1
    with pytest.raises(DataError, match="non-negative"):
        Poisson().fit(X, y)


# ------------------------------------------------------------------ perceptron
def test_perceptron_learns_separable_data_with_zero_mistakes():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = np.where(X @ [1.0, -2.0] + 0.3 > 0, "pos", "neg")
    keep = np.abs(X @ [1.0, -2.0] + 0.3) > 0.2  # a margin: convergence theorem applies
    m = Perceptron(tol=None, random_state=0).fit(X[keep], y[keep])
    assert np.all(m.predict(X[keep]) == y[keep])


def test_perceptron_rule_by_hand():
    # [Colombo Algorithm 1] without shuffling: w <- w + eta t x on each mistake (t*f(x) <= 0)
    X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -0.5]])
    y = np.array([1, 0, 0])
    m = Perceptron(shuffle=False, max_iter=1, tol=None, eta0=0.5).fit(X, y)
    # sample 0: f=0 -> mistake, w=(0.5,0), b=0.5; sample 1: f=0.5 (t=-1) mistake, w=(0.5,-0.5), b=0;
    # sample 2: f=-0.5+0.25=-0.25, t=-1 -> correct
    np.testing.assert_allclose(m.coef_[0], [0.5, -0.5])
    np.testing.assert_allclose(m.intercept_, [0.0])


@pytest.mark.parametrize("loader,n", [(load_iris, None), (load_breast_cancer, None), (load_digits, 500)])
def test_perceptron_identical_to_sklearn_without_shuffle(loader, n):
    X, y = _scaled(loader, n)
    ours = Perceptron(shuffle=False).fit(X, y)
    ref = SkPerceptron(shuffle=False).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=1e-12)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, atol=1e-12)
    assert ours.n_iter_ == ref.n_iter_


def _cv_acc(make, X, y, seeds=(0,)):
    out = []
    for s in seeds:
        for tr, te in StratifiedKFold(5, shuffle=True, random_state=0).split(X, y):
            out.append(np.mean(make(s).fit(X[tr], y[tr]).predict(X[te]) == y[te]))
    return np.mean(out)


@pytest.mark.parametrize("loader,n_seeds", [(load_iris, 10), (load_wine, 10), (load_breast_cancer, 3)])
def test_perceptron_cv_accuracy_parity(loader, n_seeds):
    X, y = _scaled(loader)
    # deterministic order: must agree within 1 point
    a = _cv_acc(lambda s: Perceptron(shuffle=False), X, y)
    b = _cv_acc(lambda s: SkPerceptron(shuffle=False), X, y)
    assert abs(a - b) <= 0.01
    # shuffled (different RNG streams, per-seed std ~3-4 points on iris): mean over seeds within 2 points
    seeds = range(n_seeds)
    a = _cv_acc(lambda s: Perceptron(random_state=s), X, y, seeds)
    b = _cv_acc(lambda s: SkPerceptron(random_state=s), X, y, seeds)
    assert abs(a - b) <= 0.02


def test_perceptron_one_vs_one():
    X, y = _scaled(load_wine)
    ours = Perceptron(multi_class="ovo", shuffle=False).fit(X, y)
    ref = OneVsOneClassifier(SkPerceptron(shuffle=False)).fit(X, y)
    assert ours.coef_.shape == (3, X.shape[1])  # one row per pair
    # same pairwise models (pair (a, b): a positive) and the same vote/confidence rule
    for j, est in enumerate(ref.estimators_):
        np.testing.assert_allclose(ours.coef_[j], -est.coef_[0], atol=1e-12)
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X), atol=1e-12)
    a = _cv_acc(lambda s: Perceptron(multi_class="ovo", shuffle=False), X, y)
    b = _cv_acc(lambda s: OneVsOneClassifier(SkPerceptron(shuffle=False)), X, y)
    assert abs(a - b) <= 0.01


# ------------------------------------------------------------------ least squares classifier
def test_least_squares_classifier_closed_form():
    # [Colombo eq. 35]: W = (X~^T X~)^{-1} X~^T T with one-hot T
    X, y = _scaled(load_iris)
    m = LSC(target_encoding="one_hot").fit(X, y)
    Xt = np.column_stack([np.ones(len(X)), X])
    T = np.eye(3)[y]
    W = np.linalg.lstsq(Xt, T, rcond=None)[0]
    np.testing.assert_allclose(m.coef_, W[1:].T, atol=1e-10)
    np.testing.assert_allclose(m.intercept_, W[0], atol=1e-10)
    np.testing.assert_array_equal(m.predict(X), np.argmax(Xt @ W, axis=1))
    # +/-1 coding gives the same decisions (affine map of the targets)
    np.testing.assert_array_equal(LSC().fit(X, y).predict(X), m.predict(X))


@pytest.mark.parametrize("loader,n", [(load_iris, None), (load_wine, None), (load_breast_cancer, None),
                                      (load_digits, 600)])
def test_least_squares_classifier_matches_ridge_classifier(loader, n):
    X, y = _scaled(loader, n)
    ours = LSC(alpha=1.0).fit(X, y)
    ref = RidgeClassifier(alpha=1.0, solver="svd").fit(X, y)
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X), atol=1e-6)
    # alpha = 0: minimum-norm least squares on the +/-1 coded targets
    T = np.where(y[:, None] == np.unique(y)[None, :], 1.0, -1.0)
    T = T[:, 1:] if T.shape[1] == 2 else T
    ref = SkLinear().fit(X, T)
    ref_dec = ref.predict(X)
    np.testing.assert_allclose(LSC().fit(X, y).decision_function(X), ref_dec[:, 0] if ref_dec.shape[1] == 1
                               else ref_dec, atol=1e-6)
    a = _cv_acc(lambda s: LSC(), X, y)
    b = _cv_acc(lambda s: RidgeClassifier(alpha=1e-12, solver="svd"), X, y)
    assert abs(a - b) <= 0.01
