"""Density estimators: [Passerini §5.2.1, §5.5.1] closed forms, Laplace die, predictive checks."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import multigammaln

from core import registry
from core.params import ParamError
from core.validation import DataError

GD = registry.get("gaussian_density")
BD = registry.get("bernoulli_density")
CD = registry.get("categorical_density")

# [Passerini §5.5.1]: D = {H, H, T, T, T, H, H} (H = 1)
COINS = np.array([1, 1, 0, 0, 0, 1, 1], dtype=float)[:, None]


def test_bernoulli_mle_is_four_sevenths():
    est = BD(method="mle").fit(COINS)
    assert est.theta_[0] == pytest.approx(4 / 7)
    assert (est.n_heads_[0], est.n_tails_[0]) == (4, 3)
    np.testing.assert_allclose(est.score_samples([[1.0], [0.0]]), np.log([4 / 7, 3 / 7]))


@pytest.mark.parametrize("a_h,a_t", [(1.0, 1.0), (2.0, 5.0), (0.0, 0.0), (0.5, 3.0)])
def test_bernoulli_bayesian_predictive(a_h, a_t):
    """(alpha_h + 4) / (alpha_h + alpha_t + 7) [Passerini §5.5.1]; 5/9 for a uniform prior."""
    est = BD(method="bayesian", alpha_h=a_h, alpha_t=a_t).fit(COINS)
    assert est.theta_[0] == pytest.approx((a_h + 4) / (a_h + a_t + 7))
    assert est.posterior_alpha_h_[0] == a_h + 4 and est.posterior_alpha_t_[0] == a_t + 3
    if a_h == a_t == 1.0:
        assert est.theta_[0] == pytest.approx(5 / 9)


def test_bernoulli_missing_values_binarize_and_mle_zero():
    X = np.array([[1, 0], [np.nan, 0], [0, 0]], dtype=float)
    est = BD().fit(X)
    np.testing.assert_allclose(est.theta_, [0.5, 0.0])
    # feature 1 never 1: a row with x_1 = 1 has probability 0 under the MLE
    assert est.score_samples([[1.0, 1.0]])[0] == -np.inf
    assert est.score_samples([[np.nan, 0.0]])[0] == pytest.approx(0.0)
    with pytest.raises(DataError, match="0, 1"):
        BD().fit(np.array([[0.3]]))
    est = BD(binarize=0.5).fit(np.array([[0.2], [0.9], [0.7]]))
    assert est.theta_[0] == pytest.approx(2 / 3)


def test_laplace_smoothed_die():
    """[Arias Example A.8]: {1,3,5,4,4,6}; p1 = 1/6, p2 = 1/12, ..., p4 = 1/4."""
    faces = (np.array([1, 3, 5, 4, 4, 6]) - 1.0)[:, None]
    est = CD(method="bayesian", alpha=1.0, min_categories=6).fit(faces)
    np.testing.assert_allclose(est.theta_[0], [1 / 6, 1 / 12, 1 / 6, 1 / 4, 1 / 6, 1 / 6])
    mle = CD(method="mle", min_categories=6).fit(faces)
    np.testing.assert_allclose(mle.theta_[0], [1 / 6, 0, 1 / 6, 1 / 3, 1 / 6, 1 / 6])
    assert mle.score_samples([[1.0]])[0] == -np.inf  # face 2 never seen
    expected = [np.log(1 / 12), np.log(1 / 4), 0.0]
    np.testing.assert_allclose(est.score_samples([[1.0], [3.0], [np.nan]]), expected)


def test_categorical_dirichlet_posterior_mean_and_weights():
    X = np.array([[0, 2], [1, 2], [1, 0], [np.nan, 1]], dtype=float)
    est = CD(method="bayesian", alpha=0.5).fit(X, sample_weight=[1, 2, 1, 1])
    # feature 0: counts (1, 3) of 4 weighted observations, k = 2 -> (N + a) / (4 + 2a)
    np.testing.assert_allclose(est.theta_[0], [1.5 / 5, 3.5 / 5])
    np.testing.assert_allclose(est.theta_[1], [1.5 / 6.5, 1.5 / 6.5, 3.5 / 6.5])
    assert est.score_samples([[5.0, 0.0]])[0] == -np.inf  # code outside 0..k-1
    with pytest.raises(DataError, match="integer"):
        CD().fit(np.array([[-1.0]]))


def test_gaussian_mle_matches_scipy():
    rng = np.random.default_rng(0)
    X = rng.multivariate_normal([1, -1, 0], [[2, 0.5, 0], [0.5, 1, 0.2], [0, 0.2, 0.5]], size=200)
    est = GD(method="mle", reg_covar=0.0).fit(X)
    cov = np.cov(X.T, bias=True)  # [Passerini §5.1.2]: the 1/n estimator
    np.testing.assert_allclose(est.scale_matrix_, cov, rtol=1e-12)
    ref = stats.multivariate_normal(X.mean(0), cov).logpdf(X[:5])
    np.testing.assert_allclose(est.score_samples(X[:5]), ref)


def test_gaussian_known_variance_conjugate_update_closed_form():
    """[Passerini §5.2.1]: mu_n, sigma_n^2 and the predictive N(mu_n, s^2 + s_n^2)."""
    x = np.array([2.1, 1.7, 2.6, 2.2, 1.9, 3.0])[:, None]
    n, xbar = 6, x.mean()
    s2, s02, mu0 = 0.5, 2.0, -1.0
    est = GD(method="bayesian", prior="normal", noise_variance=s2, prior_variance=s02, prior_mean=[mu0])
    est.fit(x)
    mu_n = n * s02 / (n * s02 + s2) * xbar + s2 / (n * s02 + s2) * mu0
    var_n = s02 * s2 / (n * s02 + s2)
    assert est.posterior_mean_[0] == pytest.approx(mu_n, rel=1e-12)
    assert est.posterior_covariance_[0, 0] == pytest.approx(var_n, rel=1e-12)
    q = np.array([[0.0], [2.0], [4.5]])
    np.testing.assert_allclose(est.score_samples(q), stats.norm(mu_n, np.sqrt(s2 + var_n)).logpdf(q[:, 0]))
    # many observations: the sample mean dominates and the posterior variance shrinks ([Passerini §5.2.1])
    big = np.random.default_rng(0).normal(3.0, np.sqrt(s2), size=(5000, 1))
    est = GD(method="bayesian", prior="normal", noise_variance=s2, prior_mean=[mu0]).fit(big)
    assert est.posterior_mean_[0] == pytest.approx(big.mean(), abs=1e-3)
    assert est.posterior_covariance_[0, 0] < 1e-3


def test_gaussian_known_covariance_multivariate():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 2)) + [1.0, 2.0]
    S0, Sigma = 0.7 * np.eye(2), np.cov(X.T, bias=True) + 1e-6 * np.eye(2)
    est = GD(method="bayesian", prior="normal", prior_variance=0.7).fit(X)
    prec = np.linalg.inv(S0) + 30 * np.linalg.inv(Sigma)
    Sn = np.linalg.inv(prec)
    mun = Sn @ (30 * np.linalg.inv(Sigma) @ X.mean(0))
    np.testing.assert_allclose(est.posterior_covariance_, Sn, rtol=1e-8)
    np.testing.assert_allclose(est.posterior_mean_, mun, rtol=1e-8)


def _niw_log_marginal(X, mu0, k0, psi0, nu0):
    """log p(D) under NIW(mu0, k0, Psi0, nu0), an independent closed form."""
    n, d = X.shape
    xbar = X.mean(0)
    S = (X - xbar).T @ (X - xbar)
    kn, nun = k0 + n, nu0 + n
    Psin = psi0 + S + k0 * n / kn * np.outer(xbar - mu0, xbar - mu0)
    return (
        -n * d / 2 * np.log(np.pi)
        + multigammaln(nun / 2, d) - multigammaln(nu0 / 2, d)
        + nu0 / 2 * np.linalg.slogdet(psi0)[1] - nun / 2 * np.linalg.slogdet(Psin)[1]
        + d / 2 * np.log(k0 / kn)
    )


def test_gaussian_niw_predictive_is_marginal_likelihood_ratio():
    """p(x | D) = p(D u {x}) / p(D) for the Normal-inverse-Wishart model (Student-t predictive)."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(12, 3)) @ np.array([[1, 0.3, 0], [0, 1, 0.4], [0, 0, 0.6]]) + 0.5
    mu0, k0, psi, nu0 = np.array([0.1, -0.2, 0.3]), 0.8, 1.5, 6.0
    est = GD(method="bayesian", prior="normal_inverse_wishart", prior_mean=list(mu0), kappa0=k0,
             psi0=psi, nu0=nu0).fit(X)
    assert est.predictive_ == "student_t" and est.df_ == pytest.approx(nu0 + 12 - 3 + 1)
    q = rng.normal(size=(4, 3))
    base = _niw_log_marginal(X, mu0, k0, psi * np.eye(3), nu0)
    ref = [_niw_log_marginal(np.vstack([X, x]), mu0, k0, psi * np.eye(3), nu0) - base for x in q]
    np.testing.assert_allclose(est.score_samples(q), ref, rtol=1e-10)
    t = stats.multivariate_t(est.location_, est.scale_matrix_, df=est.df_)
    np.testing.assert_allclose(est.score_samples(q), t.logpdf(q), rtol=1e-10)


def test_gaussian_errors_and_weights():
    X = np.random.default_rng(0).normal(size=(10, 2))
    with pytest.raises(ParamError, match="prior_mean"):
        GD(method="bayesian", prior_mean=[0.0]).fit(X)
    with pytest.raises(ParamError, match="nu0"):
        GD(method="bayesian", nu0=0.5).fit(X)
    w = np.arange(1, 11).astype(float)
    a = GD().fit(X, sample_weight=w)
    b = GD().fit(np.repeat(X, w.astype(int), axis=0))
    np.testing.assert_allclose(a.score_samples(X), b.score_samples(X), rtol=1e-10)
    with pytest.raises(DataError, match="positive definite"):
        GD(reg_covar=0.0).fit(np.ones((5, 2)))
