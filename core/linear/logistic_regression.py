"""Logistic regression: binary (sigmoid), multinomial (softmax) or one-vs-rest.

[Colombo §2.4], [Santini §9.4], [da Silva Neto §1.2.3-1.3.4].  Objective as
sklearn.linear_model.LogisticRegression: C * sum_i s_i l_i + pen(w) (see _logistic).
"""

from __future__ import annotations

from ..params import Choice
from ..registry import register
from ._logistic import LOGISTIC_PARAMS, LogisticModel


@register
class LogisticRegression(LogisticModel):
    """Penalised maximum-likelihood logistic regression (lbfgs, Newton/IRLS, gd, sgd)."""

    name = "logistic_regression"
    summary = "Logistic regression (binary/multinomial/OvR) with l2, l1, elastic-net penalties."
    params = {
        **LOGISTIC_PARAMS,
        "multi_class": Choice(
            "auto",
            choices=("auto", "multinomial", "ovr"),
            doc="auto: sigmoid for 2 classes, softmax otherwise; ovr: one binary model per class.",
        ),
    }
