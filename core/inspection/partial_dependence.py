"""Partial dependence [Friedman 2001] and individual conditional expectation (ICE) curves
[Goldstein et al.].

For grid values ``g`` of a player (one column, or several columns set together, e.g. the one-hot
columns of a category): ``ice[i, k] = f(x_i with the player set to g_k)`` and
``average[k] = mean_i ice[i, k]`` -- the "brute" method, exact for every model.
"""

from __future__ import annotations

import numpy as np

__all__ = ["partial_dependence", "quantile_grid"]


def quantile_grid(values: np.ndarray, grid_resolution: int) -> np.ndarray:
    """Distinct quantiles of the non-missing ``values`` at ``grid_resolution`` evenly spaced levels in [0, 1]."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return np.zeros(0)
    return np.unique(np.quantile(v, np.linspace(0.0, 1.0, grid_resolution)))


def partial_dependence(f, X, columns, grid, *, batch_rows: int = 50_000):
    """``(average (n_grid, V), individual (n, n_grid, V))`` of ``f`` (rows -> outputs).

    ``columns``: the column index, or indices set together; ``grid``: (n_grid,) values, or
    (n_grid, len(columns)) rows of values.
    """
    X = np.asarray(X, dtype=float)
    cols = np.atleast_1d(np.asarray(columns, dtype=np.intp))
    grid = np.asarray(grid, dtype=float)
    if grid.ndim == 1:
        grid = grid[:, None]
    if grid.shape[1] != cols.size:
        raise ValueError(f"grid rows need {cols.size} values")
    n, K = X.shape[0], grid.shape[0]
    H = np.repeat(X[None, :, :], K, axis=0)  # (K, n, F)
    H[:, :, cols] = grid[:, None, :]
    H = H.reshape(K * n, -1)
    outs = [np.asarray(f(H[a : a + batch_rows]), dtype=float) for a in range(0, H.shape[0], batch_rows)]
    out = np.concatenate(outs)
    if out.ndim == 1:
        out = out[:, None]
    ice = out.reshape(K, n, -1).transpose(1, 0, 2)
    return ice.mean(axis=0), ice
