"""Exact k-nearest-neighbour search shared by ``knn_classifier`` and ``knn_regressor``.

[Passerini §3] (kNN), [Santini ch. 2].  Two engines, same answer:

* **brute** (any metric): cache-blocked over query rows *and* training rows, so memory stays
  bounded (a block is ``_Q_CHUNK x _T_CHUNK`` floats).  A cheap upper bound ``t`` on each
  query's k-th neighbour distance comes from a strided sample of the training set (the k-th
  smallest distance to a subset is >= the k-th smallest to the whole set); only training
  points with distance <= t survive as candidates, so no full sort or partition over the
  n_train columns is ever needed.  Euclidean ranks come from one GEMM on augmented matrices
  (``[-2a, 1] . [b, |b|^2]``); candidates then get scikit-learn's value
  ``(-2 a.b + |a|^2) + |b|^2``.  With at most ``_T_CHUNK`` training points the whole block is
  computed in scikit-learn's operation order, so distances that are equal in exact arithmetic
  tie, or not, exactly as they do there.  Large queries run their blocks on all cores with
  single-threaded BLAS (threadpoolctl when installed).
* **kd_tree** (Minkowski family: euclidean, manhattan, chebyshev, minkowski p):
  ``scipy.spatial.cKDTree``.  Rows whose k-th and (k+1)-th distances tie are re-solved by brute
  force so that tie-breaking is identical.

Ordering is deterministic and stable: by distance, then by lower training index (the rule
scikit-learn's brute force documents).  ``algorithm="auto"`` picks the tree for at most 15
features, a Minkowski-family metric and ``k < n_train / 2`` (scikit-learn's rule), else brute.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import numpy as np
from scipy.spatial import cKDTree

from ..distances import canonical_metric, row_norms_squared

try:  # optional: BLAS thread control (installed with scikit-learn; not required)
    from threadpoolctl import ThreadpoolController
except ImportError:  # pragma: no cover - fall back to the BLAS default
    ThreadpoolController = None

_CONTROLLER = None


def _single_threaded_blas():
    """Context limiting BLAS to one thread (about 30 us), or a no-op without threadpoolctl.

    The brute-force blocks are many small GEMMs; multi-threaded BLAS spends more time waking
    threads than computing on them (and stalls badly on a busy machine).  Parallelism comes
    from running query blocks on a thread pool instead.
    """
    global _CONTROLLER
    if ThreadpoolController is None:
        return nullcontext()
    if _CONTROLLER is None:
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1, user_api="blas")

_Q_CHUNK = 256  # query rows per block
_T_CHUNK = 2048  # training rows per block (block = 4 MB of float64: stays in cache)
_GROUPS = 64  # column groups whose minima bound the k-th distance of a single block
_SAMPLE = 4096  # training points used for the first upper bound on the k-th distance
_SINGLE_BLOCK_MAX = 1 << 19  # a query chunk x n_train block this small is computed in one go
_PARALLEL_MIN = 20_000_000  # query x train pairs above which query blocks run on all cores
_WORKERS = os.cpu_count() or 1


def _unit(X: np.ndarray) -> np.ndarray:
    n = np.sqrt(row_norms_squared(X))
    n[n == 0] = 1.0
    return X / n[:, None]


class NeighborIndex:
    """An exact k-NN index over ``X`` for one metric.

    Picklable: the kd-tree and the brute-force helper arrays are rebuilt lazily after loading.
    """

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
        self._prep = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_tree"] = None  # cKDTree pickles, but rebuilding is cheap and keeps artifacts small
        state["_prep"] = None
        return state

    def _prepared(self) -> dict:
        if self._prep is None:
            X = self.X
            n = X.shape[0]
            prep = {"sample": np.arange(0, n, max(1, n // _SAMPLE))}
            if self.metric == "euclidean":
                sq = row_norms_squared(X)
                prep["sq"] = sq
                # rank value |b|^2 - 2 a.b = [-2a, 1] . [b, |b|^2]: one GEMM, no extra pass
                prep["B"] = np.ascontiguousarray(np.hstack([X, sq[:, None]]))
            elif self.metric == "cosine":
                prep["B"] = _unit(X)  # rank value -a_unit . b_unit
            else:
                prep["B"] = X
            prep["B_sample"] = np.ascontiguousarray(prep["B"][prep["sample"]])
            self._prep = prep
        return self._prep

    # -- public -----------------------------------------------------------------------------
    def kneighbors(self, Q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(dist, ind)`` of shape (m, k), sorted by (distance, training index)."""
        if self.algorithm == "kd_tree":
            return self._tree_query(Q, k)
        m = Q.shape[0]
        dist = np.empty((m, k))
        ind = np.empty((m, k), dtype=np.intp)
        starts = range(0, m, _Q_CHUNK)

        def work(q0):
            q1 = min(m, q0 + _Q_CHUNK)
            dist[q0:q1], ind[q0:q1] = self._brute_chunk(Q[q0:q1], k)

        workers = _WORKERS
        # limiting BLAS threads costs ~30 us: worth it for many small GEMMs, not for a few queries
        # (a one-row product never wakes BLAS threads)
        limit = _single_threaded_blas() if m * self.X.shape[0] >= _SINGLE_BLOCK_MAX else nullcontext()
        with limit:
            if m * self.X.shape[0] >= _PARALLEL_MIN and len(starts) > 1 and workers > 1:
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    list(pool.map(work, starts))
            else:
                for q0 in starts:
                    work(q0)
        return dist, ind

    # -- brute force ------------------------------------------------------------------------
    def _exact_block(self, A: np.ndarray, clip: bool = True) -> np.ndarray:
        """Distances (squared for euclidean) to every training point, as scikit-learn computes them.

        ``clip=False`` (euclidean only) leaves out the final ``max(., 0)``: the caller applies it."""
        X = self.X
        if self.metric == "euclidean":
            R = (-2.0 * A) @ X.T
            R += row_norms_squared(A)[:, None]
            R += self._prepared()["sq"][None, :]
            if clip:
                np.maximum(R, 0.0, out=R)
            return R
        if self.metric == "cosine":
            R = _unit(A) @ self._prepared()["B"].T
            np.subtract(1.0, R, out=R)
            np.clip(R, 0.0, 2.0, out=R)
            return R
        return self._cdist(A, X)

    def _cdist(self, A, B):
        from scipy.spatial.distance import cdist

        if self.metric == "manhattan":
            return cdist(A, B, "cityblock")
        if self.metric == "chebyshev":
            return cdist(A, B, "chebyshev")
        return cdist(A, B, "minkowski", p=self.p)

    def _brute_chunk(self, A: np.ndarray, k: int):
        n = self.X.shape[0]
        mc = A.shape[0]
        if n <= _T_CHUNK or mc * n <= _SINGLE_BLOCK_MAX:
            # one block, values computed in scikit-learn's operation order: the k-th smallest
            # value is the bound, so every tie at the boundary is a candidate
            # euclidean: max(., 0) is monotone, so the bound and the candidates are found on the values
            # before it ({max(R, 0) <= max(t, 0)} = {R <= max(t, 0)}) and only the candidates are clipped
            euclid = self.metric == "euclidean"
            R = self._exact_block(A, clip=not euclid)
            span = n // _GROUPS
            if span >= 2 and k * 4 <= _GROUPS:
                # column c in group c mod _GROUPS: the groups' minima are actual values of k distinct
                # columns at least, so the k-th smallest of them is >= the k-th smallest overall (a valid
                # bound, ties included) and close to it; one minimum pass instead of a row partition
                mins = R[:, : span * _GROUPS].reshape(mc, span, _GROUPS).min(axis=1)
                t = np.partition(mins, k - 1, axis=1)[:, k - 1]
            else:
                t = np.partition(R, k - 1, axis=1)[:, k - 1] if k < n else R.max(axis=1)
            if euclid:
                np.maximum(t, 0.0, out=t)
            rows, cols = np.divmod(np.flatnonzero(R <= t[:, None]), n)
            vals = R[rows, cols]
            if euclid:
                np.maximum(vals, 0.0, out=vals)
        else:
            rows, cols = self._candidates(A, k)
            vals = self._values(A, rows, cols)
        # order: row, distance, training index; keep the first k of each row
        order = np.lexsort((cols, vals, rows))
        counts = np.bincount(rows, minlength=mc)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        pos = order[starts[:, None] + np.arange(k)[None, :]]
        dist = vals[pos]
        if self.metric == "euclidean":
            dist = np.sqrt(dist)
        return dist, cols[pos]

    def _candidates(self, A: np.ndarray, k: int):
        """All training points whose rank value is within a bound of the k-th nearest."""
        prep = self._prepared()
        n = self.X.shape[0]
        B = prep["B"]
        if self.metric == "euclidean":
            Aq = np.hstack([-2.0 * A, np.ones((A.shape[0], 1))])
        elif self.metric == "cosine":
            Aq = -_unit(A)
        else:
            Aq = A

        def rank(Bblk):
            return Aq @ Bblk.T if self.metric in ("euclidean", "cosine") else self._cdist(Aq, Bblk)

        # 1) upper bound on the k-th rank value from a strided sample (>= k points)
        Bs = prep["B_sample"] if len(prep["sample"]) >= k else B
        Rs = rank(Bs)
        t = np.partition(Rs, k - 1, axis=1)[:, k - 1] if k < Rs.shape[1] else Rs.max(axis=1)
        # widen by far more than the rounding of the rank values, so no neighbour is lost
        if self.metric == "euclidean":
            t = t + 1e-9 * (row_norms_squared(A) + float(prep["sq"].max()) + np.abs(t))
        elif self.metric == "cosine":
            t = t + 1e-9
        else:
            t = t * (1.0 + 1e-12) + 1e-300
        # 2) every training point whose rank value is <= t
        rows_l, cols_l = [], []
        tcol = t[:, None]
        for c0 in range(0, n, _T_CHUNK):
            R = rank(B[c0 : c0 + _T_CHUNK])
            # 1-d flatnonzero is several times faster than 2-d nonzero
            flat = np.flatnonzero(R <= tcol)
            r, c = np.divmod(flat, R.shape[1])
            rows_l.append(r)
            cols_l.append(c + c0)
        return np.concatenate(rows_l), np.concatenate(cols_l)

    def _values(self, A: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Distances of the candidate pairs (squared for euclidean, like ``_exact_block``)."""
        X = self.X
        if self.metric == "euclidean":
            middle = -2.0 * np.einsum("ij,ij->i", A[rows], X[cols])
            v = (middle + row_norms_squared(A)[rows]) + self._prepared()["sq"][cols]
            return np.maximum(v, 0.0)
        if self.metric == "cosine":
            sim = np.einsum("ij,ij->i", _unit(A)[rows], self._prepared()["B"][cols])
            return np.clip(1.0 - sim, 0.0, 2.0)
        diff = np.abs(A[rows] - X[cols])
        if self.metric == "manhattan":
            return diff.sum(axis=1)
        if self.metric == "chebyshev":
            return diff.max(axis=1)
        return (diff**self.p).sum(axis=1) ** (1.0 / self.p)

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
