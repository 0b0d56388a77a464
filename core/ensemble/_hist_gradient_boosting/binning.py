"""Feature binning for histogram gradient boosting.

Each numeric feature is mapped to at most ``max_bins`` (<= 255) ordinal bins,
stored as ``uint8``.  Bin edges are the midpoints between distinct values when a
feature has at most ``max_bins`` distinct values, otherwise quantiles ("averaged_inverted_cdf", as in
scikit-learn's ``_BinMapper``).  Bin ``b`` holds values ``x`` with
``edges[b-1] < x <= edges[b]``, so ``x <= edges[b]`` exactly when ``bin(x) <= b``:
trees learned on bins can predict on raw values with real thresholds.

Missing values (NaN) go to one dedicated bin, ``missing_bin`` = the largest
number of non-missing bins over the features (<= ``max_bins``, so <= 255).
Categorical features (category codes 0..k-1, k <= max_bins) are binned by
their code; NaN, negative or unseen codes go to the missing bin.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...validation import DataError

__all__ = ["BinMapper"]

_SUBSAMPLE = 200_000


def _quantiles_sorted(s: np.ndarray, max_bins: int) -> np.ndarray:
    """``np.percentile(s, linspace(0, 100, max_bins + 1)[1:-1], method="averaged_inverted_cdf")``
    for already sorted ``s`` (no second partition): with ``g = n q``, the value is
    ``s[g]`` when ``g`` is fractional and the mean of ``s[g-1]`` and ``s[g]`` when integral."""
    n = s.size
    q = np.linspace(0, 100, num=max_bins + 1)[1:-1] / 100.0
    v = n * q - 1.0  # numpy's virtual index for this method
    j = np.floor(v)
    exact = (v - j) == 0
    j = j.astype(np.intp)
    lo = s[np.clip(j, 0, n - 1)]
    hi = s[np.clip(j + 1, 0, n - 1)]
    return np.where(exact, lo + 0.5 * (hi - lo), hi)


class BinMapper:
    """Learn per-feature bin edges and map float data to ``uint8`` bins."""

    def __init__(self, max_bins: int = 255, categorical: np.ndarray | None = None):
        self.max_bins = int(max_bins)
        self.categorical = categorical

    def fit(self, X: np.ndarray, rng: np.random.Generator) -> BinMapper:
        self._fit(X, rng, None)
        return self

    def fit_transform_T(self, X: np.ndarray, rng: np.random.Generator, n_threads: int = 1) -> np.ndarray:
        """``fit(X, rng)`` then ``transform_T(X)``, sharing one sort per column when no subsample is drawn.

        The argsort that gives the sorted column for the edges also bins it: in sorted order
        each bin is one run, found by one ``np.searchsorted`` per edge, and the bins are
        scattered back through the permutation (same bins as ``transform_T``).  With
        ``n_threads=2`` two threads take the columns in turn (the sorts release the GIL):
        the same edges and bins."""
        n, n_features = X.shape
        if n > _SUBSAMPLE:
            return self.fit(X, rng).transform_T(X)
        out = np.empty((n_features, n), dtype=np.uint8)
        self._fit(X, rng, out, n_threads)
        return out

    def _fit(self, X, rng, out, n_threads=1):
        n, n_features = X.shape
        if n > _SUBSAMPLE:
            rows = np.sort(rng.choice(n, _SUBSAMPLE, replace=False))
            X = X[rows]
        cat = np.zeros(n_features, dtype=bool) if self.categorical is None else self.categorical
        def fit_column(j):
            return self._fit_column(X[:, j], cat[j], j, out)

        if n_threads > 1 and n_features > 1:
            with ThreadPoolExecutor(min(n_threads, n_features)) as pool:
                columns = list(pool.map(fit_column, range(n_features)))
        else:
            columns = list(map(fit_column, range(n_features)))
        edges = [e for e, _, _ in columns]
        n_bins = np.array([k for _, k, _ in columns], dtype=np.intp)
        with_nan = [j for j, (_, _, nan) in enumerate(columns) if nan]
        self.edges_ = edges
        self.n_bins_non_missing_ = n_bins
        # the missing bin follows the largest feature's bins: histograms are only as wide as needed
        self.missing_bin_ = int(n_bins.max()) if n_features else self.max_bins
        self.is_categorical_ = cat
        if out is None:
            return
        for j in range(n_features):
            if cat[j]:
                out[j] = self._transform_col(np.ascontiguousarray(X[:, j]), j)
            elif j in with_nan and self.missing_bin_ != 255:
                row = out[j]
                row[row == 255] = self.missing_bin_

    def _fit_column(self, x, is_cat, j, out):
        """Edges and number of non-missing bins of column ``x`` (feature ``j``), and whether it holds NaN
        that was binned here; when ``out`` is given and the column is numeric, writes its bins into
        ``out[j]`` (NaN as 255, replaced by the missing bin once every feature's bins are known)."""
        n = x.shape[0]
        order = None  # argsort of the column when it is binned here (out given, numeric)
        with_nan = False
        if out is not None and not is_cat:
            full = np.ascontiguousarray(x)
            order = np.argsort(full)  # NaN sorts last
            s = full[order]
            n_valid = int(np.searchsorted(np.isnan(s), True)) if n and np.isnan(s[-1]) else n
            col = s[:n_valid]
            if n_valid < n:
                # 255 is never a non-missing bin (<= max_bins - 1 <= 254)
                out[j, order[n_valid:]] = 255
                with_nan = True
        else:
            col = x[~np.isnan(x)]
        if is_cat:
            if col.size and (col.min() < 0 or not np.all(col == np.floor(col))):
                raise DataError(f"categorical feature {j} must hold non-negative integer category codes")
            k = int(col.max()) + 1 if col.size else 1
            if k > self.max_bins:
                raise DataError(
                    f"categorical feature {j} has {k} categories; at most max_bins={self.max_bins} are supported"
                )
            # edges b + 0.5 so that numeric-style binning also works for codes
            return np.arange(k - 1, dtype=np.float64) + 0.5, k, with_nan
        if col.size == 0:
            return np.empty(0), 1, with_nan
        if order is None:
            col = np.sort(col)
        distinct = col[np.concatenate(([True], col[1:] != col[:-1]))]
        if distinct.size <= self.max_bins:
            mids = 0.5 * (distinct[:-1] + distinct[1:])
        else:
            mids = np.unique(_quantiles_sorted(col, self.max_bins))
        edges = np.ascontiguousarray(mids, dtype=np.float64)
        if order is not None:
            # sorted values: bin i holds edges[i-1] < x <= edges[i]; its run ends where x first exceeds edges[i]
            ends = np.searchsorted(col, edges, side="right")
            counts = np.diff(ends, prepend=0, append=col.size)
            out[j, order[: col.size]] = np.repeat(np.arange(len(counts), dtype=np.uint8), counts)
        return edges, mids.size + 1, with_nan

    def transform_T(self, X: np.ndarray) -> np.ndarray:
        """Binned data, feature-major: shape ``(n_features, n_samples)``, ``uint8``."""
        n, n_features = X.shape
        out = np.empty((n_features, n), dtype=np.uint8)
        for j in range(n_features):
            # searchsorted is ~30% faster on contiguous keys
            out[j] = self._transform_col(np.ascontiguousarray(X[:, j]), j)
        return out

    def _transform_col(self, col: np.ndarray, j: int) -> np.ndarray:
        if self.is_categorical_[j]:
            k = self.n_bins_non_missing_[j]
            with np.errstate(invalid="ignore"):
                ok = (col >= 0) & (col < k)
            b = np.full(len(col), self.missing_bin_, dtype=np.uint8)
            b[ok] = col[ok].astype(np.uint8)
            return b
        b = np.searchsorted(self.edges_[j], col, side="left")
        # NaN sorts past every edge; send it to the missing bin
        b[np.isnan(col)] = self.missing_bin_
        return b
