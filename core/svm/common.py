"""Shared pieces of the SVM estimators: parameter specs, class weights, kernel set-up."""

from __future__ import annotations

import numpy as np

from ..kernels import KernelSpec, build_kernel
from ..params import Choice, DictOf, Float, Int, OneOf

__all__ = ["gamma_spec", "kernel_params", "make_kernel"]


def gamma_spec(default="scale"):
    return OneOf(
        default,
        options=[Choice(choices=("scale", "auto")), Float(gt=0, le=1e12)],
        doc="Kernel coefficient of rbf/poly/sigmoid/laplacian: 'scale' = 1/(n_features Var(X)), "
        "'auto' = 1/n_features, or a positive number.",
    )


def kernel_params(default_kernel="rbf", default_gamma="scale", default_coef0=0.0) -> dict:
    return {
        "kernel": KernelSpec(default_kernel),
        "degree": Int(3, ge=1, le=20, doc="Degree of the poly kernel."),
        "gamma": gamma_spec(default_gamma),
        "coef0": Float(default_coef0, le=1e12, doc="Independent term of the poly and sigmoid kernels."),
    }


def class_weight_spec():
    return OneOf(
        None,
        options=[Choice(choices=("balanced",)), DictOf(Float(gt=0, le=1e12))],
        nullable=True,
        doc="Per-class multiplier of C: 'balanced' (n / (k n_c)) or {label: weight}.",
    )


def make_kernel(p: dict, X: np.ndarray):
    """The estimator's kernel object, with gamma 'scale'/'auto' resolved on the training X."""
    return build_kernel(p["kernel"], gamma=p["gamma"], degree=p["degree"], coef0=p["coef0"]).resolved(X)
