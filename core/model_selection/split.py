"""Data splitting: hold-out, k-fold, stratified k-fold, leave-one-out, bootstrap.

[Passerini §4] (evaluation): hold-out and k-fold cross-validation; stratification
keeps each fold's class proportions close to the whole set's.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..random import check_random_state
from ..validation import DataError

__all__ = [
    "KFold",
    "StratifiedKFold",
    "LeaveOneOut",
    "train_test_split_indices",
    "train_val_test_split_indices",
    "bootstrap_indices",
]


class KFold:
    """Split ``n`` samples into ``n_splits`` consecutive (optionally shuffled) folds."""

    def __init__(self, n_splits: int = 5, *, shuffle: bool = False, random_state=None):
        if int(n_splits) < 2:
            raise DataError("n_splits must be at least 2")
        self.n_splits = int(n_splits)
        self.shuffle = shuffle
        self.random_state = random_state

    def split(self, X, y=None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        n = len(X)
        if self.n_splits > n:
            raise DataError(f"cannot make {self.n_splits} folds from {n} samples")
        idx = np.arange(n)
        if self.shuffle:
            check_random_state(self.random_state).shuffle(idx)
        sizes = np.full(self.n_splits, n // self.n_splits)
        sizes[: n % self.n_splits] += 1
        start = 0
        for size in sizes:
            test = idx[start : start + size]
            train = np.concatenate([idx[:start], idx[start + size :]])
            yield np.sort(train), np.sort(test)
            start += size


class StratifiedKFold:
    """k-fold where each fold keeps the class proportions of ``y``.

    Samples of each class are dealt round-robin over the folds (after an
    optional shuffle), so fold class counts differ by at most one.
    """

    def __init__(self, n_splits: int = 5, *, shuffle: bool = False, random_state=None):
        if int(n_splits) < 2:
            raise DataError("n_splits must be at least 2")
        self.n_splits = int(n_splits)
        self.shuffle = shuffle
        self.random_state = random_state

    def split(self, X, y) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        y = np.asarray(y)
        n = len(y)
        if self.n_splits > n:
            raise DataError(f"cannot make {self.n_splits} folds from {n} samples")
        _, codes = np.unique(y, return_inverse=True)
        rng = check_random_state(self.random_state) if self.shuffle else None
        fold_of = np.empty(n, dtype=np.intp)
        offset = 0
        for c in range(codes.max() + 1):
            members = np.flatnonzero(codes == c)
            if rng is not None:
                members = rng.permutation(members)
            # continue dealing where the previous class stopped, to balance fold sizes
            fold_of[members] = (offset + np.arange(len(members))) % self.n_splits
            offset += len(members)
        for k in range(self.n_splits):
            test = np.flatnonzero(fold_of == k)
            train = np.flatnonzero(fold_of != k)
            yield train, test


class LeaveOneOut:
    def split(self, X, y=None):
        n = len(X)
        all_idx = np.arange(n)
        for i in range(n):
            yield np.delete(all_idx, i), np.array([i])


def train_test_split_indices(n: int, test_size: float, *, stratify=None, random_state=None):
    """Indices ``(train, test)`` of a hold-out split; stratified when ``stratify`` is given."""
    if not 0.0 < test_size < 1.0:
        raise DataError("test_size must be in (0, 1)")
    rng = check_random_state(random_state)
    if stratify is None:
        perm = rng.permutation(n)
        n_test = max(1, int(round(test_size * n)))
        if n_test >= n:
            raise DataError(f"a hold-out of {test_size} leaves no training samples out of {n}")
        return np.sort(perm[n_test:]), np.sort(perm[:n_test])
    _, codes = np.unique(np.asarray(stratify), return_inverse=True)
    test = []
    for c in range(codes.max() + 1):
        members = rng.permutation(np.flatnonzero(codes == c))
        k = int(round(test_size * len(members)))
        if len(members) > 1:
            k = min(max(k, 1), len(members) - 1)
        else:
            k = 0
        test.append(members[:k])
    test = np.sort(np.concatenate(test))
    mask = np.ones(n, dtype=bool)
    mask[test] = False
    if not len(test) or mask.sum() == 0:
        raise DataError("the hold-out split left one side empty; use more data or another test_size")
    return np.flatnonzero(mask), test


def train_val_test_split_indices(
    n: int, val_size: float, test_size: float, *, stratify=None, random_state=None
):
    """Indices ``(train, val, test)`` of a three-way hold-out ([Passerini §4 (hold-out)]), stratified when asked.

    The test part is split off first (``test_size`` of ``n``), then the validation part
    (``val_size`` of ``n``) from the rest, each with ``train_test_split_indices``.
    """
    if not (0.0 < val_size < 1.0 and 0.0 < test_size < 1.0 and val_size + test_size < 1.0):
        raise DataError("val_size and test_size must be in (0, 1) with val_size + test_size < 1")
    rng = check_random_state(random_state)
    seeds = rng.integers(0, 2**31 - 1, size=2)
    rest, test = train_test_split_indices(n, test_size, stratify=stratify, random_state=int(seeds[0]))
    strat_rest = None if stratify is None else np.asarray(stratify)[rest]
    tr, va = train_test_split_indices(
        len(rest), val_size / (1.0 - test_size), stratify=strat_rest, random_state=int(seeds[1])
    )
    return rest[tr], rest[va], test


def bootstrap_indices(n: int, rng: np.random.Generator, size: int | None = None):
    """A bootstrap sample (with replacement) and its out-of-bag complement."""
    idx = rng.integers(0, n, size=size or n)
    oob = np.ones(n, dtype=bool)
    oob[idx] = False
    return idx, np.flatnonzero(oob)
