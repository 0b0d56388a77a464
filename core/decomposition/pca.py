"""Principal component analysis (registry name ``pca``).

Sources: [Passerini App. A], [Colombo §3.3.4], [Santini ch. 10] (eig and SVD routes; lambda_i = s_i^2 / n for the
population covariance), [da Silva Neto §3.4].  Centre X, then either
* ``full``: thin SVD Xc = U S V^T, components = rows of V^T, variances s^2 / (n - 1);
* ``eigen``: eigendecomposition of the covariance C = Xc^T Xc / (n - 1) (scipy.linalg.eigh);
* ``randomized``: Halko et al. randomized range finder (power iterations), then SVD.
The variances use n - 1 (unbiased, as scikit-learn); the notes' 1/n differs only by a factor
and gives the same components and ratios.  Projection Z = (X - mean) V_k^T ([da Silva Neto §3.4] encoding),
reconstruction X ~ Z V_k + mean; with ``whiten`` Z is divided by sqrt(explained_variance_).
Sign convention: largest |entry| of each component positive (``_utils.flip_rows``).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.linalg import blas

from ..base import Transformer
from ..context import NULL_CONTEXT
from ..params import Bool, Choice, Float, Int, OneOf, Seed
from ..random import check_random_state
from ..registry import register
from ..validation import DataError, check_array, check_inverse_input, check_predict_input
from ._utils import flip_rows


def _randomized_svd(Xc, k, rng, n_oversamples=10, n_iter=7):
    n, d = Xc.shape
    Q = rng.normal(size=(d, k + n_oversamples))
    Q = Xc @ Q
    for _ in range(n_iter):
        Q, _ = linalg.lu(Q, permute_l=True)
        Q, _ = linalg.lu(Xc.T @ Q, permute_l=True)
        Q = Xc @ Q
    Q, _ = linalg.qr(Q, mode="economic")
    B = Q.T @ Xc
    Ub, s, Vt = linalg.svd(B, full_matrices=False)
    return s[:k], Vt[:k]


@register
class PCA(Transformer):
    name = "pca"
    summary = "Principal component analysis by SVD, covariance eigendecomposition or randomized SVD"
    params = {
        "n_components": OneOf(None, options=(Int(1, ge=1, le=10_000), Float(0.5, gt=0.0, lt=1.0)),
                              doc="int, explained-variance fraction in (0, 1), or null for all."),
        "whiten": Bool(False),
        "svd_solver": Choice("auto", choices=("auto", "full", "eigen", "randomized")),
        "random_state": Seed(),
    }

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X = check_array(X, min_samples=2)
        n, d = X.shape
        nc = p["n_components"]
        kmax = min(n, d)
        if isinstance(nc, int) and nc > kmax:
            raise DataError(f"n_components={nc} must be <= min(n_samples, n_features) = {kmax}")
        solver = p["svd_solver"]
        if solver == "auto":
            solver = "eigen" if (d <= 1000 and n >= 10 * d) else "full"
            if solver == "full" and isinstance(nc, int) and max(n, d) > 500 and nc < 0.8 * kmax:
                solver = "randomized"
        if solver == "randomized" and not isinstance(nc, int):
            solver = "full"
        mean = X.mean(axis=0)
        if solver == "eigen":
            # C = (X^T X - n mean mean^T) / (n - 1), without copying X; BLAS syrk on the
            # F-ordered view X^T fills the upper triangle only (~2x faster than X.T @ X)
            C = blas.dsyrk(1.0, X.T, trans=0, lower=0)
            C -= n * np.outer(mean, mean)
            C /= n - 1
            evals, evecs = linalg.eigh(C, lower=False)
            evals = np.maximum(evals[::-1], 0.0)
            V = evecs[:, ::-1].T.copy()
            var = evals
            total_var = float(np.trace(C))
            V = V[:kmax]
            var = var[:kmax]
        elif solver == "full":
            Xc = X - mean
            _, s, V = linalg.svd(Xc, full_matrices=False, check_finite=False)
            var = s**2 / (n - 1)
            total_var = float(var.sum())
        else:
            Xc = X - mean
            s, V = _randomized_svd(Xc, nc, check_random_state(p["random_state"]))
            var = s**2 / (n - 1)
            total_var = float(np.einsum("ij,ij->", Xc, Xc) / (n - 1))
        flip_rows(V)
        ratio = var / total_var if total_var > 0 else np.zeros_like(var)
        if nc is None:
            k = kmax
        elif isinstance(nc, float):
            k = int(np.searchsorted(np.cumsum(ratio), nc, side="right") + 1)
            k = min(k, len(var))
        else:
            k = nc
        if k < kmax:
            noise = (total_var - float(var[:k].sum())) / (kmax - k) if solver == "randomized" \
                else float(var[k:kmax].mean())
        else:
            noise = 0.0
        self.components_ = V[:k]
        self.explained_variance_ = var[:k]
        self.explained_variance_ratio_ = ratio[:k]
        self.singular_values_ = np.sqrt(var[:k] * (n - 1))
        self.mean_ = mean
        self.noise_variance_ = max(noise, 0.0)
        self.n_components_ = k
        self.n_samples_ = n
        self.n_features_in_ = d
        return self

    def transform(self, X):
        X = check_predict_input(self, X, "components_")
        Z = X @ self.components_.T
        Z -= self.mean_ @ self.components_.T  # (X - mean) V^T without a centred copy of X
        if self.whiten:
            Z /= np.sqrt(np.maximum(self.explained_variance_, np.finfo(float).tiny))
        return Z

    def inverse_transform(self, Z):
        Z = check_inverse_input(self, Z, "components_", lambda est: est.components_.shape[0])
        if self.whiten:
            Z = Z * np.sqrt(self.explained_variance_)
        return Z @ self.components_ + self.mean_

    def get_covariance(self):
        """Model covariance V^T diag(var - noise) V + noise I (probabilistic PCA)."""
        V = self.components_
        ev = np.maximum(self.explained_variance_ - self.noise_variance_, 0.0)
        cov = (V.T * ev) @ V
        cov.flat[:: cov.shape[0] + 1] += self.noise_variance_
        return cov
