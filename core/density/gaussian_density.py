"""Multivariate Gaussian density: maximum likelihood or conjugate Bayesian ([Passerini §5.1.2, §5.2.1])."""

from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.special import gammaln

from ..base import Density
from ..context import NULL_CONTEXT
from ..params import Choice, Float, ListOf, ParamError
from ..registry import register
from ..validation import DataError, check_array, check_predict_input, check_sample_weight


def _chol(S: np.ndarray, what: str) -> np.ndarray:
    try:
        return linalg.cholesky(S, lower=True)
    except linalg.LinAlgError:
        raise DataError(f"the {what} is not positive definite; increase reg_covar") from None


def _maha_logdet(X: np.ndarray, mean: np.ndarray, L: np.ndarray):
    Z = linalg.solve_triangular(L, (X - mean).T, lower=True, check_finite=False)
    return np.einsum("ij,ij->j", Z, Z), 2.0 * np.sum(np.log(np.diag(L)))


@register
class GaussianDensity(Density):
    """A multivariate normal density ``N(mu, Sigma)`` fitted by MLE or by a conjugate prior.

    * ``method="mle"`` ([Passerini §5.1.2]): ``mu = mean(x)``, ``Sigma = (1/n) sum (x - mu)(x - mu)^T``
      (the notes' 1/n estimator) plus ``reg_covar`` on the diagonal.
    * ``method="bayesian", prior="normal"`` ([Passerini §5.2.1]): unknown mean with prior
      ``mu ~ N(mu0, s0^2 I)`` and known covariance ``Sigma`` (``noise_variance * I``, or the MLE
      covariance as a plug-in when not given).  Posterior ``N(mu_n, Sigma_n)`` with
      ``Sigma_n = (Sigma0^-1 + n Sigma^-1)^-1`` and ``mu_n = Sigma_n (Sigma0^-1 mu0 + n Sigma^-1 xbar)``;
      in one dimension ``mu_n = (n s0^2 xbar + s^2 mu0)/(n s0^2 + s^2)``,
      ``s_n^2 = s0^2 s^2/(n s0^2 + s^2)``.  Predictive: ``N(mu_n, Sigma + Sigma_n)``.  Computed through
      Cholesky solves of ``Sigma0 + Sigma/n`` (no explicit inverses).
    * ``method="bayesian", prior="normal_inverse_wishart"``: unknown mean and covariance with prior
      ``NIW(mu0, kappa0, Psi0 = psi0 I, nu0)``; ``kappa_n = kappa0 + n``, ``nu_n = nu0 + n``,
      ``mu_n = (kappa0 mu0 + n xbar)/kappa_n``,
      ``Psi_n = Psi0 + S + kappa0 n/kappa_n (xbar - mu0)(xbar - mu0)^T`` (S the scatter matrix);
      predictive multivariate Student t with ``nu_n - d + 1`` degrees of freedom, location ``mu_n``
      and shape ``Psi_n (kappa_n + 1)/(kappa_n (nu_n - d + 1))``.

    ``score_samples`` returns the log density (MLE plug-in or posterior predictive).
    With ``sample_weight``, n is the total weight.
    """

    name = "gaussian_density"
    summary = "Multivariate Gaussian density (MLE, or Bayesian Normal / Normal-inverse-Wishart prior)"
    params = {
        "method": Choice("mle", choices=("mle", "bayesian"), doc="mle or bayesian (posterior predictive)."),
        "prior": Choice(
            "normal_inverse_wishart",
            choices=("normal_inverse_wishart", "normal"),
            doc="Conjugate prior: Normal-inverse-Wishart (unknown mean and covariance) or Normal "
            "on the mean with known covariance.",
        ),
        "prior_mean": ListOf(Float(le=1e12), None, doc="mu0 (default: zeros)."),
        "prior_variance": Float(1.0, gt=0.0, le=1e12, doc="s0^2 of the Normal prior on the mean (prior='normal')."),
        "noise_variance": Float(
            None, gt=0.0, le=1e12, doc="Known variance s^2 (prior='normal'); null: the MLE covariance is used."
        ),
        "kappa0": Float(1.0, gt=0.0, le=1e12, doc="NIW prior strength on the mean."),
        "nu0": Float(None, gt=0.0, le=1e12, doc="NIW degrees of freedom (> d - 1; default d + 2)."),
        "psi0": Float(1.0, gt=0.0, le=1e12, doc="NIW scale matrix Psi0 = psi0 * I."),
        "reg_covar": Float(1e-6, ge=0.0, le=1e12, doc="Added to the diagonal of the MLE covariance."),
    }
    supports_sample_weight = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X = check_array(X)
        n_rows, d = X.shape
        w = check_sample_weight(sample_weight, n_rows)
        n = float(w.sum())
        xbar = (w @ X) / n
        Xc = X - xbar
        scatter = (Xc * w[:, None]).T @ Xc
        cov_mle = scatter / n
        cov_mle.flat[:: d + 1] += p["reg_covar"]
        if p["prior_mean"] is None:
            mu0 = np.zeros(d)
        else:
            mu0 = np.asarray(p["prior_mean"], dtype=np.float64)
            if mu0.shape != (d,):
                raise ParamError("prior_mean", f"has {mu0.size} entries but X has {d} features")
        post = {}
        if p["method"] == "mle":
            predictive, loc, shape, df = "normal", xbar, cov_mle, np.inf
        elif p["prior"] == "normal":
            Sigma = cov_mle if p["noise_variance"] is None else p["noise_variance"] * np.eye(d)
            S0 = p["prior_variance"] * np.eye(d)
            # Sigma_n = S0 (S0 + Sigma/n)^-1 Sigma/n ; mu_n = Sigma/n A^-1 mu0 + S0 A^-1 xbar
            A = S0 + Sigma / n
            cA = linalg.cho_factor(A, lower=True)
            Sigma_n = S0 @ linalg.cho_solve(cA, Sigma / n)
            Sigma_n = 0.5 * (Sigma_n + Sigma_n.T)
            mu_n = (Sigma / n) @ linalg.cho_solve(cA, mu0) + S0 @ linalg.cho_solve(cA, xbar)
            predictive, loc, shape, df = "normal", mu_n, Sigma + Sigma_n, np.inf
            post = {"posterior_mean_": mu_n, "posterior_covariance_": Sigma_n, "known_covariance_": Sigma}
        else:
            nu0 = d + 2.0 if p["nu0"] is None else p["nu0"]
            if nu0 <= d - 1:
                raise ParamError("nu0", f"must be > n_features - 1 = {d - 1}, got {nu0}")
            k0 = p["kappa0"]
            kn, nun = k0 + n, nu0 + n
            mu_n = (k0 * mu0 + n * xbar) / kn
            diff = xbar - mu0
            Psi_n = p["psi0"] * np.eye(d) + scatter + (k0 * n / kn) * np.outer(diff, diff)
            df = nun - d + 1.0
            predictive, loc, shape = "student_t", mu_n, Psi_n * (kn + 1.0) / (kn * df)
            post = {"kappa_n_": kn, "nu_n_": nun, "posterior_mean_": mu_n, "psi_n_": Psi_n}
        L = _chol(shape, "predictive covariance")
        self.mean_ = xbar
        self.covariance_mle_ = cov_mle
        self.predictive_ = predictive
        self.location_ = loc
        self.scale_matrix_ = shape
        self.df_ = float(df)
        self._L = L
        for k, v in post.items():
            setattr(self, k, v)
        self.n_samples_ = n
        self.n_features_in_ = d
        return self

    def score_samples(self, X):
        """Log density of each row under the fitted (MLE or posterior predictive) distribution."""
        X = check_predict_input(self, X, "location_")
        d = X.shape[1]
        maha, logdet = _maha_logdet(X, self.location_, self._L)
        if self.predictive_ == "normal":
            return -0.5 * (maha + logdet + d * np.log(2.0 * np.pi))
        v = self.df_
        return (
            gammaln((v + d) / 2.0)
            - gammaln(v / 2.0)
            - 0.5 * d * np.log(v * np.pi)
            - 0.5 * logdet
            - 0.5 * (v + d) * np.log1p(maha / v)
        )
