"""Engine shared by ``linear_regression`` and ``ridge_regression``.

Objective ([Colombo eq. 20] with per-sample weights s_i and an unpenalised intercept):

    L(w, b) = 1/2 sum_i s_i (y_i - b - phi(x_i)^T w)^2 + alpha/2 ||w||^2

(alpha = 0 is ordinary least squares, [Colombo eq. 7-10]; scikit-learn's Ridge
minimises twice this, same minimiser).  Solvers:

* ``normal_equation`` / ``cholesky``: Cholesky of (Phi^T S Phi + alpha I); falls back
  to the SVD solution when the system is singular;
* ``svd``: thin SVD / LAPACK gelsd (minimum-norm solution when rank deficient);
* ``gd``: batch gradient descent (Nesterov-accelerated, step 1/L) on the mean loss,
  with a diagonal (column-scale) preconditioner;
* ``sgd``: mini-batch SGD with averaging (see ``_optim``).
"""

from __future__ import annotations

import numpy as np

from ..base import Regressor
from ..context import NULL_CONTEXT
from ..params import Bool, Float, Int, Seed
from ..random import check_random_state
from ..validation import check_predict_input, check_sample_weight, check_X_y
from . import _common
from ._optim import accelerated_gradient, minibatch_sgd
from .basis import BASIS_PARAMS, make_basis

ITERATIVE_PARAMS = {
    "max_iter": Int(1000, ge=1, le=1_000_000, doc="Iterations (gd) or epochs (sgd)."),
    "tol": Float(1e-6, gt=0.0, le=1e6, doc="Stop gd/sgd when the largest coefficient change is below tol."),
    "learning_rate": Float(
        None, gt=0.0, le=1e6, nullable=True, doc="Initial step for gd/sgd (null: 1/L from the data)."
    ),
    "batch_size": Int(32, ge=1, le=10_000_000, doc="Mini-batch size for sgd."),
    "random_state": Seed(None),
}


def fit_squared_loss(Xc, yc, sw, alpha, solver, p, rng, ctx=NULL_CONTEXT):
    """Coefficients of the centred weighted (ridge) least-squares problem.  Returns ``(coef, n_iter)``."""
    if solver == "auto":
        solver = "cholesky"
    if solver in ("normal_equation", "cholesky", "svd", "lstsq"):
        sq = np.sqrt(sw)
        Xs, ys = Xc * sq[:, None], yc * sq
        if solver == "svd":
            if alpha > 0:
                return _common.solve_ridge_svd(Xs, ys, alpha), None
            return _common.solve_lstsq(Xs, ys)[0], None
        if alpha > 0:
            return _common.solve_ridge_cholesky(Xs, ys, alpha), None
        return _common.solve_normal_equation(Xs, ys), None
    # iterative: minimise (1/S) [ 1/2 sum s_i r_i^2 + alpha/2 ||w||^2 ] in scaled coordinates v = w * scale
    n, d = Xc.shape
    S = float(sw.sum())
    scale = np.sqrt((sw @ (Xc * Xc)) / S)
    scale[scale <= 1e-12] = 1.0
    Xs = Xc / scale
    pen = alpha / (S * scale**2)  # penalty curvature per scaled coordinate
    v0 = np.zeros(d)
    if solver == "gd":
        L = _common.lipschitz_sq(Xs, sw) / S + float(pen.max(initial=0.0))
        if p["learning_rate"] is not None:
            L = 1.0 / p["learning_rate"]

        def grad(v):
            r = Xs @ v - yc
            return (Xs.T @ (sw * r)) / S + pen * v

        v, n_iter = accelerated_gradient(grad, v0, L, max_iter=p["max_iter"], tol=p["tol"], ctx=ctx)
    else:  # sgd
        bs = min(p["batch_size"], n)
        row_l = (n / S) * sw * np.sum(Xs * Xs, axis=1)
        L_full = _common.lipschitz_sq(Xs, sw) / S
        L_max = float(row_l.max())
        if n > 1:
            L_b = n * (bs - 1) / (bs * (n - 1)) * L_full + (n - bs) / (bs * (n - 1)) * L_max
        else:
            L_b = L_max
        L_b += float(pen.max(initial=0.0))
        eta0 = p["learning_rate"] if p["learning_rate"] is not None else 1.0 / max(L_b, 1e-12)
        w_rows = (n / S) * sw

        def grad_batch(v, idx):
            Xb = Xs[idx]
            r = (Xb @ v - yc[idx]) * w_rows[idx]
            return (Xb.T @ r) / len(idx) + pen * v

        def objective(v):
            r = Xs @ v - yc
            return 0.5 * float(sw @ (r * r)) / S + 0.5 * float(pen @ (v * v))

        v, n_iter = minibatch_sgd(
            grad_batch, v0, n, eta0=eta0, rng=rng, batch_size=bs,
            max_iter=p["max_iter"], tol=p["tol"], loss=objective, ctx=ctx,
        )
    return v / scale, n_iter


class BasisLeastSquaresRegressor(Regressor):
    """Base of the squared-loss regressors with an optional basis expansion (not registered)."""

    supports_sample_weight = True
    needs_scaling = True
    reports_progress = True

    common_params = {
        "fit_intercept": Bool(True, doc="Fit an unpenalised intercept (by centring)."),
        **BASIS_PARAMS,
        **ITERATIVE_PARAMS,
    }

    def _alpha(self, p) -> float:
        return 0.0

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, y_numeric=True)
        sw = check_sample_weight(sample_weight, X.shape[0])
        rng = check_random_state(p["random_state"])
        basis = make_basis(p, X, rng)
        Phi = basis.transform(X)
        Xc, yc, x_mean, y_mean = _common.center_data(Phi, y, sw, p["fit_intercept"])
        coef, n_iter = fit_squared_loss(Xc, yc, sw, self._alpha(p), p["solver"], p, rng, ctx)
        ctx.step(1, 1)
        self.basis_ = basis
        self.coef_ = coef
        self.intercept_ = float(y_mean - x_mean @ coef)
        self.n_iter_ = n_iter
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        X = check_predict_input(self, X, "coef_")
        return self.basis_.transform(X) @ self.coef_ + self.intercept_
