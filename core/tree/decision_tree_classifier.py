"""Decision-tree classifier ([Passerini §2], [Santini ch. 5], [da Silva Neto §1.8]).

Greedy top-down growth choosing, at each node, the split with the largest
impurity decrease: information gain with entropy H(S) = -sum_i p_i log2 p_i
([Passerini eq. 2.1-2.2]), Gini 1 - sum p_i^2, or C4.5's gain ratio IG / H_A
(eq. 2.3-2.4).  Numeric features split by a threshold at the midpoint between
successive distinct values ([Passerini §2.3.2]; the notes only place thresholds where
the label changes, which never excludes the best split, so all midpoints are
scanned as in scikit-learn); categorical features split multiway, one child per
category (§2.2); missing values follow C4.5 fractional propagation at fit and
predict ([Passerini §2.3.4]).  See core/tree/_tree.py for the flat-array layout.
"""

from __future__ import annotations

from ..base import Classifier
from ..context import NULL_CONTEXT
from ..memory import forest_fit
from ..random import check_random_state
from ..registry import register
from ..validation import (
    DataError,
    check_array,
    check_is_fitted,
    check_n_features,
    check_sample_weight,
    column_or_1d,
)
from ._base import class_weight_vector, fit_one_tree, group_rare, prepare_X, regroup, tree_params
from ._tree import NodeTable

__all__ = ["DecisionTreeClassifier"]


@register
class DecisionTreeClassifier(Classifier):
    name = "decision_tree_classifier"
    fit_memory = forest_fit(1)  # peak memory model (core/memory.py)
    summary = "Decision tree (entropy / Gini / gain ratio); categorical splits, missing values, pruning."
    params = tree_params(("gini", "entropy", "gain_ratio"), "gini")
    supports_sample_weight = True
    native_missing = True
    native_categorical = True

    def fit(self, X, y=None, *, sample_weight=None, categorical_features=None, ctx=NULL_CONTEXT,
            _binned=None):
        """Fit; ``_binned`` (private) reuses the binning of the same X across boosting rounds."""
        p = self._validated_params()
        X, is_cat = prepare_X(X, categorical_features)
        X = group_rare(self, X, is_cat, p)
        if y is None:
            raise DataError("y is required for a supervised estimator")
        y = column_or_1d(y)
        if y.shape[0] != X.shape[0]:
            raise DataError(f"X has {X.shape[0]} samples but y has {y.shape[0]}")
        classes, codes = self._encode_targets(y)
        w = check_sample_weight(sample_weight, X.shape[0])
        cw = class_weight_vector(p["class_weight"], classes, codes)
        if cw is not None:
            w = w * cw[codes]
        rng = check_random_state(p["random_state"])
        tree = fit_one_tree(X, codes, w, is_cat, p, regression=False, n_classes=len(classes), rng=rng,
                            stratify=codes, binned=_binned)
        ctx.step(1, 1)
        imp = tree.feature_importances(X.shape[1])
        self.classes_ = classes
        self.n_classes_ = len(classes)
        self.n_features_in_ = X.shape[1]
        self.categorical_features_ = is_cat
        self.tree_ = tree
        self.feature_importances_ = imp / imp.sum() if imp.sum() > 0 else imp
        self._table = NodeTable([tree])
        return self

    def predict_proba(self, X):
        check_is_fitted(self, ["tree_"])
        X = check_array(X, allow_nan=True)
        X = regroup(self, X)
        check_n_features(self, X)
        return self._table.mean_value(X)

    def apply(self, X):
        """Leaf index of each sample (rows without missing values)."""
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
