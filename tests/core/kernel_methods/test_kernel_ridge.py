"""kernel_ridge_regression: dual ridge ([Colombo §5.1.2]) vs KernelRidge and primal ridge."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import datasets
from sklearn.kernel_ridge import KernelRidge

from core.kernel_methods.kernel_ridge_regression import KernelRidgeRegression
from core.model_selection import KFold


def _diabetes():
    X, y = datasets.load_diabetes(return_X_y=True)
    return (X - X.mean(0)) / X.std(0), y


@pytest.mark.parametrize(
    "kw",
    [
        {"kernel": "linear"},
        {"kernel": "rbf", "gamma": 0.1},
        {"kernel": "rbf"},
        {"kernel": "poly", "degree": 2},
        {"kernel": "sigmoid", "gamma": 0.01, "coef0": 0.5},
        {"kernel": "laplacian", "gamma": 0.05},
    ],
    ids=str,
)
def test_dual_coef_and_predictions_equal_sklearn(kw):
    X, y = _diabetes()
    for tr, te in KFold(3, shuffle=True, random_state=0).split(X):
        ours = KernelRidgeRegression(alpha=0.7, **kw).fit(X[tr], y[tr])
        ref = KernelRidge(alpha=0.7, **kw).fit(X[tr], y[tr])
        np.testing.assert_allclose(ours.dual_coef_, ref.dual_coef_, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(ours.predict(X[te]), ref.predict(X[te]), rtol=1e-6, atol=1e-6)
        assert ours.solver_ == "cholesky"


def test_r2_parity_rbf_on_diabetes():
    X, y = _diabetes()
    ours_r2, ref_r2 = [], []
    for tr, te in KFold(5, shuffle=True, random_state=1).split(X):
        ours_r2.append(
            KernelRidgeRegression(alpha=1.0, kernel="rbf", gamma=0.02).fit(X[tr], y[tr]).score(X[te], y[te])
        )
        ref_r2.append(KernelRidge(alpha=1.0, kernel="rbf", gamma=0.02).fit(X[tr], y[tr]).score(X[te], y[te]))
    assert abs(np.mean(ours_r2) - np.mean(ref_r2)) <= 0.02
    assert np.mean(ours_r2) > 0.4


def test_linear_kernel_equals_primal_ridge():
    # [Colombo §5.1.2]: w = Phi^T a, so dual predictions = primal ridge predictions (no intercept)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    y = rng.normal(size=30)
    lam = 0.3
    w = np.linalg.solve(X.T @ X + lam * np.eye(4), X.T @ y)
    m = KernelRidgeRegression(alpha=lam, kernel="linear").fit(X, y)
    np.testing.assert_allclose(X.T @ m.dual_coef_, w, atol=1e-10)
    Xq = rng.normal(size=(5, 4))
    np.testing.assert_allclose(m.predict(Xq), Xq @ w, atol=1e-10)


def test_sample_weight_matches_sklearn():
    X, y = _diabetes()
    w = np.random.default_rng(3).uniform(0.1, 3.0, size=len(y))
    ours = KernelRidgeRegression(alpha=0.5, kernel="rbf", gamma=0.05).fit(X, y, sample_weight=w)
    ref = KernelRidge(alpha=0.5, kernel="rbf", gamma=0.05).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(ours.dual_coef_, ref.dual_coef_, rtol=1e-6, atol=1e-6)


def test_singular_system_falls_back_to_lstsq():
    X = np.ones((6, 2))  # linear Gram matrix of rank 1
    y = np.arange(6.0)
    m = KernelRidgeRegression(alpha=0.0, kernel="linear").fit(X, y)
    assert m.solver_ == "lstsq"
    assert np.isfinite(m.predict(X)).all()


def test_composite_kernel():
    X, y = _diabetes()
    m = KernelRidgeRegression(alpha=1.0, kernel="rbf+linear", gamma=0.05).fit(X, y)
    ref = KernelRidge(alpha=1.0, kernel="precomputed").fit(
        np.exp(-0.05 * ((X[:, None] - X[None]) ** 2).sum(-1)) + X @ X.T, y
    )
    np.testing.assert_allclose(m.dual_coef_, ref.dual_coef_, rtol=1e-6, atol=1e-6)
