"""Kernel PCA (registry name ``kernel_pca``).

Source: [Santini §10.6] (only the idea: PCA after the kernel trick).  Standard algorithm
(Schoelkopf et al. 1998): K = k(X, X); centre in feature space
Kc = K - 1_n K - K 1_n + 1_n K 1_n (1_n = matrix of 1/n); eigendecomposition Kc = A diag(lambda) A^T
(scipy.linalg.eigh, top components; zero eigenvalues removed); training projection
Z = A sqrt(lambda); a new point x: kc(x) = k(x, X) centred with the training means,
z = kc(x) A / sqrt(lambda).  ``fit_inverse_transform`` learns the pre-image map by kernel
ridge regression from Z to X (``alpha``).  Kernels come from ``core.kernels``.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.sparse.linalg import eigsh

from ..base import Transformer
from ..context import NULL_CONTEXT
from ..kernels import kernel_matrix
from ..memory import kernel_fit
from ..params import Bool, Choice, Float, Int, Seed
from ..random import check_random_state
from ..registry import register
from ..validation import DataError, check_array, check_inverse_input, check_is_fitted, check_predict_input
from ._utils import flip_columns


@register
class KernelPCA(Transformer):
    name = "kernel_pca"
    fit_memory = kernel_fit(4)  # peak memory model (core/memory.py)
    summary = "Kernel PCA: PCA of the feature-space-centred kernel matrix, with projection of new points"
    params = {
        "n_components": Int(None, ge=1, le=10_000, doc="Number of components (null: all non-zero)."),
        "kernel": Choice("linear", choices=("linear", "poly", "rbf", "sigmoid", "laplacian", "cosine")),
        "gamma": Float(None, gt=0.0, le=1e12, doc="Kernel coefficient (null: 1 / n_features)."),
        "degree": Int(3, ge=1, le=20),
        "coef0": Float(1.0, le=1e12),
        "alpha": Float(1.0, gt=0.0, le=1e12, doc="Ridge penalty of the learned inverse transform."),
        "fit_inverse_transform": Bool(False),
        "eigen_solver": Choice("dense", choices=("dense", "arpack")),
        "remove_zero_eig": Bool(False),
        "random_state": Seed(),
    }

    def _kernel(self, X, Y=None, *, gamma=None):
        g = self._gamma_ if gamma is None else gamma
        if self.kernel == "cosine":
            return kernel_matrix(X, Y, kernel="linear", normalize=True)
        return kernel_matrix(X, Y, kernel=self.kernel, gamma=g, degree=self.degree, coef0=self.coef0)

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X = check_array(X, min_samples=2)
        n, d = X.shape
        gamma = p["gamma"] if p["gamma"] is not None else 1.0 / d
        self._gamma_ = gamma
        K = self._kernel(X, gamma=gamma)
        row_means = K.mean(axis=0)
        all_mean = float(row_means.mean())
        K -= row_means[None, :]
        K -= row_means[:, None]
        K += all_mean
        k = n if p["n_components"] is None else min(p["n_components"], n)
        if p["eigen_solver"] == "arpack" and k < n - 1:
            rng = check_random_state(p["random_state"])
            v0 = rng.uniform(-1, 1, size=n)
            lam, A = eigsh(K, k=k, which="LA", v0=v0)
        else:
            lam, A = linalg.eigh(K, subset_by_index=(n - k, n - 1))
        order = np.argsort(-lam, kind="stable")
        lam, A = lam[order], np.ascontiguousarray(A[:, order])
        lam = np.where(lam < 0, 0.0, lam)
        flip_columns(A)
        if p["remove_zero_eig"] or p["n_components"] is None:
            tol = max(lam.max(initial=0.0), 0.0) * n * np.finfo(float).eps
            keep = lam > tol
            lam, A = lam[keep], A[:, keep]
        if lam.size == 0:
            raise DataError("the centred kernel matrix has no positive eigenvalue; nothing to project")
        if p["fit_inverse_transform"]:
            Z = A * np.sqrt(lam)
            Kz = self._kernel(Z, gamma=gamma)
            Kz.flat[:: n + 1] += p["alpha"]
            self.dual_coef_ = linalg.solve(Kz, X, assume_a="pos")
            self.X_transformed_fit_ = Z
        self.eigenvalues_ = lam
        self.eigenvectors_ = A
        self._row_means = row_means
        self._all_mean = all_mean
        self.X_fit_ = X.copy()
        self.n_features_in_ = d
        self.n_components_ = lam.size
        self.gamma_ = gamma
        return self

    def transform(self, X):
        X = check_predict_input(self, X, "eigenvectors_")
        K = self._kernel(X, self.X_fit_, gamma=self.gamma_)
        kmean = K.mean(axis=1)
        K -= self._row_means[None, :]
        K -= kmean[:, None]
        K += self._all_mean
        return K @ (self.eigenvectors_ / np.sqrt(self.eigenvalues_))

    def inverse_transform(self, Z):
        check_is_fitted(self, ["eigenvectors_"])
        if not hasattr(self, "dual_coef_"):
            raise DataError("inverse_transform needs fit_inverse_transform=true at fit time")
        Z = check_inverse_input(self, Z, "eigenvectors_", lambda est: est.X_transformed_fit_.shape[1])
        return self._kernel(Z, self.X_transformed_fit_, gamma=self.gamma_) @ self.dual_coef_
