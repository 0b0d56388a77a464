"""Label handling shared by the classification and ranking metrics: checks, label encoding, safe ratios."""

from __future__ import annotations

import math

import numpy as np

from ..validation import DataError, column_or_1d

__all__ = [
    "as_1d",
    "check_lengths",
    "is_str_kind",
    "sorted_unique",
    "unique_labels",
    "label_codes",
    "metric_weights",
    "zero_division_value",
    "safe_divide",
    "nanaverage",
]


def as_1d(y, name: str) -> np.ndarray:
    arr = column_or_1d(y, name=name)
    if arr.shape[0] == 0:
        raise DataError(f"{name} is empty; at least one sample is required")
    return arr


def check_lengths(*arrays) -> None:
    n = {len(a) for a in arrays if a is not None}
    if len(n) > 1:
        raise DataError(f"inconsistent numbers of samples: {sorted(n)}")


def is_str_kind(a: np.ndarray) -> bool:
    if a.dtype.kind in "US":
        return True
    if a.dtype == object and len(a):
        return isinstance(a.flat[0], str)
    return False


def sorted_unique(values: np.ndarray) -> np.ndarray:
    try:
        return np.unique(values)
    except TypeError:
        uniq = list(dict.fromkeys(values.tolist()))
        uniq.sort(key=lambda v: (type(v).__name__, str(v)))
        out = np.empty(len(uniq), dtype=object)
        out[:] = uniq
        return out


def unique_labels(*ys) -> np.ndarray:
    """Sorted union of the labels in ``ys`` (like ``sklearn.utils.multiclass.unique_labels``).

    Raises DataError for a mix of string and numeric labels.
    """
    arrays = [np.asarray(y).ravel() for y in ys if y is not None]
    kinds = {is_str_kind(a) for a in arrays if len(a)}
    if len(kinds) > 1:
        raise DataError("mix of string and numeric labels; labels must be all strings or all numbers")
    if len(arrays) == 1:
        return sorted_unique(arrays[0])
    if any(a.dtype == object for a in arrays):
        arrays = [a.astype(object) for a in arrays]
    return sorted_unique(np.concatenate(arrays))


def label_codes(y: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Position of each ``y`` in ``labels`` (any order); -1 where absent."""
    k = len(labels)
    if k == 0:
        return np.full(len(y), -1, dtype=np.intp)
    try:
        sorter = np.argsort(labels, kind="stable")
        sorted_labels = labels[sorter]
        pos = np.searchsorted(sorted_labels, y)
        pos_c = np.minimum(pos, k - 1)
        found = sorted_labels[pos_c] == y
        found = np.asarray(found, dtype=bool)
        if found.shape != y.shape:
            raise TypeError
        return np.where(found, sorter[pos_c], -1).astype(np.intp)
    except TypeError:
        index = {v: i for i, v in enumerate(labels.tolist())}
        return np.fromiter((index.get(v, -1) for v in y.tolist()), dtype=np.intp, count=len(y))


def metric_weights(sample_weight, n: int) -> np.ndarray | None:
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
    if w.shape[0] != n:
        raise DataError(f"sample_weight has {w.shape[0]} entries, expected {n}")
    return w


def zero_division_value(zero_division) -> float:
    if isinstance(zero_division, str):
        if zero_division == "warn":
            return 0.0
        if zero_division == "nan":
            return float("nan")
        raise DataError(f"zero_division must be 'warn', 0.0, 1.0 or nan, got {zero_division!r}")
    if zero_division is None:
        return 0.0
    value = float(zero_division)
    if not (value in (0.0, 1.0) or math.isnan(value)):
        raise DataError(f"zero_division must be 'warn', 0.0, 1.0 or nan, got {zero_division!r}")
    return value


def safe_divide(num: np.ndarray, den: np.ndarray, zero_division) -> np.ndarray:
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    mask = den == 0
    safe = np.where(mask, 1.0, den)
    out = num / safe
    if mask.any():
        out[mask] = zero_division_value(zero_division)
    return out


def nanaverage(a: np.ndarray, weights=None) -> float:
    if a.shape[0] == 0:
        return float("nan")
    mask = np.isnan(a)
    if mask.all():
        return float("nan")
    if weights is None:
        return float(np.mean(a[~mask]))
    a, weights = a[~mask], np.asarray(weights, dtype=np.float64)[~mask]
    if weights.sum() == 0:
        return float(np.mean(a))
    return float(np.average(a, weights=weights))
