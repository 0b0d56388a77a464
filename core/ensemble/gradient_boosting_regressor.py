"""Histogram-based gradient boosting regressor (squared or absolute error)."""

from __future__ import annotations

from ..base import Regressor
from ..context import NULL_CONTEXT
from ..params import Choice
from ..registry import register
from ..validation import check_X_y
from ._hist_gradient_boosting.gradient_boosting import COMMON_PARAMS, HistGradientBoostingMixin
from ._hist_gradient_boosting.loss import AbsoluteError, SquaredError

__all__ = ["GradientBoostingRegressor"]


@register
class GradientBoostingRegressor(HistGradientBoostingMixin, Regressor):
    """Histogram gradient boosting for regression (like scikit-learn's HistGradientBoostingRegressor).

    ``squared_error``: ``g = F - y``, ``h = 1``, leaf ``-learning_rate * G / (H + l2)``
    (the mean residual when ``l2 = 0``).  ``absolute_error``: trees fit ``sign(F - y)``
    and each leaf is then set to ``learning_rate`` times its median residual.
    [Colombo §3.4.2], [da Silva Neto §1.8.5].
    """

    name = "gradient_boosting_regressor"
    summary = "Histogram gradient boosting of regression trees (squared or absolute error)."
    params = {
        "loss": Choice("squared_error", ["squared_error", "absolute_error"], doc="Loss to minimise."),
        **COMMON_PARAMS,
    }

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT, categorical_features=None):
        p = self._validated_params()
        X, y = check_X_y(X, y, allow_nan=True, y_numeric=True)
        loss = SquaredError() if p["loss"] == "squared_error" else AbsoluteError()
        state = self._fit_boosting(X, y, None, sample_weight, ctx, p, loss, categorical_features)
        for key, value in state.items():
            setattr(self, key, value)
        return self

    def predict(self, X):
        return self._raw_predict(X)[:, 0]
