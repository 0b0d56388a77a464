"""Discriminant analysis mathematics: RDA limits, discriminants, shrinkage, errors."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import multivariate_normal
from sklearn.covariance import ledoit_wolf

from core import registry
from core.discriminant._base import ledoit_wolf_shrinkage
from core.params import ParamError
from core.validation import DataError

LDA = registry.get("linear_discriminant_analysis")
QDA = registry.get("quadratic_discriminant_analysis")
RDA = registry.get("regularized_discriminant_analysis")


def _blobs(seed=0, n=60):
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1, 2], n // 3)
    A = [np.array([[1.0, 0.3], [0.3, 0.5]]), np.array([[0.4, -0.2], [-0.2, 1.5]]), np.eye(2) * 0.7]
    X = np.vstack([rng.multivariate_normal([0, 0], A[0], n // 3),
                   rng.multivariate_normal([2, 1], A[1], n // 3),
                   rng.multivariate_normal([0, 3], A[2], n // 3)])
    return X, y


def test_qda_discriminant_matches_seed_formula():
    """[Arias §4.2.1]: g_k = log pi_k - 1/2 log det S_k - d/2 log 2pi - 1/2 Mahalanobis^2."""
    X, y = _blobs()
    est = QDA().fit(X, y)
    x = np.array([[0.5, 1.0], [2.0, -1.0]])
    for k in range(3):
        Xk = X[y == k]
        S = np.cov(Xk.T, bias=True)
        g = np.log(1 / 3) + multivariate_normal(Xk.mean(axis=0), S).logpdf(x)
        np.testing.assert_allclose(est.decision_function(x)[:, k], g, rtol=1e-10)


def test_lda_discriminant_is_linear_seed_formula():
    """[Arias §4.2.1]: g_k = log pi_k + mu_k^T S^-1 x - 1/2 mu_k^T S^-1 mu_k (shared S)."""
    X, y = _blobs(1)
    est = LDA(solver="lsqr").fit(X, y)
    S = sum(np.cov(X[y == k].T, bias=True) / 3 for k in range(3))
    x = np.array([[0.3, 0.4]])
    mus = np.array([X[y == k].mean(axis=0) for k in range(3)])
    Sinv_mu = np.linalg.solve(S, mus.T).T
    g = np.log(1 / 3) + Sinv_mu @ x[0] - 0.5 * np.einsum("kd,kd->k", mus, Sinv_mu)
    np.testing.assert_allclose(est.decision_function(x)[0], g, rtol=1e-10)
    # the three solvers agree on full-rank data
    for solver in ("svd", "eigen"):
        other = LDA(solver=solver).fit(X, y)
        np.testing.assert_allclose(other.predict_proba(X), est.predict_proba(X), atol=1e-10)


def test_rda_limits_alpha_one_is_qda_alpha_zero_is_lda():
    """[Arias §4.2.2]: alpha = 1 gives QDA, alpha = 0 gives LDA."""
    X, y = _blobs(2)
    np.testing.assert_allclose(RDA(alpha=1.0, gamma=0.0).fit(X, y).predict_proba(X),
                               QDA().fit(X, y).predict_proba(X), atol=1e-12)
    np.testing.assert_allclose(RDA(alpha=0.0, gamma=0.0).fit(X, y).predict_proba(X),
                               LDA().fit(X, y).predict_proba(X), atol=1e-10)


def test_rda_gamma_shrinks_toward_scaled_identity():
    X, y = _blobs(3)
    est = RDA(alpha=0.4, gamma=0.3).fit(X, y)
    Sk = np.cov(X[y == 0].T, bias=True)
    pooled = sum(np.cov(X[y == k].T, bias=True) / 3 for k in range(3))
    Sa = 0.4 * Sk + 0.6 * pooled
    expected = 0.7 * Sa + 0.3 * np.trace(Sa) / 2 * np.eye(2)
    np.testing.assert_allclose(est.covariance_[0], expected, rtol=1e-12)
    full = RDA(alpha=0.4, gamma=1.0).fit(X, y).covariance_[0]
    np.testing.assert_allclose(full, np.trace(Sa) / 2 * np.eye(2), rtol=1e-12)


def test_rda_regularises_singular_problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 30))  # fewer samples per class than features
    y = np.repeat([0, 1], 10)
    with pytest.raises(DataError, match="not full rank"):
        QDA().fit(X, y)
    proba = RDA(alpha=0.5, gamma=0.2).fit(X, y).predict_proba(X)
    assert np.isfinite(proba).all()


def test_ledoit_wolf_shrinkage_matches_sklearn():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 8)) @ rng.normal(size=(8, 8))
    _, ref = ledoit_wolf(X)
    assert ledoit_wolf_shrinkage(X) == pytest.approx(ref, rel=1e-10)


def test_lda_param_errors():
    X, y = _blobs()
    with pytest.raises(ParamError, match="shrinkage"):
        LDA(solver="svd", shrinkage=0.5).fit(X, y)
    with pytest.raises(ParamError, match="n_components"):
        LDA(n_components=3).fit(X, y)
    with pytest.raises(ParamError, match="priors"):
        LDA(priors=[0.5, 0.5]).fit(X, y)
    with pytest.raises(DataError, match="lsqr"):
        LDA(solver="lsqr").fit(X, y).transform(X)
    est = LDA(priors=[2.0, 1.0, 1.0]).fit(X, y)  # renormalised as scikit-learn does
    np.testing.assert_allclose(est.priors_, [0.5, 0.25, 0.25])
