"""Per-feature Bernoulli density: MLE or Beta-Bernoulli ([Passerini §5.5.1])."""

from __future__ import annotations

import numpy as np
from scipy.special import xlogy

from ..base import Density
from ..context import NULL_CONTEXT
from ..params import Choice, Float
from ..registry import register
from ..validation import (
    DataError,
    check_array,
    check_predict_input,
    check_sample_weight,
)


def _binary(X: np.ndarray, threshold: float | None) -> np.ndarray:
    nan = np.isnan(X)
    if threshold is None:
        if not (nan | (X == 0) | (X == 1)).all():
            raise DataError("bernoulli_density needs X in {0, 1} (or NaN); set binarize to threshold")
        return X
    B = (X > threshold).astype(np.float64)
    B[nan] = np.nan
    return B


@register
class BernoulliDensity(Density):
    """Independent Bernoulli features ``P(x) = prod_j theta_j^x_j (1 - theta_j)^(1 - x_j)``.

    With h_j ones ("heads") and t_j zeros among the observed values of feature j:
    MLE ``theta_j = h_j/(h_j + t_j)`` ([Passerini §5.5.1]: 4/7); Bayesian with prior
    ``Beta(alpha_h, alpha_t)``: posterior ``Beta(alpha_h + h, alpha_t + t)`` and predictive
    ``P(x_j = 1 | D) = (alpha_h + h)/(alpha_h + alpha_t + h + t)`` ([Passerini §5.5.1]: 5/9 with 1, 1).
    Missing values (NaN) are skipped at fit and in ``score_samples``.  An MLE probability of 0 or 1
    gives log density -inf to rows that contradict it.
    """

    name = "bernoulli_density"
    summary = "Per-feature Bernoulli density (MLE or Beta prior with posterior predictive)"
    params = {
        "method": Choice("mle", choices=("mle", "bayesian"), doc="mle or bayesian (Beta prior)."),
        "alpha_h": Float(1.0, ge=0.0, le=1e12, doc="Beta prior pseudo-count of ones (heads)."),
        "alpha_t": Float(1.0, ge=0.0, le=1e12, doc="Beta prior pseudo-count of zeros (tails)."),
        "binarize": Float(None, le=1e12, doc="Threshold: x > binarize is 1; null: X must be 0/1."),
    }
    supports_sample_weight = True
    native_missing = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X = check_array(X, allow_nan=True)
        B = _binary(X, p["binarize"])
        w = check_sample_weight(sample_weight, X.shape[0])
        obs = ~np.isnan(B)
        h = w @ np.where(obs, B, 0.0)
        t = w @ (obs & (B == 0)).astype(np.float64)
        if p["method"] == "mle":
            a_h = a_t = 0.0
        else:
            a_h, a_t = p["alpha_h"], p["alpha_t"]
        den = a_h + a_t + h + t
        if (den <= 0).any():
            raise DataError("a feature has no observed value and the prior is empty (alpha_h + alpha_t = 0)")
        self.n_heads_ = h
        self.n_tails_ = t
        self.posterior_alpha_h_ = a_h + h
        self.posterior_alpha_t_ = a_t + t
        self.theta_ = (a_h + h) / den
        self.binarize_ = p["binarize"]
        self.n_features_in_ = X.shape[1]
        return self

    def score_samples(self, X):
        X = check_predict_input(self, X, "theta_", allow_nan=True)
        B = _binary(X, self.binarize_)
        nan = np.isnan(B)
        B0 = np.where(nan, 0.0, B)
        with np.errstate(divide="ignore"):
            L = xlogy(B0, self.theta_) + xlogy(np.where(nan, 0.0, 1.0 - B0), 1.0 - self.theta_)
        return L.sum(axis=1)
