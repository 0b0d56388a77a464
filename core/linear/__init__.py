"""Linear models: least squares, penalised regression, Bayesian and local regression, GLMs, perceptron."""

from . import (  # noqa: F401 - importing registers the estimators
    bayesian_linear_regression,
    elastic_net,
    lasso_regression,
    least_squares_classifier,
    linear_regression,
    locally_weighted_regression,
    logistic_regression,
    perceptron,
    poisson_regression,
    ridge_regression,
    softmax_regression,
)
