"""Random-forest classifier ([Passerini §2.4, §16.1.2]; [Santini §5.6]; [da Silva Neto §1.8.3]).

Bagged decision trees with a random feature subset at each split.  Combiners
([Passerini §16.1.2]): soft voting argmax_y (1/m) sum_i f_y^(i)(x) (default, as
scikit-learn) or hard (majority) voting argmax_y sum_i [y = yhat^(i)(x)].
``oob_score_`` is the accuracy of the out-of-bag soft vote (§16.1.1).
"""

from __future__ import annotations

import numpy as np

from ..base import Classifier
from ..memory import forest_fit
from ..registry import register
from ..tree._base import FitTarget, classifier_target
from ._forest import BaseForest, forest_params, oob_values
from ._oob import oob_classification

__all__ = ["RandomForestClassifier"]


@register
class RandomForestClassifier(BaseForest, Classifier):
    name = "random_forest_classifier"
    fit_memory = forest_fit()  # peak memory model (core/memory.py)
    summary = "Random forest of decision trees (bootstrap + random feature subsets), soft or hard voting."
    params = forest_params(("gini", "entropy", "gain_ratio"), "gini", max_features_default="sqrt",
                           classifier=True)
    supports_sample_weight = True
    native_missing = True
    native_categorical = True
    reports_progress = True

    def _validate_y_class_weight(self, y, n_samples, sample_weight, p) -> FitTarget:
        return classifier_target(y, n_samples, sample_weight, p["class_weight"])

    def _oob_score_and_attributes(self, table, X, y, counts) -> dict:
        """Accuracy of the out-of-bag soft vote."""
        total, n_oob = oob_values(table, X, counts)
        return oob_classification(total, n_oob, y)

    def predict_proba(self, X):
        if self.voting == "hard":
            X = self._checked_X(X)
            vals = self._table.per_tree_values(X)
            votes = np.argmax(vals, axis=2)  # (n, T)
            K = self.n_classes_
            n, T = votes.shape
            counts = np.bincount((np.arange(n)[:, None] * K + votes).ravel(), minlength=n * K)
            return counts.reshape(n, K) / T
        return self._forest_values(X)

