"""Bagging classifier ([Passerini §16.1]; [da Silva Neto §1.8.4]): bootstrap aggregation of any registered classifier.

Combiner: soft vote (1/m) sum_i f^(i)(x) when every member has predict_proba,
else majority vote.  ``oob_score_``: accuracy of the out-of-bag vote.
"""

from __future__ import annotations

import numpy as np

from ..base import Classifier
from ..memory import forest_fit
from ..registry import register
from ..validation import check_array, check_target
from ._bagging import BaseBagging, bagging_params
from ._oob import oob_classification

__all__ = ["BaggingClassifier"]


@register
class BaggingClassifier(BaseBagging, Classifier):
    name = "bagging_classifier"
    fit_memory = forest_fit()  # peak memory model (core/memory.py)
    summary = "Bagging: bootstrap aggregation of any registered classifier (soft or majority vote)."
    params = bagging_params("decision_tree_classifier")
    supports_sample_weight = True
    native_missing = True
    native_categorical = True
    reports_progress = True
    _classification = True

    def _validate_X_y(self, X, y, cls):
        """Labels encoded as class codes (members are fitted on codes)."""
        X = check_array(X, allow_nan=cls.native_missing)
        y = check_target(y, X.shape[0])
        classes, codes = self._encode_targets(y)
        soft = callable(getattr(cls, "predict_proba", None))
        self._soft = soft  # read by _member_output while the out-of-bag vote is computed
        return X, codes, {"classes_": classes, "n_classes_": len(classes), "_soft": soft}

    def _member_output(self, est, Xs):
        """Member's class probabilities (or one-hot vote) in the ensemble's class order."""
        K = self.n_classes_
        out = np.zeros((Xs.shape[0], K))
        cols = np.asarray(est.classes_, dtype=np.intp)  # members were fitted on class codes
        if self._soft:
            out[:, cols] = est.predict_proba(Xs)
        else:
            out[np.arange(Xs.shape[0]), np.asarray(est.predict(Xs), dtype=np.intp)] = 1.0
        return out

    def _output_shape(self):
        return (self.n_classes_,)

    def _oob_score_and_attributes(self, total, n_oob, y):
        """Accuracy of the out-of-bag vote."""
        return oob_classification(total, n_oob, y)

    def predict_proba(self, X):
        return self._mean_output(X)

