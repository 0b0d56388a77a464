"""k-nearest-neighbour regressor ([Passerini §3.5])."""

from __future__ import annotations

import numpy as np

from ..base import Regressor
from ..context import NULL_CONTEXT
from ..registry import register
from ..validation import check_X_y
from ._base import KNN_PARAMS, KNNMixin, neighbor_weights


@register
class KNNRegressor(KNNMixin, Regressor):
    """Mean (or 1/d-weighted mean) of the k nearest training targets.

    ``f(x) = sum_{i in N_k(x)} w_i y_i / sum_i w_i`` ([Passerini §3.5]); exact matches
    (d = 0) take all the weight, as in scikit-learn.
    """

    name = "knn_regressor"
    summary = "k-nearest-neighbour regressor (brute force or kd-tree, several metrics)"
    params = dict(KNN_PARAMS)
    needs_scaling = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, y_numeric=True)
        index = self._fit_index(X, p)
        self.y_ = np.array(y, dtype=np.float64)  # one copy
        self.index_ = index
        self.n_neighbors_ = p["n_neighbors"]
        self.weights_ = p["weights"]
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        dist, ind = self.kneighbors(X)
        w = neighbor_weights(dist, self.weights_)
        vals = self.y_[ind]
        if w is None:
            return vals.mean(axis=1)
        return np.einsum("ij,ij->i", w, vals) / w.sum(axis=1)
