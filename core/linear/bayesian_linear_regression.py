"""Bayesian linear regression with a Gaussian prior, optional evidence maximisation.

[Colombo §1.4], [Arias §2.9].  Prior w ~ N(0, alpha^{-1} I) (alpha =
prior precision = 1/tau^2), likelihood t ~ N(Phi w, beta^{-1} I) (beta = noise
precision = 1/sigma^2).  Posterior N(m_N, S_N):

    S_N^{-1} = alpha I + beta Phi^T S Phi,      m_N = beta S_N Phi^T S t

([Colombo §1.4] with w_0 = 0, S_0 = tau^2 I; the posterior mean is ridge with
lambda = alpha / beta = sigma^2 / tau^2, [Colombo eq. 26]).  Predictive ([Colombo eq. 27-28]):
mean m_N^T phi(x), variance 1/beta + phi(x)^T S_N phi(x).

With ``fit_hyperparameters`` alpha and beta are re-estimated by MacKay's
evidence-maximisation fixed point ([Bishop §3.5.2]; not in the notes):

    gamma = sum_i beta l_i / (alpha + beta l_i)   (l_i eigenvalues of Phi^T S Phi)
    alpha = gamma / ||m_N||^2,   beta = (n - gamma) / ||t - Phi m_N||^2

with scikit-learn BayesianRidge's tiny Gamma(1e-6, 1e-6) hyperpriors added to
numerators and denominators (which keeps them finite).  Note the naming: our
``alpha``/``beta`` are sklearn's ``lambda_``/``alpha_``.  As in sklearn the
intercept is handled by centring and carries no posterior uncertainty.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from ..base import Regressor
from ..context import NULL_CONTEXT
from ..params import Bool, Float, Int, Seed
from ..random import check_random_state
from ..registry import register
from ..validation import check_predict_input, check_sample_weight, check_X_y
from ._common import center_data
from .basis import BASIS_PARAMS, make_basis

_EPS_PRIOR = 1e-6  # sklearn's alpha_1 = alpha_2 = lambda_1 = lambda_2 defaults


@register
class BayesianLinearRegression(Regressor):
    """Gaussian-prior linear regression with predictive mean and standard deviation."""

    name = "bayesian_linear_regression"
    summary = "Bayesian linear regression: Gaussian posterior, predictive std, evidence-maximised precisions."
    supports_sample_weight = True
    has_predict_std = True
    needs_scaling = True
    reports_progress = True

    params = {
        "alpha": Float(1.0, gt=0.0, le=1e12, doc="Prior precision of the weights (1/tau^2); initial value if fitted."),
        "beta": Float(
            None, gt=0.0, le=1e12, nullable=True,
            doc="Noise precision (1/sigma^2); null: 1/var(y). Initial value if fitted.",
        ),
        "fit_hyperparameters": Bool(
            True, doc="Re-estimate alpha and beta by evidence maximisation (MacKay updates)."
        ),
        "max_iter": Int(300, ge=1, le=1_000_000, doc="Maximum evidence-maximisation iterations."),
        "tol": Float(1e-3, gt=0.0, le=1e6, doc="Stop when the coefficients change by less than tol (L1)."),
        "fit_intercept": Bool(True, doc="Fit an intercept (by centring)."),
        **BASIS_PARAMS,
        "random_state": Seed(None),
    }

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, y_numeric=True, min_samples=2)
        sw = check_sample_weight(sample_weight, X.shape[0])
        rng = check_random_state(p["random_state"])
        basis = make_basis(p, X, rng)
        Phi = basis.transform(X)
        n_eff = float(sw.sum())  # weights count as repetitions (sklearn's sw_sum)
        Xc, yc, x_mean, y_mean = center_data(Phi, y, sw, p["fit_intercept"])
        sq = np.sqrt(sw)
        Xs, ys = Xc * sq[:, None], yc * sq
        G = Xs.T @ Xs
        Xty = Xs.T @ ys
        eig, V = linalg.eigh(G, check_finite=False)
        eig = np.maximum(eig, 0.0)
        Vty = V.T @ Xty
        alpha = p["alpha"]
        beta = p["beta"]
        if beta is None:
            s_norm = sw / sw.sum()
            var = float(s_norm @ (y - s_norm @ y) ** 2)  # weighted variance (sklearn)
            beta = 1.0 / (var + np.finfo(float).eps * 10)

        def posterior_mean(a, b):
            return V @ (b * Vty / (a + b * eig))

        coef = posterior_mean(alpha, beta)
        n_iter = 0
        if p["fit_hyperparameters"]:
            for n_iter in range(1, p["max_iter"] + 1):
                rss = float(np.sum((ys - Xs @ coef) ** 2))
                gamma = float(np.sum(beta * eig / (alpha + beta * eig)))
                alpha = (gamma + 2 * _EPS_PRIOR) / (float(coef @ coef) + 2 * _EPS_PRIOR)
                beta = (n_eff - gamma + 2 * _EPS_PRIOR) / (rss + 2 * _EPS_PRIOR)
                new = posterior_mean(alpha, beta)
                change = float(np.sum(np.abs(new - coef)))
                coef = new
                ctx.step(n_iter, p["max_iter"], alpha=alpha, beta=beta)
                if change < p["tol"]:
                    break
        ctx.step(1, 1)
        # S_N = (alpha I + beta G)^{-1} = V diag(1 / (alpha + beta eig)) V^T
        sigma = (V / (alpha + beta * eig)) @ V.T
        self.basis_ = basis
        self.coef_ = coef
        self.intercept_ = float(y_mean - x_mean @ coef)
        self.x_mean_ = x_mean
        self.alpha_ = float(alpha)
        self.beta_ = float(beta)
        self.sigma_ = sigma
        self.n_iter_ = n_iter
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X, return_std: bool = False):
        """Predictive mean; with ``return_std`` also sqrt(1/beta + phi_c^T S_N phi_c)."""
        X = check_predict_input(self, X, "coef_")
        Phi = self.basis_.transform(X)
        mean = Phi @ self.coef_ + self.intercept_
        if not return_std:
            return mean
        Pc = Phi - self.x_mean_
        var = 1.0 / self.beta_ + np.sum((Pc @ self.sigma_) * Pc, axis=1)
        return mean, np.sqrt(np.maximum(var, 0.0))
