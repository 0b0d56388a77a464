"""Regularised discriminant analysis (Friedman 1989; [Arias §4.2.2])."""

from __future__ import annotations

import numpy as np

from ..context import NULL_CONTEXT
from ..params import Float
from ..registry import register
from ..validation import DataError, check_X_y
from ._base import (
    PRIORS,
    DiscriminantClassifier,
    GaussianScorer,
    class_stats,
    empirical_covariance,
    resolve_priors,
)


@register
class RegularizedDiscriminantAnalysis(DiscriminantClassifier):
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

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y)
        classes, codes = self._encode_targets(y)
        K = len(classes)
        n, d = X.shape
        counts, means = class_stats(X, codes, K)
        if p["alpha"] > 0 and (counts < 2).any():
            raise DataError("every class needs at least 2 samples when alpha > 0")
        priors = resolve_priors(p["priors"], counts)
        class_covs = [empirical_covariance(X[codes == k]) for k in range(K)]
        pooled = sum((counts[k] / n) * class_covs[k] for k in range(K))
        a, g = p["alpha"], p["gamma"]
        covs = []
        for k in range(K):
            Sa = a * class_covs[k] + (1.0 - a) * pooled
            S = (1.0 - g) * Sa
            S.flat[:: d + 1] += g * np.trace(Sa) / d
            covs.append(S)
        scorer = GaussianScorer(means, covs)
        self.classes_ = classes
        self.priors_ = priors
        self.means_ = means
        self.covariance_ = covs
        self.pooled_covariance_ = pooled
        self._scorer = scorer
        self.n_features_in_ = X.shape[1]
        return self

    def _decision(self, X):
        with np.errstate(divide="ignore"):
            return self._scorer.log_likelihood(X) + np.log(self.priors_)
