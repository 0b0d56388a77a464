"""Linear discriminant analysis ([Arias §4.2.1], [da Silva Neto §1.4.1] GDA with shared covariance)."""

from __future__ import annotations

import numpy as np
from scipy import linalg

from ..context import NULL_CONTEXT
from ..params import Choice, Float, Int, ParamError
from ..registry import register
from ..validation import DataError, check_X_y
from ._base import PRIORS, SHRINKAGE, DiscriminantClassifier, class_stats, covariance, resolve_priors


@register
class LinearDiscriminantAnalysis(DiscriminantClassifier):
    """Gaussian classes with one shared covariance: linear boundaries.

    ``g_k(x) = log pi_k + mu_k^T S^{-1} x - 1/2 mu_k^T S^{-1} mu_k`` ([Arias §4.2.1]), with
    maximum-likelihood means and the within-class covariance ([da Silva Neto §1.4.1]; the
    notes' pooled 1/m estimator).  Solvers as scikit-learn:

    * ``svd``: no covariance matrix is formed; SVD of the within-class-standardised centred data,
      then of the whitened class centres (handles rank deficiency; ``tol`` drops tiny singular values);
    * ``lsqr``: ``coef = lstsq(S_w, means^T)`` with ``S_w = sum_k pi_k S_k`` (shrinkage allowed);
    * ``eigen``: the generalised eigenproblem ``S_b v = lambda S_w v`` (shrinkage allowed).

    ``transform`` projects onto at most ``K - 1`` discriminant directions (Fisher), like
    scikit-learn (svd: ``(x - xbar) @ scalings``, eigen: ``x @ scalings``; not for lsqr).
    ``predict_proba`` is the softmax (log-sum-exp) of the decision function.
    """

    name = "linear_discriminant_analysis"
    summary = "Linear discriminant analysis (shared covariance; svd/lsqr/eigen, shrinkage, transform)"
    params = {
        "solver": Choice("svd", choices=("svd", "lsqr", "eigen"), doc="svd, lsqr or eigen."),
        "shrinkage": SHRINKAGE,
        "priors": PRIORS,
        "n_components": Int(None, ge=1, le=10_000, doc="Discriminant directions kept by transform (<= K - 1)."),
        "tol": Float(1e-4, ge=0.0, le=1e6, doc="Singular values below tol are dropped (svd solver)."),
    }

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, min_samples=2)
        classes, codes = self._encode_targets(y)
        n, d = X.shape
        K = len(classes)
        if n == K:
            raise DataError("the number of samples must be larger than the number of classes")
        counts, means = class_stats(X, codes, K)
        priors = resolve_priors(p["priors"], counts)
        max_comp = min(K - 1, d)
        if p["n_components"] is not None and p["n_components"] > max_comp:
            raise ParamError("n_components", f"must be <= min(n_features, n_classes - 1) = {max_comp}")
        n_comp = max_comp if p["n_components"] is None else p["n_components"]
        if p["solver"] == "svd" and p["shrinkage"] is not None:
            raise ParamError("shrinkage", "is not supported with solver='svd'; use lsqr or eigen")
        cov = sum(priors[k] * covariance(X[codes == k], p["shrinkage"]) for k in range(K))
        xbar = priors @ means
        evr = None
        if p["solver"] == "svd":
            coef, intercept, scalings, evr = self._svd(X, codes, means, priors, xbar, p["tol"])
        elif p["solver"] == "lsqr":
            coef = linalg.lstsq(cov, means.T)[0].T
            intercept = -0.5 * np.einsum("ij,ij->i", means, coef) + np.log(priors)
            scalings = None
        else:
            St = covariance(X, p["shrinkage"])
            try:
                evals, evecs = linalg.eigh(St - cov, cov)
            except linalg.LinAlgError:
                raise DataError(
                    "the within-class covariance is singular; use shrinkage or solver='svd'"
                ) from None
            order = np.argsort(evals)[::-1]
            evr = (evals / evals.sum())[order]
            scalings = evecs[:, order]
            coef = (means @ scalings) @ scalings.T
            intercept = -0.5 * np.einsum("ij,ij->i", means, coef) + np.log(priors)
        self.classes_ = classes
        self.priors_ = priors
        self.means_ = means
        self.covariance_ = cov
        self.xbar_ = xbar
        self.coef_ = coef
        self.intercept_ = intercept
        self.scalings_ = scalings
        self.explained_variance_ratio_ = None if evr is None else evr[:n_comp]
        self.solver_ = p["solver"]
        self.n_components_ = n_comp
        self.n_features_in_ = d
        return self

    @staticmethod
    def _svd(X, codes, means, priors, xbar, tol):
        n = X.shape[0]
        K = means.shape[0]
        Xc = X - means[codes]
        std = Xc.std(axis=0)
        std[std == 0] = 1.0
        _, S, Vt = linalg.svd(np.sqrt(1.0 / n) * (Xc / std), full_matrices=False)
        rank = int(np.sum(S > tol))
        scalings = (Vt[:rank] / std).T / S[:rank]
        fac = 1.0 if K == 1 else 1.0 / (K - 1)
        Xb = (np.sqrt(n * priors * fac)[:, None] * (means - xbar)) @ scalings
        _, S, Vt = linalg.svd(Xb, full_matrices=False)
        evr = S**2 / np.sum(S**2)
        rank = int(np.sum(S > tol * S[0]))
        scalings = scalings @ Vt.T[:, :rank]
        coef = (means - xbar) @ scalings
        intercept = -0.5 * np.sum(coef**2, axis=1) + np.log(priors)
        coef = coef @ scalings.T
        intercept = intercept - xbar @ coef.T
        return coef, intercept, scalings, evr

    def _decision(self, X):
        return X @ self.coef_.T + self.intercept_

    def transform(self, X):
        """Project onto the first ``n_components`` discriminant directions."""
        X = self._check(X)
        if self.solver_ == "lsqr":
            raise DataError("transform is not available with solver='lsqr'; use 'svd' or 'eigen'")
        if self.solver_ == "svd":
            return ((X - self.xbar_) @ self.scalings_)[:, : self.n_components_]
        return (X @ self.scalings_)[:, : self.n_components_]

    def fit_transform(self, X, y=None, **kw):
        return self.fit(X, y, **kw).transform(X)
