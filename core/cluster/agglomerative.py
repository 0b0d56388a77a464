"""Agglomerative (bottom-up hierarchical) clustering (registry name ``agglomerative_clustering``).

Sources: [Passerini §14.4.3] (merge the two closest clusters until k remain; linkages min/max/average/
centroid), [Santini §11.4] (the dendrogram as output).  The merge tree is built from scratch by
``_hierarchy.linkage_matrix`` (nearest-neighbour chain with Lance-Williams updates; generic
algorithm for centroid) and exposed as ``linkage_matrix_`` (scipy format), ``children_``
and ``distances_`` (scikit-learn format).  The flat clustering cuts the tree at
``n_clusters`` or at ``distance_threshold`` (clusters = number of merges at distance >=
threshold, + 1, as scikit-learn).

New points (``predict``): hierarchical clustering defines no rule, so a point is assigned to
the cluster whose CENTROID (mean of its training members, ``cluster_centers_``) is nearest in
Euclidean distance, whatever the linkage (documented choice, docs/decisions/unsupervised.md).
"""

from __future__ import annotations

import numpy as np

from ..base import Clusterer
from ..context import NULL_CONTEXT
from ..kernels import squared_euclidean
from ..memory import kernel_fit
from ..params import Choice, Float, Int, ParamError
from ..registry import register
from ..validation import DataError, check_array, check_predict_input
from ._hierarchy import LINKAGES, cut_tree, linkage_matrix


@register
class AgglomerativeClustering(Clusterer):
    name = "agglomerative_clustering"
    fit_memory = kernel_fit(2, "distance")  # peak memory model (core/memory.py)
    summary = "Bottom-up hierarchical clustering (ward/complete/average/single/centroid) with its merge tree"
    params = {
        "n_clusters": Int(2, ge=1, le=10_000, nullable=True, doc="Clusters to keep (null with distance_threshold)."),
        "distance_threshold": Float(None, ge=0.0, le=1e12, doc="Cut the tree at this merge distance instead."),
        "linkage": Choice("ward", choices=LINKAGES),
        "metric": Choice("euclidean", choices=("euclidean", "manhattan", "cosine"),
                         doc="Point distance (ward and centroid need euclidean)."),
    }
    reports_progress = True
    needs_scaling = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        if p["distance_threshold"] is not None and p["n_clusters"] is not None:
            raise ParamError("distance_threshold", "set n_clusters to null when distance_threshold is given")
        if p["distance_threshold"] is None and p["n_clusters"] is None:
            raise ParamError("n_clusters", "give n_clusters or distance_threshold")
        if p["linkage"] in ("ward", "centroid") and p["metric"] != "euclidean":
            raise ParamError("metric", f"linkage {p['linkage']!r} needs metric 'euclidean'")
        X = check_array(X, min_samples=2)
        n = X.shape[0]
        if p["n_clusters"] is not None and p["n_clusters"] > n:
            raise DataError(f"X has {n} samples but n_clusters={p['n_clusters']}")
        Z = linkage_matrix(X, p["linkage"], p["metric"], ctx=ctx)
        if p["distance_threshold"] is not None:
            k = int(np.count_nonzero(Z[:, 2] >= p["distance_threshold"]) + 1)
        else:
            k = p["n_clusters"]
        labels = cut_tree(Z, n, k)
        counts = np.bincount(labels, minlength=k)
        centers = np.stack([np.bincount(labels, weights=X[:, j], minlength=k) for j in range(X.shape[1])], 1)
        self.linkage_matrix_ = Z
        self.children_ = Z[:, :2].astype(np.intp)
        self.distances_ = Z[:, 2].copy()
        self.labels_ = labels
        self.n_clusters_ = k
        self.n_leaves_ = n
        self.cluster_centers_ = centers / counts[:, None]
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        """Label of the nearest cluster centroid (Euclidean)."""
        X = check_predict_input(self, X, "cluster_centers_")
        return np.argmin(squared_euclidean(X, self.cluster_centers_), axis=1)
