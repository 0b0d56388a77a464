"""Random-forest regressor ([Passerini §16.1.2] "mean" combiner; [da Silva Neto §1.8.3]).

yhat = (1/m) sum_i f^(i)(x) over bagged regression trees grown with a random
feature subset per split (default: all features, as scikit-learn's 1.0).
``oob_score_`` is the R^2 of the out-of-bag mean prediction.
"""

from __future__ import annotations

from ..base import Regressor
from ..memory import forest_fit
from ..registry import register
from ..tree._base import FitTarget, regressor_target
from ._forest import BaseForest, forest_params, oob_values
from ._oob import oob_regression

__all__ = ["RandomForestRegressor"]


@register
class RandomForestRegressor(BaseForest, Regressor):
    name = "random_forest_regressor"
    fit_memory = forest_fit()  # peak memory model (core/memory.py)
    summary = "Random forest of regression trees (bootstrap + random feature subsets), mean prediction."
    params = forest_params(("squared_error", "absolute_error"), "squared_error", max_features_default=1.0,
                           classifier=False)
    supports_sample_weight = True
    native_missing = True
    native_categorical = True
    reports_progress = True
    _regression = True

    def _validate_y_class_weight(self, y, n_samples, sample_weight, p) -> FitTarget:
        return regressor_target(y, n_samples, sample_weight)

    def _oob_score_and_attributes(self, table, X, y, counts) -> dict:
        """R^2 of the out-of-bag mean prediction."""
        total, n_oob = oob_values(table, X, counts)
        return oob_regression(total[:, 0], n_oob, y)

    def predict(self, X):
        return self._forest_values(X)[:, 0]

