"""Poisson regression: GLM with log link, fitted by Newton / IRLS, L2 penalty.

[da Silva Neto §1.3.2-1.3.3] (exponential family, GLMs; the Poisson response exp(eta) is
implied in §1.3.2 but not written).  Objective as sklearn.linear_model.PoissonRegressor:

    F(w, b) = 1/(2S) sum_i s_i d(y_i, mu_i) + alpha/2 ||w||^2,   mu = exp(X w + b),
    d(y, mu) = 2 (y log(y/mu) - y + mu)

gradient 1/S X^T s (mu - y) + alpha w, Hessian 1/S X^T diag(s mu) X + alpha I
(intercept unpenalised).  Newton steps use a Cholesky solve and an Armijo
backtracking line search (IRLS is the same iteration written as weighted least
squares).  ``solver='lbfgs'`` uses scipy's L-BFGS-B on the same objective.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize
from scipy.special import xlogy

from ..base import Regressor
from ..context import NULL_CONTEXT
from ..params import Bool, Choice, Float, Int
from ..registry import register
from ..validation import DataError, check_predict_input, check_sample_weight, check_X_y
from ._optim import cholesky_direction, newton_minimize

_ETA_MAX = 700.0


def _deviance_terms(y, mu):
    return 2.0 * (xlogy(y, y) - xlogy(y, mu) - y + mu)


@register
class PoissonRegression(Regressor):
    """Log-link Poisson GLM for non-negative counts; predicts the mean exp(x^T w + b)."""

    name = "poisson_regression"
    summary = "Poisson GLM (log link) for counts, L2-penalised, fitted by Newton/IRLS."
    supports_sample_weight = True
    needs_scaling = True
    reports_progress = True

    params = {
        "alpha": Float(1.0, ge=0.0, le=1e12, doc="L2 penalty strength (sklearn's alpha)."),
        "fit_intercept": Bool(True, doc="Fit an unpenalised intercept."),
        "solver": Choice("newton", choices=("newton", "lbfgs"), doc="Newton/IRLS or L-BFGS-B."),
        "max_iter": Int(100, ge=1, le=1_000_000, doc="Maximum iterations."),
        "tol": Float(1e-4, gt=0.0, le=1e6, doc="Stop when the largest gradient entry is below tol."),
    }

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, y_numeric=True)
        if (y < 0).any():
            raise DataError("poisson_regression needs non-negative targets (counts)")
        sw = check_sample_weight(sample_weight, X.shape[0])
        S = float(sw.sum())
        if float(sw @ y) <= 0:
            raise DataError("poisson_regression needs at least one positive target")
        fit_intercept = p["fit_intercept"]
        Xa = np.hstack([X, np.ones((X.shape[0], 1))]) if fit_intercept else X
        q = Xa.shape[1]
        mask = np.ones(q)
        if fit_intercept:
            mask[-1] = 0.0
        alpha = p["alpha"]

        def loss_grad(theta):
            eta = np.minimum(Xa @ theta, _ETA_MAX)
            mu = np.exp(eta)
            mt = theta * mask
            f = float(sw @ _deviance_terms(y, mu)) / (2.0 * S) + 0.5 * alpha * float(mt @ mt)
            g = Xa.T @ (sw * (mu - y)) / S + alpha * mt
            return f, g

        theta = np.zeros(q)
        if fit_intercept:
            theta[-1] = np.log(float(sw @ y) / S)
        max_iter, tol = p["max_iter"], p["tol"]
        n_iter = 0
        if p["solver"] == "lbfgs":
            count = [0]

            def cb(*_):
                count[0] += 1
                ctx.step(count[0], max_iter)

            res = optimize.minimize(
                loss_grad, theta, jac=True, method="L-BFGS-B", callback=cb,
                options={"maxiter": max_iter, "maxls": 50, "gtol": tol, "ftol": 64 * np.finfo(float).eps},
            )
            theta, n_iter = res.x, int(res.nit)
        else:

            def direction(theta, g):
                mu = np.exp(np.minimum(Xa @ theta, _ETA_MAX))
                H = (Xa * (sw * mu)[:, None]).T @ Xa / S
                H[np.diag_indices_from(H)] += alpha * mask
                return cholesky_direction(H, g)

            theta, n_iter = newton_minimize(loss_grad, direction, theta, max_iter=max_iter, tol=tol, ctx=ctx)
        ctx.step(1, 1)
        self.coef_ = theta[:-1].copy() if fit_intercept else theta.copy()
        self.intercept_ = float(theta[-1]) if fit_intercept else 0.0
        self.n_iter_ = n_iter
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        X = check_predict_input(self, X, "coef_")
        return np.exp(np.minimum(X @ self.coef_ + self.intercept_, _ETA_MAX))
