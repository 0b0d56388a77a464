"""Ridge regression (L2-penalised least squares) with optional basis expansion.

[Colombo §1.3.1, eq. 20-21]: w = (lambda I + Phi^T Phi)^{-1} Phi^T t; [Arias §2.7].
The intercept is not penalised (the notes penalise w_0 too; we follow scikit-learn).
Reference: sklearn.linear_model.Ridge (objective ||y - Xw||^2 + alpha ||w||^2).
"""

from __future__ import annotations

from ..params import Choice, Float
from ..registry import register
from ._least_squares import BasisLeastSquaresRegressor


@register
class RidgeRegression(BasisLeastSquaresRegressor):
    """min_w 1/2 sum_i s_i (y_i - b - phi(x_i)^T w)^2 + alpha/2 ||w||^2."""

    name = "ridge_regression"
    summary = "L2-penalised least squares (Cholesky, SVD, GD or SGD) with basis expansions."
    params = {
        "alpha": Float(1.0, ge=0.0, le=1e12, doc="L2 penalty strength (lambda in [Colombo eq. 20])."),
        "solver": Choice(
            "auto",
            choices=("auto", "cholesky", "svd", "gd", "sgd"),
            doc="auto/cholesky: Cholesky of the (primal or dual) normal equations; svd: thin SVD; "
            "gd: batch gradient descent; sgd: mini-batch SGD.",
        ),
        **BasisLeastSquaresRegressor.common_params,
    }

    def _alpha(self, p) -> float:
        return p["alpha"]
