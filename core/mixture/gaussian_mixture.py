"""Gaussian mixture fitted by EM (registry name ``gaussian_mixture``).

Sources: [Passerini §14.3], [Arias §3.4], [Santini §11.2], [da Silva Neto §3.2].
p(x) = sum_k pi_k N(x; mu_k, Sigma_k).  E-step: responsibilities
gamma_ik = pi_k N(x_i; mu_k, Sigma_k) / sum_j pi_j N(x_i; mu_j, Sigma_j), computed in log
space with log-sum-exp.  M-step ([Arias §3.4.3], [da Silva Neto eq. 3.1]): pi_k = N_k / n,
mu_k = sum_i gamma_ik x_i / N_k, Sigma_k = sum_i gamma_ik (x_i - mu_k)(x_i - mu_k)^T / N_k + reg_covar I
(or its diag / spherical / tied restriction, [da Silva Neto §3.3]).  Densities use the Cholesky factor
of each PRECISION matrix (no explicit inverse): log N = -d/2 log 2pi + log det L - ||L^T (x - mu)||^2 / 2.
The lower bound (mean log-likelihood per sample) never decreases ([da Silva Neto §3.2.1], tested).
``n_init`` restarts: each initialisation draws its own seed from ``random_state`` (with
``init_params="kmeans"``, its own k-means++ + Lloyd run, as scikit-learn); the restart whose final
parameters have the highest mean log-likelihood is kept and that value is ``lower_bound_``
(= ``score(X)`` on the training data; scikit-learn reports the value one M-step earlier).

Anomaly flagging ([da Silva Neto §3.2], "flag x when p(x) is small"; the notes give no threshold):
``threshold_`` is the ``contamination`` quantile of the training log densities, or
``anomaly_threshold`` when given; ``is_anomaly(X)`` = score_samples(X) < threshold_.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack
from scipy.special import logsumexp

from ..base import Clusterer
from ..context import NULL_CONTEXT
from ..params import Choice, Float, Int, Seed
from ..random import check_random_state, spawn_seeds
from ..registry import register
from ..validation import DataError, check_array, check_is_fitted, check_predict_input

_LOG2PI = np.log(2.0 * np.pi)


def _m_step(X, resp, reg, cov_type):
    """Weights, means and covariances from responsibilities (plus reg_covar on the diagonal)."""
    n, d = X.shape
    nk = resp.sum(axis=0) + 10.0 * np.finfo(resp.dtype).eps
    means = (resp.T @ X) / nk[:, None]
    if cov_type == "full":
        k = means.shape[0]
        cov = np.empty((k, d, d))
        for j in range(k):
            diff = X - means[j]
            cov[j] = (resp[:, j] * diff.T) @ diff / nk[j]
            cov[j].flat[:: d + 1] += reg
    elif cov_type == "tied":
        cov = X.T @ X - (nk * means.T) @ means
        cov /= nk.sum()
        cov.flat[:: d + 1] += reg
    else:
        avg_x2 = (resp.T @ (X * X)) / nk[:, None]
        avg_m2 = means**2
        cov = avg_x2 - avg_m2 + reg  # E[x^2] - mu^2 (as scikit-learn)
        if cov_type == "spherical":
            cov = cov.mean(axis=1)
    return nk / n, means, cov


def _precision_cholesky(cov, cov_type):
    """Cholesky factors of the precision matrices: Sigma = C C^T, prec_chol = C^{-T}."""
    msg = ("fitting the mixture failed: a covariance matrix is singular; increase reg_covar "
           "or decrease n_components")
    if cov_type in ("full", "tied"):
        covs = cov[None] if cov_type == "tied" else cov
        out = np.empty_like(covs)
        for j, c in enumerate(covs):
            # LAPACK potrf + trtri directly: the inverse of the triangular factor, never of Sigma
            # (scipy's solve_triangular goes through threaded BLAS-3 and is ~1000x slower for d ~ 10)
            chol, info = lapack.dpotrf(c, lower=1, clean=1)
            if info != 0:
                raise DataError(msg)
            inv, info = lapack.dtrtri(chol, lower=1)
            if info != 0:
                raise DataError(msg)
            out[j] = inv.T
        return out[0] if cov_type == "tied" else out
    if np.any(cov <= 0.0):
        raise DataError(msg)
    return 1.0 / np.sqrt(cov)


def _log_gaussian(X, means, prec_chol, cov_type):
    """log N(x_i; mu_k, Sigma_k) for every i, k."""
    n, d = X.shape
    k = means.shape[0]
    if cov_type == "full":
        log_det = np.log(np.diagonal(prec_chol, axis1=1, axis2=2)).sum(axis=1)
        maha = np.empty((n, k))
        XT = X.T
        for j in range(k):
            # (d, n) layout: L^T X^T is several times faster in OpenBLAS than X L for small d
            y = prec_chol[j].T @ XT
            y -= (means[j] @ prec_chol[j])[:, None]
            y *= y
            maha[:, j] = y.sum(axis=0)
    elif cov_type == "tied":
        log_det = np.full(k, np.log(np.diag(prec_chol)).sum())
        Y = X @ prec_chol
        M = means @ prec_chol
        maha = (np.einsum("ij,ij->i", Y, Y)[:, None] - 2.0 * Y @ M.T + np.einsum("ij,ij->i", M, M)[None])
    elif cov_type == "diag":
        log_det = np.log(prec_chol).sum(axis=1)
        P = prec_chol**2
        maha = ((means**2) * P).sum(1)[None] - 2.0 * X @ (means * P).T + (X**2) @ P.T
    else:
        log_det = d * np.log(prec_chol)
        P = prec_chol**2
        maha = ((means**2).sum(1) * P)[None] - 2.0 * (X @ means.T) * P + np.outer((X**2).sum(1), P)
    return -0.5 * (d * _LOG2PI + maha) + log_det


def _n_parameters(k, d, cov_type):
    cov = {"full": k * d * (d + 1) / 2.0, "diag": k * d, "tied": d * (d + 1) / 2.0, "spherical": k}[cov_type]
    return int(cov + k * d + k - 1)


@register
class GaussianMixture(Clusterer):
    name = "gaussian_mixture"
    summary = "Gaussian mixture model fitted by EM (full/diag/spherical/tied covariances), with BIC/AIC"
    params = {
        "n_components": Int(1, ge=1, le=10_000),
        "covariance_type": Choice("full", choices=("full", "tied", "diag", "spherical")),
        "tol": Float(1e-3, ge=0.0, le=1e6, doc="Convergence threshold on the change of the mean log-likelihood."),
        "reg_covar": Float(1e-6, ge=0.0, le=1e12, doc="Added to the covariance diagonals."),
        "max_iter": Int(100, ge=1, le=1_000_000),
        "n_init": Int(1, ge=1, le=1_000, doc="EM restarts; the best lower bound is kept."),
        "init_params": Choice("kmeans", choices=("kmeans", "k-means++", "random", "random_from_data")),
        "contamination": Float(0.01, gt=0.0, lt=0.5,
                               doc="Fraction of training points below the anomaly density threshold."),
        "anomaly_threshold": Float(None, le=1e12, doc="Explicit log-density threshold (overrides contamination)."),
        "random_state": Seed(),
    }
    reports_progress = True

    # -- fitting --------------------------------------------------------------------
    def _initial_resp(self, X, k, rng, init):
        n = X.shape[0]
        if init == "kmeans":
            from ..cluster import _kmeans_engine as eng

            w = np.ones(n)
            _, labels, _, _ = eng.kmeans_fit(X, k, w, np.random.default_rng(spawn_seeds(rng, 1)[0]),
                                             init="k-means++", n_init=1)
            resp = np.zeros((n, k))
            resp[np.arange(n), labels] = 1.0
            return resp
        if init == "random":
            resp = rng.uniform(size=(n, k))
            return resp / resp.sum(axis=1, keepdims=True)
        if init == "k-means++":
            from ..cluster import _kmeans_engine as eng

            C = eng.kmeans_plusplus(X, k, np.ones(n), rng)
        else:
            C = X[rng.choice(n, size=k, replace=False)]
        labels = eng_assign(X, C)
        resp = np.zeros((n, k))
        resp[np.arange(n), labels] = 1.0
        return resp

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X = check_array(X, min_samples=2)
        n, d = X.shape
        k, ct = p["n_components"], p["covariance_type"]
        if n < k:
            raise DataError(f"X has {n} samples but n_components={k}; need at least one sample per component")
        rng = check_random_state(p["random_state"])
        best = None
        total = p["n_init"] * p["max_iter"]
        for r in range(p["n_init"]):
            resp = self._initial_resp(X, k, rng, p["init_params"])
            weights, means, cov = _m_step(X, resp, p["reg_covar"], ct)
            prec = _precision_cholesky(cov, ct)
            bounds = []
            lb = -np.inf
            converged = False
            n_iter = 0
            for it in range(1, p["max_iter"] + 1):
                n_iter = it
                prev = lb
                # E-step in log space
                wlp = _log_gaussian(X, means, prec, ct) + np.log(weights)
                lpn = logsumexp(wlp, axis=1)
                lb = float(lpn.mean())
                resp = np.exp(wlp - lpn[:, None])
                # M-step
                weights, means, cov = _m_step(X, resp, p["reg_covar"], ct)
                prec = _precision_cholesky(cov, ct)
                bounds.append(lb)
                ctx.step(r * p["max_iter"] + it, total, lower_bound=lb)
                if abs(lb - prev) < p["tol"]:
                    converged = True
                    break
            # inits are compared (and lower_bound_ reported) by the mean log-likelihood of their FINAL
            # parameters (one more E-step): the loop's lb belongs to the parameters before the last M-step
            lb = float(logsumexp(_log_gaussian(X, means, prec, ct) + np.log(weights), axis=1).mean())
            if best is None or lb > best["lb"]:
                best = {"lb": lb, "weights": weights, "means": means, "cov": cov, "prec": prec,
                        "n_iter": n_iter, "converged": converged, "bounds": bounds}
            ctx.step((r + 1) * p["max_iter"], total)
        self.weights_ = best["weights"]
        self.means_ = best["means"]
        self.covariances_ = best["cov"]
        self.precisions_cholesky_ = best["prec"]
        self.lower_bound_ = best["lb"]
        self.lower_bounds_ = np.asarray(best["bounds"])
        self.n_iter_ = best["n_iter"]
        self.converged_ = best["converged"]
        self.n_features_in_ = d
        self.labels_ = self.predict(X)
        scores = self.score_samples(X)
        thr = p["anomaly_threshold"]
        self.threshold_ = float(np.quantile(scores, p["contamination"])) if thr is None else float(thr)
        return self

    # -- prediction -----------------------------------------------------------------
    def _weighted_log_prob(self, X):
        X = check_predict_input(self, X, "means_")
        return _log_gaussian(X, self.means_, self.precisions_cholesky_, self.covariance_type) + np.log(
            self.weights_
        )

    @property
    def precisions_(self):
        pc = self.precisions_cholesky_
        if self.covariance_type == "full":
            return np.einsum("kij,klj->kil", pc, pc)
        if self.covariance_type == "tied":
            return pc @ pc.T
        return pc**2

    def predict(self, X):
        return np.argmax(self._weighted_log_prob(X), axis=1)

    def predict_proba(self, X):
        wlp = self._weighted_log_prob(X)
        return np.exp(wlp - logsumexp(wlp, axis=1, keepdims=True))

    def score_samples(self, X):
        """log p(x) for each row (log-sum-exp over the weighted component densities)."""
        return logsumexp(self._weighted_log_prob(X), axis=1)

    def score(self, X, y=None) -> float:
        return float(np.mean(self.score_samples(X)))

    @property
    def classes_(self):
        return np.arange(self.means_.shape[0])

    def _n_parameters(self):
        k, d = self.means_.shape
        return _n_parameters(k, d, self.covariance_type)

    def bic(self, X) -> float:
        """-2 log L + p log n."""
        X = check_array(X)
        return float(-2.0 * self.score(X) * X.shape[0] + self._n_parameters() * np.log(X.shape[0]))

    def aic(self, X) -> float:
        """-2 log L + 2 p."""
        X = check_array(X)
        return float(-2.0 * self.score(X) * X.shape[0] + 2.0 * self._n_parameters())

    def is_anomaly(self, X):
        """True where the log density is below ``threshold_`` ([da Silva Neto §3.2])."""
        return self.score_samples(X) < self.threshold_

    predict_anomaly = is_anomaly

    def sample(self, n_samples=1, random_state=None):
        """Draw ``n_samples`` points and their component labels."""
        check_is_fitted(self, ["means_"])
        rng = check_random_state(random_state)
        counts = rng.multinomial(n_samples, self.weights_)
        d = self.means_.shape[1]
        Xs, ys = [], []
        for j, c in enumerate(counts):
            if self.covariance_type == "full":
                cov = self.covariances_[j]
            elif self.covariance_type == "tied":
                cov = self.covariances_
            elif self.covariance_type == "diag":
                cov = np.diag(self.covariances_[j])
            else:
                cov = np.eye(d) * self.covariances_[j]
            Xs.append(rng.multivariate_normal(self.means_[j], cov, size=c))
            ys.append(np.full(c, j))
        return np.vstack(Xs), np.concatenate(ys)


def eng_assign(X, C):
    from ..cluster import _kmeans_engine as eng

    return eng.assign_euclidean(X, C, return_dist=False)[0]
