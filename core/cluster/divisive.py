"""Divisive (top-down) clustering by bisecting k-means (registry name ``divisive_clustering``).

Source: [Passerini §14.4.3] describes top-down recursive splitting without an algorithm; we use
bisecting k-means (Steinbach et al. 2000), as scikit-learn's BisectingKMeans: start from one
cluster; n_clusters - 1 times, pick a leaf (``biggest_inertia``: largest within-cluster SSE;
``largest_cluster``: most points) and split it with 2-means (best of ``n_init`` runs).
Labels number the leaves depth-first (left child first).  ``predict`` descends the bisection
tree, taking the nearer child centre at each node (so predict(X_train) == labels_).
"""

from __future__ import annotations

import numpy as np

from ..base import Clusterer
from ..context import NULL_CONTEXT
from ..params import Choice, Float, Int, Seed
from ..random import check_random_state
from ..registry import register
from ..validation import DataError, check_array, check_predict_input, check_sample_weight
from . import _kmeans_engine as eng


@register
class DivisiveClustering(Clusterer):
    name = "divisive_clustering"
    summary = "Top-down hierarchical clustering by bisecting k-means"
    params = {
        "n_clusters": Int(8, ge=1, le=10_000),
        "init": Choice("random", choices=("random", "k-means++")),
        "n_init": Int(1, ge=1, le=1_000, doc="2-means runs per bisection (best inertia kept)."),
        "max_iter": Int(300, ge=1, le=1_000_000),
        "tol": Float(1e-4, ge=0.0, le=1e6),
        "bisecting_strategy": Choice("biggest_inertia", choices=("biggest_inertia", "largest_cluster")),
        "random_state": Seed(),
    }
    supports_sample_weight = True
    reports_progress = True
    needs_scaling = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X = check_array(X)
        n, k = X.shape[0], p["n_clusters"]
        if n < k:
            raise DataError(f"X has {n} samples but n_clusters={k}")
        w = check_sample_weight(sample_weight, n)
        rng = check_random_state(p["random_state"])
        x_sq = eng.row_norms_sq(X)
        var = np.average((X - np.average(X, axis=0, weights=w)) ** 2, axis=0, weights=w)
        abs_tol = p["tol"] * float(np.mean(var))

        def node(idx):
            c = np.average(X[idx], axis=0, weights=w[idx])
            sse = float(np.einsum("ij,ij,i->", X[idx] - c, X[idx] - c, w[idx]))
            return {"idx": idx, "center": c, "sse": sse, "children": None}

        root = node(np.arange(n))
        leaves = [root]
        for step in range(k - 1):
            key = "sse" if p["bisecting_strategy"] == "biggest_inertia" else None
            cand = [lf for lf in leaves if lf["idx"].size >= 2]
            if not cand:
                raise DataError("cannot bisect further: every cluster holds a single point")
            if key:
                target = max(cand, key=lambda lf: lf["sse"])
            else:
                target = max(cand, key=lambda lf: w[lf["idx"]].sum())
            idx = target["idx"]
            Xs, ws = X[idx], w[idx]
            best = None
            for _ in range(p["n_init"]):
                C0 = eng.init_centres(Xs, 2, ws, rng, p["init"], x_sq[idx])
                res = eng.kmeans_single(Xs, C0, ws, metric="euclidean", max_iter=p["max_iter"],
                                        tol=abs_tol, x_sq=x_sq[idx])
                if best is None or res[2] < best[2]:
                    best = res
            _, lab, _, _ = best
            left, right = node(idx[lab == 0]), node(idx[lab == 1])
            if left["idx"].size == 0 or right["idx"].size == 0:
                raise DataError("bisection produced an empty cluster (duplicate points?)")
            target["children"] = (left, right)
            pos = next(i for i, lf in enumerate(leaves) if lf is target)
            leaves[pos:pos + 1] = [left, right]
            ctx.step(step + 1, k - 1)
        labels = np.empty(n, dtype=np.intp)
        centers = np.empty((len(leaves), X.shape[1]))
        for i, lf in enumerate(leaves):  # depth-first, left first
            labels[lf["idx"]] = i
            centers[i] = lf["center"]
            lf["label"] = i
        self._tree = _strip(root)
        self.labels_ = labels
        self.cluster_centers_ = centers
        self.inertia_ = float(sum(lf["sse"] for lf in leaves))
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        X = check_predict_input(self, X, "cluster_centers_")
        out = np.empty(X.shape[0], dtype=np.intp)
        stack = [(self._tree, np.arange(X.shape[0]))]
        while stack:
            nd, rows = stack.pop()
            if nd[2] is None:
                out[rows] = nd[1]
                continue
            left, right = nd[2]
            Xr = X[rows]
            go_left = ((Xr - left[0]) ** 2).sum(1) <= ((Xr - right[0]) ** 2).sum(1)
            stack.append((left, rows[go_left]))
            stack.append((right, rows[~go_left]))
        return out


def _strip(nd):
    """Compact picklable tree: (center, label or None, children or None)."""
    if nd["children"] is None:
        return (nd["center"], nd["label"], None)
    return (nd["center"], None, (_strip(nd["children"][0]), _strip(nd["children"][1])))
