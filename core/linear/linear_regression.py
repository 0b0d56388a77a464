"""Ordinary least-squares linear regression with optional basis expansion.

[Colombo §1.1-1.2] (eq. 7-10: w = (Phi^T Phi)^{-1} Phi^T t, solved here by Cholesky or
SVD, never by an explicit inverse), [Arias §2], [da Silva Neto §1.1] (batch GD and SGD,
LMS rule).  Reference: sklearn.linear_model.LinearRegression.
"""

from __future__ import annotations

from ..params import Choice
from ..registry import register
from ._least_squares import BasisLeastSquaresRegressor


@register
class LinearRegression(BasisLeastSquaresRegressor):
    """min_w 1/2 sum_i s_i (y_i - b - phi(x_i)^T w)^2 ([Colombo eq. 7])."""

    name = "linear_regression"
    summary = "Least-squares linear regression (normal equation, SVD, GD or SGD) with basis expansions."
    params = {
        "solver": Choice(
            "svd",
            choices=("svd", "normal_equation", "gd", "sgd"),
            doc="svd: LAPACK least squares (rank-deficient safe); normal_equation: Cholesky; "
            "gd: batch gradient descent; sgd: mini-batch stochastic gradient descent.",
        ),
        **BasisLeastSquaresRegressor.common_params,
    }
