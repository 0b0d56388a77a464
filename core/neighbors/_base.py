"""Shared parameters and fitting of the k-nearest-neighbour estimators ([Passerini §3])."""

from __future__ import annotations

import numpy as np

from ..params import Choice, Float, Int
from ..validation import DataError, check_predict_input
from ._search import NeighborIndex

KNN_PARAMS = {
    "n_neighbors": Int(5, ge=1, le=100_000, doc="Number of neighbours k."),
    "weights": Choice(
        "uniform",
        choices=("uniform", "distance"),
        doc="uniform: equal votes; distance: weight 1/d (exact matches take all the weight).",
    ),
    "algorithm": Choice(
        "auto",
        choices=("auto", "brute", "kd_tree"),
        doc="Search engine; auto picks a kd-tree for <= 15 features and Minkowski metrics.",
    ),
    "metric": Choice(
        "minkowski",
        choices=("minkowski", "euclidean", "manhattan", "chebyshev", "cosine"),
        doc="Distance; minkowski uses p (p=2 is euclidean).",
    ),
    "p": Float(2.0, ge=1.0, le=100.0, doc="Minkowski exponent (metric='minkowski')."),
}


def neighbor_weights(dist: np.ndarray, weights: str) -> np.ndarray | None:
    """Weights of the k neighbours: None (uniform) or 1/d.

    [Passerini §3.5] uses w_i = 1/d(x, x_i) and leaves d = 0 open [GAP]; like scikit-learn,
    a query with any exact match (d = 0) gives weight 1 to its exact matches and 0 to the rest.
    """
    if weights == "uniform":
        return None
    with np.errstate(divide="ignore"):
        w = 1.0 / dist
    inf = np.isinf(w)
    rows = inf.any(axis=1)
    if rows.any():
        w[rows] = inf[rows]
    return w


class KNNMixin:
    """fit / kneighbors shared by the classifier and the regressor."""

    lazy_learner = True

    def _fit_index(self, X: np.ndarray, p: dict) -> NeighborIndex:
        if p["n_neighbors"] > X.shape[0]:
            raise DataError(
                f"n_neighbors={p['n_neighbors']} is larger than the number of training "
                f"samples ({X.shape[0]})"
            )
        if p["algorithm"] == "kd_tree" and p["metric"] == "cosine":
            from ..params import ParamError

            raise ParamError("algorithm", "kd_tree does not support metric='cosine'; use brute")
        # the training array itself, as scikit-learn keeps it (a copy of a large table costs more than the
        # rest of the fit): changing that array after fit changes the model; fit on a copy to keep them apart
        return NeighborIndex(X, p["metric"], p["p"], p["algorithm"], p["n_neighbors"])

    def kneighbors(self, X, n_neighbors: int | None = None):
        """Distances and training indices of the nearest neighbours, sorted (distance, index)."""
        X = check_predict_input(self, X, "index_")
        k = self.n_neighbors_ if n_neighbors is None else int(n_neighbors)
        if not 1 <= k <= self.index_.X.shape[0]:
            raise DataError(f"n_neighbors must be in [1, {self.index_.X.shape[0]}], got {k}")
        return self.index_.kneighbors(X, k)
