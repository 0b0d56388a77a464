"""Kernel machines: kernel ridge regression, Gaussian process regression and classification, kernel perceptron."""

from . import (  # noqa: F401
    gaussian_process_classifier,
    gaussian_process_regressor,
    kernel_perceptron,
    kernel_ridge_regression,
)
