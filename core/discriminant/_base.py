"""Shared numerics of the discriminant analysers ([Arias §4.2], [da Silva Neto §1.4.1-1.4.2]).

Covariance estimators follow scikit-learn: the empirical (1/n, maximum-likelihood) covariance,
optionally shrunk toward ``mu I`` (``mu = tr(S)/d``) by a fixed amount or by the Ledoit-Wolf
formula on standardised features (``shrinkage="auto"``).  Class scores use an eigendecomposition
(eigh) of each covariance, never an explicit inverse:
``log N(x; m, S) = -1/2 (||(x - m) V s^{-1/2}||^2 + sum log s + d log 2 pi)``.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from .._posterior import LogPosteriorClassifier
from ..context import NULL_CONTEXT
from ..params import Choice, Float, ListOf, OneOf, ParamError
from ..validation import DataError, check_predict_input, check_X_y

SHRINKAGE = OneOf(
    None,
    options=(Choice("auto", choices=("auto",)), Float(ge=0.0, le=1.0)),
    nullable=True,
    doc="Covariance shrinkage toward a scaled identity: null, 'auto' (Ledoit-Wolf) or a value in [0, 1].",
)
PRIORS = ListOf(Float(ge=0.0, le=1e12), None, doc="Class priors in classes_ order (default: class frequencies).")


def empirical_covariance(X: np.ndarray) -> np.ndarray:
    Xc = X - X.mean(axis=0)
    return (Xc.T @ Xc) / X.shape[0]


def shrunk_covariance(S: np.ndarray, shrinkage: float) -> np.ndarray:
    """``(1 - a) S + a (tr S / d) I``."""
    d = S.shape[0]
    mu = np.trace(S) / d
    out = (1.0 - shrinkage) * S
    out.flat[:: d + 1] += shrinkage * mu
    return out


def ledoit_wolf_shrinkage(X: np.ndarray) -> float:
    """Ledoit & Wolf (2004) optimal shrinkage intensity for centred-in-place data ``X``."""
    n, d = X.shape
    X = X - X.mean(axis=0)
    X2 = X**2
    emp_trace = X2.sum(axis=0) / n
    mu = emp_trace.sum() / d
    beta_ = float(np.sum(X2.T @ X2))
    delta_ = float(np.sum((X.T @ X) ** 2)) / n**2
    beta = (beta_ / n - delta_) / (d * n)
    delta = (delta_ - 2.0 * mu * emp_trace.sum() + d * mu**2) / d
    beta = min(beta, delta)
    return 0.0 if beta == 0 else beta / delta


def covariance(X: np.ndarray, shrinkage) -> np.ndarray:
    """Empirical covariance, shrunk by a float or by Ledoit-Wolf on standardised data ('auto')."""
    if shrinkage is None:
        return empirical_covariance(X)
    if shrinkage == "auto":
        scale = X.std(axis=0)
        scale[scale == 0] = 1.0
        Z = (X - X.mean(axis=0)) / scale
        S = shrunk_covariance(empirical_covariance(Z), ledoit_wolf_shrinkage(Z))
        return scale[:, None] * S * scale[None, :]
    return shrunk_covariance(empirical_covariance(X), float(shrinkage))


def resolve_priors(priors, counts: np.ndarray) -> np.ndarray:
    K = counts.shape[0]
    if priors is None:
        return counts / counts.sum()
    pr = np.asarray(priors, dtype=np.float64)
    if pr.shape != (K,):
        raise ParamError("priors", f"has {pr.size} entries but there are {K} classes")
    if pr.sum() <= 0:
        raise ParamError("priors", "must not be all zero")
    # scikit-learn renormalises priors that do not sum to 1 (with a warning)
    return pr / pr.sum()


class GaussianScorer:
    """Class-conditional Gaussians ``N(means_k, covs_k)`` scored through eigh factors."""

    def __init__(self, means: np.ndarray, covs: list[np.ndarray], rel_tol: float = 1e-12):
        self.means = means
        self.rotations = []
        self.inv_sqrt = []
        logdets = []
        for k, S in enumerate(covs):
            s, V = linalg.eigh(S)
            if not np.isfinite(s).all() or s.min() <= rel_tol * max(s.max(), 0.0) or s.max() <= 0:
                raise DataError(
                    f"the covariance matrix of class index {k} is not full rank (collinear or "
                    "constant features, or fewer samples than features); increase the "
                    "regularisation (reg_param / shrinkage / gamma)"
                )
            self.rotations.append(V)
            self.inv_sqrt.append(1.0 / np.sqrt(s))
            logdets.append(np.sum(np.log(s)))
        self.logdets = np.array(logdets)

    def log_likelihood(self, X: np.ndarray) -> np.ndarray:
        d = X.shape[1]
        out = np.empty((X.shape[0], len(self.rotations)))
        for k, (V, w) in enumerate(zip(self.rotations, self.inv_sqrt, strict=True)):
            Z = (X - self.means[k]) @ (V * w)
            out[:, k] = np.einsum("ij,ij->i", Z, Z)
        return -0.5 * (out + self.logdets + d * np.log(2.0 * np.pi))


class DiscriminantClassifier(LogPosteriorClassifier):
    """Base: subclasses implement ``_decision(X)`` = log prior + log likelihood (up to a constant)."""

    def _check(self, X) -> np.ndarray:
        X = check_predict_input(self, X, "classes_")
        return X

    def decision_function(self, X) -> np.ndarray:
        """Unnormalised log posterior of every class (n, K)."""
        return self._decision(self._check(X))

    def _log_posterior(self, X) -> np.ndarray:
        return self.decision_function(X)


class ClassGaussianDiscriminant(DiscriminantClassifier):
    """One Gaussian per class (QDA, RDA): ``fit`` written once; the twins differ by the hooks
    ``_check_counts`` (the class sizes their covariances need) and ``_covariances`` (the class covariances,
    with any further fitted attributes)."""

    def _check_counts(self, counts: np.ndarray, p: dict) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _covariances(self, X, codes, counts, p: dict) -> tuple[list[np.ndarray], dict]:  # pragma: no cover
        raise NotImplementedError

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y)
        classes, codes = self._encode_targets(y)
        counts, means = class_stats(X, codes, len(classes))
        self._check_counts(counts, p)
        priors = resolve_priors(p["priors"], counts)
        covs, extra = self._covariances(X, codes, counts, p)
        scorer = GaussianScorer(means, covs)
        self.classes_ = classes
        self.priors_ = priors
        self.means_ = means
        self.covariance_ = covs
        for name, value in extra.items():
            setattr(self, name, value)
        self._scorer = scorer
        self.n_features_in_ = X.shape[1]
        return self

    def _decision(self, X):
        with np.errstate(divide="ignore"):
            return self._scorer.log_likelihood(X) + np.log(self.priors_)


def class_stats(X: np.ndarray, codes: np.ndarray, K: int):
    counts = np.bincount(codes, minlength=K).astype(np.float64)
    means = np.empty((K, X.shape[1]))
    for k in range(K):
        means[k] = X[codes == k].mean(axis=0)
    return counts, means
