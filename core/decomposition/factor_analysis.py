"""Factor analysis (registry name ``factor_analysis``).

Source: [da Silva Neto §3.3]: z ~ N(0, I_k), x = mu + Lambda z + eps, eps ~ N(0, Psi), Psi diagonal;
marginal x ~ N(mu, C), C = Lambda Lambda^T + Psi.  The notes give the E-step
(mu_{z|x} = Lambda^T C^{-1} (x - mu), Sigma_{z|x} = I - Lambda^T C^{-1} Lambda) and leave the M-step
as a generic argmax; the closed form (Ghahramani & Hinton 1996) is, with S the sample covariance
and G = (I + Lambda^T Psi^{-1} Lambda)^{-1} = Sigma_{z|x} (Woodbury, no d x d inverse):
  B = Lambda^T C^{-1} = G Lambda^T Psi^{-1};  Lambda <- S B^T (B S B^T + G)^{-1};
  Psi <- diag(S - Lambda B S).
Each EM step is one ``ctx.step`` and the log-likelihood
  l = -n/2 [d log 2pi + log det C + tr(C^{-1} S)]
never decreases (tested).  ``solver="svd"`` runs scikit-learn's SVD-based alternating
maximisation (Barber, BRML, alg. 21.1) instead.  ``components_`` = Lambda^T (k x d);
``transform`` = posterior mean E[z | x].  Sign convention: largest |entry| of each
component positive (the factors are otherwise defined up to a rotation).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from ..base import Transformer
from ..context import NULL_CONTEXT
from ..params import Choice, Float, Int
from ..registry import register
from ..validation import check_array, check_is_fitted, check_predict_input
from ._utils import flip_rows

_SMALL = 1e-12
_LOG2PI = np.log(2.0 * np.pi)


def _loglik(L, psi, S, n):
    """Total log-likelihood from the sample covariance S (matrix determinant lemma + Woodbury)."""
    d, k = L.shape
    Lp = L / psi[:, None]  # Psi^{-1} Lambda
    M = np.eye(k) + L.T @ Lp
    cM = linalg.cho_factor(M, lower=True)
    logdet = 2.0 * np.log(np.diag(cM[0])).sum() + np.log(psi).sum()
    # tr(C^{-1} S) = tr(Psi^{-1} S) - tr(M^{-1} Lp^T S Lp)
    SLp = S @ Lp
    tr = float((np.diag(S) / psi).sum() - np.trace(linalg.cho_solve(cM, Lp.T @ SLp)))
    return -0.5 * n * (d * _LOG2PI + logdet + tr)


@register
class FactorAnalysis(Transformer):
    name = "factor_analysis"
    summary = "Factor analysis (Gaussian latent factors, diagonal noise) fitted by EM or SVD iterations"
    params = {
        "n_components": Int(None, ge=1, le=10_000, doc="Number of factors (null: n_features)."),
        "tol": Float(1e-2, ge=0.0, le=1e6, doc="Stopping threshold on the increase of the log-likelihood."),
        "max_iter": Int(1000, ge=1, le=1_000_000),
        "solver": Choice("svd", choices=("em", "svd"),
                         doc="'svd': scikit-learn's SVD iterations (default, its results); 'em': EM "
                             "([da Silva Neto §3.3]), the same optimum but a different path when tol stops it early."),
        "noise_variance_init": Float(None, gt=0.0, le=1e12, doc="Initial value of every Psi_jj (null: 1)."),
    }
    reports_progress = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X = check_array(X, min_samples=2)
        n, d = X.shape
        k = d if p["n_components"] is None else min(p["n_components"], d)
        mean = X.mean(axis=0)
        Xc = X - mean
        var = Xc.var(axis=0)
        psi = np.full(d, p["noise_variance_init"] or 1.0)
        lls = []
        ll = -np.inf
        n_iter = 0
        if p["solver"] == "em":
            S = (Xc.T @ Xc) / n
            # start: principal axes of Psi^{-1/2} S Psi^{-1/2} (the SVD method's first step)
            sq = np.sqrt(psi)
            ev, V = linalg.eigh(S / np.outer(sq, sq))
            ev, V = ev[::-1][:k], V[:, ::-1][:, :k]
            L = sq[:, None] * V * np.sqrt(np.maximum(ev - 1.0, 1e-3))
            for it in range(1, p["max_iter"] + 1):
                n_iter = it
                Lp = L / psi[:, None]
                G = linalg.inv(np.eye(k) + L.T @ Lp)  # k x k posterior covariance Sigma_{z|x}
                B = G @ Lp.T  # E[z|x] = B (x - mu)
                SBt = S @ B.T
                Ezz = B @ SBt + G  # (1/n) sum E[z z^T | x]
                L = linalg.solve(Ezz, SBt.T, assume_a="pos").T
                psi = np.maximum(np.diag(S) - np.einsum("ij,ij->i", L, SBt), _SMALL)
                old, ll = ll, _loglik(L, psi, S, n)
                lls.append(ll)
                ctx.step(it, p["max_iter"], loglik=ll)
                if ll - old < p["tol"]:
                    break
            W = L.T.copy()
        else:
            nsqrt = np.sqrt(n)
            llconst = d * _LOG2PI + k
            W = np.zeros((k, d))
            for it in range(1, p["max_iter"] + 1):
                n_iter = it
                sqrt_psi = np.sqrt(psi) + _SMALL
                _, s, Vt = linalg.svd(Xc / (sqrt_psi * nsqrt), full_matrices=False, check_finite=False)
                s2 = s**2
                unexp = float(s2[k:].sum())
                s2, Vt = s2[:k], Vt[:k]
                W = np.sqrt(np.maximum(s2 - 1.0, 0.0))[:, None] * Vt * sqrt_psi
                new = -0.5 * n * (llconst + np.sum(np.log(s2)) + unexp + np.sum(np.log(psi)))
                old, ll = ll, new
                lls.append(ll)
                ctx.step(it, p["max_iter"], loglik=ll)
                if ll - old < p["tol"]:
                    break  # before the Psi update: (W, Psi) is the pair whose likelihood is ll (scikit-learn)
                psi = np.maximum(var - np.sum(W**2, axis=0), _SMALL)
        flip_rows(W)
        self.components_ = W
        self.noise_variance_ = psi
        self.mean_ = mean
        self.loglike_ = np.asarray(lls)
        self.n_iter_ = n_iter
        self.n_features_in_ = d
        self.n_components_ = k
        return self

    def _check(self, X):
        X = check_predict_input(self, X, "components_")
        return X

    def transform(self, X):
        """Posterior mean E[z | x] = (I + W Psi^{-1} W^T)^{-1} W Psi^{-1} (x - mu)."""
        X = self._check(X)
        W = self.components_
        Wpsi = W / self.noise_variance_
        cov_z = linalg.inv(np.eye(W.shape[0]) + Wpsi @ W.T)
        return (X - self.mean_) @ Wpsi.T @ cov_z

    def get_covariance(self):
        """C = W^T W + diag(Psi)."""
        check_is_fitted(self, ["components_"])
        C = self.components_.T @ self.components_
        C.flat[:: C.shape[0] + 1] += self.noise_variance_
        return C

    def get_precision(self):
        """C^{-1} by the Woodbury identity."""
        check_is_fitted(self, ["components_"])
        W, psi = self.components_, self.noise_variance_
        Wp = W / psi
        M = np.eye(W.shape[0]) + Wp @ W.T
        P = -Wp.T @ linalg.solve(M, Wp, assume_a="pos")
        P.flat[:: P.shape[0] + 1] += 1.0 / psi
        return P

    def score_samples(self, X):
        """log N(x; mu, C) for each row."""
        X = self._check(X)
        Xr = X - self.mean_
        P = self.get_precision()
        d = X.shape[1]
        logdet = np.linalg.slogdet(P)[1]
        return -0.5 * np.einsum("ij,ij->i", Xr @ P, Xr) - 0.5 * (d * _LOG2PI - logdet)

    def score(self, X, y=None) -> float:
        return float(np.mean(self.score_samples(X)))
