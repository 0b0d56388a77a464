"""Lasso: L1-penalised least squares by coordinate descent with soft-thresholding.

[Colombo §1.3.2] (objective only, no solver), [Arias §2.8].  Objective as
sklearn.linear_model.Lasso: 1/(2n) ||y - Xw||^2 + alpha ||w||_1 (see _coordinate_descent).
"""

from __future__ import annotations

from ..registry import register
from ._coordinate_descent import CoordinateDescentRegressor


@register
class LassoRegression(CoordinateDescentRegressor):
    """1/(2n) ||y - b - Xw||^2 + alpha ||w||_1, cyclic coordinate descent, duality-gap stopping."""

    name = "lasso_regression"
    summary = "L1-penalised least squares (sparse coefficients) by coordinate descent."
    params = dict(CoordinateDescentRegressor.common_params)
