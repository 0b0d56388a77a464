"""Pairwise distances shared by the neighbour, clustering and kernel families.

Metrics ([Passerini §3], [Santini ch. 2]):

* ``euclidean``  ``sqrt(sum (x - y)^2)``, computed as ``|x|^2 - 2 x.y + |y|^2`` (one GEMM),
  clipped at 0 (rounding can make it slightly negative);
* ``manhattan``  ``sum |x - y|`` (Minkowski p = 1);
* ``chebyshev``  ``max |x - y|`` (Minkowski p = inf);
* ``minkowski``  ``(sum |x - y|^p)^(1/p)`` for ``p >= 1`` (p = 1, 2, inf use the cases above);
* ``cosine``     ``1 - x.y / (|x| |y|)``; a zero vector has similarity 0 with everything
  (distance 1), as scikit-learn's ``cosine_distances``; the result is clipped to [0, 2].

``pairwise_distances`` computes the full matrix; ``pairwise_distances_chunked`` yields
row blocks whose size keeps the working memory under ``working_memory`` megabytes,
so callers (k-nearest neighbours, silhouette, ...) never hold an n x m matrix at once.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from scipy.spatial.distance import cdist

__all__ = [
    "METRICS",
    "pairwise_distances",
    "pairwise_distances_chunked",
    "row_norms_squared",
    "chunk_rows",
    "canonical_metric",
]

METRICS = ("euclidean", "manhattan", "chebyshev", "minkowski", "cosine")

# default working memory per chunk of the distance matrix, in megabytes
WORKING_MEMORY_MB = 64


def canonical_metric(metric: str, p: float = 2.0) -> tuple[str, float]:
    """Reduce ``minkowski`` with p = 1, 2 or inf to its named special case.

    Returns ``(metric, p)`` where ``p`` is the Minkowski exponent of the metric
    (``nan`` for cosine).
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    if metric == "minkowski":
        p = float(p)
        if p < 1:
            raise ValueError(f"minkowski p must be >= 1, got {p}")
        if p == 1:
            return "manhattan", 1.0
        if p == 2:
            return "euclidean", 2.0
        if np.isinf(p):
            return "chebyshev", np.inf
        return "minkowski", p
    return metric, {"euclidean": 2.0, "manhattan": 1.0, "chebyshev": np.inf, "cosine": np.nan}[
        metric
    ]


def row_norms_squared(X: np.ndarray) -> np.ndarray:
    """``sum_j X[i, j]^2`` for each row (einsum: no temporary copy)."""
    return np.einsum("ij,ij->i", X, X)


def _normalize_rows(X: np.ndarray) -> np.ndarray:
    norms = np.sqrt(row_norms_squared(X))
    norms[norms == 0] = 1.0
    return X / norms[:, None]


def _block(
    A: np.ndarray,
    B: np.ndarray,
    metric: str,
    p: float,
    *,
    squared: bool = False,
    B_sq: np.ndarray | None = None,
    B_unit: np.ndarray | None = None,
) -> np.ndarray:
    if metric == "euclidean":
        if B_sq is None:
            B_sq = row_norms_squared(B)
        D = A @ B.T
        D *= -2.0
        D += row_norms_squared(A)[:, None]
        D += B_sq[None, :]
        np.maximum(D, 0.0, out=D)
        return D if squared else np.sqrt(D, out=D)
    if metric == "cosine":
        Bu = _normalize_rows(B) if B_unit is None else B_unit
        D = _normalize_rows(A) @ Bu.T
        np.subtract(1.0, D, out=D)
        np.clip(D, 0.0, 2.0, out=D)
        return D
    if metric == "manhattan":
        return cdist(A, B, "cityblock")
    if metric == "chebyshev":
        return cdist(A, B, "chebyshev")
    return cdist(A, B, "minkowski", p=p)


def pairwise_distances(
    X, Y=None, *, metric: str = "euclidean", p: float = 2.0, squared: bool = False
) -> np.ndarray:
    """The full ``(n_X, n_Y)`` distance matrix (``Y = X`` when omitted).

    ``squared`` returns squared euclidean distances (only for euclidean).
    With ``Y`` omitted the diagonal is set to exactly 0.
    """
    X = np.asarray(X, dtype=np.float64)
    same = Y is None
    Y = X if same else np.asarray(Y, dtype=np.float64)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[1]:
        raise ValueError(f"incompatible shapes {X.shape} and {Y.shape}")
    metric, p = canonical_metric(metric, p)
    if squared and metric != "euclidean":
        raise ValueError("squared=True is only defined for the euclidean metric")
    D = _block(X, Y, metric, p, squared=squared)
    if same:
        np.fill_diagonal(D, 0.0)
    return D


def chunk_rows(n_rows: int, n_cols: int, working_memory: float | None = None) -> int:
    """Rows per chunk so that a float64 block of ``n_cols`` columns fits in the budget."""
    mb = WORKING_MEMORY_MB if working_memory is None else working_memory
    return int(max(1, min(n_rows, (mb * 2**20) // (8 * max(n_cols, 1)))))


def pairwise_distances_chunked(
    X,
    Y=None,
    *,
    metric: str = "euclidean",
    p: float = 2.0,
    squared: bool = False,
    working_memory: float | None = None,
) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(start, D_block)`` with ``D_block = d(X[start:stop], Y)``.

    Each block holds at most ``working_memory`` megabytes (64 by default).
    """
    X = np.asarray(X, dtype=np.float64)
    same = Y is None
    Y = X if same else np.asarray(Y, dtype=np.float64)
    metric, p = canonical_metric(metric, p)
    if squared and metric != "euclidean":
        raise ValueError("squared=True is only defined for the euclidean metric")
    B_sq = row_norms_squared(Y) if metric == "euclidean" else None
    B_unit = _normalize_rows(Y) if metric == "cosine" else None
    step = chunk_rows(X.shape[0], Y.shape[0], working_memory)
    for start in range(0, X.shape[0], step):
        stop = min(start + step, X.shape[0])
        D = _block(X[start:stop], Y, metric, p, squared=squared, B_sq=B_sq, B_unit=B_unit)
        if same:
            r = np.arange(stop - start)
            D[r, start + r] = 0.0
        yield start, D
