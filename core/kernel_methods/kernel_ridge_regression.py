"""Kernel ridge regression: ridge regression in the dual ([Colombo §5.1.2]).

a = (K + alpha I)^{-1} t (eq. 57), solved by Cholesky (fallback: least squares when
K + alpha I is singular or indefinite), prediction y(x) = k(x)^T a.  With sample
weights s the weighted problem is solved as scikit-learn does: K <- S^1/2 K S^1/2,
t <- S^1/2 t, a <- S^1/2 a.  (Erratum in [Colombo §5.1.2]: K = Phi Phi^T, not Phi^T Phi.)
No intercept, as KernelRidge.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve, lstsq

from ..base import Regressor
from ..context import NULL_CONTEXT
from ..kernels import KernelSpec, build_kernel
from ..memory import kernel_fit
from ..params import Choice, Float, Int, OneOf
from ..registry import register
from ..validation import (
    check_predict_input,
    check_sample_weight,
    check_X_y,
)

__all__ = ["KernelRidgeRegression"]


@register
class KernelRidgeRegression(Regressor):
    name = "kernel_ridge_regression"
    lazy_learner = True
    fit_memory = kernel_fit(2)  # peak memory model (core/memory.py)
    summary = "Kernel ridge regression: dual coefficients (K + alpha I)^-1 y with any kernel."
    params = {
        "alpha": Float(1.0, ge=0, le=1e12, doc="Ridge penalty (lambda of [Colombo §5.1.2])."),
        "kernel": KernelSpec("linear"),
        "gamma": OneOf(
            None,
            options=[Choice(choices=("scale", "auto")), Float(gt=0, le=1e12)],
            nullable=True,
            doc="Kernel coefficient; null or 'auto' = 1/n_features (as KernelRidge), 'scale' as SVC.",
        ),
        "degree": Int(3, ge=1, le=20),
        "coef0": Float(1.0, le=1e12),
    }
    supports_sample_weight = True
    needs_scaling = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, y_numeric=True)
        sw = None if sample_weight is None else check_sample_weight(sample_weight, X.shape[0])
        gamma = "auto" if p["gamma"] is None else p["gamma"]
        kernel = build_kernel(p["kernel"], gamma=gamma, degree=p["degree"], coef0=p["coef0"]).resolved(X)
        ctx.check_cancelled()
        K = kernel(X)
        t = y
        if sw is not None:
            r = np.sqrt(sw)
            K = K * np.outer(r, r)
            t = y * r
        K[np.diag_indices_from(K)] += p["alpha"]
        try:
            dual = cho_solve(cho_factor(K, lower=True, check_finite=False), t, check_finite=False)
            solver = "cholesky"
        except (LinAlgError, ValueError):
            dual = lstsq(K, t, check_finite=False)[0]
            solver = "lstsq"
        if sw is not None:
            dual = dual * np.sqrt(sw)
        self.dual_coef_ = dual
        self.X_fit_ = X.copy()
        self.solver_ = solver
        self._kernel = kernel
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        X = check_predict_input(self, X, "dual_coef_")
        return self._kernel(X, self.X_fit_) @ self.dual_coef_
