"""Agglomerative merge tree from scratch (used by ``agglomerative_clustering``).

Sources: [Passerini §14.4.3] (bottom-up merging; linkages min, max, average, centroid), [Santini §11.4].
Distances between a merged cluster (x u y) and any other cluster i follow the
Lance-Williams recurrences (n_* are cluster sizes):
  single    d = min(d_xi, d_yi)
  complete  d = max(d_xi, d_yi)
  average   d = (n_x d_xi + n_y d_yi) / (n_x + n_y)
  ward      d^2 = ((n_x + n_i) d_xi^2 + (n_y + n_i) d_yi^2 - n_i d_xy^2) / (n_x + n_y + n_i)
  centroid  d^2 = (n_x d_xi^2 + n_y d_yi^2) / (n_x + n_y) - n_x n_y d_xy^2 / (n_x + n_y)^2
Single, complete, average and ward are reducible, so the nearest-neighbour chain algorithm
(Murtagh 1983; Muellner 2011) finds the same merges as the naive O(n^3) loop in O(n^2) time.
Centroid linkage is not reducible (merge distances can decrease); it uses the generic
algorithm with a cached nearest neighbour per row (Muellner 2011, "generic_linkage").
Memory: ONE dense n x n float64 matrix (scipy.spatial.distance.cdist, exact differences).
Output: a linkage matrix in scipy's format (merges sorted by distance, stable, except for
centroid, kept in merge order as scipy does; new cluster
ids n + row; smaller id first; 4th column the cluster size).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

from ..context import NULL_CONTEXT

LINKAGES = ("ward", "complete", "average", "single", "centroid")


def _update(method, dx, dy, dxy, nx, ny, sizes):
    if method == "single":
        return np.minimum(dx, dy)
    if method == "complete":
        return np.maximum(dx, dy)
    if method == "average":
        return (nx * dx + ny * dy) / (nx + ny)
    if method == "ward":  # on squared distances
        t = 1.0 / (nx + ny + sizes)
        return ((nx + sizes) * dx + (ny + sizes) * dy - sizes * dxy) * t
    # centroid, on squared distances
    s = nx + ny
    return np.maximum((nx * dx + ny * dy) / s - (nx * ny) * dxy / (s * s), 0.0)


def _nn_chain(D, method, ctx, every):
    n = D.shape[0]
    sizes = np.ones(n)
    pen = np.zeros(n)  # +inf for clusters merged away
    buf = np.empty(n)
    chain = []
    out = np.empty((n - 1, 3))
    next_start = 0
    for m in range(n - 1):
        if not chain:
            while pen[next_start] != 0.0:
                next_start += 1
            chain.append(next_start)
        while True:
            x = chain[-1]
            np.add(D[x], pen, out=buf)
            y = int(np.argmin(buf))
            if len(chain) > 1:
                prev = chain[-2]
                if buf[prev] <= buf[y]:  # prefer the previous element on ties (termination)
                    y = prev
                    break
            chain.append(y)
        chain.pop()
        chain.pop()
        if x > y:
            x, y = y, x
        dxy = D[x, y]
        out[m] = (x, y, dxy)
        new = _update(method, D[x], D[y], dxy, sizes[x], sizes[y], sizes)
        # the merged cluster lives in slot y; slot x is retired
        pen[x] = np.inf
        new[y] = np.inf
        D[y] = new
        D[:, y] = new
        sizes[y] += sizes[x]
        if every and (m + 1) % every == 0:
            ctx.step(m + 1, n - 1)
    return out


def _generic(D, method, ctx, every):
    n = D.shape[0]
    sizes = np.ones(n)
    pen = np.zeros(n)
    active = np.ones(n, dtype=bool)
    mini = np.argmin(D, axis=1)
    mind = D[np.arange(n), mini]
    out = np.empty((n - 1, 3))
    for m in range(n - 1):
        x = int(np.argmin(mind + pen))
        y = int(mini[x])
        if x > y:
            x, y = y, x
        dxy = D[x, y]
        out[m] = (x, y, dxy)
        new = _update(method, D[x], D[y], dxy, sizes[x], sizes[y], sizes)
        pen[x] = np.inf
        active[x] = False
        new[y] = np.inf
        new[x] = np.inf
        D[y] = new
        D[:, y] = new
        sizes[y] += sizes[x]
        mind[x] = np.inf
        # rows whose cached neighbour was x or y: recompute; others may only improve via y
        stale = np.flatnonzero(active & ((mini == x) | (mini == y)))
        better = active & (new < mind)
        mind[better] = new[better]
        mini[better] = y
        for r in stale:
            row = D[r] + pen
            j = int(np.argmin(row))
            mini[r], mind[r] = j, row[j]
        if active.sum() > 1:
            row = new + pen
            j = int(np.argmin(row))
            mini[y], mind[y] = j, row[j]
        if every and (m + 1) % every == 0:
            ctx.step(m + 1, n - 1)
    return out


def _label(merges, n, sort=True):
    """Sort merges by distance (stable; not for centroid, whose merge order is kept as scipy
    does, distances may decrease) and turn point slots into scipy cluster ids."""
    if sort:
        merges = merges[np.argsort(merges[:, 2], kind="mergesort")]
    parent = np.arange(2 * n - 1)
    size = np.ones(2 * n - 1)
    Z = np.empty((n - 1, 4))

    def find(a):
        root = a
        while parent[root] != root:
            root = parent[root]
        while parent[a] != root:
            parent[a], a = root, parent[a]
        return root

    for i, (x, y, d) in enumerate(merges):
        a, b = find(int(x)), find(int(y))
        if a > b:
            a, b = b, a
        parent[a] = parent[b] = n + i
        size[n + i] = size[a] + size[b]
        Z[i] = (a, b, d, size[n + i])
    return Z


def linkage_matrix(X, method="ward", metric="euclidean", ctx=NULL_CONTEXT):
    """scipy-format linkage matrix of the rows of ``X``."""
    n = X.shape[0]
    squared = method in ("ward", "centroid")
    if squared:
        D = cdist(X, X, "sqeuclidean")
    else:
        D = cdist(X, X, {"manhattan": "cityblock"}.get(metric, metric))
    D.flat[:: n + 1] = np.inf
    every = max(1, (n - 1) // 100)
    merges = (_generic if method == "centroid" else _nn_chain)(D, method, ctx, every)
    del D
    if squared:
        merges[:, 2] = np.sqrt(merges[:, 2])
    return _label(merges, n, sort=method != "centroid")


def cut_tree(Z, n, n_clusters):
    """Flat labels (0..k-1, by first appearance) after the first n - n_clusters merges of ``Z``."""
    parent = np.arange(n)

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    rep = np.arange(2 * n - 1)  # a point inside each tree node
    for i in range(n - 1):
        a, b = int(Z[i, 0]), int(Z[i, 1])
        rep[n + i] = rep[a]
        if i < n - n_clusters:
            ra, rb = find(rep[a]), find(rep[b])
            parent[max(ra, rb)] = min(ra, rb)
    roots = np.array([find(i) for i in range(n)])
    _, first, inv = np.unique(roots, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    return order[inv].astype(np.intp)
