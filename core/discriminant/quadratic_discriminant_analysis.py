"""Quadratic discriminant analysis ([Arias §4.2.1])."""

from __future__ import annotations

from ..params import Float
from ..registry import register
from ..validation import DataError
from ._base import PRIORS, SHRINKAGE, ClassGaussianDiscriminant, covariance


@register
class QuadraticDiscriminantAnalysis(ClassGaussianDiscriminant):
    """Gaussian classes, each with its own covariance: quadratic boundaries.

    ``g_k(x) = log pi_k - 1/2 log det S_k - d/2 log 2 pi - 1/2 (x - mu_k)^T S_k^{-1} (x - mu_k)``
    ([Arias §4.2.1]).  ``S_k`` is the maximum-likelihood (1/n_k) class covariance, as
    scikit-learn >= 1.8, optionally shrunk (``shrinkage``) and then regularised
    ``(1 - reg_param) S_k + reg_param I`` (scikit-learn applies reg_param with its svd solver and
    shrinkage with its eigen solver; here both can be combined).  Scored through eigh factors.
    """

    name = "quadratic_discriminant_analysis"
    summary = "Quadratic discriminant analysis (per-class covariance, reg_param)"
    params = {
        "priors": PRIORS,
        "reg_param": Float(0.0, ge=0.0, le=1.0, doc="Blend of each class covariance with the identity."),
        "shrinkage": SHRINKAGE,
    }

    def _check_counts(self, counts, p) -> None:
        if (counts < 2).any():
            raise DataError("every class needs at least 2 samples for a covariance matrix")

    def _covariances(self, X, codes, counts, p):
        r = p["reg_param"]
        covs = []
        for k in range(len(counts)):
            S = (1.0 - r) * covariance(X[codes == k], p["shrinkage"])
            S.flat[:: X.shape[1] + 1] += r
            covs.append(S)
        return covs, {}
