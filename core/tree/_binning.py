"""Feature binning shared by trees and forests.

Every feature is mapped once to integer codes so that split finding works on
weighted histograms (``np.bincount``) instead of sorting at every node:

* ``exact``: one bin per distinct training value, so the candidate thresholds
  are exactly the midpoints between successive distinct values ([Passerini §2.3.2];
  scikit-learn's ``best`` splitter);
* ``hist``: at most ``max_bins`` quantile bins per numeric feature (the fast
  route for large data, as in LightGBM / HistGradientBoosting); thresholds are
  midpoints between the largest training value of one bin and the smallest of
  the next non-empty bin, so training rows are routed identically by codes and
  by thresholds.

Categorical features keep their codes 0..k-1 (one bin per category).  NaN gets
the extra code ``missing_code`` (= the largest bin count), so it sorts last.
"""

from __future__ import annotations

import numpy as np

from ..validation import DataError

__all__ = ["Binned", "bin_features", "AUTO_HIST_MIN_SAMPLES"]

# splitter="auto" switches to the binned route above this many training rows
AUTO_HIST_MIN_SAMPLES = 5000
# exact bins of all the columns at once up to this many values (beyond, one np.unique per column is faster)
_SMALL_MATRIX = 1 << 14


class Binned:
    """Codes and per-bin value ranges of a training matrix."""

    def __init__(self, codes, n_bins, bin_lo, bin_hi, is_cat, missing_code, has_missing):
        self.codes = codes  # (n, f) int, NaN -> missing_code
        self.n_bins = n_bins  # (f,) bins (categories) per feature
        self.bin_lo = bin_lo  # (f, B) smallest training value of each bin
        self.bin_hi = bin_hi  # (f, B) largest training value of each bin
        self.is_cat = is_cat  # (f,) bool
        self.missing_code = missing_code
        self.has_missing = has_missing

    def take(self, rows) -> Binned:
        return Binned(self.codes[rows], self.n_bins, self.bin_lo, self.bin_hi, self.is_cat,
                      self.missing_code, self.has_missing)


def bin_features(X: np.ndarray, is_cat: np.ndarray, *, hist: bool, max_bins: int,
                 rng: np.random.Generator | None = None) -> Binned:
    n, f = X.shape
    if not hist and 0 < n * f <= _SMALL_MATRIX and not is_cat.any():
        binned = _bin_exact_numeric(X, is_cat)
        if binned is not None:
            return binned
    has_missing = False
    codes_list, lo_list, hi_list, miss_list = [], [], [], []
    n_bins = np.zeros(f, dtype=np.intp)
    for j in range(f):
        col = X[:, j]
        nan = np.isnan(col)
        miss_list.append(np.flatnonzero(nan) if nan.any() else None)
        has_missing |= miss_list[-1] is not None
        known = ~nan
        x = col[known]
        code = np.zeros(n, dtype=np.int64)  # per-feature temporary
        if is_cat[j]:
            if x.size and ((x < 0).any() or (x != np.floor(x)).any()):
                raise DataError(
                    f"categorical feature {j} must hold category codes 0..k-1 (non-negative integers)"
                )
            k = int(x.max()) + 1 if x.size else 1
            code[known] = x.astype(np.int64)
            lo = hi = np.arange(k, dtype=np.float64)
        else:
            uniq = np.unique(x)
            if uniq.size == 0:
                uniq = np.zeros(1)
            if hist and uniq.size > max_bins:
                # quantile edges of the data (a subsample of at most 200k rows)
                sample = x
                if x.size > 200_000 and rng is not None:
                    sample = x[rng.choice(x.size, 200_000, replace=False)]
                qs = np.linspace(0, 1, max_bins + 1)[1:-1]
                edges = np.unique(np.quantile(sample, qs, method="lower"))
                edges = edges[edges < uniq[-1]]
                code[known] = np.searchsorted(edges, x, side="left")
                k = edges.size + 1
                xs = np.sort(x)
                cs = np.searchsorted(edges, xs, side="left")
                first = np.searchsorted(cs, np.arange(k), side="left")
                last = np.searchsorted(cs, np.arange(k), side="right") - 1
                ok = last >= first
                lo = np.where(ok, xs[np.minimum(first, xs.size - 1)], np.nan)
                hi = np.where(ok, xs[np.maximum(last, 0)], np.nan)
            else:
                k = uniq.size
                code[known] = np.searchsorted(uniq, x)
                lo = hi = uniq
        n_bins[j] = k
        # compact per-feature codes (missing rows are overwritten with the global missing code below)
        codes_list.append(code.astype(np.uint8 if k <= 255 else np.uint16 if k < 65535 else np.int32))
        del code, known, nan
        lo_list.append(lo)
        hi_list.append(hi)
    B = int(n_bins.max()) if f else 1
    bin_lo = np.full((f, B), np.nan)
    bin_hi = np.full((f, B), np.nan)
    for j in range(f):
        bin_lo[j, : n_bins[j]] = lo_list[j]
        bin_hi[j, : n_bins[j]] = hi_list[j]
    # codes 0..B-1 and the missing code B
    dtype = np.uint8 if B <= 255 else (np.uint16 if B <= 65535 else np.int32)
    codes = np.empty((n, f), dtype=dtype)
    for j in range(f):
        codes[:, j] = codes_list[j]
        codes_list[j] = None
        if miss_list[j] is not None:
            codes[miss_list[j], j] = B
    return Binned(codes, n_bins, bin_lo, bin_hi, is_cat.copy(), B, has_missing)


def _bin_exact_numeric(X: np.ndarray, is_cat: np.ndarray) -> Binned | None:
    """``bin_features`` for a small matrix of numeric features without missing values, one bin per distinct
    value: every column at once (one sort of the transposed matrix) instead of one ``np.unique`` per column;
    the same codes and bin values.  None (the per-column path) when a value is NaN, or a column holds both
    0.0 and -0.0 (``np.unique`` keeps one of the two, depending on its sort)."""
    n, f = X.shape
    XT = np.ascontiguousarray(X.T)
    order = XT.argsort(axis=1)  # ties in any order: equal values share a bin
    rows = np.arange(f)[:, None]
    # flat indices and takes instead of 2-d fancy indexing (the same values, fewer index checks)
    xs = XT.reshape(-1).take(order + rows * n)  # np.take_along_axis(XT, order, axis=1)
    if np.isnan(xs[:, -1]).any():  # NaN sorts last
        return None
    zero = xs == 0
    if zero.any() and np.signbit(xs[zero]).any() and (~np.signbit(xs[zero])).any():
        return None
    new = np.empty((f, n), dtype=bool)
    new[:, 0] = True
    np.not_equal(xs[:, 1:], xs[:, :-1], out=new[:, 1:])
    rank = np.cumsum(new, axis=1)  # 1 + the bin of each sorted value
    rank -= 1
    n_bins = (rank[:, -1] + 1).astype(np.intp)
    B = int(n_bins.max())
    dtype = np.uint8 if B <= 255 else (np.uint16 if B <= 65535 else np.int32)
    codes = np.empty((n, f), dtype=dtype)  # codes[order[j, i], j] = rank[j, i]
    order *= f
    order += rows
    codes.reshape(-1)[order] = rank
    bin_lo = np.full((f, B), np.nan)
    rank += rows * B
    bin_lo.reshape(-1)[rank] = xs  # bin_lo[j, rank[j, i]] = xs[j, i]: equal values share a bin
    return Binned(codes, n_bins, bin_lo, bin_lo.copy(), is_cat.copy(), B, False)


def group_categories(X: np.ndarray, is_cat: np.ndarray, min_count: int, max_categories: int | None = None):
    """Group rare categories: ``(X', maps)`` where ``maps[j]`` recodes categorical feature ``j``.

    Categories seen fewer than ``min_count`` times, and beyond the ``max_categories - 1`` most frequent
    ones, share one "other" code (the last); categories never seen at fit fall into it too.  Features
    that need no grouping keep their codes (``maps`` holds no entry; ``X`` is copied only when some
    feature is recoded).  Ties in frequency keep the smaller code.
    """
    maps: dict[int, np.ndarray] = {}
    for j in np.flatnonzero(is_cat):
        col = X[:, j]
        known = col[~np.isnan(col)]
        if not known.size or known.min() < 0 or (known != np.floor(known)).any():
            continue  # bin_features reports bad codes
        counts = np.bincount(known.astype(np.intp))
        present = np.flatnonzero(counts)
        keep = present[counts[present] >= min_count]
        too_wide = max_categories is not None and counts.size > max_categories
        if too_wide and keep.size > max_categories - 1:
            keep = np.sort(keep[np.argsort(-counts[keep], kind="stable")[: max_categories - 1]])
        if keep.size == present.size and not too_wide:
            continue
        lookup = np.full(counts.size, float(keep.size))
        lookup[keep] = np.arange(keep.size, dtype=np.float64)
        maps[int(j)] = lookup
    return (apply_category_groups(X, maps) if maps else X), maps


def apply_category_groups(X: np.ndarray, maps: dict | None) -> np.ndarray:
    """``X`` with the fitted category groups of ``group_categories`` applied (unseen codes -> "other")."""
    if not maps:
        return X
    X = np.array(X, dtype=np.float64, copy=True)
    for j, lookup in maps.items():
        col = X[:, j]
        ok = ~np.isnan(col)
        codes = col[ok].astype(np.intp)
        other = float(lookup.max()) if lookup.size else 0.0
        inside = (codes >= 0) & (codes < lookup.size)
        col[ok] = np.where(inside, lookup[np.clip(codes, 0, max(lookup.size - 1, 0))], other)
        X[:, j] = col
    return X
