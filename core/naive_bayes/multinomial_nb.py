"""Multinomial naive Bayes ([da Silva Neto §1.4.5] multinomial event model, [Passerini §8])."""

from __future__ import annotations

import numpy as np

from ..context import NULL_CONTEXT
from ..registry import register
from ..validation import DataError, check_sample_weight, check_X_y
from ._base import DISCRETE_PARAMS, NaiveBayes, class_log_prior, one_hot


@register
class MultinomialNB(NaiveBayes):
    """Naive Bayes for counts (bag of words): the multinomial event model.

    [da Silva Neto §1.4.5]: ``phi_{v|k} = (sum_i [y_i = k] x_iv + alpha) /
    (sum_i [y_i = k] n_i + alpha V)`` where ``x_iv`` counts word ``v`` in document ``i``,
    ``n_i = sum_v x_iv`` and V is the vocabulary size (alpha = 1 is Laplace smoothing).  The
    notes' word-index representation and the count vector give the same likelihood up to the
    multinomial coefficient, which does not depend on the class:
    ``g_k(x) = log pi_k + sum_v x_v log phi_{v|k}``.
    """

    name = "multinomial_nb"
    summary = "Multinomial naive Bayes for count features (Laplace/Lidstone smoothing)"
    params = dict(DISCRETE_PARAMS)
    supports_sample_weight = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y)
        if (X < 0).any():
            raise DataError("multinomial_nb needs non-negative feature counts; X has negative values")
        w = check_sample_weight(sample_weight, X.shape[0])
        classes, codes = self._encode_targets(y)
        Y = one_hot(codes, len(classes), w)
        alpha = max(p["alpha"], 1e-10)
        feature_count = Y.T @ X
        class_count = Y.sum(axis=0)
        smoothed = feature_count + alpha
        flp = np.log(smoothed) - np.log(smoothed.sum(axis=1, keepdims=True))
        clp = class_log_prior(class_count, p)
        self.classes_ = classes
        self.feature_count_ = feature_count
        self.class_count_ = class_count
        self.feature_log_prob_ = flp
        self.class_log_prior_ = clp
        self.n_features_in_ = X.shape[1]
        return self

    def _jll(self, X):
        if (X < 0).any():
            raise DataError("multinomial_nb needs non-negative feature counts; X has negative values")
        return X @ self.feature_log_prob_.T + self.class_log_prior_
