"""Exact k-nearest-neighbour search shared by ``knn_classifier`` and ``knn_regressor``.

Seed 000 §3 (kNN), seed 003 ch.2.  Two engines, same answer:

* **brute** (any metric): cache-blocked over query rows *and* training rows, so memory stays
  bounded (a block is ``_Q_CHUNK x _T_CHUNK`` floats).  A cheap upper bound ``t`` on each
  query's k-th neighbour distance comes from a strided sample of the training set (the k-th
  smallest distance to a subset is >= the k-th smallest to the whole set); only training
  points with distance <= t survive as candidates, so no full sort or partition over the
  n_train columns is ever needed.  Euclidean blocks use scikit-learn's expansion
  ``|a|^2 - 2 a.b + |b|^2`` (one GEMM, same operation order), so distances that are equal in
  exact arithmetic tie, or not, exactly as they do in scikit-learn's brute force.
* **kd_tree** (Minkowski family: euclidean, manhattan, chebyshev, minkowski p):
  ``scipy.spatial.cKDTree``.  Rows whose k-th and (k+1)-th distances tie are re-solved by brute
  force so that tie-breaking is identical.

Ordering is deterministic and stable: by distance, then by lower training index (the rule
scikit-learn's brute force documents).  ``algorithm="auto"`` picks the tree for at most 15
features, a Minkowski-family metric and ``k < n_train / 2`` (scikit-learn's rule), else brute.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from ..distances import canonical_metric, row_norms_squared

_Q_CHUNK = 256  # query rows per block
_T_CHUNK = 2048  # training rows per block (block = 4 MB of float64: stays in cache)
_SAMPLE = 2048  # training points used for the first upper bound on the k-th distance


def _unit(X: np.ndarray) -> np.ndarray:
    n = np.sqrt(row_norms_squared(X))
    n[n == 0] = 1.0
    return X / n[:, None]


class NeighborIndex:
    """An exact k-NN index over ``X`` for one metric.  Picklable (the tree is rebuilt lazily)."""

    def __init__(self, X: np.ndarray, metric: str, p: float, algorithm: str, n_neighbors: int):
        self.X = X
        self.metric, self.p = canonical_metric(metric, p)
        n, d = X.shape
        if algorithm == "auto":
            tree_ok = self.metric != "cosine" and d <= 15 and n_neighbors < n // 2
            algorithm = "kd_tree" if tree_ok else "brute"
        if algorithm == "kd_tree" and self.metric == "cosine":
            raise ValueError("kd_tree supports the Minkowski-family metrics only, not cosine")
        self.algorithm = algorithm
        self._tree = None
        # brute-force precomputation
        self._sq = None
        if self.metric == "euclidean":
            # rank value: squared distance |a|^2 - 2 a.b + |b|^2 (scikit-learn's GEMM expansion,
            # same operation order, so equal-looking distances tie exactly as they do there)
            self._BT = np.ascontiguousarray(-2.0 * X.T)
            self._sq = row_norms_squared(X)
        elif self.metric == "cosine":
            self._BT = np.ascontiguousarray(_unit(X).T)  # rank value 1 - a_unit . b_unit
        else:
            self._BT = None
        step = max(1, n // _SAMPLE)
        self._sample = np.arange(0, n, step)
        self._sample_BT = None if self._BT is None else np.ascontiguousarray(self._BT[:, self._sample])
        self._sample_sq = None if self._sq is None else self._sq[self._sample]

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_tree"] = None  # cKDTree pickles, but rebuilding is cheap and keeps artifacts small
        return state

    # -- public -----------------------------------------------------------------------------
    def kneighbors(self, Q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(dist, ind)`` of shape (m, k), sorted by (distance, training index)."""
        if self.algorithm == "kd_tree":
            return self._tree_query(Q, k)
        m = Q.shape[0]
        dist = np.empty((m, k))
        ind = np.empty((m, k), dtype=np.intp)
        for q0 in range(0, m, _Q_CHUNK):
            q1 = min(m, q0 + _Q_CHUNK)
            dist[q0:q1], ind[q0:q1] = self._brute_chunk(Q[q0:q1], k)
        return dist, ind

    # -- brute force ------------------------------------------------------------------------
    def _query_rep(self, A: np.ndarray):
        if self.metric == "euclidean":
            return A, row_norms_squared(A)[:, None]
        if self.metric == "cosine":
            return _unit(A), None
        return A, None

    def _block_rank(self, Arep, BT: np.ndarray | None, cols: slice | np.ndarray, sq=None):
        """Rank values (monotone in the distance) of the query chunk against training ``cols``."""
        Arep, Asq = Arep
        if self.metric == "euclidean":
            R = Arep @ BT
            R += Asq
            R += sq[None, :]
            np.maximum(R, 0.0, out=R)
            return R
        if self.metric == "cosine":
            R = Arep @ BT
            np.subtract(1.0, R, out=R)
            np.clip(R, 0.0, 2.0, out=R)
            return R
        from scipy.spatial.distance import cdist

        B = self.X[cols]
        if self.metric == "manhattan":
            return cdist(Arep, B, "cityblock")
        if self.metric == "chebyshev":
            return cdist(Arep, B, "chebyshev")
        return cdist(Arep, B, "minkowski", p=self.p)

    def _slack(self, A: np.ndarray, t: np.ndarray) -> np.ndarray:
        # rounding of the GEMM rank values: widen the bound so no true neighbour is lost
        if self.metric == "euclidean":
            scale = row_norms_squared(A) + float(self._sq.max(initial=0.0))
            return t + 1e-9 * (scale + np.abs(t))
        if self.metric == "cosine":
            return t + 1e-9
        return t * (1 + 1e-12) + 1e-300

    def _brute_chunk(self, A: np.ndarray, k: int):
        n = self.X.shape[0]
        mc = A.shape[0]
        Arep = self._query_rep(A)
        if n <= _T_CHUNK:
            # one block: the k-th smallest rank value itself is the bound (ties included)
            R = self._block_rank(Arep, self._BT, slice(0, n), self._sq)
            t = np.partition(R, k - 1, axis=1)[:, k - 1] if k < n else R.max(axis=1)
            r, c = np.nonzero(R <= t[:, None])
            rows_l, cols_l, rank_l = [r], [c], [R[r, c]]
        else:
            # 1) upper bound on the k-th rank value from a strided sample (>= k points)
            sample = self._sample if len(self._sample) >= k else np.arange(n)
            if sample is self._sample:
                Rs = self._block_rank(Arep, self._sample_BT, sample, self._sample_sq)
            else:
                BT_s = None if self._BT is None else self._BT[:, sample]
                sq_s = None if self._sq is None else self._sq[sample]
                Rs = self._block_rank(Arep, BT_s, sample, sq_s)
            t = np.partition(Rs, k - 1, axis=1)[:, k - 1] if k < Rs.shape[1] else Rs.max(axis=1)
            t = self._slack(A, t)
            # 2) candidates: every training point whose rank value is <= t
            rows_l, cols_l, rank_l = [], [], []
            for c0 in range(0, n, _T_CHUNK):
                c1 = min(n, c0 + _T_CHUNK)
                BT = None if self._BT is None else self._BT[:, c0:c1]
                sq = None if self._sq is None else self._sq[c0:c1]
                R = self._block_rank(Arep, BT, slice(c0, c1), sq)
                r, c = np.nonzero(R <= t[:, None])
                rows_l.append(r)
                cols_l.append(c + c0)
                rank_l.append(R[r, c])
        rows = np.concatenate(rows_l)
        cols = np.concatenate(cols_l)
        d = np.concatenate(rank_l)
        # 3) order: row, distance, training index; keep the first k of each row
        order = np.lexsort((cols, d, rows))
        counts = np.bincount(rows, minlength=mc)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        pos = order[starts[:, None] + np.arange(k)[None, :]]
        dist = d[pos]
        if self.metric == "euclidean":
            dist = np.sqrt(dist)
        return dist, cols[pos]

    # -- kd-tree ----------------------------------------------------------------------------
    def _tree_query(self, Q: np.ndarray, k: int):
        if self._tree is None:
            self._tree = cKDTree(self.X, leafsize=32, balanced_tree=False)
        n = self.X.shape[0]
        kk = min(n, k + 1)
        workers = -1 if Q.shape[0] >= 2048 else 1
        d, i = self._tree.query(Q, k=kk, p=self.p, workers=workers)
        d = np.asarray(d, dtype=np.float64).reshape(Q.shape[0], kk)
        i = np.asarray(i, dtype=np.intp).reshape(Q.shape[0], kk)
        if kk > k:
            tie = d[:, k - 1] >= d[:, k]  # the k-th and (k+1)-th neighbours tie
            d, i = d[:, :k], i[:, :k]
        else:
            tie = None
        # order inside the k by (distance, index)
        order = np.lexsort((i, d), axis=1)
        d = np.take_along_axis(d, order, axis=1)
        i = np.take_along_axis(i, order, axis=1)
        if tie is not None and tie.any():
            rows = np.flatnonzero(tie)
            for q0 in range(0, len(rows), _Q_CHUNK):
                sub = rows[q0 : q0 + _Q_CHUNK]
                d[sub], i[sub] = self._brute_chunk(Q[sub], k)
        return d, i
