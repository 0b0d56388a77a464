"""Shared pieces of the naive Bayes classifiers ([Passerini §8], [Arias §4.3], [da Silva Neto §1.4.3-1.4.5]).

Every naive Bayes model scores ``g_k(x) = log pi_k + sum_j log p(x_j | y = c_k)`` (the joint
log-likelihood, computed in log space) and normalises with log-sum-exp:
``P(c_k | x) = exp(g_k(x) - logsumexp_l g_l(x))``.
"""

from __future__ import annotations

import numpy as np

from .._posterior import LogPosteriorClassifier
from ..params import Bool, Float, ListOf, ParamError
from ..validation import check_predict_input


def one_hot(codes: np.ndarray, n_classes: int, weights: np.ndarray) -> np.ndarray:
    """``Y[i, k] = w_i [y_i = k]`` (n, K)."""
    Y = np.zeros((codes.shape[0], n_classes))
    Y[np.arange(codes.shape[0]), codes] = weights
    return Y


def check_priors(priors, n_classes: int, name: str) -> np.ndarray:
    """Validate user priors against the number of classes (ParamError naming ``name``)."""
    pr = np.asarray(priors, dtype=np.float64)
    if pr.shape != (n_classes,):
        raise ParamError(name, f"has {pr.size} entries but there are {n_classes} classes")
    if (pr < 0).any():
        raise ParamError(name, "must be non-negative")
    if not np.isclose(pr.sum(), 1.0):
        raise ParamError(name, f"must sum to 1, got {pr.sum():.6g}")
    return pr


def class_log_prior(class_count: np.ndarray, p: dict) -> np.ndarray:
    """log pi_k: user ``class_prior``, else fitted frequencies (``fit_prior``), else uniform."""
    K = class_count.shape[0]
    if p.get("class_prior") is not None:
        with np.errstate(divide="ignore"):
            return np.log(check_priors(p["class_prior"], K, "class_prior"))
    if p.get("fit_prior", True):
        with np.errstate(divide="ignore"):
            return np.log(class_count) - np.log(class_count.sum())
    return np.full(K, -np.log(K))


DISCRETE_PARAMS = {
    "alpha": Float(
        1.0,
        ge=0.0, le=1e12,
        doc="Additive (Laplace/Lidstone) smoothing pseudocount; 1 = Laplace. Values below "
        "1e-10 are raised to 1e-10 (scikit-learn's force_alpha=False rule).",
    ),
    "fit_prior": Bool(True, doc="Learn class priors from the data; else uniform."),
    "class_prior": ListOf(
        Float(ge=0.0, le=1e12), None, doc="Fixed class priors (in classes_ order); overrides fit_prior."
    ),
}


class NaiveBayes(LogPosteriorClassifier):
    """Base: subclasses implement ``_jll(X)`` (unnormalised log posterior, (n, K))."""

    allow_nan_predict = False

    def _check_predict_X(self, X) -> np.ndarray:
        X = check_predict_input(self, X, "classes_", allow_nan=self.native_missing)
        return X

    def predict_joint_log_proba(self, X) -> np.ndarray:
        """``log pi_k + log p(x | c_k)`` for every class (n, K)."""
        return self._jll(self._check_predict_X(X))

    def _log_posterior(self, X) -> np.ndarray:
        return self.predict_joint_log_proba(X)
