"""Kernel (dual) perceptron, multiclass one-vs-rest.

[Colombo §6, eq. 68]: with w starting at 0, w = sum_n a_n t_n phi(x_n),
so f(x) = sum_n a_n t_n k(x_n, x) (+ b) and the perceptron rule "on a mistake
t_i f(x_i) <= 0, w += t_i phi(x_i)" becomes a_i += 1, b += t_i ([Passerini §10]).

All one-vs-rest perceptrons are trained in the same pass over the (shuffled)
samples.  The scores f(x_t) of all training points are kept current
(f += t_i k(x_i, .) on a mistake), so the sequential pass jumps from one mistake to
the next with vectorised scans instead of a Python loop over samples.  A pass with
no mistake ends training (the data are separated in feature space).
"""

from __future__ import annotations

import numpy as np

from ..base import Classifier
from ..context import NULL_CONTEXT
from ..kernels import KernelSpec, build_kernel
from ..memory import kernel_fit
from ..params import Bool, Float, Int, Seed
from ..random import check_random_state
from ..registry import register
from ..svm.common import gamma_spec
from ..validation import check_predict_input, check_X_y

__all__ = ["KernelPerceptron"]


@register
class KernelPerceptron(Classifier):
    name = "kernel_perceptron"
    lazy_learner = True
    fit_memory = kernel_fit(2)  # peak memory model (core/memory.py)
    summary = "Dual (kernel) perceptron with any kernel; multiclass one-vs-rest."
    params = {
        "kernel": KernelSpec("rbf"),
        "gamma": gamma_spec("scale"),
        "degree": Int(3, ge=1, le=20),
        "coef0": Float(1.0, le=1e12),
        "max_iter": Int(100, ge=1, le=1_000_000, doc="Maximum number of passes (epochs) over the data."),
        "shuffle": Bool(True, doc="Shuffle the samples before each pass."),
        "random_state": Seed(),
    }
    reports_progress = True
    needs_scaling = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y)
        classes, codes = self._encode_targets(y)
        n, k = X.shape[0], len(classes)
        kernel = build_kernel(p["kernel"], gamma=p["gamma"], degree=p["degree"], coef0=p["coef0"]).resolved(X)
        rng = check_random_state(p["random_state"])
        K = kernel(X)
        # targets in {-1, +1}: one column per one-vs-rest problem (one column for two classes)
        if k == 2:
            T = np.where(codes == 1, 1.0, -1.0)[:, None]
        else:
            T = -np.ones((n, k))
            T[np.arange(n), codes] = 1.0
        A = np.zeros_like(T)  # mistake counts a_n
        b = np.zeros(T.shape[1])
        F = np.zeros_like(T)  # current scores f(x_t) of every training point
        order = np.arange(n)
        epoch = 0
        for epoch in range(1, p["max_iter"] + 1):
            if p["shuffle"]:
                order = rng.permutation(n)
            mistakes = 0
            pos = 0
            while pos < n:
                rest = order[pos:]
                bad = ((T[rest] * F[rest]) <= 0).any(axis=1)
                hit = int(np.argmax(bad))
                if not bad[hit]:
                    break
                i = int(rest[hit])
                wrong = (T[i] * F[i]) <= 0
                step = np.where(wrong, T[i], 0.0)
                A[i] += wrong
                b += step
                F += np.outer(K[:, i] + 1.0, step)
                mistakes += 1
                pos += hit + 1
            ctx.step(epoch, p["max_iter"], epoch=epoch, mistakes=mistakes)
            if mistakes == 0:
                break
        sv = np.flatnonzero(A.any(axis=1))
        self.support_ = sv
        self.support_vectors_ = X[sv].copy()
        self.dual_coef_ = (A * T)[sv].T
        self.intercept_ = b
        self.n_iter_ = epoch
        self._kernel = kernel
        self.classes_ = classes
        self.n_features_in_ = X.shape[1]
        return self

    def decision_function(self, X):
        X = check_predict_input(self, X, "dual_coef_")
        F = (self._kernel(X, self.support_vectors_) + 1.0) @ self.dual_coef_.T
        return F[:, 0] if F.shape[1] == 1 else F

    def predict(self, X):
        F = self.decision_function(X)
        if F.ndim == 1:
            return self.classes_[(F > 0).astype(np.intp)]
        return self.classes_[np.argmax(F, axis=1)]
