"""Gaussian naive Bayes ([Passerini §8], [Arias §4.3.1], [da Silva Neto §1.4.3])."""

from __future__ import annotations

import numpy as np

from ..context import NULL_CONTEXT
from ..params import Float, ListOf
from ..registry import register
from ..validation import DataError, check_sample_weight, check_X_y
from ._base import NaiveBayes, check_priors


def gaussian_class_stats(X: np.ndarray, codes: np.ndarray, K: int, w: np.ndarray, var_smoothing: float):
    """Per-class weighted means/variances over the *observed* entries of each feature.

    Returns ``(theta, var, class_count, epsilon)``; NaN entries are skipped.  A feature with no
    observed value in a class falls back to the feature's overall mean and variance.
    """
    d = X.shape[1]
    has_nan = bool(np.isnan(X).any())
    theta = np.zeros((K, d))
    var = np.zeros((K, d))
    W = np.zeros((K, d))
    class_count = np.bincount(codes, weights=w, minlength=K).astype(np.float64)
    unit = bool(np.all(w == 1.0))
    for k in range(K):
        sel = codes == k
        Xk = X[sel]
        if not has_nan:
            if unit:
                theta[k] = Xk.mean(axis=0)
                var[k] = Xk.var(axis=0)
            else:
                wk = w[sel]
                theta[k] = (wk @ Xk) / wk.sum()
                var[k] = (wk @ (Xk - theta[k]) ** 2) / wk.sum()
            W[k] = class_count[k]
            continue
        obs = ~np.isnan(Xk)
        wk = w[sel][:, None] * obs
        W[k] = wk.sum(axis=0)
        X0 = np.where(obs, Xk, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            theta[k] = (wk * X0).sum(axis=0) / W[k]
            var[k] = (wk * (X0 - theta[k]) ** 2).sum(axis=0) / W[k]
    overall_var = np.nanvar(X, axis=0) if has_nan else np.var(X, axis=0)
    if np.isnan(overall_var).any():
        raise DataError("a feature of X has no observed (non-NaN) value")
    epsilon = var_smoothing * float(np.max(overall_var))
    empty = W <= 0
    if empty.any():
        overall_mean = np.nanmean(X, axis=0) if has_nan else X.mean(axis=0)
        theta = np.where(empty, overall_mean[None, :], theta)
        var = np.where(empty, overall_var[None, :], var)
    var = var + epsilon
    if (var <= 0).any():
        # all features constant and var_smoothing = 0: no density can be formed
        raise DataError("a class has zero variance in a feature; use var_smoothing > 0")
    return theta, var, class_count, epsilon


def gaussian_log_likelihood(X: np.ndarray, theta: np.ndarray, var: np.ndarray) -> np.ndarray:
    """``sum_j log N(x_j; theta_kj, var_kj)`` per class, skipping NaN features (n, K).

    Without missing values: ``sum_j (x_j - t_kj)^2 / v_kj`` is expanded into two GEMMs on
    data centred at the mean of the class centres (small magnitudes, little cancellation).
    """
    nan = np.isnan(X)
    log2pv = np.log(2.0 * np.pi * var)
    if not nan.any():
        c = theta.mean(axis=0)
        Xc = X - c
        T = theta - c
        P = 1.0 / var
        maha = (Xc * Xc) @ P.T - 2.0 * (Xc @ (T * P).T) + np.sum(T * T * P, axis=1)
        return -0.5 * (maha + log2pv.sum(axis=1))
    out = np.empty((X.shape[0], theta.shape[0]))
    for k in range(theta.shape[0]):
        Z = (X - theta[k]) ** 2 / var[k] + log2pv[k]
        out[:, k] = -0.5 * np.where(nan, 0.0, Z).sum(axis=1)
    return out


@register
class GaussianNB(NaiveBayes):
    """Naive Bayes with per-class, per-feature Gaussians.

    ``p(x_j | c_k) = N(x_j; theta_kj, sigma2_kj + eps)`` with MLE (1/n, weighted) moments and
    ``eps = var_smoothing * max_j Var(x_j)`` (scikit-learn's rule).  Equivalent to QDA with
    diagonal covariances ([Arias §4.3]).  Missing values (NaN) are handled natively by skipping
    the missing features in the likelihood product, at fit (moments over observed entries)
    and at predict (see docs/decisions/naive_bayes.md).
    """

    name = "gaussian_nb"
    summary = "Gaussian naive Bayes (per-class diagonal Gaussians, var_smoothing)"
    params = {
        "priors": ListOf(Float(ge=0.0, le=1e12), None, doc="Fixed class priors in classes_ order."),
        "var_smoothing": Float(
            1e-9, ge=0.0, le=1e12, doc="Fraction of the largest feature variance added to all variances."
        ),
    }
    supports_sample_weight = True
    native_missing = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, allow_nan=True)
        w = check_sample_weight(sample_weight, X.shape[0])
        classes, codes = self._encode_targets(y)
        K = len(classes)
        theta, var, class_count, eps = gaussian_class_stats(X, codes, K, w, p["var_smoothing"])
        if p["priors"] is not None:
            prior = check_priors(p["priors"], K, "priors")
        else:
            prior = class_count / class_count.sum()
        self.classes_ = classes
        self.theta_ = theta
        self.var_ = var
        self.epsilon_ = eps
        self.class_count_ = class_count
        self.class_prior_ = prior
        self.n_features_in_ = X.shape[1]
        return self

    def _jll(self, X):
        with np.errstate(divide="ignore"):
            logp = np.log(self.class_prior_)
        return gaussian_log_likelihood(X, self.theta_, self.var_) + logp
