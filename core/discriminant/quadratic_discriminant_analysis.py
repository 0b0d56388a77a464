"""Quadratic discriminant analysis ([Arias §4.2.1])."""

from __future__ import annotations

import numpy as np

from ..context import NULL_CONTEXT
from ..params import Float
from ..registry import register
from ..validation import DataError, check_X_y
from ._base import (
    PRIORS,
    SHRINKAGE,
    DiscriminantClassifier,
    GaussianScorer,
    class_stats,
    covariance,
    resolve_priors,
)


@register
class QuadraticDiscriminantAnalysis(DiscriminantClassifier):
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

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y)
        classes, codes = self._encode_targets(y)
        K = len(classes)
        counts, means = class_stats(X, codes, K)
        if (counts < 2).any():
            raise DataError("every class needs at least 2 samples for a covariance matrix")
        priors = resolve_priors(p["priors"], counts)
        r = p["reg_param"]
        covs = []
        for k in range(K):
            S = (1.0 - r) * covariance(X[codes == k], p["shrinkage"])
            S.flat[:: X.shape[1] + 1] += r
            covs.append(S)
        scorer = GaussianScorer(means, covs)
        self.classes_ = classes
        self.priors_ = priors
        self.means_ = means
        self.covariance_ = covs
        self._scorer = scorer
        self.n_features_in_ = X.shape[1]
        return self

    def _decision(self, X):
        with np.errstate(divide="ignore"):
            return self._scorer.log_likelihood(X) + np.log(self.priors_)
