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
from ..memory import forest_fit
from ..registry import register
from ._base import BaseDecisionTree, FitTarget, classifier_target, tree_params

__all__ = ["DecisionTreeClassifier"]


@register
class DecisionTreeClassifier(BaseDecisionTree, Classifier):
    name = "decision_tree_classifier"
    fit_memory = forest_fit(1)  # peak memory model (core/memory.py)
    summary = "Decision tree (entropy / Gini / gain ratio); categorical splits, missing values, pruning."
    params = tree_params(("gini", "entropy", "gain_ratio"), "gini")
    supports_sample_weight = True
    native_missing = True
    native_categorical = True

    def _validate_y_class_weight(self, y, n_samples, sample_weight, p) -> FitTarget:
        return classifier_target(y, n_samples, sample_weight, p["class_weight"])

    def predict_proba(self, X):
        return self._tree_values(X)

