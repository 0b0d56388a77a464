"""k-means engine shared by ``kmeans``, ``divisive_clustering``, ``spectral_clustering``
and the k-means initialisation of ``gaussian_mixture``.

Sources: [Passerini §14.1] (k-means with Euclidean / Manhattan / cosine), [Arias §3.1-3.2] (k-means++),
[Santini §11.1], [da Silva Neto §3.1] (Algorithm 2, distortion J = sum ||x - mu_c||^2).

* euclidean: Lloyd, mu_j = weighted mean of C_j, cost = sum w ||x - mu_c||^2;
* manhattan: k-medians, mu_j = weighted coordinate-wise median, cost = sum w ||x - mu_c||_1;
* cosine: spherical k-means on unit rows, mu_j = normalised mean, cost = sum w (1 - cos).

k-means++ samples candidates with probability proportional to the SQUARED distance to
the closest chosen centre (Arthur & Vassilvitskii; departs from [Arias §3.2] which prints
the plain distance), with scikit-learn's greedy variant (2 + log k local trials).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.spatial.distance import cdist

from ..context import NULL_CONTEXT

_CHUNK = 1 << 15


def row_norms_sq(X: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", X, X)


def assign_euclidean(X, C, x_sq=None, *, return_dist=True):
    """Nearest centre by squared Euclidean distance, in row chunks of bounded memory."""
    n = X.shape[0]
    labels = np.empty(n, dtype=np.intp)
    dist = np.empty(n) if return_dist else None
    c_sq = row_norms_sq(C)
    if x_sq is None and return_dist:
        x_sq = row_norms_sq(X)
    C2 = -2.0 * C
    for s in range(0, n, _CHUNK):
        e = min(n, s + _CHUNK)
        # (k, m) layout: C @ X^T is ~2-5x faster in OpenBLAS than X @ C^T for skinny shapes
        D = C2 @ X[s:e].T  # ||x - c||^2 - ||x||^2 = ||c||^2 - 2 x.c
        D += c_sq[:, None]
        labels[s:e] = np.argmin(D, axis=0)
        if return_dist:  # the minimum itself: the entry argmin picks (a reduction, not a 2-D gather: ~5x faster)
            out = dist[s:e]
            np.min(D, axis=0, out=out)
            out += x_sq[s:e]
            np.maximum(out, 0.0, out=out)
    return labels, dist


try:  # SciPy's compiled CSR x dense kernel (accumulates into its output); private, hence the fallback
    from scipy.sparse._sparsetools import csr_matvecs as _csr_matvecs
except ImportError:  # pragma: no cover
    _csr_matvecs = None

_FUSED_BYTES = 1 << 20  # rows per fused chunk: about this many bytes of X (stays in cache between the two uses)


def assign_and_sum(X, C, w, x_sq):
    """``assign_euclidean`` and ``weighted_sums`` of its labels in one pass over ``X`` (Euclidean, dense).

    Chunk by chunk, the rows' nearest centres are found and the rows are added to their cluster's sum while
    still in cache (two separate passes read ``X`` from memory twice).  Each chunk's rows are added to the
    running sums in row order, as the sparse product of ``weighted_sums`` adds all rows, so the sums are the
    same bit for bit.  Returns (labels, squared distances, (k, d) sums, (k,) weight totals)."""
    n, d = X.shape
    k = C.shape[0]
    labels = np.empty(n, dtype=np.intp)
    dist = np.empty(n)
    sums = np.zeros((k, d))
    c_sq = row_norms_sq(C)
    C2 = -2.0 * C
    step = max(256, _FUSED_BYTES // (8 * max(d, 1)))
    ends = np.empty(k + 1, dtype=np.intp)
    ends[0] = 0
    flat = sums.reshape(-1)
    for s in range(0, n, step):
        e = min(n, s + step)
        Xc = X[s:e]
        D = C2 @ Xc.T  # as assign_euclidean computes it
        D += c_sq[:, None]
        lab = labels[s:e]
        lab[:] = np.argmin(D, axis=0)
        out = dist[s:e]
        np.min(D, axis=0, out=out)
        out += x_sq[s:e]
        np.maximum(out, 0.0, out=out)
        order = np.argsort(lab, kind="stable")  # the chunk's rows grouped by cluster, in row order
        np.cumsum(np.bincount(lab, minlength=k), out=ends[1:])
        _csr_matvecs(k, e - s, d, ends, order, w[s:e].take(order), Xc.reshape(-1), flat)
    return labels, dist, sums, np.bincount(labels, weights=w, minlength=k)


def assign(X, C, metric, x_sq=None):
    """(labels, per-point cost) for a metric; cost is squared distance for euclidean."""
    if metric == "euclidean":
        return assign_euclidean(X, C, x_sq)
    if metric == "cosine":  # rows of X and C are unit vectors (or zero)
        n = X.shape[0]
        labels = np.empty(n, dtype=np.intp)
        cost = np.empty(n)
        for s in range(0, n, _CHUNK):
            e = min(n, s + _CHUNK)
            S = X[s:e] @ C.T
            lab = np.argmax(S, axis=1)
            labels[s:e] = lab
            cost[s:e] = 1.0 - S[np.arange(e - s), lab]
        return labels, np.maximum(cost, 0.0)
    # manhattan
    n = X.shape[0]
    labels = np.empty(n, dtype=np.intp)
    cost = np.empty(n)
    step = max(1, _CHUNK // 4)
    for s in range(0, n, step):
        e = min(n, s + step)
        D = cdist(X[s:e], C, "cityblock")
        lab = np.argmin(D, axis=1)
        labels[s:e] = lab
        cost[s:e] = D[np.arange(e - s), lab]
    return labels, cost


def weighted_sums(X, labels, w, k):
    """(k, d) weighted sums per cluster and (k,) weight totals, via one sparse product."""
    n = X.shape[0]
    M = sparse.csr_matrix((w, (labels, np.arange(n))), shape=(k, n))
    return np.asarray(M @ X), np.bincount(labels, weights=w, minlength=k)


def _weighted_median(v, w):
    order = np.argsort(v, kind="stable")
    cw = np.cumsum(w[order])
    idx = np.searchsorted(cw, 0.5 * cw[-1])
    return v[order[min(idx, len(v) - 1)]]


def update_centres(X, labels, w, k, metric, old):
    """New centres; an empty cluster keeps its old centre (repaired by the caller)."""
    if metric == "manhattan":
        C = old.copy()
        order = np.argsort(labels, kind="stable")
        bounds = np.searchsorted(labels[order], np.arange(k + 1))
        for j in range(k):
            idx = order[bounds[j]:bounds[j + 1]]
            if idx.size == 0:
                continue
            if np.all(w[idx] == w[idx[0]]):
                C[j] = np.median(X[idx], axis=0)
            else:
                C[j] = [_weighted_median(X[idx, f], w[idx]) for f in range(X.shape[1])]
        counts = np.bincount(labels, weights=w, minlength=k)
        return C, counts
    sums, counts = weighted_sums(X, labels, w, k)
    C = old.copy()
    nz = counts > 0
    C[nz] = sums[nz] / counts[nz, None]
    if metric == "cosine":
        nrm = np.linalg.norm(C, axis=1)
        C = np.divide(C, nrm[:, None], out=np.zeros_like(C), where=nrm[:, None] > 0)
    return C, counts


def kmeans_plusplus(X, k, w, rng, x_sq=None, n_local_trials=None):
    """Greedy k-means++ seeding (squared-distance sampling, weighted by ``w``)."""
    n = X.shape[0]
    if x_sq is None:
        x_sq = row_norms_sq(X)
    if n_local_trials is None:
        n_local_trials = 2 + int(np.log(k))
    centres = np.empty((k, X.shape[1]))
    p = w / w.sum()
    first = rng.choice(n, p=p)
    centres[0] = X[first]
    closest = np.maximum(x_sq - 2.0 * X @ X[first] + x_sq[first], 0.0)
    pot = float(closest @ w)
    for c in range(1, k):
        if pot <= 0:
            cand = rng.choice(n, size=n_local_trials, p=p)
        else:
            r = rng.uniform(size=n_local_trials) * pot
            cand = np.searchsorted(np.cumsum(closest * w), r)
            np.clip(cand, None, n - 1, out=cand)
        D = np.maximum(x_sq[cand][:, None] - 2.0 * X[cand] @ X.T + x_sq[None, :], 0.0)
        np.minimum(closest, D, out=D)
        pots = D @ w
        best = int(np.argmin(pots))
        pot = float(pots[best])
        closest = D[best]
        centres[c] = X[cand[best]]
    return centres


def init_centres(X, k, w, rng, init, x_sq=None):
    if init == "random":
        idx = rng.choice(X.shape[0], size=k, replace=False)
        return X[idx].copy()
    return kmeans_plusplus(X, k, w, rng, x_sq)


def _repair_empty(X, labels, cost, counts, C, metric):
    """Move each empty cluster's centre to the point farthest from its own centre."""
    empty = np.flatnonzero(counts == 0)
    if empty.size == 0:
        return C, labels, False
    far = np.argsort(-cost, kind="stable")[: empty.size]
    C = C.copy()
    labels = labels.copy()
    for j, i in zip(empty, far, strict=True):
        C[j] = X[i]
        labels[i] = j
    if metric == "cosine":
        nrm = np.linalg.norm(C, axis=1)
        C = np.divide(C, nrm[:, None], out=np.zeros_like(C), where=nrm[:, None] > 0)
    return C, labels, True


def kmeans_single(X, C, w, *, metric, max_iter, tol, x_sq=None, ctx=NULL_CONTEXT,
                  step0=0, total=None):
    """One k-means run from centres ``C``.  Returns (centres, labels, inertia, n_iter).

    ``tol`` is absolute on the total squared centre shift (the caller scales it).
    Calls ``ctx.step(step0 + it, total)`` once per iteration.
    """
    k = C.shape[0]
    labels_old = None
    n_iter = 0
    fused = (metric == "euclidean" and _csr_matvecs is not None and isinstance(X, np.ndarray) and X.flags.c_contiguous
             and X.dtype == np.float64 and x_sq is not None)
    w = np.ascontiguousarray(w, dtype=np.float64)
    converged = False
    for it in range(1, max_iter + 1):
        n_iter = it
        if fused:
            labels, cost, sums, counts = assign_and_sum(X, C, w, x_sq)
        else:
            labels, cost = assign(X, C, metric, x_sq)
        if labels_old is not None and np.array_equal(labels, labels_old):
            converged = True  # strict convergence: assignments unchanged ([Passerini §14.1])
            break
        if fused:
            C_new = C.copy()
            nz = counts > 0
            C_new[nz] = sums[nz] / counts[nz, None]
        else:
            C_new, counts = update_centres(X, labels, w, k, metric, C)
        C_new, labels, repaired = _repair_empty(X, labels, cost, counts, C_new, metric)
        shift = float(((C_new - C) ** 2).sum())
        C = C_new
        labels_old = labels
        ctx.step(step0 + it, total, inertia=float(cost @ w))
        if not repaired and shift <= tol:
            break
    if not converged:  # (converged: the last assignment is that of the final centres already)
        labels, cost = assign(X, C, metric, x_sq)
    return C, labels, float(cost @ w), n_iter


def prepare(X, metric):
    """Data in the form the metric works on (unit rows for cosine)."""
    if metric == "cosine":
        nrm = np.linalg.norm(X, axis=1)
        return np.divide(X, nrm[:, None], out=np.zeros_like(X), where=nrm[:, None] > 0)
    return X


def kmeans_fit(X, k, w, rng, *, init="k-means++", n_init=1, metric="euclidean",
               max_iter=300, tol=1e-4, ctx=NULL_CONTEXT):
    """Best of ``n_init`` runs.  ``X`` already prepared.  Returns (C, labels, inertia, n_iter)."""
    x_sq = row_norms_sq(X) if metric == "euclidean" else None
    var = np.average((X - np.average(X, axis=0, weights=w)) ** 2, axis=0, weights=w)
    abs_tol = tol * float(np.mean(var))
    best = None
    total = n_init * max_iter
    for r in range(n_init):
        C0 = init_centres(X, k, w, rng, init, x_sq if metric == "euclidean" else None)
        if metric == "cosine":
            C0 = prepare(C0, "cosine")
        res = kmeans_single(X, C0, w, metric=metric, max_iter=max_iter, tol=abs_tol, x_sq=x_sq,
                            ctx=ctx, step0=r * max_iter, total=total)
        if best is None or res[2] < best[2] - 1e-12 * abs(best[2]):
            best = res
        ctx.step((r + 1) * max_iter, total)
    return best
