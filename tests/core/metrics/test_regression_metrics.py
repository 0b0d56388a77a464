"""Regression metrics: sklearn parity (1e-12), closed forms for adjusted R^2, log-likelihood, AIC/BIC."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sklearn.metrics as skm
from numpy.testing import assert_allclose
from scipy import stats
from sklearn.datasets import load_diabetes

from core import metrics as M
from core.metrics import regression as R
from core.validation import DataError

TOL = dict(rtol=0, atol=1e-12)


def _data(seed=0, n=200):
    rng = np.random.default_rng(seed)
    y = rng.normal(3.0, 2.0, n)
    pred = y + rng.normal(0, 0.7, n)
    w = rng.uniform(0.2, 3.0, n)
    return y, pred, w


def test_match_sklearn():
    y, p, w = _data()
    for sw in (None, w):
        assert_allclose(
            M.mean_squared_error(y, p, sample_weight=sw),
            skm.mean_squared_error(y, p, sample_weight=sw),
            **TOL,
        )
        assert_allclose(
            M.root_mean_squared_error(y, p, sample_weight=sw),
            skm.root_mean_squared_error(y, p, sample_weight=sw),
            **TOL,
        )
        assert_allclose(
            M.mean_absolute_error(y, p, sample_weight=sw),
            skm.mean_absolute_error(y, p, sample_weight=sw),
            **TOL,
        )
        assert_allclose(M.r2_score(y, p, sample_weight=sw), skm.r2_score(y, p, sample_weight=sw), **TOL)
    assert R.mse is M.mean_squared_error and R.rmse is M.root_mean_squared_error


def test_diabetes_linear_fit_matches_sklearn():
    X, y = load_diabetes(return_X_y=True)
    A = np.column_stack([np.ones(len(X)), X])
    pred = A @ np.linalg.lstsq(A, y, rcond=None)[0]
    assert_allclose(M.r2_score(y, pred), skm.r2_score(y, pred), **TOL)
    assert_allclose(M.mean_squared_error(y, pred), skm.mean_squared_error(y, pred), rtol=1e-15, atol=0)


def test_r2_edge_cases_follow_sklearn():
    c = np.full(5, 2.0)
    assert M.r2_score(c, c) == skm.r2_score(c, c) == 1.0
    assert M.r2_score(c, c + 1) == skm.r2_score(c, c + 1) == 0.0
    assert math.isnan(M.r2_score(c, c, force_finite=False))
    assert M.r2_score(c, c + 1, force_finite=False) == -math.inf
    with pytest.warns(Warning):
        assert math.isnan(skm.r2_score([1.0], [2.0]))
    assert math.isnan(M.r2_score([1.0], [2.0]))
    # worse than the mean: negative
    y = np.array([1.0, 2.0, 3.0])
    assert M.r2_score(y, y[::-1]) == pytest.approx(-3.0, abs=1e-15)


def test_adjusted_r2_closed_form():
    y, p, _ = _data(1, n=50)
    r2 = skm.r2_score(y, p)
    for k in (1, 5, 20):
        assert_allclose(M.adjusted_r2_score(y, p, k), 1 - (1 - r2) * 49 / (49 - k), **TOL)
    assert math.isnan(M.adjusted_r2_score(y, p, 49))  # n - p - 1 = 0
    with pytest.raises(DataError, match="non-negative"):
        M.adjusted_r2_score(y, p, -1)


def test_gaussian_log_likelihood_aic_bic():
    y, p, _ = _data(2, n=80)
    resid = y - p
    s2 = np.mean(resid**2)
    ref = stats.norm.logpdf(resid, scale=np.sqrt(s2)).sum()
    assert_allclose(M.gaussian_log_likelihood(y, p), ref, rtol=1e-13)
    ref2 = stats.norm.logpdf(resid, scale=np.sqrt(0.5)).sum()
    assert_allclose(M.gaussian_log_likelihood(y, p, sigma2=0.5), ref2, rtol=1e-13)
    assert_allclose(M.aic(y, p, 4), 2 * 4 - 2 * ref, rtol=1e-13)
    assert_allclose(M.bic(y, p, 4), 4 * math.log(80) - 2 * ref, rtol=1e-13)
    # closed form with the ML variance: -n/2 (log(2 pi RSS/n) + 1)
    assert_allclose(M.gaussian_log_likelihood(y, p), -40 * (math.log(2 * math.pi * s2) + 1), rtol=1e-13)
    assert M.gaussian_log_likelihood(y, y) == math.inf
    with pytest.raises(DataError, match="sigma2 must be positive"):
        M.gaussian_log_likelihood(y, p, sigma2=0.0)


def test_aic_prefers_true_model_on_nested_fits():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 6))
    y = X[:, 0] * 2 - X[:, 1] + rng.normal(0, 0.5, 200)

    def fit(cols):
        A = np.column_stack([np.ones(200), X[:, cols]])
        return A @ np.linalg.lstsq(A, y, rcond=None)[0]

    small, true, big = fit([0]), fit([0, 1]), fit(list(range(6)))
    # k = coefficients + intercept + noise variance
    assert M.bic(y, true, 4) < M.bic(y, small, 3)
    assert M.bic(y, true, 4) < M.bic(y, big, 8)


def test_regression_errors():
    with pytest.raises(DataError, match="3 samples but y_pred has 2"):
        M.mean_squared_error([1, 2, 3], [1, 2])
    with pytest.raises(DataError, match="finite"):
        M.mean_absolute_error([1, np.nan], [1, 2])
