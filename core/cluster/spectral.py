"""Spectral clustering (registry name ``spectral_clustering``).

Source: [Santini §11.3] (graph of the data: Gaussian similarity W_ij = exp(-gamma ||x_i - x_j||^2) or a
k-nearest-neighbour graph; relaxed minimum cut as an eigenproblem).  The notes give no Laplacian;
we use Ng, Jordan & Weiss (2002) and [von Luxburg]: the graph has NO self-loops (W_ii = 0; the
rbf kernel's k(x, x) = 1 would otherwise dominate every degree when gamma is large and make
D^{-1/2} W D^{-1/2} ~ I, whose eigenvectors carry no information), degree d_i = sum_{j != i} W_ij
(an isolated vertex, d_i = 0, gets d_i = 1 as in scipy's csgraph.laplacian), symmetric normalised
Laplacian L = I - D^{-1/2} W D^{-1/2}; the n_clusters eigenvectors of SMALLEST L eigenvalue.
The normalised Laplacian is invariant to a common scaling of W, so a near-disconnected graph
(tiny affinities, e.g. the default gamma = 1 on many features) is as well posed as any other.

Eigen-solvers (``eigen_solver``): ``dense`` = LAPACK eigh of the n x n matrix (subset of the
spectrum); ``arpack`` = scipy eigsh on L in shift-invert mode around sigma = -1e-5 (scikit-learn's
``spectral_embedding``: the wanted eigenvalues, near 0, become the largest of (L - sigma I)^{-1},
well separated even when they cluster near 0, where plain Lanczos on L fails to converge), falling
back to the dense solver if ARPACK fails.  ``auto`` = dense for n <= 1000, arpack above.
All n_clusters eigenvectors are kept (as scikit-learn's SpectralClustering, ``drop_first=False``):
with ``embedding_norm="degree"`` the trivial one, D^{-1/2} D^{1/2} 1, is a constant column that
k-means ignores anyway; with ``"rows"`` or a disconnected graph it carries cluster information.
Rows of the embedding U are normalised to unit length (``embedding_norm="rows"``, NJW; or
``"degree"``: D^{-1/2} U, scikit-learn's diffusion-map scaling); k-means (k-means++, ``n_init``)
on the rows.  The kNN graph is connectivity, symmetrised (A + A^T) / 2, as scikit-learn.

New points (``predict``): the label of the nearest training point (Euclidean, k-d tree);
spectral clustering has no out-of-sample rule (documented choice).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, sparse
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, eigsh
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
        "eigen_solver": Choice("auto", choices=("auto", "dense", "arpack"),
                               doc="'dense' (LAPACK), 'arpack' (shift-invert Lanczos, dense fallback) "
                                   "or 'auto' (dense for n <= 1000)."),
        "n_init": Int(10, ge=1, le=1_000),
        "embedding_norm": Choice("rows", choices=("rows", "degree"),
                                 doc="'rows': unit-length rows (Ng-Jordan-Weiss); 'degree': D^-1/2 U "
                                     "(scikit-learn's spectral_embedding)."),
        "random_state": Seed(),
    }
    reports_progress = True
    needs_scaling = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X = check_array(X, min_samples=2)
        n, k = X.shape[0], p["n_clusters"]
        if n <= k:
            raise DataError(f"X has {n} samples; spectral clustering with n_clusters={k} needs more")
        rng = check_random_state(p["random_state"])
        if p["affinity"] == "rbf":
            W = kernel_matrix(X, kernel="rbf", gamma=p["gamma"])
            np.fill_diagonal(W, 0.0)
        else:
            m = min(p["n_neighbors"], n)
            _, nbr = cKDTree(X).query(X, k=m)
            nbr = nbr.reshape(n, m)
            C = sparse.csr_matrix((np.ones(n * m), (np.repeat(np.arange(n), m), nbr.ravel())), shape=(n, n))
            W = (0.5 * (C + C.T)).tocsr()
            W.setdiag(0.0)
            W.eliminate_zeros()
        ctx.step(1, 3)
        U, dinv, solver_used = _laplacian_eigenvectors(W, k, p["eigen_solver"], rng)
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
        self.eigen_solver_ = solver_used
        self._tree = cKDTree(X)
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        """Label of the nearest training point."""
        X = check_predict_input(self, X, "labels_")
        _, idx = self._tree.query(X, k=1)
        return self.labels_[np.asarray(idx).reshape(-1)]


_DENSE_MAX = 1000  # 'auto' uses the dense solver up to this many points
_SIGMA = -1e-5  # shift below the Laplacian's zero eigenvalue (scikit-learn's spectral_embedding)


def _laplacian_eigenvectors(W, k, solver, rng):
    """The k eigenvectors of smallest eigenvalue of L = I - D^-1/2 W D^-1/2 (W without self-loops).

    Returns (U, D^-1/2, the solver that produced U)."""
    n = W.shape[0]
    deg = np.asarray(W.sum(axis=1)).ravel()
    deg[deg <= 0.0] = 1.0  # isolated vertex: its row of D^-1/2 W D^-1/2 is 0 (scipy's convention)
    dinv = 1.0 / np.sqrt(deg)
    if sparse.issparse(W):
        L = -(sparse.diags(dinv) @ W @ sparse.diags(dinv)).tocsr()
        L.setdiag(1.0)
    else:
        L = W * dinv[:, None]
        L *= -dinv[None, :]
        L.flat[:: n + 1] = 1.0
    if solver == "auto":
        solver = "dense" if n <= _DENSE_MAX else "arpack"
    if solver == "arpack" and k < n - 1:
        try:
            v0 = rng.uniform(-1.0, 1.0, size=n)
            _, U = eigsh(L, k=k, sigma=_SIGMA, which="LM", v0=v0, tol=0.0)
            return U, dinv, "arpack"
        except (ArpackNoConvergence, ArpackError, RuntimeError):
            pass  # dense fallback below (exact, O(n^3))
    Ld = L.toarray() if sparse.issparse(L) else L
    _, U = linalg.eigh(Ld, subset_by_index=(0, k - 1), check_finite=False)
    return U, dinv, "dense"
