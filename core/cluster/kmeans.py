"""k-means clustering (registry name ``kmeans``).

Sources: [Passerini §14.1], [Arias §3.1-3.2], [Santini §11.1], [da Silva Neto §3.1].  Lloyd's alternation of
assignment c_i = argmin_j d(x_i, mu_j) and update of mu_j, minimising
J = sum_i w_i d(x_i, mu_{c_i}) (squared Euclidean for ``euclidean``; L1 for
``manhattan`` = k-medians; 1 - cos for ``cosine`` = spherical k-means).
Engine: ``core/cluster/_kmeans_engine.py``.
"""

from __future__ import annotations

from scipy.spatial.distance import cdist

from ..base import Clusterer
from ..context import NULL_CONTEXT
from ..params import Choice, Float, Int, OneOf, Seed
from ..random import check_random_state
from ..registry import register
from ..validation import DataError, check_array, check_predict_input, check_sample_weight
from . import _kmeans_engine as eng


@register
class KMeans(Clusterer):
    name = "kmeans"
    summary = "k-means (Lloyd), k-medians (manhattan) or spherical k-means (cosine) with k-means++ restarts"
    params = {
        "n_clusters": Int(8, ge=1, le=10_000, doc="Number of clusters k."),
        "init": Choice("k-means++", choices=("k-means++", "random"), doc="Seeding of the centres."),
        "n_init": OneOf("auto", options=(Choice("auto", choices=("auto",)), Int(1, ge=1, le=1_000)),
                        doc="Restarts (best inertia kept); 'auto' = 1 for k-means++, 10 for random."),
        "max_iter": Int(300, ge=1, le=1_000_000),
        "tol": Float(1e-4, ge=0.0, le=1e6, doc="Squared centre-shift tolerance, relative to the mean variance."),
        "metric": Choice("euclidean", choices=("euclidean", "manhattan", "cosine")),
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
            raise DataError(f"X has {n} samples but n_clusters={k}; need at least one sample per cluster")
        w = check_sample_weight(sample_weight, n)
        n_init = p["n_init"] if p["n_init"] != "auto" else (1 if p["init"] == "k-means++" else 10)
        rng = check_random_state(p["random_state"])
        Xp = eng.prepare(X, p["metric"])
        C, labels, inertia, n_iter = eng.kmeans_fit(
            Xp, k, w, rng, init=p["init"], n_init=n_init, metric=p["metric"],
            max_iter=p["max_iter"], tol=p["tol"], ctx=ctx)
        self.cluster_centers_ = C
        self.labels_ = labels
        self.inertia_ = inertia
        self.n_iter_ = n_iter
        self.n_features_in_ = X.shape[1]
        return self

    def _check(self, X):
        X = check_predict_input(self, X, "cluster_centers_")
        return X

    def predict(self, X):
        X = self._check(X)
        if self.metric == "euclidean":  # labels only: no distances
            return eng.assign_euclidean(X, self.cluster_centers_, return_dist=False)[0]
        return eng.assign(eng.prepare(X, self.metric), self.cluster_centers_, self.metric)[0]

    def transform(self, X):
        """Distances to the centres (Euclidean, L1 or cosine distance by ``metric``)."""
        X = self._check(X)
        if self.metric == "euclidean":
            return cdist(X, self.cluster_centers_)
        if self.metric == "manhattan":
            return cdist(X, self.cluster_centers_, "cityblock")
        return 1.0 - eng.prepare(X, "cosine") @ self.cluster_centers_.T

    def score(self, X, y=None, sample_weight=None) -> float:
        """Negative cost of ``X`` under the fitted centres (as scikit-learn)."""
        X = self._check(X)
        w = check_sample_weight(sample_weight, X.shape[0])
        return -float(eng.assign(eng.prepare(X, self.metric), self.cluster_centers_, self.metric)[1] @ w)

    def fit_transform(self, X, y=None, **kw):
        return self.fit(X, y, **kw).transform(X)
