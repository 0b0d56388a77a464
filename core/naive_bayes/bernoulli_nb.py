"""Bernoulli naive Bayes ([da Silva Neto §1.4.3-1.4.4] multivariate Bernoulli event model, [Arias §4.3])."""

from __future__ import annotations

import numpy as np

from ..context import NULL_CONTEXT
from ..params import Float
from ..registry import register
from ..validation import DataError, check_sample_weight, check_X_y
from ._base import DISCRETE_PARAMS, NaiveBayes, class_log_prior, one_hot


def _binarize(X: np.ndarray, threshold: float | None) -> np.ndarray:
    nan = np.isnan(X)
    if threshold is None:
        ok = nan | (X == 0) | (X == 1)
        if not ok.all():
            raise DataError("bernoulli_nb with binarize=null needs X in {0, 1} (or NaN)")
        return X
    B = (X > threshold).astype(np.float64)
    if nan.any():
        B[nan] = np.nan
    return B


@register
class BernoulliNB(NaiveBayes):
    """Naive Bayes over binary features (the multivariate Bernoulli event model).

    ``phi_{j|k} = (sum_i w_i [y_i = k] x_ij + alpha) / (sum_i w_i [y_i = k] + 2 alpha)``
    ([da Silva Neto §1.4.4] with alpha = 1), and
    ``g_k(x) = log pi_k + sum_j [x_j log phi_{j|k} + (1 - x_j) log(1 - phi_{j|k})]``
    ([Arias §4.3], linear in x).  Features are binarised at ``binarize`` (x > threshold).
    Missing values (NaN) are skipped: at fit each feature's denominator counts only the
    observed rows, at predict missing features drop out of the product.
    """

    name = "bernoulli_nb"
    summary = "Bernoulli naive Bayes for binary features (binarize threshold, smoothing)"
    params = {
        **DISCRETE_PARAMS,
        "binarize": Float(0.0, le=1e12, nullable=True, doc="Threshold: x > binarize is 1; null: X is already 0/1."),
    }
    supports_sample_weight = True
    native_missing = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, allow_nan=True)
        B = _binarize(X, p["binarize"])
        w = check_sample_weight(sample_weight, X.shape[0])
        classes, codes = self._encode_targets(y)
        Y = one_hot(codes, len(classes), w)
        alpha = max(p["alpha"], 1e-10)
        obs = ~np.isnan(B)
        if obs.all():
            feature_count = Y.T @ B
            denom = Y.sum(axis=0)[:, None]
        else:
            feature_count = Y.T @ np.where(obs, B, 0.0)
            denom = Y.T @ obs
        class_count = Y.sum(axis=0)
        flp = np.log(feature_count + alpha) - np.log(denom + 2.0 * alpha)
        neg = np.log1p(-np.exp(flp))
        self.classes_ = classes
        self.feature_count_ = feature_count
        self.class_count_ = class_count
        self.feature_log_prob_ = flp
        self._neg_log_prob = neg
        self.class_log_prior_ = class_log_prior(class_count, p)
        self.binarize_ = p["binarize"]
        self.n_features_in_ = X.shape[1]
        return self

    def _jll(self, X):
        B = _binarize(X, self.binarize_)
        nan = np.isnan(B)
        if nan.any():
            obs = (~nan).astype(np.float64)
            B = np.where(nan, 0.0, B)
            jll = B @ (self.feature_log_prob_ - self._neg_log_prob).T
            return jll + obs @ self._neg_log_prob.T + self.class_log_prior_
        jll = B @ (self.feature_log_prob_ - self._neg_log_prob).T
        return jll + (self._neg_log_prob.sum(axis=1) + self.class_log_prior_)
