"""Decision-tree regressor ([da Silva Neto §1.8.1], [Santini §5.2]; CART regression tree).

Each leaf predicts the weighted mean (squared_error) or weighted median
(absolute_error) of its training targets; the split maximises the decrease of
W_t * I(t) with I the weighted variance or the mean absolute deviation from the
median.  Same binning, categorical multiway splits, C4.5 missing-value
propagation and pruning as the classifier (core/tree/: _grower.py, _splitter.py, _pruning.py).
"""

from __future__ import annotations

from ..base import Regressor
from ..memory import forest_fit
from ..registry import register
from ._base import BaseDecisionTree, FitTarget, regressor_target, tree_params

__all__ = ["DecisionTreeRegressor"]


@register
class DecisionTreeRegressor(BaseDecisionTree, Regressor):
    name = "decision_tree_regressor"
    fit_memory = forest_fit(1)  # peak memory model (core/memory.py)
    summary = "Regression tree (squared or absolute error); categorical splits, missing values, pruning."
    params = tree_params(("squared_error", "absolute_error"), "squared_error", classifier=False)
    supports_sample_weight = True
    native_missing = True
    native_categorical = True
    _regression = True

    def _validate_y_class_weight(self, y, n_samples, sample_weight, p) -> FitTarget:
        return regressor_target(y, n_samples, sample_weight)

    def predict(self, X):
        return self._tree_values(X)[:, 0]

