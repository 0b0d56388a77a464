"""Leaf-wise growth of one histogram regression tree on gradients/hessians,
and flat-array prediction.

For a node with gradient sum ``G`` and hessian sum ``H`` (second-order Taylor
expansion of the loss), the optimal leaf value and loss reduction of a split
into ``L``/``R`` are (Chen & Guestrin 2016; scikit-learn's HistGradientBoosting)::

    value = -learning_rate * G / (H + l2)
    gain  = G_L^2 / (H_L + l2) + G_R^2 / (H_R + l2) - G^2 / (H + l2)

(the factor 1/2 of the loss reduction is dropped, as in scikit-learn; it does
not change the argmax).  Histograms of ``g``, ``h`` and counts per (feature, bin)
are one sparse product per node (``HistogramBuilder``); only the smaller child's
histogram is built, and nodes keep cumulative histograms, so the sibling's is
``parent - child``.  Split candidates of all features and bins of both children
are scored at once, once with the missing-value bin sent right and once sent
left; the better direction is kept.  Batch prediction uses leaf bitmasks over
all trees (``TreeEnsemble._bitmask_tables``).
"""

from __future__ import annotations

import heapq
import os
import sys

import numpy as np

from ._hist_gbm_worker import GRADIENTS, LEAF_VALUES, LEAVES, ROOT, SPLIT, RowWorker, SharedArrays

__all__ = ["grow_tree", "TreeEnsemble", "HistogramBuilder"]

_MIN_HESSIAN = 1e-3  # scikit-learn's min_hessian_to_split
_CHUNK = 2048  # rows per sparse-product call (bounds the shared ones/indptr buffers and gathers)

try:  # SciPy's compiled sparse (CSC) x dense kernel; private, hence the fallback below
    from scipy.sparse._sparsetools import csc_matvecs as _csc_matvecs
except ImportError:  # pragma: no cover
    _csc_matvecs = None

# Training sets of at least this many rows are cut in two row parts, histogrammed separately and summed;
# with two workers the second part belongs to a forked worker process (_hist_gbm_worker).  The cut does
# not depend on the number of workers, so one and two workers give bit-identical models.
_TWO_PARTS_MIN_ROWS = 8192
_CAN_FORK = hasattr(os, "fork") and sys.platform.startswith("linux")


def _default_workers() -> int:
    """Processes of one fit: ``ORCHARD_HIST_WORKERS`` when set, else 2 (capped by ``OMP_NUM_THREADS`` when
    set, as scikit-learn's OpenMP threads are); at most 2 and the CPUs this process may use."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    n = 2
    for var in ("ORCHARD_HIST_WORKERS", "OMP_NUM_THREADS"):
        value = os.environ.get(var)
        if value is not None:
            try:
                n = int(value)
            except ValueError:
                n = 1
            break
    return max(1, min(2, cpus, n))


N_WORKERS = _default_workers()


class HistogramBuilder:
    """Histograms of gradients, hessians and counts per (feature, bin) on a node's rows.

    The binned data are kept row-major as ``int32`` codes ``f * n_bins + bin``,
    so that all features' histograms of all quantities are one sparse product:
    with ``A`` the (F * n_bins, m) one-hot matrix of the node's codes and ``W``
    the (m, q) matrix of per-row quantities ``[g, h, 1]``, ``hist = A @ W``.
    ``A`` is never built: its CSC arrays are the gathered codes (row ``i`` of the
    node holds F entries), a shared ``indptr`` and a shared vector of ones, and
    SciPy's ``csc_matvecs`` kernel accumulates all q quantities in one pass over
    the codes (about 2x faster than one ``np.bincount`` per feature and quantity).
    With a constant hessian (unit weights) ``q = 2`` and the hessian histogram is
    the count histogram.

    Rows are in two parts, ``[0, n1)`` and ``[n1, n)`` (one part below
    ``_TWO_PARTS_MIN_ROWS`` rows).  A node's rows are ``(part 0 rows, part 1
    rows[, all rows])``, sorted index arrays (None: all rows of the part, at
    the root; with two parts and no worker, the parts are views of the third).
    Used as a context manager with ``n_workers=2``, a forked ``RowWorker``
    holds and processes part 1 while this process does part 0; the nodes
    then carry None for part 1.  The fit's raw predictions ``raw`` (n, K) and
    gradients live here too, so that each process computes the gradients of
    its part (``gradients``) and adds the leaf values to its part's raw
    predictions (``add_leaf_values``).
    """

    def __init__(self, XbT, n_bins, constant_hessian, n_outputs=1, n_workers=1):
        n_features, n = XbT.shape
        self.n_features = n_features
        self.n_bins = n_bins
        self.n_cols = n_features * n_bins
        self.constant_hessian = constant_hessian
        self.XbT = XbT
        self.n = n
        self.n1 = n // 2 if n >= _TWO_PARTS_MIN_ROWS else n
        self.two_parts = self.n1 < n
        # whether any row has a value in the last (missing-value) bin
        self.has_missing = bool(n and n_features and XbT.max() == n_bins - 1)
        self.codes = np.ascontiguousarray(XbT.T, dtype=np.int32)
        self.codes += (np.arange(n_features, dtype=np.int32) * n_bins)[None, :]
        # rows as opaque F*4-byte items: ``take`` on this 1-D view is ~3x faster than take(axis=0)
        self._code_rows = self.codes.view(np.dtype((np.void, 4 * n_features))).reshape(-1)
        self.q = q = 2 if constant_hessian else 3
        use_worker = n_workers >= 2 and self.two_parts and _CAN_FORK and _csc_matvecs is not None
        self.shared = None
        if use_worker:  # what both processes read and write: raw predictions, gradients, the worker's histogram
            # and leaf rows
            self.shared = SharedArrays({"W": ((n_outputs, n, q), np.float64), "Y": ((self.n_cols, q), np.float64),
                                        "rows": ((n - self.n1,), np.intp), "raw": ((n, n_outputs), np.float64),
                                        "error": ((512,), np.uint8)})
            self._W = self.shared.arrays["W"]
            self._Yw = self.shared.arrays["Y"]  # the worker's histogram of its part
            self.raw = self.shared.arrays["raw"]
        else:
            self._W = np.empty((n_outputs, n, q))
            self.raw = np.empty((n, n_outputs))
        # the loss's gradients/hessians of rows [lo, hi) (from ``raw``) into ``g``/``h``: ``gradient_fn(lo, hi)``,
        # set by the fit before the worker is forked
        self.gradient_fn = None
        # per output: rows [g, h, 1] (or [g, 1]); ``g``/``h`` are views the loss writes into
        self._W[:, :, -1] = 1.0
        self.g = self._W[:, :, 0]
        # constant hessian: ``h`` aliases the ones column (those losses write h = 1 there)
        self.h = self._W[:, :, 1]
        self.W = self._W[0]
        self._k = 0
        chunk = min(n, _CHUNK)
        self._ones = np.ones(chunk * n_features)
        self._indptr = np.arange(0, chunk * n_features + 1, n_features, dtype=np.int32)
        self._chunk = max(chunk, 1)
        self._Y = [None, None]  # accumulation buffers (the second for part 1 without a worker)
        self._root_counts = None  # (F, n_bins) count histogram of all rows, computed on first use
        self.hist_buffers: list = []  # free (2, 3, F, n_bins) buffers of grow_tree, reused across trees
        self._worker = None
        self.worker_peak_traced = 0  # the worker's tracemalloc peak (bytes), when tracing at its start

    def __enter__(self):
        """Fork the worker that processes part 1 (when this builder was made for two workers; if the system
        refuses a process, the fit goes on in this one: the same model)."""
        if self.shared is not None and self._worker is None:
            try:
                self._worker = RowWorker(self)
            except OSError:
                self._worker = None
        return self

    def __exit__(self, exc_type, exc, tb):
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.close(graceful=exc_type is None)
            self.worker_peak_traced = worker.peak_traced

    def gradients(self):
        """Gradients and hessians of every row (``gradient_fn``); the worker computes those of its part meanwhile.
        Row by row, so the same values in one or two calls."""
        worker = self._worker
        if worker is None:
            self.gradient_fn(0, self.n)
            return
        worker.send(GRADIENTS)
        self.gradient_fn(0, self.n1)
        worker.wait()

    def add_leaf_values(self, leaves, values, k):
        """``raw[:, k] += values[id]`` on the rows of each leaf of ``leaves`` ``[(id, parts, count)]`` (the
        worker on its part, meanwhile).  Ends the worker's tree: it drops its rows."""
        col = self.raw[:, k]
        worker = self._worker
        if worker is None:
            for i, parts, _ in leaves:
                rows = self.rows_of(parts)
                col[slice(None) if rows is None else rows] += values[i]
            return
        ids = [i for i, _, _ in leaves]
        payload = np.array(ids, dtype=np.int64).tobytes() + np.array([values[i] for i in ids]).tobytes()
        worker.send(LEAF_VALUES, len(ids), output=k, payload=payload)
        for i, (p0, _), _ in leaves:
            col[slice(0, self.n1) if p0 is None else p0] += values[i]
        worker.wait()

    def use_output(self, k):
        """Histogram the gradients/hessians of output ``k`` (``self.g[k]``, ``self.h[k]``)."""
        self.W = self._W[k]
        self._k = k

    def _zeroed(self, i):
        """Reused accumulation buffer ``i`` (0 or 1), zeroed: no allocation (nor page faults) per node."""
        Y = self._Y[i]
        if Y is None:
            Y = self._Y[i] = np.zeros((self.n_cols, self.q))
        else:
            Y.fill(0.0)
        return Y

    def __call__(self, idx):
        """(3, F, n_bins) float array (a view): sums of g, h and counts of rows ``idx`` (None = all rows)."""
        rows = np.arange(self.n) if idx is None else idx
        Y = np.zeros((self.n_cols, self.q))
        if _csc_matvecs is None:  # private SciPy kernel unavailable (tested by monkeypatching)
            codes, W = self.codes.take(rows, axis=0), self.W.take(rows, axis=0)
            for f in range(self.n_features):
                c = codes[:, f]
                for j in range(self.q):
                    Y[:, j] += np.bincount(c, weights=W[:, j], minlength=self.n_cols)
        else:
            self.accumulate(rows, Y)
        return self._as_hist(Y)

    def root_hist(self, out):
        """Write the (3, F, n_bins) histogram of all rows into the contiguous array ``out``.

        The count histogram of all rows never changes (nor does the hessian one with a
        constant hessian): it is computed once, and the sparse product carries only the
        q - 1 varying quantities (about 20% less work than the full product)."""
        if _csc_matvecs is None:
            np.copyto(out, self(None))
            return out
        F, B, q = self.n_features, self.n_bins, self.q
        if self._root_counts is None:
            self._root_counts = np.stack([np.bincount(self.XbT[f], minlength=B) for f in range(F)]).astype(
                np.float64)
        r = q - 1
        worker = self._worker
        if worker is not None:
            worker.send(ROOT, output=self._k)
        Y = self.root_part(0, self._zeroed(0))
        if worker is not None:
            worker.wait()
            Y += self.root_part_view(self._Yw)
        elif self.two_parts:
            Y += self.root_part(1, self._zeroed(1))
        Yt = Y.reshape(F, B, r)
        np.copyto(out[0], Yt[:, :, 0])
        np.copyto(out[1], Yt[:, :, 1] if r == 2 else self._root_counts)
        np.copyto(out[2], self._root_counts)
        return out

    def root_part_view(self, Y):
        """The first ``n_cols * (q - 1)`` entries of an accumulation buffer, as an (n_cols, q - 1) array."""
        r = self.q - 1
        return Y.reshape(-1)[: self.n_cols * r].reshape(self.n_cols, r)

    def root_part(self, part, Y):
        """Sums of the first q - 1 quantities over all rows of ``part`` (no gather), written into the zeroed
        start of the accumulation buffer ``Y``; returns that (n_cols, q - 1) view."""
        codes, F, r = self.codes, self.n_features, self.q - 1
        Y = self.root_part_view(Y)
        Y.fill(0.0)
        start, stop = self._bounds(part)
        w = np.empty((self._chunk, r))
        for s in range(start, stop, self._chunk):
            e = min(stop, s + self._chunk)
            k = e - s
            for j in range(r):  # column by column: a (k, 2) copy would loop over k rows of 2 items
                np.copyto(w[:k, j], self.W[s:e, j])
            _csc_matvecs(self.n_cols, k, r, self._indptr[: k + 1], codes[s:e].reshape(-1),
                         self._ones[: k * F], w[:k].reshape(-1), Y.reshape(-1))
        return Y

    def _as_hist(self, Y):
        Yt = Y.reshape(self.n_features, self.n_bins, self.q)
        if self.q == 2:
            Yt = Yt[:, :, [0, 1, 1]]  # hessian histogram = count histogram
        return Yt.transpose(2, 0, 1)  # (3, F, n_bins) view

    def split(self, parts, ids, f, b, missing_left, cat_set, n_left, hist_side, out=None):
        """Partition a node's rows on feature ``f`` and histogram one child.

        ``parts``: the node's rows (see the class docstring); ``ids``: the node's and its
        children's ids (node, left, right), which the worker keys its rows by.  Left: bin
        <= b (and the missing bin if ``missing_left``), or bin in ``cat_set`` for a
        categorical split.  ``n_left`` is the left child's row count (known from the
        histogram counts; checked).  Returns ``(parts_left, parts_right, hist)`` with the
        (3, F, n_bins) histogram of child ``hist_side`` (0: left, 1: right; None: no
        histogram) written into the contiguous array ``out`` (or a new one).  Each part is
        partitioned and histogrammed on its own and the parts' histograms are summed (part 1
        by the worker, if there is one, meanwhile).
        """
        with_hist = hist_side is not None and _csc_matvecs is not None
        worker = self._worker
        if worker is not None:
            worker.send(SPLIT, *ids, f, b, missing_left, hist_side if with_hist else -1, self._k, cat_set)
        if worker is None and self.two_parts:
            left, right = self._partition_parts(parts, f, b, missing_left, cat_set)
        else:
            l0, r0 = self.partition(parts[0], 0, f, b, missing_left, cat_set)
            left, right = (l0, None), (r0, None)
        Y = None
        if with_hist:
            Y = self._zeroed(0)
            self.accumulate((left, right)[hist_side][0], Y)
        n_l = len(left[0])
        Y1 = None
        if worker is not None:
            n_l += worker.wait()
            Y1 = self._Yw
        elif self.two_parts:
            n_l += len(left[1])
            if with_hist:
                Y1 = self._zeroed(1)
                self.accumulate((left, right)[hist_side][1], Y1)
        if n_l != n_left:  # pragma: no cover - the counts come from the same bins
            raise RuntimeError(f"partition sent {n_l} rows left, the histogram counted {n_left}")
        if hist_side is None:
            return left, right, None
        if out is None:
            out = np.empty((3, self.n_features, self.n_bins))
        if not with_hist:  # np.bincount fallback
            np.copyto(out, self(self.rows_of((left, right)[hist_side])))
            return left, right, out
        return left, right, self._write_hist(out, Y, Y1)

    def _write_hist(self, out, Y0, Y1):
        """Write the histogram of accumulation buffer ``Y0`` (plus ``Y1`` unless None) into the contiguous
        (3, F, n_bins) ``out``: the sum of the parts and the layout change in one pass."""
        F, B, q = self.n_features, self.n_bins, self.q
        h0 = Y0.reshape(F, B, q).transpose(2, 0, 1)
        if Y1 is None:
            np.copyto(out[:q], h0)
        else:
            np.add(h0, Y1.reshape(F, B, q).transpose(2, 0, 1), out=out[:q])
        if q == 2:  # constant hessian: the hessian histogram is the count histogram
            np.copyto(out[2], out[1])
        return out

    def _goes_left(self, col, b, missing_left, cat_set):
        if cat_set is not None:
            return cat_set[col]
        go = col <= b
        if missing_left:
            go |= col == self.n_bins - 1
        return go

    @staticmethod
    def _compress(go, rows):
        # np.compress is ~5x faster than boolean indexing ``rows[go]`` (same result); sized by itself it
        # needs no count_nonzero nor preallocated outputs (2-6 us less per node)
        return rows.compress(go), rows.compress(np.logical_not(go, out=go))

    def _bounds(self, part):
        return (0, self.n1) if part == 0 else (self.n1, self.n)

    def _column(self, rows, start, stop, f):
        """A node's rows (None: rows ``start..stop-1``, at the root: no gather) and their bins of feature f."""
        if rows is None:
            return np.arange(start, stop), self.XbT[f, start:stop]
        return rows, self.XbT[f].take(rows)

    def partition(self, rows, part, f, b, missing_left, cat_set):
        """Stable partition of one part's rows of a node (None: all rows of the part) -> (left, right)."""
        rows, col = self._column(rows, *self._bounds(part), f)
        return self._compress(self._goes_left(col, b, missing_left, cat_set), rows)

    def _partition_parts(self, parts, f, b, missing_left, cat_set):
        """Both parts of a node in one pass (no worker): its rows are one sorted array, part 0 first, so the
        children's parts are views of their arrays (``(part 0, part 1, all)``), as two passes would give."""
        root = parts[0] is None
        rows, col = self._column(None if root else parts[2], 0, self.n, f)
        n0 = self.n1 if root else len(parts[0])
        go = self._goes_left(col, b, missing_left, cat_set)
        p_l = int(np.count_nonzero(go[:n0]))
        idx_l, idx_r = self._compress(go, rows)
        p_r = n0 - p_l
        return (idx_l[:p_l], idx_l[p_l:], idx_l), (idx_r[:p_r], idx_r[p_r:], idx_r)

    def accumulate(self, rows, Y):
        """Add the histogram of rows ``rows`` (an index array) into the (n_cols, q) buffer ``Y``, by chunks."""
        W, F, q, Yv = self.W, self.n_features, self.q, Y.reshape(-1)
        for s in range(0, len(rows), self._chunk):
            chunk = rows[s : s + self._chunk]  # gather chunk by chunk: small temporaries
            k = len(chunk)
            c, w = self._code_rows.take(chunk).view(np.int32), W.take(chunk, axis=0)
            _csc_matvecs(self.n_cols, k, q, self._indptr[: k + 1], c.reshape(-1),
                         self._ones[: k * F], w.reshape(-1), Yv)

    def rows_of(self, parts):
        """All rows of a node (None: every row), without a worker: one part, or the array two parts view."""
        if parts[0] is None:
            return None
        return parts[2] if len(parts) == 3 else parts[0]

    def leaf_rows(self, leaves):
        """``[(id, rows)]`` for ``leaves`` ``[(id, parts, count)]`` (rows None: every row), a worker's parts
        included.  Ends the worker's tree: it drops its rows."""
        if len(leaves) == 1 and leaves[0][1][0] is None:  # the root alone
            return [(leaves[0][0], None)]
        if self._worker is None:
            return [(i, self.rows_of(parts)) for i, parts, _ in leaves]
        self._worker.send(LEAVES)
        total = self._worker.wait()
        theirs = self.shared.arrays["rows"]
        out, pos = [], 0
        for i, (p0, *_), count in sorted(leaves, key=lambda leaf: leaf[0]):
            m = count - len(p0)  # the worker's rows of this leaf, in its ascending-id order
            out.append((i, np.concatenate((p0, theirs[pos : pos + m]))))
            pos += m
        if pos != total:  # pragma: no cover - both count the same rows
            raise RuntimeError(f"the worker holds {total} leaf rows, the leaf counts say {pos}")
        return out


_BLOCK = 16
_TRIU = np.triu(np.ones((_BLOCK, _BLOCK)))
_STRICT_UPPER: dict = {}


def _cumsum_bins(hist, out=None):
    """Inclusive cumulative sums over the last (bin) axis of a histogram array.

    ``np.cumsum`` is one sequential add chain; for bin counts that are multiples of
    16 a blocked version is ~2x faster: one (rows * n_blocks, 16) @ (16, 16)
    upper-triangular product gives the sums within blocks, one (rows, n_blocks)
    @ strictly-upper-triangular product the block offsets.  Callers pass contiguous
    histograms (``HistogramBuilder`` writes them so); a strided view is copied first.
    """
    n_bins = hist.shape[-1]
    if n_bins % _BLOCK or n_bins < 4 * _BLOCK:
        return np.cumsum(hist, axis=-1, out=out)
    rows = hist.size // n_bins
    n_blocks = n_bins // _BLOCK
    if out is None:
        out = np.empty(hist.shape)
    hist = np.ascontiguousarray(hist)
    np.matmul(hist.reshape(-1, _BLOCK), _TRIU, out=out.reshape(-1, _BLOCK))
    su = _STRICT_UPPER.get(n_blocks)
    if su is None:
        su = _STRICT_UPPER[n_blocks] = np.triu(np.ones((n_blocks, n_blocks)), 1)
    cs = out.reshape(rows, n_blocks, _BLOCK)
    offsets = cs[:, :, -1] @ su  # (rows, n_blocks): sums of the blocks before each block
    cs += offsets[:, :, None]
    return out


class _SplitFinder:
    """Best split of one node or of a pair of sibling nodes from their cumulative histograms.

    ``cum[..., b]`` (shape (k, 3, F, n_bins), k <= 2) holds the sums of g, h and
    counts over bins ``<= b`` (the last bin is the missing-value bin).  Cumulative
    sums are linear, so a sibling's ``cum`` is ``parent - child`` like its
    histogram, and only the histogrammed (smaller) child needs a cumulative sum.
    All nodes, features and bins are scored at once per missing-value direction,
    with preallocated scratch arrays (one ufunc call per step, no temporaries):
    ``gain = G_L^2 / (H_L + l2) + G_R^2 / (H_R + l2)`` where the counts allow
    ``min_samples_leaf`` rows on both sides (and, if ``check_hessian``, both
    hessian sums reach ``min_hessian_to_split``) and the bin is a split point
    (``invalid_bins`` (F, n_bins) masks those that are not; or None).

    Candidates are scored over all n_bins columns (contiguous arrays): the last
    column (left = every row) always fails the count test ``C_L <= C - min_samples_leaf``.
    Left child = non-missing bins <= b (plus the missing bin if missing_left).
    """

    def __init__(self, n_features, n_bins, invalid_bins, l2, min_samples_leaf, check_hessian,
                 may_have_missing=True):
        shape = (2, n_features, n_bins)
        gain, t1 = np.empty(shape), np.empty(shape)
        bad, bad2 = np.empty(shape, dtype=bool), np.empty(shape, dtype=bool)
        # scratch views for k = 1 and k = 2 nodes, sliced once (per-call Python overhead is ~half of a call)
        self._scratch = [None] + [(gain[:k], t1[:k], bad[:k], bad2[:k], gain[:k].reshape(k, -1))
                                  for k in (1, 2)]
        # per-node G, H and C - min_samples_leaf of a pair, broadcast against (2, F, n_bins)
        self._pair = np.empty((3, 2, 1, 1))
        self._pair_flat = self._pair.reshape(-1)
        self.n_bins = n_bins
        self.invalid_bins = invalid_bins
        self.l2 = l2
        self.min_samples_leaf = min_samples_leaf
        self.check_hessian = check_hessian
        # False when no training row has a missing value: no node has any, so the missing-left
        # direction and the per-feature missing counts are skipped
        self.may_have_missing = may_have_missing

    def __call__(self, cum, G, H, C):
        """A list (one per node) of ``(gain, feature, bin, missing_left, GL, HL, CL, None)`` or None.

        Call under ``np.errstate(divide="ignore", invalid="ignore")`` (grow_tree holds it for a whole
        tree: entering it costs about as much as a ufunc call): bins with no rows on a side divide by
        zero, and are masked."""
        k = len(G)
        l2, msl = self.l2, self.min_samples_leaf
        if k == 1:
            Gk, Hk, Cmax = G[0], H[0], C[0] - msl
        else:
            v = self._pair_flat
            v[0], v[1], v[2], v[3], v[4], v[5] = G[0], G[1], H[0], H[1], C[0] - msl, C[1] - msl
            Gk, Hk, Cmax = self._pair
        cm = None  # (k, F) missing counts
        if self.may_have_missing:
            cm = cum[:, 2, :, -1] - cum[:, 2, :, -2]
            if not cm.any():
                cm = None
        best = [None] * k
        arg = self._score(cum, Gk, Hk, Cmax, k)
        flat = self._scratch[k][4]
        for i in range(k):
            j = arg[i]
            gk = flat.item(i, j) - _parent_gain(G[i], H[i], l2)
            if gk > 0:
                f, b = divmod(j, self.n_bins)
                cl = cum.item(i, 2, f, b)
                if cm is None or cm.item(i, f) == 0:
                    # no missing values here: missing go to the child with more samples
                    miss_left = cl >= C[i] - cl
                else:
                    miss_left = False
                best[i] = (gk, f, b, miss_left, cum.item(i, 0, f, b), cum.item(i, 1, f, b), int(cl), None)
        if cm is not None:  # the missing values' bin sent left: every cumulative sum plus that bin's sums
            has_missing = cm.any(axis=1)
            missing = cum[..., -1] - cum[..., -2]  # (k, 3, F): sums over the missing bin
            c = cum + missing[..., None]
            arg = self._score(c, Gk, Hk, Cmax, k)
            for i in range(k):
                if not has_missing[i]:
                    continue
                j = arg[i]
                gk = flat.item(i, j) - _parent_gain(G[i], H[i], l2)
                if gk > 0 and (best[i] is None or gk > best[i][0]):
                    f, b = divmod(j, self.n_bins)
                    best[i] = (gk, f, b, True, c.item(i, 0, f, b), c.item(i, 1, f, b), int(c.item(i, 2, f, b)),
                               None)
        return best

    def _score(self, c, Gk, Hk, Cmax, k):
        """Gains of all candidates of cumulative sums ``c`` (k, 3, F, n_bins) into the scratch ``gain``
        (-inf where not allowed); returns each node's best flat (feature * n_bins + bin) index."""
        gain, t1, bad, bad2, flat = self._scratch[k]
        msl, l2 = self.min_samples_leaf, self.l2
        GL, HL, CL = c[:, 0], c[:, 1], c[:, 2]
        np.less(CL, msl, out=bad)
        np.greater(CL, Cmax, out=bad2)
        bad |= bad2
        np.subtract(Hk, HL, out=t1)  # H_R
        if self.check_hessian:  # min(H_L, H_R) < min_hessian_to_split
            np.minimum(HL, t1, out=gain)
            np.less(gain, _MIN_HESSIAN, out=bad2)
            bad |= bad2
        if self.invalid_bins is not None:
            bad |= self.invalid_bins
        np.subtract(Gk, GL, out=gain)  # G_R
        np.square(gain, out=gain)
        if l2:
            t1 += l2
        gain /= t1  # G_R^2 / (H_R + l2)
        np.square(GL, out=t1)
        if l2:
            t1 /= HL + l2
        else:
            t1 /= HL
        gain += t1
        np.copyto(gain, -np.inf, where=bad)
        return flat.argmax(axis=1).tolist()


def _parent_gain(G, H, l2):
    return G * G / (H + l2) if H + l2 > 0 else 0.0


def _best_splits(cum, G, H, C, invalid_bins, l2, min_samples_leaf, check_hessian=True):
    """Best split of each of ``k`` (<= 2) nodes from their stacked (k, 3, F, n_bins) cumulative
    histograms (see ``_SplitFinder``)."""
    finder = _SplitFinder(cum.shape[2], cum.shape[3], invalid_bins, l2, min_samples_leaf, check_hessian)
    with np.errstate(divide="ignore", invalid="ignore"):
        return finder(cum, G, H, C)


_CAT_SMOOTH = 10.0  # scikit-learn's smoothing of G/H when ordering categories


def _best_categorical_split(hist, G, H, C, features, missing_bin, l2, min_samples_leaf, best):
    """Improve ``best`` with category-subset splits of the categorical ``features``.

    Categories present in the node (the missing bin counts as one more category)
    are ordered by ``G_c / (H_c + 10)``; the left child is a prefix of that order
    (Fisher 1958; LightGBM / scikit-learn), scored with the same gain formula.
    Returns the split with a boolean ``cat_set`` over bins 0..missing_bin.
    """
    parent = G * G / (H + l2) if H + l2 > 0 else 0.0
    for f in features:
        present = np.flatnonzero(hist[2, f] > 0)
        if len(present) < 2:
            continue
        Gc, Hc, Cc = hist[0, f, present], hist[1, f, present], hist[2, f, present]
        order = np.argsort(Gc / (Hc + _CAT_SMOOTH), kind="stable")
        GL = np.cumsum(Gc[order])[:-1]
        HL = np.cumsum(Hc[order])[:-1]
        CL = np.cumsum(Cc[order])[:-1]
        HR = H - HL
        ok = (CL >= min_samples_leaf) & (C - CL >= min_samples_leaf)
        ok &= (HL >= _MIN_HESSIAN) & (HR >= _MIN_HESSIAN)
        if not ok.any():
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = GL * GL / (HL + l2) + (G - GL) ** 2 / (HR + l2) - parent
        gain = np.where(ok, gain, -np.inf)
        j = int(np.argmax(gain))
        if gain[j] > 0 and (best is None or gain[j] > best[0]):
            cat_set = np.zeros(missing_bin + 1, dtype=bool)
            cat_set[present[order[: j + 1]]] = True
            if hist[2, f, missing_bin] == 0:
                # no missing value here: NaN / unseen categories follow the larger child
                cat_set[missing_bin] = bool(CL[j] >= C - CL[j])
            best = (float(gain[j]), int(f), 0, bool(cat_set[missing_bin]), float(GL[j]), float(HL[j]),
                    int(CL[j]), cat_set)
    return best


class _Node:
    # idx: the rows as (part 0, part 1) index arrays (HistogramBuilder); hist: cumulative over bins
    __slots__ = ("id", "idx", "hist", "buf", "G", "H", "C", "depth", "split")

    def __init__(self, id_, idx, G, H, C, depth):
        self.id = id_
        self.idx = idx
        self.G = G
        self.H = H
        self.C = C
        self.depth = depth
        self.hist = None  # a half of the pair buffer ``buf``
        self.buf = None
        self.split = None


def grow_tree(hist_builder, g, h, *, constant_hessian, valid_bins, missing_bin, learning_rate, l2,
              max_leaf_nodes, max_depth, min_samples_leaf, categorical=(), G=None, H=None):
    """Grow one tree leaf-wise (best-gain leaf first).

    Returns ``(nodes, leaves)``: ``nodes`` is a dict of flat lists (feature, bin,
    missing_left, left, right, value), ``leaves`` a list of ``(node_id, parts, count)``
    (``parts``: the leaf's rows, see ``HistogramBuilder``).  The caller ends the tree
    with ``hist_builder.add_leaf_values`` or ``hist_builder.leaf_rows``.
    """
    XbT = hist_builder.XbT  # (F, n) uint8 bins, for partitioning
    n = XbT.shape[1]
    feature, bins, miss_left, left, right, value = [], [], [], [], [], []
    cats: dict[int, np.ndarray] = {}  # node id -> bins going left (categorical splits)

    def new_node(idx, G, H, C, depth):
        node = _Node(len(feature), idx, G, H, C, depth)
        feature.append(0)
        bins.append(0)
        miss_left.append(False)
        left.append(node.id)
        right.append(node.id)
        value.append(-learning_rate * G / max(H + l2, 1e-300))
        return node

    if G is None:
        G = float(g.sum())
    if H is None:
        H = float(n) if constant_hessian else float(h.sum())
    root = new_node((None, None), G, H, n, 0)
    leaves: dict[int, _Node] = {root.id: root}
    heap: list = []

    def splittable(node):
        return (max_depth is None or node.depth < max_depth) and node.C >= 2 * min_samples_leaf

    invalid_bins = ~valid_bins
    if not invalid_bins.any():
        invalid_bins = None
    else:  # one more column for the missing bin (never a split point, see _best_splits)
        invalid_bins = np.concatenate([invalid_bins, np.ones((len(invalid_bins), 1), dtype=bool)], axis=1)
    # every child with >= min_samples_leaf rows has H >= min_samples_leaf * min(h): if that
    # exceeds min_hessian_to_split (with a margin for rounding), the hessian test is void
    h_floor = 1.0 if constant_hessian else (float(h.min()) if n else 0.0)
    check_hessian = not min_samples_leaf * h_floor >= 2 * _MIN_HESSIAN

    n_features = XbT.shape[0]
    hist_shape = (3, n_features, missing_bin + 1)
    finder = _SplitFinder(n_features, missing_bin + 1, invalid_bins, l2, min_samples_leaf, check_hessian,
                          hist_builder.has_missing)
    # Cumulative histograms live in (2, 3, F, n_bins) pair buffers: the children of a split are computed
    # into one, which the finder scores as is and whose halves the children then own (no copies).
    # ``pairs``: id -> [buffer, holder of half 0, holder of half 1] for buffers held by a node.  Free
    # buffers persist across trees (``hist_builder.hist_buffers``: no allocation nor page faults per tree).
    free = hist_builder.hist_buffers
    pairs: dict = {}

    def new_pair():
        """A buffer with no holder.  Without a free one, two half-held buffers are consolidated (one
        holder's histogram moves to the other's free half) before a new buffer is allocated, so the
        buffers in use stay within one of the held halves (the memory of one buffer per histogram)."""
        if free:
            return free.pop()
        singles = [e for e in pairs.values() if (e[1] is None) != (e[2] is None)]
        if len(singles) < 2:
            return np.empty((2,) + hist_shape)
        (dst, *dst_h), (src, *src_h) = singles[0], singles[1]
        node = src_h[0] if src_h[0] is not None else src_h[1]
        d = 0 if dst_h[0] is None else 1
        np.copyto(dst[d], node.hist)
        del pairs[id(src)]
        hold(node, dst, d)
        return src

    def hold(node, buf, i):
        entry = pairs.setdefault(id(buf), [buf, None, None])
        entry[1 + i] = node
        node.hist, node.buf = buf[i], buf

    def release(node):
        if node.hist is not None:
            entry = pairs[id(node.buf)]
            entry[1 if entry[1] is node else 2] = None
            node.hist = node.buf = None
            if entry[1] is None and entry[2] is None:
                del pairs[id(entry[0])]
                free.append(entry[0])

    def consider(nodes_, buf, first):
        """Score ``nodes_``, whose cumulative histograms are ``buf[first:first + len(nodes_)]``."""
        cum = buf[first : first + len(nodes_)]
        splits = finder(cum, [nd.G for nd in nodes_], [nd.H for nd in nodes_], [nd.C for nd in nodes_])
        for i, (node, split) in enumerate(zip(nodes_, splits, strict=True)):
            if len(categorical):
                hist = np.diff(cum[i], axis=-1, prepend=0.0)
                split = _best_categorical_split(hist, node.G, node.H, node.C, categorical, missing_bin,
                                                l2, min_samples_leaf, split)
            node.split = split
            if split is not None:
                hold(node, buf, first + i)
                heapq.heappush(heap, (-split[0], node.id, node))
        if id(buf) not in pairs:
            free.append(buf)

    # bins with no rows on a side divide by zero in the finder, which masks them
    with np.errstate(divide="ignore", invalid="ignore"):
        if max_leaf_nodes is None or max_leaf_nodes > 1:
            if splittable(root):
                buf = new_pair()
                _cumsum_bins(hist_builder.root_hist(buf[1]), out=buf[0])
                consider([root], buf, 0)
        n_leaves = 1
        while heap and (max_leaf_nodes is None or n_leaves < max_leaf_nodes):
            _, _, node = heapq.heappop(heap)
            _, f, b, mleft, GL, HL, CL, cat_set = node.split
            # children's sizes are known from the histogram: decide before partitioning which one
            # (the smaller) gets a histogram, so that partition and histogram run in one pass
            last = max_leaf_nodes is not None and n_leaves + 1 >= max_leaf_nodes
            c_r = node.C - CL
            need_hist = not last and (max_depth is None or node.depth + 1 < max_depth) and (
                max(CL, c_r) >= 2 * min_samples_leaf)
            small_side = 0 if CL <= c_r else 1
            ids = (node.id, len(feature), len(feature) + 1)  # the children's ids (new_node below)
            # the children's pair buffer (first: it may move the parent's histogram, by consolidation);
            # the smaller child's histogram goes into its second half
            buf = new_pair() if need_hist else None
            idx_l, idx_r, small_hist = hist_builder.split(
                node.idx, ids, f, b, mleft, cat_set, CL, small_side if need_hist else None,
                None if buf is None else buf[1])
            if constant_hessian:
                HL = float(CL)
            lnode = new_node(idx_l, GL, HL, CL, node.depth + 1)
            rnode = new_node(idx_r, node.G - GL, node.H - HL, node.C - CL, node.depth + 1)
            feature[node.id] = f
            bins[node.id] = b
            if cat_set is not None:
                cats[node.id] = cat_set
            miss_left[node.id] = mleft
            left[node.id] = lnode.id
            right[node.id] = rnode.id
            del leaves[node.id]
            leaves[lnode.id] = lnode
            leaves[rnode.id] = rnode
            n_leaves += 1
            node.idx = node.split = None
            if max_leaf_nodes is not None and n_leaves >= max_leaf_nodes:
                break
            if need_hist:
                parent_hist = node.hist
                if parent_hist is None:  # pragma: no cover - popped nodes always hold one (see the pruning below)
                    raise RuntimeError(f"node {node.id} was split without its histogram")
                small, large = (lnode, rnode) if small_side == 0 else (rnode, lnode)
                # cumulative histograms of the pair: the smaller child's is computed, the other's subtracted
                _cumsum_bins(small_hist, out=buf[0])
                todo = [i for i, nd in enumerate((small, large)) if splittable(nd)]
                if todo[-1] == 1:
                    np.subtract(parent_hist, buf[0], out=buf[1])
                release(node)
                if len(todo) == 2:
                    consider([small, large], buf, 0)
                else:
                    consider([(small, large)[todo[0]]], buf, todo[0])
                if max_leaf_nodes is not None and len(heap) > max_leaf_nodes - n_leaves:
                    # pops follow the heap order, so a pending leaf ranked below the number of splits
                    # left is never split: drop its histogram (bounds the memory held by histograms)
                    for _, _, nd in sorted(heap)[max_leaf_nodes - n_leaves :]:
                        if nd.hist is not None:  # (most were dropped at an earlier split)
                            release(nd)
            else:
                release(node)
    free.extend(entry[0] for entry in pairs.values())  # pending leaves' buffers, for the next tree
    nodes = {
        "feature": feature,
        "bin": bins,
        "missing_left": miss_left,
        "left": left,
        "right": right,
        "value": value,
        "cats": cats,
    }
    return nodes, [(nd.id, nd.idx, nd.C) for nd in leaves.values()]


class TreeEnsemble:
    """All trees of a boosted model as flat arrays (one node table, global ids).

    Leaves point to themselves (``left == right == id``), so a fixed number of
    descent steps is harmless.  ``roots[t]`` and ``tree_output[t]`` (the output
    column a tree adds to) describe tree ``t``.  Thresholds are real values:
    go left when ``x <= threshold`` (NaN: when ``missing_left``).
    """

    def __init__(self, n_outputs: int, missing_bin: int = 255):
        self.n_outputs = n_outputs
        self.missing_bin = missing_bin
        self._parts: list = []
        self._n = 0
        self._cat_sets: list = []

    def add(self, nodes: dict, edges: list, output: int) -> None:
        k = len(nodes["feature"])
        feat = np.asarray(nodes["feature"], dtype=np.intp)
        b = np.asarray(nodes["bin"], dtype=np.intp)
        thr = np.full(k, np.inf)
        internal = np.asarray(nodes["left"]) != np.arange(k)
        cat_index = np.full(k, -1, dtype=np.intp)
        for i in np.flatnonzero(internal):
            e = edges[feat[i]]
            thr[i] = e[b[i]] if b[i] < len(e) else np.inf
        for i, cat_set in nodes.get("cats", {}).items():
            cat_set = cat_set.copy()
            # categories never seen in training (codes >= k) follow the missing values
            cat_set[len(edges[feat[i]]) + 1 : self.missing_bin] = cat_set[self.missing_bin]
            cat_index[i] = len(self._cat_sets)
            self._cat_sets.append(cat_set)
            thr[i] = np.nan
        self._parts.append(
            (
                feat,
                b,
                thr,
                np.asarray(nodes["missing_left"], dtype=bool),
                np.asarray(nodes["left"], dtype=np.intp) + self._n,
                np.asarray(nodes["right"], dtype=np.intp) + self._n,
                np.asarray(nodes["value"], dtype=np.float64),
                output,
                self._n,
                internal,
                cat_index,
            )
        )
        self._n += k

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_bm", None)  # prediction tables: rebuilt on demand, not persisted
        return state

    def set_leaf_value(self, tree: int, node: int, value: float) -> None:
        self._parts[tree][6][node] = value

    def finalize(self) -> TreeEnsemble:
        parts = self._parts
        cat = (lambda i, dt: np.concatenate([p[i] for p in parts]).astype(dt)) if parts else None
        if parts:
            self.feature = cat(0, np.intp)
            self.bin = cat(1, np.intp)
            self.threshold = cat(2, np.float64)
            self.missing_left = cat(3, bool)
            self.left = cat(4, np.intp)
            self.right = cat(5, np.intp)
            self.value = cat(6, np.float64)
            self.is_internal = cat(9, bool)
            self.cat_index = cat(10, np.intp)
        else:
            self.feature = self.bin = self.left = self.right = np.zeros(0, np.intp)
            self.threshold = self.value = np.zeros(0)
            self.missing_left = self.is_internal = np.zeros(0, bool)
            self.cat_index = np.zeros(0, np.intp)
        self.cat_table = (
            np.array(self._cat_sets, dtype=bool) if self._cat_sets
            else np.zeros((0, self.missing_bin + 1), dtype=bool)
        )
        self._cat_sets = []
        self.roots = np.array([p[8] for p in parts], dtype=np.intp)
        self.tree_output = np.array([p[7] for p in parts], dtype=np.intp)
        self.n_trees = len(parts)
        self.max_depth = self._depth()
        # per-tree slices, for partition-based batch prediction
        self.tree_slices = [(p[8], p[8] + len(p[0])) for p in parts]
        self._parts = []
        return self

    def _depth(self) -> int:
        if self.n_trees == 0:
            return 0
        depth = np.zeros(len(self.feature), dtype=np.intp)
        # children always have larger ids than their parent within a tree
        for i in range(len(self.feature)):
            if self.is_internal[i]:
                depth[self.left[i]] = depth[self.right[i]] = depth[i] + 1
        return int(depth.max())

    # -- prediction ----------------------------------------------------------------
    def predict_raw(self, X: np.ndarray, out: np.ndarray, *, binned: bool = False) -> np.ndarray:
        """Add every tree's output to ``out`` (shape (n, n_outputs)).

        ``X`` is (n, F) real data, or (F, n) uint8 bins when ``binned``.
        """
        n = X.shape[1] if binned else X.shape[0]
        if self.n_trees == 0 or n == 0:
            return out
        if n * self.n_trees <= 20_000 and not binned:
            return self._predict_levels(X, out)
        if not binned and self._bitmask_tables() is not None:
            return self._predict_bitmask(X, out)
        return self._predict_partition(X, out, binned)

    # -- batch prediction with leaf bitmasks (QuickScorer) -------------------------
    def _bitmask_tables(self):
        """Lazily built tables for ``_predict_bitmask`` (None when a tree has > 64 leaves).

        Leaves of tree ``t`` are numbered left to right.  An internal node's mask
        has the bits of its left subtree's leaves cleared: if a row goes right
        there, none of those leaves can be its exit leaf.  The exit leaf is the
        lowest bit left after AND-ing the masks of all nodes where the row goes
        right (Lucchese et al. 2015, "QuickScorer").  Whether a row goes right
        depends only on its code for the node's feature (the rank of ``x`` among
        the feature's distinct thresholds; NaN has its own code; categorical
        features use the category bin), so per feature one table
        ``mask[code, tree]`` holds the AND over all of the tree's nodes on that
        feature, and a row's masks for all trees are one row gather per feature.
        """
        if getattr(self, "_bm", False) is not False:
            return self._bm
        self._bm = None
        internal = self.is_internal
        n_leaves = [int((~internal[a:b]).sum()) for a, b in self.tree_slices]
        if not n_leaves or max(n_leaves) > 64:
            return None
        dt = np.uint32 if max(n_leaves) <= 32 else np.uint64
        ones = np.iinfo(dt).max
        T = self.n_trees
        n_features = int(self.feature[internal].max()) + 1 if internal.any() else 0
        is_cat = np.zeros(n_features, dtype=bool)
        is_cat[self.feature[internal & (self.cat_index >= 0)]] = True
        uth = []
        for f in range(n_features):
            if is_cat[f]:
                uth.append(None)
            else:
                uth.append(np.unique(self.threshold[internal & (self.feature == f)]))
        sizes = [self.missing_bin + 1 if c else len(u) + 2 for c, u in zip(is_cat, uth, strict=True)]
        tables = [np.full((k, T), ones, dtype=dt) for k in sizes]
        leaf_value = np.zeros((T, max(n_leaves)))
        for t, (a, _) in enumerate(self.tree_slices):
            # iterative in-order walk: leaves numbered left to right, [lo, hi) leaf range of each left subtree
            pos = 0
            stack = [(a, False)]
            spans = []
            start = {}
            while stack:
                node, done = stack.pop()
                if not internal[node]:
                    leaf_value[t, pos] = self.value[node]
                    pos += 1
                elif not done:
                    start[node] = pos
                    stack.append((int(self.right[node]), False))
                    stack.append((node, True))
                    stack.append((int(self.left[node]), False))
                else:
                    spans.append((node, start[node], pos))
            for node, lo, hi in spans:
                bv = dt(ones ^ (((1 << hi) - 1) ^ ((1 << lo) - 1)))
                f = self.feature[node]
                table = tables[f]
                if self.cat_index[node] >= 0:
                    table[~self.cat_table[self.cat_index[node]], t] &= bv
                    continue
                u = uth[f]
                j = int(np.searchsorted(u, self.threshold[node]))
                table[j + 1 : len(u) + 1, t] &= bv  # codes above the threshold's rank go right
                if not self.missing_left[node]:
                    table[len(u) + 1, t] &= bv  # NaN
        onehot = np.zeros((T, self.n_outputs))
        onehot[np.arange(T), self.tree_output] = 1.0
        used = [f for f in range(n_features) if (tables[f] != ones).any()]
        self._bm = (dt, uth, is_cat, tables, used, leaf_value, onehot)
        return self._bm

    def _predict_bitmask(self, X, out):
        """Add every tree's output to ``out`` using the leaf-bitmask tables (rows in chunks)."""
        dt, uth, is_cat, tables, used, leaf_value, onehot = self._bm
        n = X.shape[0]
        T = self.n_trees
        width = leaf_value.shape[1]
        flat_value = leaf_value.ravel()
        base = np.arange(T, dtype=np.intp) * width
        codes = {}
        for f in used:
            col = np.ascontiguousarray(X[:, f])
            if is_cat[f]:
                codes[f] = _category_codes(col, self.missing_bin)
            else:
                c = np.searchsorted(uth[f], col, side="left")
                c[np.isnan(col)] = len(uth[f]) + 1
                codes[f] = c
        chunk = max(64, (1 << 18) // max(T, 1))
        one = dt(1)
        for s in range(0, n, chunk):
            e = min(n, s + chunk)
            if used:
                mask = tables[used[0]][codes[used[0]][s:e]]
                for f in used[1:]:
                    mask &= tables[f][codes[f][s:e]]
            else:
                mask = np.full((e - s, T), 1, dtype=dt)
            mask &= ~mask + one  # lowest set bit = the exit leaf
            leaf = np.frexp(mask)[1]
            leaf -= 1
            leaf = leaf.astype(np.intp)
            leaf += base
            vals = flat_value.take(leaf)
            if self.n_outputs == 1:
                out[s:e, 0] += vals.sum(axis=1)
            else:
                out[s:e] += vals @ onehot
        return out

    def _predict_levels(self, X, out):
        """Descend all trees at once, one level per step (cheap for few rows)."""
        n, n_features = X.shape
        flat = X.ravel()
        row = (np.arange(n, dtype=np.intp) * n_features)[:, None]
        node = np.broadcast_to(self.roots, (n, self.n_trees)).copy()
        has_missing_left = bool(self.missing_left.any())
        has_cat = len(self.cat_table) > 0
        for _ in range(self.max_depth):
            x = flat[row + self.feature[node]]
            go = x <= self.threshold[node]
            if has_missing_left:
                go |= np.isnan(x) & self.missing_left[node]
            if has_cat:
                ci = self.cat_index[node]
                m = ci >= 0
                if m.any():
                    go[m] = self.cat_table[ci[m], _category_codes(x[m], self.missing_bin)]
            node = np.where(go, self.left[node], self.right[node])
        vals = self.value[node]
        if self.n_outputs == 1:
            out[:, 0] += vals.sum(axis=1)
        else:
            for k in range(self.n_outputs):
                out[:, k] += vals[:, self.tree_output == k].sum(axis=1)
        return out

    def _predict_partition(self, X, out, binned):
        """Per tree, route index sets down the tree (work ~ n * depth per tree)."""
        cols = X if binned else np.ascontiguousarray(X.T)
        thr = self.bin if binned else self.threshold
        miss = self.missing_bin if binned else None
        for t in range(self.n_trees):
            o = out[:, self.tree_output[t]] if self.n_outputs > 1 else out[:, 0]
            route_tree(cols, int(self.roots[t]), self.feature, thr, self.missing_left, self.left,
                       self.right, self.value, self.is_internal, o, miss, self.cat_index, self.cat_table,
                       self.missing_bin)
        return out


def _category_codes(x, missing_bin):
    """Real category codes -> bin index (NaN, negative and too large -> the missing bin)."""
    ok = (x >= 0) & (x < missing_bin)
    return np.where(ok, x, missing_bin).astype(np.intp)


def route_tree(cols, root, feat, thr, mleft, left, right, value, internal, out, missing_bin=None,
               cat_index=None, cat_table=None, n_missing_bin=None):
    """Add one tree's leaf values to ``out`` by partitioning row indices node by node.

    ``cols`` is feature-major (F, n): real values (NaN = missing) or bins
    (``missing_bin`` = missing).
    """
    stack = [(root, None)]
    while stack:
        node, idx = stack.pop()
        if not internal[node]:
            if idx is None:
                out += value[node]
            else:
                out[idx] += value[node]
            continue
        col = cols[feat[node]]
        x = col if idx is None else col.take(idx)
        if cat_index is not None and cat_index[node] >= 0:
            cat_set = cat_table[cat_index[node]]
            go = cat_set[x] if missing_bin is not None else cat_set[_category_codes(x, n_missing_bin)]
        else:
            go = x <= thr[node]
            if mleft[node]:
                go |= np.isnan(x) if missing_bin is None else (x == missing_bin)
        if idx is None:
            li = np.flatnonzero(go)
            ri = np.flatnonzero(~go)
        else:
            li = np.compress(go, idx)
            ri = np.compress(~go, idx)
        if len(li):
            stack.append((int(left[node]), li))
        if len(ri):
            stack.append((int(right[node]), ri))


def predict_nodes_binned(nodes: dict, XbT: np.ndarray, missing_bin: int, out: np.ndarray) -> None:
    """Add the output of one freshly grown tree (``grow_tree`` lists) on binned data to ``out``."""
    left = np.asarray(nodes["left"], dtype=np.intp)
    internal = left != np.arange(len(left))
    cats = nodes.get("cats") or {}
    cat_index = np.full(len(left), -1, dtype=np.intp)
    for j, i in enumerate(cats):
        cat_index[i] = j
    cat_table = np.array(list(cats.values()), dtype=bool) if cats else None
    route_tree(XbT, 0, np.asarray(nodes["feature"], dtype=np.intp), np.asarray(nodes["bin"], dtype=np.intp),
               np.asarray(nodes["missing_left"], dtype=bool), left,
               np.asarray(nodes["right"], dtype=np.intp), np.asarray(nodes["value"], dtype=np.float64),
               internal, out, missing_bin, cat_index if cats else None, cat_table, missing_bin)
