"""Histogram-based gradient boosting classifier (log-loss; binary or softmax)."""

from __future__ import annotations

import numpy as np

from ..base import Classifier
from ..context import NULL_CONTEXT
from ..params import Choice
from ..registry import register
from ..validation import check_X_y
from ._hist_gradient_boosting.gradient_boosting import COMMON_PARAMS, HistGradientBoostingMixin
from ._hist_gradient_boosting.loss import BinaryLogLoss, MultinomialLogLoss

__all__ = ["GradientBoostingClassifier"]


@register
class GradientBoostingClassifier(HistGradientBoostingMixin, Classifier):
    """Histogram gradient boosting for classification (like scikit-learn's HistGradientBoostingClassifier).

    Binary: one tree per iteration on the log-odds, ``p = sigmoid(F)``.
    Multiclass (K classes): K trees per iteration, ``p = softmax(F_1..F_K)``.
    Loss gradients ``g = p - y`` and hessians ``h = p (1 - p)``; leaf values
    ``-learning_rate * G / (H + l2_regularization)`` ([Colombo §3.4.2], [da Silva Neto §1.8.5]).
    Missing values (NaN) are handled natively: each split learns which side they go.
    """

    name = "gradient_boosting_classifier"
    summary = "Histogram gradient boosting of regression trees on the log-loss (binary or softmax)."
    params = {
        "loss": Choice("log_loss", ["log_loss"], doc="Binary or multinomial log-loss."),
        **COMMON_PARAMS,
    }

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT, categorical_features=None):
        p = self._validated_params()
        X, y = check_X_y(X, y, allow_nan=True)
        classes, codes = self._encode_targets(y)
        K = len(classes)
        if K == 2:
            loss, target = BinaryLogLoss(), codes.astype(np.float64)
        else:
            loss, target = MultinomialLogLoss(K), codes
        state = self._fit_boosting(X, target, codes, sample_weight, ctx, p, loss, categorical_features)
        self._loss = loss
        self.classes_ = classes
        for key, value in state.items():
            setattr(self, key, value)
        return self

    def decision_function(self, X):
        """Raw scores: log-odds (binary, shape (n,)) or per-class scores (n, K)."""
        raw = self._raw_predict(X)
        return raw[:, 0] if raw.shape[1] == 1 else raw

    def predict_proba(self, X):
        raw = self._raw_predict(X)
        return self._loss.proba(raw[:, 0] if raw.shape[1] == 1 else raw)
