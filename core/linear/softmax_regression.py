"""Softmax (multinomial logistic) regression as its own registry entry.

[da Silva Neto §1.3.4], [Colombo §2.4.2]: p(y=k|x) = exp(w_k^T x) / sum_j exp(w_j^T x),
cross-entropy loss.  Same engine as logistic_regression, always the K-vector
softmax parameterisation (also for two classes, where it is an over-parameterised
but penalised, hence unique, equivalent of the sigmoid model).
"""

from __future__ import annotations

from ..registry import register
from ._logistic import LOGISTIC_PARAMS, LogisticModel


@register
class SoftmaxRegression(LogisticModel):
    """Multinomial logistic regression with one weight vector per class."""

    name = "softmax_regression"
    summary = "Multinomial logistic (softmax) regression with cross-entropy loss."
    params = dict(LOGISTIC_PARAMS)

    def _multi_class(self, p, n_classes) -> str:
        return "multinomial"
