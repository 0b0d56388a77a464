"""Kernel machines: kernel ridge regression, Gaussian process regression, kernel perceptron."""

from . import gaussian_process_regressor, kernel_perceptron, kernel_ridge_regression  # noqa: F401
