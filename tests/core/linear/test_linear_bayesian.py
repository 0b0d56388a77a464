"""bayesian_linear_regression: closed forms of [Colombo §1.4] and sklearn BayesianRidge parity."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.linear_model import BayesianRidge
from sklearn.preprocessing import PolynomialFeatures

from core import registry
from core.model_selection.split import KFold

BLR = registry.get("bayesian_linear_regression")
LinReg = registry.get("linear_regression")
RidgeReg = registry.get("ridge_regression")


def _data(n=80, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X @ rng.normal(size=d) + 0.5 + 0.3 * rng.normal(size=n)


def test_flat_prior_is_least_squares():
    # S_0 = inf I (alpha -> 0): w_N = (Phi^T Phi)^{-1} Phi^T t  ([Colombo eq. 25])
    X, y = _data()
    m = BLR(alpha=1e-12, beta=1.0, fit_hyperparameters=False).fit(X, y)
    ols = LinReg().fit(X, y)
    np.testing.assert_allclose(m.coef_, ols.coef_, rtol=1e-9)
    np.testing.assert_allclose(m.intercept_, ols.intercept_, rtol=1e-9)


def test_gaussian_prior_is_ridge_with_lambda_sigma2_over_tau2():
    # [Colombo eq. 26]: S_0 = tau^2 I, noise sigma^2  =>  ridge with lambda = sigma^2 / tau^2
    X, y = _data()
    tau2, sigma2 = 2.0, 0.25
    m = BLR(alpha=1 / tau2, beta=1 / sigma2, fit_hyperparameters=False).fit(X, y)
    r = RidgeReg(alpha=sigma2 / tau2).fit(X, y)
    np.testing.assert_allclose(m.coef_, r.coef_, rtol=1e-10)
    np.testing.assert_allclose(m.intercept_, r.intercept_, rtol=1e-10)


def test_posterior_and_predictive_std_closed_form():
    X, y = _data(n=30, d=3, seed=1)
    alpha, beta = 0.7, 3.0
    m = BLR(alpha=alpha, beta=beta, fit_hyperparameters=False, fit_intercept=False).fit(X, y)
    SN = np.linalg.inv(alpha * np.eye(3) + beta * X.T @ X)  # [Colombo §1.4] (reference only)
    mN = beta * SN @ X.T @ y
    np.testing.assert_allclose(m.sigma_, SN, rtol=1e-10)
    np.testing.assert_allclose(m.coef_, mN, rtol=1e-10)
    Xq = np.random.default_rng(5).normal(size=(7, 3))
    mean, std = m.predict(Xq, return_std=True)
    np.testing.assert_allclose(mean, Xq @ mN, rtol=1e-10)
    np.testing.assert_allclose(std, np.sqrt(1 / beta + np.einsum("ij,jk,ik->i", Xq, SN, Xq)), rtol=1e-10)
    # far from the data the parameter uncertainty dominates; std never below the noise level
    _, s_far = m.predict(100 * Xq, return_std=True)
    assert np.all(s_far > std) and np.all(std >= np.sqrt(1 / beta))


def test_sequential_updating_equals_batch():
    # [Colombo §1.4]: the posterior after one point is the prior for the next
    X, y = _data(n=12, d=2, seed=2)
    alpha, beta = 1.5, 2.0
    S_inv, b = alpha * np.eye(2), np.zeros(2)
    for x, t in zip(X, y, strict=True):
        S_inv = S_inv + beta * np.outer(x, x)
        b = b + beta * t * x
    m = BLR(alpha=alpha, beta=beta, fit_hyperparameters=False, fit_intercept=False).fit(X, y)
    np.testing.assert_allclose(m.coef_, np.linalg.solve(S_inv, b), rtol=1e-10)


def test_evidence_maximisation_matches_sklearn_bayesian_ridge():
    X, y = load_diabetes(return_X_y=True)
    ours = BLR(tol=1e-12, max_iter=2000).fit(X, y)
    ref = BayesianRidge(tol=1e-12, max_iter=2000).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-4)
    np.testing.assert_allclose(ours.alpha_, ref.lambda_, rtol=1e-4)  # prior precision
    np.testing.assert_allclose(ours.beta_, ref.alpha_, rtol=1e-4)  # noise precision
    m1, s1 = ours.predict(X[:20], return_std=True)
    m2, s2 = ref.predict(X[:20], return_std=True)
    np.testing.assert_allclose(m1, m2, rtol=1e-4)
    np.testing.assert_allclose(s1, s2, rtol=1e-4)


def test_polynomial_basis_matches_bayesian_ridge_on_expanded_features():
    X, y = load_diabetes(return_X_y=True)
    X = X[:, :3]
    ours = BLR(basis="polynomial", degree=2, tol=1e-12, max_iter=2000).fit(X, y)
    P = PolynomialFeatures(2, include_bias=False).fit_transform(X)
    ref = BayesianRidge(tol=1e-12, max_iter=2000).fit(P, y)
    np.testing.assert_allclose(ours.predict(X), ref.predict(P), rtol=1e-4)


def test_cv_r2_parity_diabetes():
    X, y = load_diabetes(return_X_y=True)
    a, b = [], []
    for tr, te in KFold(5, shuffle=True, random_state=0).split(X):
        a.append(BLR().fit(X[tr], y[tr]).score(X[te], y[te]))
        b.append(BayesianRidge().fit(X[tr], y[tr]).score(X[te], y[te]))
    assert abs(np.mean(a) - np.mean(b)) < 0.01


def test_sample_weight_parity():
    X, y = load_diabetes(return_X_y=True)
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=len(y))
    ours = BLR(tol=1e-12, max_iter=2000).fit(X, y, sample_weight=w)
    ref = BayesianRidge(tol=1e-12, max_iter=2000).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-4)
