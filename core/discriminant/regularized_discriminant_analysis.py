"""Regularised discriminant analysis (Friedman 1989; [Arias §4.2.2])."""

from __future__ import annotations

import numpy as np

from ..params import Float
from ..registry import register
from ..validation import DataError
from ._base import PRIORS, ClassGaussianDiscriminant, empirical_covariance


@register
class RegularizedDiscriminantAnalysis(ClassGaussianDiscriminant):
    """Gaussian classes whose covariances blend QDA and LDA, then shrink toward a scaled identity.

    [Arias §4.2.2]:
    ``S_k(alpha) = alpha S_k + (1 - alpha) S``  (alpha = 1: QDA, alpha = 0: LDA) and
    ``S_k(alpha, gamma) = (1 - gamma) S_k(alpha) + gamma (tr S_k(alpha) / d) I``.
    ``S_k`` is the maximum-likelihood class covariance and ``S = sum_k (n_k/n) S_k`` the pooled
    within-class covariance, so alpha = 1, gamma = 0 is ``quadratic_discriminant_analysis`` and
    alpha = 0 gives the posteriors of ``linear_discriminant_analysis``.  (Friedman's original
    blends scatter matrices weighted by sample counts; the notes' convex blend of covariances
    is used here.)
    """

    name = "regularized_discriminant_analysis"
    summary = "Regularised discriminant analysis (alpha: QDA-LDA blend, gamma: shrinkage to identity)"
    params = {
        "alpha": Float(0.5, ge=0.0, le=1.0, doc="1 = per-class covariances (QDA), 0 = pooled (LDA)."),
        "gamma": Float(0.0, ge=0.0, le=1.0, doc="Shrinkage toward (trace/d) * identity."),
        "priors": PRIORS,
    }

    def _check_counts(self, counts, p) -> None:
        if p["alpha"] > 0 and (counts < 2).any():
            raise DataError("every class needs at least 2 samples when alpha > 0")

    def _covariances(self, X, codes, counts, p):
        K = len(counts)
        n, d = X.shape
        class_covs = [empirical_covariance(X[codes == k]) for k in range(K)]
        pooled = sum((counts[k] / n) * class_covs[k] for k in range(K))
        a, g = p["alpha"], p["gamma"]
        covs = []
        for k in range(K):
            Sa = a * class_covs[k] + (1.0 - a) * pooled
            S = (1.0 - g) * Sa
            S.flat[:: d + 1] += g * np.trace(Sa) / d
            covs.append(S)
        return covs, {"pooled_covariance_": pooled}
