"""k-nearest-neighbour classifier ([Passerini §3], [Santini ch. 2])."""

from __future__ import annotations

import numpy as np

from ..base import Classifier
from ..context import NULL_CONTEXT
from ..registry import register
from ..validation import check_X_y
from ._base import KNN_PARAMS, KNNMixin, neighbor_weights


@register
class KNNClassifier(KNNMixin, Classifier):
    """Majority (or 1/d-weighted) vote of the k nearest training points.

    ``P(c | x) = sum_{i in N_k(x)} w_i [y_i = c] / sum_i w_i`` with ``w_i = 1`` (uniform) or
    ``w_i = 1/d(x, x_i)`` ([Passerini §3.5]).  Ties in the vote go to the lowest class
    index (the first column of ``classes_``); neighbours at equal distance are taken in order of
    training index.
    """

    name = "knn_classifier"
    summary = "k-nearest-neighbour classifier (brute force or kd-tree, several metrics)"
    params = dict(KNN_PARAMS)
    needs_scaling = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y)
        classes, codes = self._encode_targets(y)
        index = self._fit_index(X, p)
        self.classes_ = classes
        self.y_codes_ = codes
        self.index_ = index
        self.n_neighbors_ = p["n_neighbors"]
        self.weights_ = p["weights"]
        self.n_features_in_ = X.shape[1]
        return self

    def predict_proba(self, X):
        dist, ind = self.kneighbors(X)
        w = neighbor_weights(dist, self.weights_)
        labels = self.y_codes_[ind]
        m, k = labels.shape
        K = len(self.classes_)
        flat = (np.arange(m)[:, None] * K + labels).ravel()
        proba = np.bincount(flat, weights=None if w is None else w.ravel(), minlength=m * K)
        proba = proba.reshape(m, K).astype(np.float64)
        proba /= proba.sum(axis=1, keepdims=True)
        return proba
