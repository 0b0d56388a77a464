"""Bagging regressor ([Passerini §16.1.2] "mean" combiner; [da Silva Neto §1.8.4]): yhat = (1/m) sum_i f^(i)(x)."""

from __future__ import annotations

import numpy as np

from ..base import Regressor
from ..memory import forest_fit
from ..registry import register
from ..validation import check_X_y
from ._bagging import BaseBagging, bagging_params
from ._oob import oob_regression

__all__ = ["BaggingRegressor"]


@register
class BaggingRegressor(BaseBagging, Regressor):
    name = "bagging_regressor"
    fit_memory = forest_fit()  # peak memory model (core/memory.py)
    summary = "Bagging: bootstrap aggregation of any registered regressor (mean prediction)."
    params = bagging_params("decision_tree_regressor")
    supports_sample_weight = True
    native_missing = True
    native_categorical = True
    reports_progress = True

    def _validate_X_y(self, X, y, cls):
        X, y = check_X_y(X, y, allow_nan=cls.native_missing, y_numeric=True)
        return X, y, {}

    def _member_output(self, est, Xs):
        return np.asarray(est.predict(Xs), dtype=float)

    def _output_shape(self):
        return ()

    def _oob_score_and_attributes(self, total, n_oob, y):
        """R^2 of the out-of-bag mean prediction."""
        return oob_regression(total, n_oob, y)

    def predict(self, X):
        return self._mean_output(X)

