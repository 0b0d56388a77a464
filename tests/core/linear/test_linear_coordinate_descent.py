"""lasso_regression / elastic_net: soft-thresholding, KKT conditions, sklearn parity, warm start."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_diabetes
from sklearn.linear_model import ElasticNet as SkEnet
from sklearn.linear_model import Lasso as SkLasso

from core import registry
from core.context import FitContext
from core.model_selection.split import KFold

Lasso = registry.get("lasso_regression")
Enet = registry.get("elastic_net")


def _sparse_problem(n=200, d=20, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w = np.zeros(d)
    w[:4] = [3.0, -2.0, 1.5, 0.5]
    return X, X @ w + 1.0 + 0.1 * rng.normal(size=n)


def test_orthogonal_design_is_soft_thresholded_least_squares():
    # X^T X = n I  =>  lasso = S(ols, alpha) (closed form of the coordinate update)
    rng = np.random.default_rng(0)
    n, d = 64, 6
    Q, _ = np.linalg.qr(rng.normal(size=(n, d)))
    X = Q * np.sqrt(n)
    X -= X.mean(0)  # centred columns keep orthogonality with the intercept
    Q2, _ = np.linalg.qr(X)
    X = Q2 * np.sqrt(n)
    y = X @ np.array([2.0, -1.0, 0.3, 0.0, 0.05, -0.6]) + rng.normal(size=n) * 0.1
    ols = X.T @ (y - y.mean()) / n
    alpha = 0.4
    m = Lasso(alpha=alpha, tol=1e-12).fit(X, y)
    np.testing.assert_allclose(m.coef_, np.sign(ols) * np.maximum(np.abs(ols) - alpha, 0), atol=1e-10)
    # elastic net: S(ols, alpha*rho) / (1 + alpha*(1-rho))
    e = Enet(alpha=alpha, l1_ratio=0.3, tol=1e-12).fit(X, y)
    ref = np.sign(ols) * np.maximum(np.abs(ols) - alpha * 0.3, 0) / (1 + alpha * 0.7)
    np.testing.assert_allclose(e.coef_, ref, atol=1e-10)


@pytest.mark.parametrize("shape", [(200, 20), (30, 80)])  # Gram path and residual path
def test_lasso_kkt_conditions(shape):
    n, d = shape
    X, y = _sparse_problem(n, d)
    alpha = 0.05
    m = Lasso(alpha=alpha, tol=1e-12, max_iter=100000).fit(X, y)
    assert m.converged_
    r = y - m.predict(X)
    g = X.T @ r / n  # minus the gradient of the smooth part
    nz = m.coef_ != 0
    assert nz.any() and (~nz).any()
    np.testing.assert_allclose(g[nz], alpha * np.sign(m.coef_[nz]), atol=1e-7)
    assert np.all(np.abs(g[~nz]) <= alpha + 1e-7)
    assert abs(r.mean()) < 1e-10  # unpenalised intercept


def test_alpha_large_gives_all_zero():
    X, y = _sparse_problem()
    alpha_max = np.max(np.abs((X - X.mean(0)).T @ (y - y.mean()))) / len(y)
    assert not np.any(Lasso(alpha=alpha_max * 1.001).fit(X, y).coef_)
    assert np.any(Lasso(alpha=alpha_max * 0.9).fit(X, y).coef_)


def test_warm_start_and_progress():
    X, y = _sparse_problem()
    seen = []
    ctx = FitContext(on_progress=lambda f, m: seen.append(m), min_interval=0.0)
    m = Lasso(alpha=0.01, tol=1e-10, warm_start=True).fit(X, y, ctx=ctx)
    assert any("gap" in s for s in seen)
    first = m.n_iter_
    assert first > 1
    m.fit(X, y)  # warm start from the solution: converges at once
    assert m.n_iter_ <= 2 < first
    cold = Lasso(alpha=0.01, tol=1e-10).fit(X, y)
    np.testing.assert_allclose(m.coef_, cold.coef_, atol=1e-8)


def test_random_selection_same_solution():
    X, y = _sparse_problem()
    a = Lasso(alpha=0.02, tol=1e-12).fit(X, y)
    b = Lasso(alpha=0.02, tol=1e-12, selection="random", random_state=3).fit(X, y)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-8)


def test_parity_coefficients_and_r2_diabetes():
    X, y = load_diabetes(return_X_y=True)
    for ours, ref in (
        (Lasso(alpha=0.05, tol=1e-10, max_iter=100000), SkLasso(alpha=0.05, tol=1e-10, max_iter=100000)),
        (Lasso(alpha=0.5, tol=1e-10), SkLasso(alpha=0.5, tol=1e-10)),
        (Enet(alpha=0.002, l1_ratio=0.5, tol=1e-10, max_iter=100000),
         SkEnet(alpha=0.002, l1_ratio=0.5, tol=1e-10, max_iter=100000)),
        (Enet(alpha=0.01, l1_ratio=0.2, tol=1e-10), SkEnet(alpha=0.01, l1_ratio=0.2, tol=1e-10)),
    ):
        ours.fit(X, y)
        ref.fit(X, y)
        np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-4, atol=1e-4 * np.abs(ref.coef_).max())
        np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-4)
    # cross-validated R^2 with default tolerances, same folds
    for make_o, make_s in ((lambda: Lasso(alpha=0.1), lambda: SkLasso(alpha=0.1)),
                           (lambda: Enet(alpha=0.001), lambda: SkEnet(alpha=0.001))):
        a, b = [], []
        for tr, te in KFold(5, shuffle=True, random_state=1).split(X):
            a.append(make_o().fit(X[tr], y[tr]).score(X[te], y[te]))
            b.append(make_s().fit(X[tr], y[tr]).score(X[te], y[te]))
        assert abs(np.mean(a) - np.mean(b)) < 0.01


def test_sample_weight_parity():
    X, y = load_diabetes(return_X_y=True)
    w = np.random.default_rng(0).uniform(0.2, 3.0, size=len(y))
    ours = Enet(alpha=0.005, l1_ratio=0.7, tol=1e-10, max_iter=100000).fit(X, y, sample_weight=w)
    ref = SkEnet(alpha=0.005, l1_ratio=0.7, tol=1e-10, max_iter=100000).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-4, atol=1e-4 * np.abs(ref.coef_).max())
