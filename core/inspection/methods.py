"""The explanation method each algorithm gets by default (a capability served by /v1/algorithms).

A leaf module: ``Estimator.capabilities`` reads it without importing the explainers (which know the estimators).
"""

from __future__ import annotations

__all__ = ["explain_method"]


def explain_method(cls) -> str:
    """The exact method a registered algorithm class is explained with by default (its capability)."""
    name = getattr(cls, "name", "")
    if name in ("decision_tree_classifier", "decision_tree_regressor", "random_forest_classifier",
                "random_forest_regressor", "gradient_boosting_classifier", "gradient_boosting_regressor"):
        return "tree"
    if name in ("linear_regression", "ridge_regression", "lasso_regression", "elastic_net",
                "logistic_regression", "softmax_regression", "least_squares_classifier", "perceptron",
                "linear_discriminant_analysis", "bayesian_linear_regression"):
        return "linear"
    return "kernel"
