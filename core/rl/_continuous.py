"""Tables of continuous states: the ``x_*`` / ``u_*`` / ``x_next_*`` column groups (LQR, fitted value iteration)."""

from __future__ import annotations

import re

import numpy as np

from ..validation import DataError
from . import _mdp as M


def _suffix_key(name: str, prefix: str):
    rest = name[len(prefix):]
    return (0, int(rest), "") if rest.isdigit() else (1, 0, rest)


def group(cols, prefix: str, exclude: str | None = None) -> list[str]:
    """Column names starting with ``prefix`` (not with ``exclude``), in natural order (x_2 before x_10)."""
    names = [c for c in cols if c.startswith(prefix) and not (exclude and c.startswith(exclude))]
    return sorted(names, key=lambda c: _suffix_key(c, prefix))


def matrix(cols, names: list[str]) -> np.ndarray:
    if not names:
        return np.zeros((M.n_rows(cols), 0))
    return np.column_stack([M.float_column(cols, c) for c in names])


def state_matrix(X, prefix: str, next_prefix: str, n_expected: int | None, what: str = "the input") -> np.ndarray:
    """Rows of states: a 2-d numeric array, or a table whose ``prefix`` columns hold the state."""
    if isinstance(X, np.ndarray) and not X.dtype.names:
        A = np.asarray(X, dtype=np.float64)
        if A.ndim == 1:
            A = A.reshape(1, -1) if n_expected and A.size == n_expected else A.reshape(-1, 1)
        if A.ndim != 2:
            raise DataError(f"{what} must be a 2-d array of states")
        if not np.isfinite(A).all():
            raise DataError(f"{what} must hold finite numbers")
    else:
        cols = M.as_columns(X)
        names = group(cols, prefix, next_prefix)
        if not names:
            raise DataError(f"{what} has no state columns (named {prefix}0, {prefix}1, ...)")
        A = matrix(cols, names)
    if n_expected is not None and A.shape[1] != n_expected:
        raise DataError(f"{what} has {A.shape[1]} state values per row, the model has {n_expected}")
    return A


def check_prefix(prefix: str) -> None:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", prefix):
        raise DataError(f"column prefix {prefix!r} must be an identifier-like name")
