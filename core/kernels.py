"""Kernel functions shared by SVMs, kernel ridge, the kernel perceptron,
Gaussian processes and kernel PCA.

k(x, x') for rows of X and Y, computed for whole matrices at once:

* linear      k = <x, x'>
* poly        k = (gamma <x, x'> + coef0)^degree      (seed 000 §12: homogeneous coef0=0, inhomogeneous 1)
* rbf         k = exp(-gamma ||x - x'||^2)             (gamma = 1 / (2 sigma^2))
* sigmoid     k = tanh(gamma <x, x'> + coef0)          (not PSD in general)
* laplacian   k = exp(-gamma ||x - x'||_1)
* cosine normalisation k~(x, x') = k(x, x') / sqrt(k(x, x) k(x', x'))

Families that need sums, products or hyperparameter gradients build on these.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

__all__ = ["KERNELS", "kernel_matrix", "kernel_diag", "squared_euclidean", "resolve_gamma"]

KERNELS = ("linear", "poly", "rbf", "sigmoid", "laplacian")


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
    """``"scale"`` -> 1 / (n_features * Var(X)) as scikit-learn; ``"auto"`` -> 1 / n_features."""
    if gamma == "scale":
        var = float(X.var())
        return 1.0 / (X.shape[1] * var) if var > 0 else 1.0
    if gamma == "auto":
        return 1.0 / X.shape[1]
    return float(gamma)


def _base(X, Y, kernel, gamma, degree, coef0):
    if kernel == "linear":
        return X @ Y.T
    if kernel == "poly":
        return (gamma * (X @ Y.T) + coef0) ** degree
    if kernel == "rbf":
        K = squared_euclidean(X, Y)
        K *= -gamma
        return np.exp(K, out=K)
    if kernel == "sigmoid":
        return np.tanh(gamma * (X @ Y.T) + coef0)
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


def kernel_matrix(X, Y=None, *, kernel="rbf", gamma=1.0, degree=3, coef0=0.0, normalize=False):
    """Gram matrix K[i, j] = k(X[i], Y[j]); ``normalize`` applies cosine normalisation."""
    X = np.asarray(X, dtype=np.float64)
    Y = X if Y is None else np.asarray(Y, dtype=np.float64)
    K = _base(X, Y, kernel, gamma, degree, coef0)
    if normalize:
        dx = kernel_diag(X, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0)
        dy = dx if Y is X else kernel_diag(Y, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0)
        denom = np.sqrt(np.outer(dx, dy))
        K = np.divide(K, denom, out=np.zeros_like(K), where=denom > 0)
    return K
