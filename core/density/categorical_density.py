"""Per-feature categorical density: MLE or Dirichlet-categorical ([Passerini §5.5.2], [Arias Example A.8])."""

from __future__ import annotations

import numpy as np

from ..base import Density
from ..context import NULL_CONTEXT
from ..params import Choice, Float, Int
from ..registry import register
from ..validation import (
    DataError,
    check_array,
    check_predict_input,
    check_sample_weight,
)


def _check_codes(X: np.ndarray) -> None:
    obs = X[~np.isnan(X)]
    if obs.size and ((obs < 0).any() or (obs != np.floor(obs)).any()):
        raise DataError("categorical_density needs non-negative integer category codes (NaN = missing)")


@register
class CategoricalDensity(Density):
    """Independent categorical features on codes ``0..k_j - 1``.

    With counts ``N_jv`` of value v in feature j (``N_j`` observed values): MLE
    ``theta_jv = N_jv/N_j`` ([Passerini §5.5.2]); Bayesian with a symmetric ``Dirichlet(alpha)``
    prior: predictive ``theta_jv = (N_jv + alpha)/(N_j + alpha k_j)`` ([Passerini §5.5.2]; alpha = 1 is the
    Laplace-smoothed die of [Arias Example A.8]).  ``k_j = max code + 1`` (at least ``min_categories``).
    ``score_samples`` = ``sum_j log theta_{j, x_j}``; NaN is skipped; a code outside ``0..k_j - 1``
    (or with MLE probability 0) has log density -inf.
    """

    name = "categorical_density"
    summary = "Per-feature categorical density on codes (MLE or Dirichlet prior)"
    params = {
        "method": Choice("mle", choices=("mle", "bayesian"), doc="mle or bayesian (Dirichlet prior)."),
        "alpha": Float(1.0, ge=0.0, le=1e12, doc="Symmetric Dirichlet pseudo-count per category."),
        "min_categories": Int(None, ge=1, le=1_000_000, doc="Minimum number of categories per feature."),
    }
    supports_sample_weight = True
    native_missing = True
    native_categorical = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT, categorical_features=None):
        p = self._validated_params()
        X = check_array(X, allow_nan=True)
        _check_codes(X)
        if categorical_features is not None:
            mask = np.zeros(X.shape[1], dtype=bool)
            cf = np.asarray(categorical_features)
            mask[cf if cf.dtype != bool else np.flatnonzero(cf)] = True
            if not mask.all():
                raise DataError("categorical_density models categorical columns only; "
                                "every column must be categorical")
        w = check_sample_weight(sample_weight, X.shape[0])
        alpha = 0.0 if p["method"] == "mle" else p["alpha"]
        counts, thetas = [], []
        d = X.shape[1]
        n_cat = np.zeros(d, dtype=np.intp)
        for j in range(d):
            col = X[:, j]
            obs = ~np.isnan(col)
            k = int(col[obs].max()) + 1 if obs.any() else 1
            k = max(k, p["min_categories"] or 1)
            cnt = np.bincount(col[obs].astype(np.intp), weights=w[obs], minlength=k)
            den = cnt.sum() + alpha * k
            if den <= 0:
                raise DataError(f"feature {j} has no observed value and alpha is 0")
            n_cat[j] = k
            counts.append(cnt)
            thetas.append((cnt + alpha) / den)
        kmax = int(n_cat.max())
        table = np.full((d, kmax + 2), -np.inf)  # column kmax: unseen code; kmax + 1: missing
        table[:, kmax + 1] = 0.0
        with np.errstate(divide="ignore"):
            for j, th in enumerate(thetas):
                table[j, : len(th)] = np.log(th)
        self.category_count_ = counts
        self.theta_ = thetas
        self.n_categories_ = n_cat
        self._log_table = table
        self.n_features_in_ = d
        return self

    def score_samples(self, X):
        X = check_predict_input(self, X, "theta_", allow_nan=True)
        _check_codes(X)
        kmax = self._log_table.shape[1] - 2
        nan = np.isnan(X)
        idx = np.where(nan, 0.0, X)
        idx = np.where(idx >= self.n_categories_[None, :], kmax, idx).astype(np.intp)
        idx[nan] = kmax + 1
        return self._log_table[np.arange(X.shape[1])[None, :], idx].sum(axis=1)
