"""Decision-tree regressor ([da Silva Neto §1.8.1], [Santini §5.2]; CART regression tree).

Each leaf predicts the weighted mean (squared_error) or weighted median
(absolute_error) of its training targets; the split maximises the decrease of
W_t * I(t) with I the weighted variance or the mean absolute deviation from the
median.  Same binning, categorical multiway splits, C4.5 missing-value
propagation and pruning as the classifier (core/tree/_tree.py, _base.py).
"""

from __future__ import annotations

from ..base import Regressor
from ..context import NULL_CONTEXT
from ..memory import forest_fit
from ..random import check_random_state
from ..registry import register
from ..validation import (
    check_array,
    check_is_fitted,
    check_n_features,
    check_sample_weight,
    check_target,
)
from ._base import fit_one_tree, group_rare, prepare_X, regroup, tree_params
from ._tree import NodeTable

__all__ = ["DecisionTreeRegressor"]


@register
class DecisionTreeRegressor(Regressor):
    name = "decision_tree_regressor"
    fit_memory = forest_fit(1)  # peak memory model (core/memory.py)
    summary = "Regression tree (squared or absolute error); categorical splits, missing values, pruning."
    params = tree_params(("squared_error", "absolute_error"), "squared_error", classifier=False)
    supports_sample_weight = True
    native_missing = True
    native_categorical = True

    def fit(self, X, y=None, *, sample_weight=None, categorical_features=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, is_cat = prepare_X(X, categorical_features)
        X = group_rare(self, X, is_cat, p)
        y = check_target(y, X.shape[0], numeric=True)
        w = check_sample_weight(sample_weight, X.shape[0])
        rng = check_random_state(p["random_state"])
        tree = fit_one_tree(X, y, w, is_cat, p, regression=True, n_classes=1, rng=rng, y_raw=y)
        ctx.step(1, 1)
        imp = tree.feature_importances(X.shape[1])
        self.n_features_in_ = X.shape[1]
        self.categorical_features_ = is_cat
        self.tree_ = tree
        self.feature_importances_ = imp / imp.sum() if imp.sum() > 0 else imp
        self._table = NodeTable([tree])
        return self

    def predict(self, X):
        check_is_fitted(self, ["tree_"])
        X = check_array(X, allow_nan=True)
        X = regroup(self, X)
        check_n_features(self, X)
        return self._table.mean_value(X)[:, 0]

    def apply(self, X):
        check_is_fitted(self, ["tree_"])
        X = check_array(X)
        X = regroup(self, X)
        return self._table.leaves(X)[:, 0]

    def get_depth(self) -> int:
        return self.tree_.max_depth

    def get_n_leaves(self) -> int:
        return self.tree_.n_leaves

    @classmethod
    def _example_params(cls):
        return {"random_state": 0}
