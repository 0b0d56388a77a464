"""Kernel functions k(x, x') for whole matrices at once (the base kernels of ``core.kernels``).

* linear      k = <x, x'>
* poly        k = (gamma <x, x'> + coef0)^degree      ([Passerini §12]: homogeneous coef0=0, inhomogeneous 1)
* rbf         k = exp(-gamma ||x - x'||^2)             (gamma = 1 / (2 sigma^2))
* sigmoid     k = tanh(gamma <x, x'> + coef0)          (not PSD in general)
* laplacian   k = exp(-gamma ||x - x'||_1)
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

__all__ = ["KERNELS", "PSD_KERNELS", "squared_euclidean", "resolve_gamma", "gram", "rbf_gram", "kernel_diag"]

KERNELS = ("linear", "poly", "rbf", "sigmoid", "laplacian")
PSD_KERNELS = ("linear", "poly", "rbf", "laplacian")  # poly: PSD for coef0 >= 0, gamma > 0


def squared_euclidean(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """||x - y||^2 for every pair, via the dot-product expansion, clipped at 0."""
    XX = np.einsum("ij,ij->i", X, X)[:, None]
    YY = np.einsum("ij,ij->i", Y, Y)[None, :]
    D = XX + YY - 2.0 * (X @ Y.T)
    np.maximum(D, 0.0, out=D)
    if X is Y:
        np.fill_diagonal(D, 0.0)
    return D


def resolve_gamma(gamma, X: np.ndarray) -> float:
    """``"scale"`` -> 1 / (n_features * Var(X)) as scikit-learn; ``"auto"`` (or None) -> 1 / n_features."""
    if gamma == "scale":
        var = float(X.var())
        return 1.0 / (X.shape[1] * var) if var > 0 else 1.0
    if gamma == "auto" or gamma is None:
        return 1.0 / X.shape[1]
    return float(gamma)


def rbf_gram(X, Y, gamma, block=512, yy=None):
    """exp(-gamma ||x - y||^2), computed in row blocks in place (cache-friendly, no big temporaries).

    ``yy`` = gamma * ||y||^2 may be given precomputed (prediction against fixed support vectors)."""
    same = X is Y
    xx = np.einsum("ij,ij->i", X, X) * gamma
    if yy is None:
        yy = xx if same else np.einsum("ij,ij->i", Y, Y) * gamma
    K = np.empty((X.shape[0], Y.shape[0]))
    for s in range(0, X.shape[0], block):
        e = min(s + block, X.shape[0])
        B = K[s:e]
        np.matmul(X[s:e], Y.T, out=B)
        B *= 2.0 * gamma
        B -= xx[s:e, None]
        B -= yy[None, :]
        np.minimum(B, 0.0, out=B)
        if same:
            B[np.arange(e - s), np.arange(s, e)] = 0.0
        np.exp(B, out=B)
    return K


def gram(X, Y, kernel, gamma, degree, coef0):
    """K[i, j] = k(X[i], Y[j]) for one base kernel by name."""
    if kernel == "linear":
        return X @ Y.T
    if kernel == "poly":
        K = X @ Y.T
        K *= gamma
        K += coef0
        return K**degree
    if kernel == "rbf":
        return rbf_gram(X, Y, gamma)
    if kernel == "sigmoid":
        K = X @ Y.T
        K *= gamma
        K += coef0
        return np.tanh(K, out=K)
    if kernel == "laplacian":
        return np.exp(-gamma * cdist(X, Y, "cityblock"))
    raise ValueError(f"unknown kernel {kernel!r}; expected one of {KERNELS}")


def kernel_diag(X, *, kernel="rbf", gamma=1.0, degree=3, coef0=0.0) -> np.ndarray:
    """k(x, x) for each row, without building the matrix."""
    if kernel in ("rbf", "laplacian"):
        return np.ones(X.shape[0])
    sq = np.einsum("ij,ij->i", X, X)
    if kernel == "linear":
        return sq
    if kernel == "poly":
        return (gamma * sq + coef0) ** degree
    if kernel == "sigmoid":
        return np.tanh(gamma * sq + coef0)
    raise ValueError(f"unknown kernel {kernel!r}")


