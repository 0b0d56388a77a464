"""Histograms of gradients, hessians and counts per (feature, bin) on a node's rows, and the row partition.

Histograms of ``g``, ``h`` and counts per (feature, bin) are one sparse product per node
(``HistogramBuilder``); the grower asks for the smaller child's histogram only (the sibling's is
``parent - child``).  Rows may be cut in two parts, the second one held by a worker process
(``worker.RowWorker``): the builder hides it from the grower, which only calls ``root_hist``,
``split``, ``add_leaf_values`` and ``leaf_rows``.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from .worker import RowWorker, SharedArrays

__all__ = ["HistogramBuilder", "CAN_FORK", "max_workers"]

_CHUNK = 2048  # rows per sparse-product call (bounds the shared ones/indptr buffers and gathers)

try:  # SciPy's compiled sparse (CSC) x dense kernel; private, hence the fallback below
    from scipy.sparse._sparsetools import csc_matvecs as _csc_matvecs
except ImportError:  # pragma: no cover
    _csc_matvecs = None

# Training sets of at least this many rows are cut in two row parts, histogrammed separately and summed;
# with two workers the second part belongs to a forked worker process (``worker``).  The cut does
# not depend on the number of workers, so one and two workers give bit-identical models.
_TWO_PARTS_MIN_ROWS = 8192
CAN_FORK = hasattr(os, "fork") and sys.platform.startswith("linux")


def max_workers(n_jobs) -> int:
    """Processes one fit uses for ``n_jobs`` (None: 1; -1: every CPU this process may use): at most 2 (the
    rows are cut in at most two parts) and the CPUs this process may use."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    n = 1 if n_jobs is None else (cpus if n_jobs < 0 else int(n_jobs))
    return max(1, min(2, cpus, n))


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
        use_worker = n_workers >= 2 and self.two_parts and CAN_FORK and _csc_matvecs is not None
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
        self.hist_buffers: list = []  # free (2, 3, F, n_bins) buffers of the grower, reused across trees
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
        worker.start_gradients()
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
        worker.start_leaf_values(ids, [values[i] for i in ids], k)
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
            worker.start_root(self._k)
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
            worker.start_split(ids, f, b, missing_left, hist_side if with_hist else -1, self._k, cat_set)
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
        self._worker.start_leaves()
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
