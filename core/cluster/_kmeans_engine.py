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
    if x_sq is None:
        x_sq = row_norms_sq(X)
    C2 = -2.0 * C
    for s in range(0, n, _CHUNK):
        e = min(n, s + _CHUNK)
        # (k, m) layout: C @ X^T is ~2-5x faster in OpenBLAS than X @ C^T for skinny shapes
        D = C2 @ X[s:e].T  # ||x - c||^2 - ||x||^2 = ||c||^2 - 2 x.c
        D += c_sq[:, None]
        lab = np.argmin(D, axis=0)
        labels[s:e] = lab
        if return_dist:
            dist[s:e] = np.maximum(D[lab, np.arange(e - s)] + x_sq[s:e], 0.0)
    return labels, dist


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
    for it in range(1, max_iter + 1):
        n_iter = it
        labels, cost = assign(X, C, metric, x_sq)
        if labels_old is not None and np.array_equal(labels, labels_old):
            break  # strict convergence: assignments unchanged ([Passerini §14.1])
        C_new, counts = update_centres(X, labels, w, k, metric, C)
        C_new, labels, repaired = _repair_empty(X, labels, cost, counts, C_new, metric)
        shift = float(((C_new - C) ** 2).sum())
        C = C_new
        labels_old = labels
        ctx.step(step0 + it, total, inertia=float(cost @ w))
        if not repaired and shift <= tol:
            break
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
