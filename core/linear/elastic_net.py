"""Elastic net: combined L1 and L2 penalties, coordinate descent.

Objective as sklearn.linear_model.ElasticNet:
1/(2n) ||y - Xw||^2 + alpha l1_ratio ||w||_1 + alpha (1 - l1_ratio)/2 ||w||^2.
Not in the course notes; the solver is the lasso's (_coordinate_descent).
"""

from __future__ import annotations

from ..params import Float
from ..registry import register
from ._coordinate_descent import CoordinateDescentRegressor


@register
class ElasticNet(CoordinateDescentRegressor):
    """Lasso + ridge penalty mix; l1_ratio=1 is the lasso, l1_ratio=0 a ridge (by CD)."""

    name = "elastic_net"
    summary = "Least squares with a mixed L1/L2 penalty, by coordinate descent."
    params = {
        **CoordinateDescentRegressor.common_params,
        "l1_ratio": Float(0.5, ge=0.0, le=1.0, doc="Share of the L1 penalty in alpha."),
    }

    def _l1_ratio(self, p) -> float:
        return p["l1_ratio"]
