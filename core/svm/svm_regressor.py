"""Epsilon-insensitive support vector regression (epsilon-SVR) solved by SMO.

Dual with 2n variables a = [a+, a-] (LIBSVM, Chang & Lin 2011 §2.3)::

    min  1/2 (a+ - a-)^T K (a+ - a-) + eps sum_i (a+_i + a-_i) - sum_i z_i (a+_i - a-_i)
    s.t. sum_i (a+_i - a-_i) = 0,   0 <= a+_i, a-_i <= C_i = C * sample_weight_i

which is the generic SMO problem with y = [+1.., -1..], p = [eps - z, eps + z]
(core.svm._smo; kernel rows of the n samples are tiled).  Prediction
f(x) = sum_i (a+_i - a-_i) k(x_i, x) - rho.
"""

from __future__ import annotations

import numpy as np

from ..base import Regressor
from ..context import NULL_CONTEXT
from ..memory import kernel_cache_fit
from ..params import Float, Int
from ..registry import register
from ..validation import (
    check_predict_input,
    check_sample_weight,
    check_X_y,
)
from ._smo import KernelRows, solve_smo
from .common import kernel_params, make_kernel

__all__ = ["SVMRegressor"]


@register
class SVMRegressor(Regressor):
    name = "svm_regressor"
    fit_memory = kernel_cache_fit()  # peak memory model (core/memory.py)
    summary = "Epsilon-insensitive support vector regression (SMO on the 2n-variable dual, any kernel)."
    params = {
        **kernel_params(),
        "C": Float(1.0, gt=0, le=1e12, doc="Penalty of errors beyond the epsilon tube."),
        "epsilon": Float(0.1, ge=0, le=1e12, doc="Half-width of the insensitive tube."),
        "tol": Float(1e-3, gt=0, le=1e6),
        "cache_size": Float(200.0, gt=0, le=100000.0, doc="Kernel cache size in MB."),
        "max_iter": Int(-1, ge=-1, le=1_000_000, doc="SMO iterations; -1: no limit."),
    }
    supports_sample_weight = True
    reports_progress = True
    needs_scaling = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, y_numeric=True, min_samples=2)
        n = X.shape[0]
        sw = check_sample_weight(sample_weight, n)
        kernel = make_kernel(p, X)
        rows = KernelRows(kernel, X, p["cache_size"])
        ys = np.concatenate([np.ones(n), -np.ones(n)])
        lin = np.concatenate([p["epsilon"] - y, p["epsilon"] + y])
        Cvec = np.tile(p["C"] * sw, 2)
        res = solve_smo(rows, ys, lin, Cvec, tol=p["tol"], max_iter=p["max_iter"], ctx=ctx)
        ctx.step(1, 1, iterations=res.n_iter)
        coef = res.alpha[:n] - res.alpha[n:]
        sv = np.flatnonzero(coef != 0)
        self.support_ = sv.astype(np.intp)
        self.support_vectors_ = X[sv].copy()
        self.dual_coef_ = coef[sv][None, :]
        self.intercept_ = np.array([-res.rho])
        self.n_support_ = np.array([sv.size], dtype=np.intp)
        self.n_iter_ = res.n_iter
        self.fit_status_ = 0 if res.converged else 1
        self._kernel = kernel
        self._sv_cache = kernel.prepare(self.support_vectors_)
        self._linear = getattr(kernel, "name", None) == "linear" and hasattr(kernel, "row_kernel")
        if self._linear:
            self.coef_ = self.dual_coef_ @ self.support_vectors_
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        X = check_predict_input(self, X, "n_features_in_")
        if self._linear:
            return X @ self.coef_[0] + self.intercept_[0]
        cache = self.__dict__.get("_sv_cache")
        if cache is None:
            cache = self._sv_cache = self._kernel.prepare(self.support_vectors_)
        return self._kernel.cross(X, self.support_vectors_, cache) @ self.dual_coef_[0] + self.intercept_[0]
