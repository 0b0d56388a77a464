"""Regression metrics ([Passerini eq. 4.6] RMSE; reference: ``sklearn.metrics``).

MSE, RMSE, MAE and R^2 reproduce scikit-learn's numbers (tests to 1e-12).
Adjusted R^2, the Gaussian log-likelihood and AIC/BIC follow the textbook
definitions given in each docstring ([Colombo §3.3.2] names Cp/AIC/BIC/adjusted R^2
as selection criteria).
"""

from __future__ import annotations

import math

import numpy as np

from ..validation import DataError

__all__ = [
    "mean_squared_error",
    "root_mean_squared_error",
    "mean_absolute_error",
    "r2_score",
    "adjusted_r2_score",
    "gaussian_log_likelihood",
    "aic",
    "bic",
    "mse",
    "rmse",
    "mae",
    "r2",
    "adjusted_r2",
]


def _check(y_true, y_pred, sample_weight=None):
    yt = np.asarray(y_true, dtype=np.float64)
    yp = np.asarray(y_pred, dtype=np.float64)
    if yt.ndim == 2 and yt.shape[1] == 1:
        yt = yt[:, 0]
    if yp.ndim == 2 and yp.shape[1] == 1:
        yp = yp[:, 0]
    if yt.ndim != 1 or yp.ndim != 1:
        raise DataError(f"y_true and y_pred must be 1-dimensional, got shapes {yt.shape} and {yp.shape}")
    if yt.shape[0] != yp.shape[0]:
        raise DataError(f"y_true has {yt.shape[0]} samples but y_pred has {yp.shape[0]}")
    if yt.shape[0] == 0:
        raise DataError("y_true is empty; at least one sample is required")
    if not (np.isfinite(yt).all() and np.isfinite(yp).all()):
        raise DataError("y_true and y_pred must be finite (no NaN or infinity)")
    w = None
    if sample_weight is not None:
        w = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
        if w.shape[0] != yt.shape[0]:
            raise DataError(f"sample_weight has {w.shape[0]} entries, expected {yt.shape[0]}")
    return yt, yp, w


def mean_squared_error(y_true, y_pred, *, sample_weight=None) -> float:
    """``MSE = (1/N) sum_i (y_i - f(x_i))^2``."""
    yt, yp, w = _check(y_true, y_pred, sample_weight)
    return float(np.average((yt - yp) ** 2, weights=w))


def root_mean_squared_error(y_true, y_pred, *, sample_weight=None) -> float:
    """``RMSE = sqrt(MSE)`` ([Passerini eq. 4.6])."""
    return float(np.sqrt(mean_squared_error(y_true, y_pred, sample_weight=sample_weight)))


def mean_absolute_error(y_true, y_pred, *, sample_weight=None) -> float:
    """``MAE = (1/N) sum_i |y_i - f(x_i)|``."""
    yt, yp, w = _check(y_true, y_pred, sample_weight)
    return float(np.average(np.abs(yt - yp), weights=w))


def r2_score(y_true, y_pred, *, sample_weight=None, force_finite: bool = True) -> float:
    """``R^2 = 1 - SS_res / SS_tot`` with ``SS_tot = sum_i (y_i - ybar)^2``.

    For a constant ``y_true`` (SS_tot = 0) scikit-learn's convention applies with
    ``force_finite``: 1.0 for a perfect prediction, else 0.0 (nan / -inf without it).
    Fewer than two samples give nan.
    """
    yt, yp, w = _check(y_true, y_pred, sample_weight)
    if yt.shape[0] < 2:
        return float("nan")
    ww = np.ones_like(yt) if w is None else w
    num = float((ww * (yt - yp) ** 2).sum())
    den = float((ww * (yt - np.average(yt, weights=ww)) ** 2).sum())
    if den == 0.0:
        if num == 0.0:
            return 1.0 if force_finite else float("nan")
        return 0.0 if force_finite else float("-inf")
    return 1.0 - num / den


def adjusted_r2_score(y_true, y_pred, n_features: int, *, sample_weight=None) -> float:
    """``adj R^2 = 1 - (1 - R^2) (n - 1) / (n - p - 1)`` with ``p = n_features``.

    Undefined (nan) when ``n - p - 1 <= 0``.
    """
    p = int(n_features)
    if p < 0:
        raise DataError("n_features must be non-negative")
    n = np.asarray(y_true).shape[0]
    r2v = r2_score(y_true, y_pred, sample_weight=sample_weight)
    if n - p - 1 <= 0 or math.isnan(r2v):
        return float("nan")
    return 1.0 - (1.0 - r2v) * (n - 1) / (n - p - 1)


def gaussian_log_likelihood(y_true, y_pred, *, sigma2: float | None = None) -> float:
    """Log-likelihood of the residuals under ``y ~ N(f(x), sigma^2)``.

    ``log L = -n/2 log(2 pi sigma^2) - RSS / (2 sigma^2)``.  With ``sigma2=None`` the
    maximum-likelihood variance ``RSS/n`` is plugged in, giving
    ``-n/2 (log(2 pi RSS/n) + 1)``.  A perfect fit (RSS = 0) gives +inf.
    """
    yt, yp, _ = _check(y_true, y_pred)
    n = yt.shape[0]
    rss = float(((yt - yp) ** 2).sum())
    if sigma2 is None:
        s2 = rss / n
        if s2 == 0.0:
            return float("inf")
        return -0.5 * n * (math.log(2.0 * math.pi * s2) + 1.0)
    s2 = float(sigma2)
    if not s2 > 0:
        raise DataError("sigma2 must be positive")
    return -0.5 * n * math.log(2.0 * math.pi * s2) - rss / (2.0 * s2)


def aic(y_true, y_pred, n_params: int, *, sigma2: float | None = None) -> float:
    """Akaike information criterion ``AIC = 2k - 2 log L`` (Gaussian likelihood above).

    ``k = n_params`` counts every estimated parameter; when the noise variance is
    estimated (``sigma2=None``) include it in ``k`` yourself (e.g. p + 1 coefficients + 1).
    """
    return 2.0 * int(n_params) - 2.0 * gaussian_log_likelihood(y_true, y_pred, sigma2=sigma2)


def bic(y_true, y_pred, n_params: int, *, sigma2: float | None = None) -> float:
    """Bayesian information criterion ``BIC = k log n - 2 log L`` (Gaussian likelihood above)."""
    n = np.asarray(y_true).shape[0]
    return int(n_params) * math.log(n) - 2.0 * gaussian_log_likelihood(y_true, y_pred, sigma2=sigma2)


# short aliases (the metric names the registry and scoring accept)
mse = mean_squared_error
rmse = root_mean_squared_error
mae = mean_absolute_error
r2 = r2_score
adjusted_r2 = adjusted_r2_score
