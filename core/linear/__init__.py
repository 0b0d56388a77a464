"""Linear models: least squares, penalised regression, Bayesian and local regression, GLMs, perceptron."""

from . import (  # noqa: F401 - importing registers the estimators
    bayesian_linear_regression,
    elastic_net,
    lasso_regression,
    linear_regression,
    locally_weighted_regression,
    ridge_regression,
)
