"""Categorical naive Bayes ([Arias Example A.8, §4.3], [Passerini §8], [da Silva Neto §1.4.4])."""

from __future__ import annotations

import numpy as np

from ..context import NULL_CONTEXT
from ..params import Float, Int
from ..registry import register
from ..validation import DataError, check_categorical_features, check_sample_weight, check_X_y
from ._base import DISCRETE_PARAMS, NaiveBayes, class_log_prior, one_hot
from .gaussian_nb import gaussian_class_stats, gaussian_log_likelihood


def check_codes(C: np.ndarray, what: str = "categorical features") -> None:
    """Category codes must be non-negative integers (NaN = missing)."""
    obs = C[~np.isnan(C)]
    if obs.size and ((obs < 0).any() or (obs != np.floor(obs)).any()):
        raise DataError(f"{what} must hold non-negative integer category codes 0..k-1 (NaN = missing)")


def padded_log_table(counts: list[np.ndarray], alpha: float, mle: bool = False) -> np.ndarray:
    """Stack per-feature (K, k_j) smoothed log tables into (d, K, max_k + 1); the last column is 0.

    ``log p_{j,k,v} = log(N_{jkv} + alpha) - log(sum_v N_{jkv} + alpha k_j)``; the zero column is
    used for missing or unseen codes (skipped in the likelihood product).
    """
    d = len(counts)
    K = counts[0].shape[0] if d else 0
    kmax = max((c.shape[1] for c in counts), default=0)
    table = np.zeros((d, K, kmax + 1))
    for j, c in enumerate(counts):
        sm = c + alpha
        with np.errstate(divide="ignore"):
            table[j, :, : c.shape[1]] = np.log(sm) - np.log(sm.sum(axis=1, keepdims=True))
        table[j, :, c.shape[1] : kmax] = 0.0
    return table


def code_index(C: np.ndarray, n_categories: np.ndarray, pad: int) -> np.ndarray:
    """Integer codes; NaN or unseen codes (>= k_j) map to the padding column ``pad``.

    Raises DataError for negative or non-integer codes (few passes over the data: predict path).
    """
    nan = np.isnan(C)
    any_nan = bool(nan.any())
    C0 = np.where(nan, 0.0, C) if any_nan else C
    if C0.size and (C0.max() > 2**40 or C0.min() < 0):
        raise DataError("categorical features must hold non-negative integer category codes 0..k-1")
    idx = C0.astype(np.intp)
    if (idx != C0).any():
        raise DataError("categorical features must hold non-negative integer category codes 0..k-1")
    unseen = idx >= n_categories[None, :]
    if any_nan:
        unseen |= nan
    if unseen.any():
        idx[unseen] = pad
    return idx


@register
class CategoricalNB(NaiveBayes):
    """Naive Bayes over categorical features given as integer codes.

    ``g_k(x) = log pi_k + sum_j log p_{k,j,x_j}`` with Laplace/Lidstone smoothing
    ``p_{k,j,v} = (N_{kjv} + alpha) / (N_{kj} + alpha k_j)`` ([Arias §4.3]; alpha = 1 is
    Laplace, the die example A.8).  ``k_j = max(code) + 1`` (at least ``min_categories``).

    Native categorical and missing values: missing codes (NaN) are skipped in the likelihood
    product, at fit (they do not count) and at predict; codes never seen at fit (>= k_j) are
    skipped too.  With ``categorical_features`` a subset of columns, the other (numeric)
    columns get per-class Gaussian likelihoods ([Arias §4.3.1]: mixed data add the
    log-likelihoods of per-feature distributions), smoothed like ``gaussian_nb``.
    """

    name = "categorical_nb"
    summary = "Categorical naive Bayes on category codes (smoothing, missing values skipped)"
    params = {
        **DISCRETE_PARAMS,
        "min_categories": Int(None, ge=1, le=1_000_000, doc="Minimum number of categories per feature."),
        "var_smoothing": Float(1e-9, ge=0.0, le=1e12, doc="Variance smoothing of numeric (non-categorical) columns."),
    }
    supports_sample_weight = True
    native_missing = True
    native_categorical = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT, categorical_features=None):
        p = self._validated_params()
        X, y = check_X_y(X, y, allow_nan=True)
        mask = check_categorical_features(categorical_features, X.shape[1], default=True)
        C = X[:, mask]
        check_codes(C)
        w = check_sample_weight(sample_weight, X.shape[0])
        classes, codes = self._encode_targets(y)
        K = len(classes)
        Y = one_hot(codes, K, w)
        alpha = max(p["alpha"], 1e-10)
        counts = []
        n_cat = np.zeros(C.shape[1], dtype=np.intp)
        for j in range(C.shape[1]):
            col = C[:, j]
            obs = ~np.isnan(col)
            k = int(col[obs].max()) + 1 if obs.any() else 1
            k = max(k, p["min_categories"] or 1)
            n_cat[j] = k
            cnt = np.zeros((K, k))
            np.add.at(cnt, (codes[obs], col[obs].astype(np.intp)), w[obs])
            counts.append(cnt)
        table = padded_log_table(counts, alpha)
        num = ~mask
        if num.any():
            theta, var, _, _ = gaussian_class_stats(X[:, num], codes, K, w, p["var_smoothing"])
        else:
            theta = var = None
        class_count = Y.sum(axis=0)
        self.classes_ = classes
        self.category_count_ = counts
        self.class_count_ = class_count
        self.n_categories_ = n_cat
        self.feature_log_prob_ = [table[j, :, : n_cat[j]] for j in range(len(counts))]
        self._table = table
        self._tableT = np.ascontiguousarray(table.transpose(0, 2, 1))  # (d, max_k + 1, K)
        self.class_log_prior_ = class_log_prior(class_count, p)
        self.categorical_features_ = mask
        self.theta_ = theta
        self.var_ = var
        self.n_features_in_ = X.shape[1]
        return self

    def _jll(self, X):
        mask = self.categorical_features_
        C = X[:, mask]
        jll = np.broadcast_to(self.class_log_prior_, (X.shape[0], len(self.classes_))).copy()
        if C.shape[1]:
            idx = code_index(C, self.n_categories_, self._table.shape[2] - 1)
            tableT = self._tableT
            for j in range(C.shape[1]):
                jll += tableT[j][idx[:, j]]
        if self.theta_ is not None:
            jll += gaussian_log_likelihood(X[:, ~mask], self.theta_, self.var_)
        return jll
