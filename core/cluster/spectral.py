"""Spectral clustering (registry name ``spectral_clustering``).

Source: [Santini §11.3] (graph of the data: Gaussian similarity W_ij = exp(-gamma ||x_i - x_j||^2) or a
k-nearest-neighbour graph; relaxed minimum cut as an eigenproblem).  The notes give no Laplacian;
we use Ng, Jordan & Weiss (2002): degree d_i = sum_j W_ij, symmetric normalised Laplacian
L = I - D^{-1/2} W D^{-1/2}; the n_clusters eigenvectors of SMALLEST L eigenvalue (= largest of
D^{-1/2} W D^{-1/2}; scipy.linalg.eigh, or scipy.sparse.linalg.eigsh for the sparse kNN graph
/ large n); rows of that embedding normalised to unit length (``embedding_norm="rows"``; or
``"degree"``: D^{-1/2} U, scikit-learn's diffusion-map scaling); k-means (k-means++, ``n_init``)
on the rows.  The kNN graph is connectivity with self-loops, symmetrised (A + A^T) / 2,
as scikit-learn.

New points (``predict``): the label of the nearest training point (Euclidean, k-d tree);
spectral clustering has no out-of-sample rule (documented choice).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, sparse
from scipy.sparse.linalg import eigsh
from scipy.spatial import cKDTree

from ..base import Clusterer
from ..context import NULL_CONTEXT
from ..kernels import kernel_matrix
from ..memory import kernel_fit
from ..params import Choice, Float, Int, Seed
from ..random import check_random_state
from ..registry import register
from ..validation import DataError, check_array, check_predict_input
from . import _kmeans_engine as eng


@register
class SpectralClustering(Clusterer):
    name = "spectral_clustering"
    fit_memory = kernel_fit(3, "affinity")  # peak memory model (core/memory.py)
    summary = "Spectral clustering: normalised-Laplacian embedding of an rbf or kNN graph, then k-means"
    params = {
        "n_clusters": Int(8, ge=1, le=10_000),
        "affinity": Choice("rbf", choices=("rbf", "nearest_neighbors")),
        "gamma": Float(1.0, gt=0.0, le=1e12, doc="rbf coefficient: W = exp(-gamma ||x - x'||^2)."),
        "n_neighbors": Int(10, ge=1, le=100_000),
        "eigen_solver": Choice("auto", choices=("auto", "dense", "arpack")),
        "n_init": Int(10, ge=1, le=1_000),
        "embedding_norm": Choice("rows", choices=("rows", "degree"),
                                 doc="'rows': unit-length rows (Ng-Jordan-Weiss); 'degree': D^-1/2 U "
                                     "(scikit-learn's spectral_embedding)."),
        "random_state": Seed(),
    }
    reports_progress = True
    needs_scaling = True

    @classmethod
    def _example_params(cls):
        return {"n_clusters": 3, "n_init": 2, "gamma": 0.2}

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X = check_array(X, min_samples=2)
        n, k = X.shape[0], p["n_clusters"]
        if n <= k:
            raise DataError(f"X has {n} samples; spectral clustering with n_clusters={k} needs more")
        rng = check_random_state(p["random_state"])
        if p["affinity"] == "rbf":
            W = kernel_matrix(X, kernel="rbf", gamma=p["gamma"])
        else:
            m = min(p["n_neighbors"], n)
            _, nbr = cKDTree(X).query(X, k=m)
            nbr = nbr.reshape(n, m)
            C = sparse.csr_matrix((np.ones(n * m), (np.repeat(np.arange(n), m), nbr.ravel())), shape=(n, n))
            W = (0.5 * (C + C.T)).tocsr()
        ctx.step(1, 3)
        deg = np.asarray(W.sum(axis=1)).ravel()
        dinv = 1.0 / np.sqrt(np.maximum(deg, np.finfo(float).tiny))
        solver = p["eigen_solver"]
        if solver == "auto":
            solver = "arpack" if n > 500 else "dense"
        if sparse.issparse(W):
            M = sparse.diags(dinv) @ W @ sparse.diags(dinv)
        else:
            M = W * dinv[:, None]
            M *= dinv[None, :]
        if solver == "dense" or k >= n - 1:
            Md = M.toarray() if sparse.issparse(M) else M
            _, U = linalg.eigh(Md, subset_by_index=(n - k, n - 1))
        else:
            v0 = rng.uniform(-1.0, 1.0, size=n)
            _, U = eigsh(M, k=k, which="LA", v0=v0, tol=0.0)
        ctx.step(2, 3)
        if p["embedding_norm"] == "rows":
            nrm = np.linalg.norm(U, axis=1)
            E = U / np.maximum(nrm, np.finfo(float).tiny)[:, None]
        else:
            E = U * dinv[:, None]
        _, labels, _, _ = eng.kmeans_fit(E, k, np.ones(n), rng, init="k-means++", n_init=p["n_init"],
                                         ctx=ctx.child(2 / 3, 1.0))
        self.labels_ = labels
        self.embedding_ = E
        self._tree = cKDTree(X)
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        """Label of the nearest training point."""
        X = check_predict_input(self, X, "labels_")
        _, idx = self._tree.query(X, k=1)
        return self.labels_[np.asarray(idx).reshape(-1)]
