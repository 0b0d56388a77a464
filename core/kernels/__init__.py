"""Kernels: the kernel functions and the kernel expression language shared by SVMs, kernel ridge, the kernel
perceptron and kernel PCA (the Gaussian processes' hyperkernels live beside them, ``core.kernel_methods``).

* ``functions``   the base kernels k(x, x') on whole matrices (linear, poly, rbf, sigmoid, laplacian)
* ``expression``  the expression language and its hyperparameter spec :class:`KernelSpec`
* ``tree``        the evaluable kernel objects an expression builds (:func:`build_kernel`, :func:`kernel_matrix`)

Users ask for a kernel with one JSON value (``kernel`` parameter), either a string expression or a structured
object (docs/decisions/kernels.md)::

    "rbf"                       a base kernel (gamma/degree/coef0 from the estimator's params)
    "rbf+linear"  "rbf*poly"    sums and products ('*' binds tighter than '+')
    "0.5*rbf + 2*linear"        positive scalings
    "cosine(poly)"              cosine normalisation of any sub-expression
    {"name": "rbf", "gamma": 0.1}                 a base kernel with its own parameters
    {"sum": [k1, k2, ...]}  {"product": [k1, ...]}  {"scale": 2.0, "kernel": k}  {"cosine": k}
"""

from __future__ import annotations

import importlib

from .expression import KernelSpec, KernelSyntaxError, kernel_to_string, parse_kernel
from .functions import KERNELS, PSD_KERNELS, kernel_diag, resolve_gamma, squared_euclidean
from .tree import (
    BaseKernel,
    CosineKernel,
    Kernel,
    ProductKernel,
    ScaledKernel,
    SumKernel,
    build_kernel,
    kernel_matrix,
)

__all__ = [
    "KERNELS",
    "PSD_KERNELS",
    "kernel_matrix",
    "kernel_diag",
    "squared_euclidean",
    "resolve_gamma",
    "parse_kernel",
    "kernel_to_string",
    "build_kernel",
    "KernelSpec",
    "KernelSyntaxError",
    "Kernel",
    "BaseKernel",
    "SumKernel",
    "ProductKernel",
    "ScaledKernel",
    "CosineKernel",
]

# Model bundles pickled before the Gaussian-process kernels moved to ``core.kernel_methods.gp_kernels`` name
# them ``core.kernels.GPRBF`` etc.; unpickling such a bundle looks them up here.
_MOVED_TO_GP_KERNELS = frozenset({"HyperKernel", "GPConstant", "GPWhite", "GPRBF", "GPLinear", "GPPoly",
                                  "GPSum", "GPProduct", "_Leaf", "_Combo"})


def __getattr__(name: str):
    if name in _MOVED_TO_GP_KERNELS:
        return getattr(importlib.import_module("core.kernel_methods.gp_kernels"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
