"""Soft-margin support vector classifier (C-SVC) solved by SMO, or Pegasos for linear problems.

Dual ([Passerini §11.3, eq. 11.14]; [Colombo §6.4])::

    max_a  sum_i a_i - 1/2 sum_ij a_i a_j y_i y_j k(x_i, x_j)
    s.t.   0 <= a_i <= C_i = C * class_weight[y_i] * sample_weight_i,   sum_i a_i y_i = 0

solved by SMO with the second-order working-set selection of Fan et al. (2005)
(core.svm._smo).  Decision function f(x) = sum_i a_i y_i k(x_i, x) + b with
b = -rho, rho the mean of y_t G_t over free support vectors (the numerically stable
average of [Passerini §11]; [Colombo §6.1-6.3] erratum: k(x_n, x_m) inside the sum).
A hard margin is a large C ([Passerini §11]).

Multiclass: one-vs-one (default, k(k-1)/2 pairwise problems, majority vote as
LIBSVM/SVC) or one-vs-rest (``multi_class="ovr"``).  ``probability=True`` adds
Platt scaling fitted on 5-fold cross-validated decision values (LIBSVM), coupled
pairwise for one-vs-one (Wu, Lin & Weng 2004).  ``solver="pegasos"`` solves the
linear primal (bias regularised, as LinearSVC) by stochastic sub-gradients (core.svm._pegasos),
then polishes the result to the exact optimum by primal Newton steps on a vanishing Huber
smoothing of the hinge (Chapelle 2007); see core/svm/_pegasos.py.
"""

from __future__ import annotations

import types
from functools import lru_cache

import numpy as np

from ..base import Classifier
from ..context import NULL_CONTEXT
from ..kernels import BaseKernel
from ..memory import kernel_cache_fit
from ..params import Bool, Choice, Float, Int, ParamError, Seed
from ..random import check_random_state
from ..registry import register
from ..validation import (
    check_predict_input,
    check_sample_weight,
    check_X_y,
    class_weight_vector,
)
from ._pegasos import pegasos, pegasos_multi
from ._smo import KernelRows, solve_smo, solve_smo_batch
from .common import class_weight_spec, kernel_params, make_kernel
from .probability import pairwise_coupling, sigmoid_predict, sigmoid_train

__all__ = ["SVMClassifier"]

# Pegasos epochs when max_iter=-1: the stochastic phase only provides the starting point of the exact
# primal Newton refinement (_pegasos.primal_newton_refine), so a few epochs suffice.
_PEGASOS_EPOCHS = 10


class _ProbaDescriptor:
    """The method on the class (so the capability is advertised); on an instance, an AttributeError
    unless the model is (or will be) fitted with probability=True."""

    def __init__(self, fn):
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.fn
        enabled = obj.__dict__.get("_probability", obj.__dict__.get("probability", False))
        if not enabled:
            raise AttributeError(
                "predict_proba is available only with probability=True (Platt scaling fitted at fit time)"
            )
        return types.MethodType(self.fn, obj)


def _is_linear(kernel) -> bool:
    return isinstance(kernel, BaseKernel) and kernel.name == "linear"


@register
class SVMClassifier(Classifier):
    name = "svm_classifier"
    fit_memory = kernel_cache_fit()  # peak memory model (core/memory.py)
    summary = "Support vector machine (soft-margin dual by SMO, any kernel; Pegasos primal for linear)."
    params = {
        "C": Float(1.0, gt=0, le=1e12, doc="Penalty of margin violations (large C = hard margin)."),
        **kernel_params(),
        "probability": Bool(False, doc="Fit Platt scaling (5-fold CV) so that predict_proba is available."),
        "tol": Float(1e-3, gt=0, le=1e6, doc="Stopping tolerance on the maximal KKT violation."),
        "cache_size": Float(200.0, gt=0, le=100000.0, doc="Kernel cache size in MB."),
        "class_weight": class_weight_spec(),
        "max_iter": Int(-1, ge=-1, le=1_000_000, doc="SMO iterations per problem or Pegasos epochs; -1: no limit."),
        "multi_class": Choice("ovo", choices=("ovo", "ovr"), doc="Multiclass strategy for training."),
        "decision_function_shape": Choice("ovr", choices=("ovr", "ovo")),
        "solver": Choice("smo", choices=("smo", "pegasos"), doc="'pegasos' needs kernel='linear'."),
        "random_state": Seed(),
    }
    supports_sample_weight = True
    reports_progress = True
    needs_scaling = True

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, min_samples=2)
        classes, codes = self._encode_targets(y)
        n = X.shape[0]
        sw = check_sample_weight(sample_weight, n)
        cw = class_weight_vector(p["class_weight"], classes, codes)
        s = sw * cw[codes]
        kernel = make_kernel(p, X)
        solver = p["solver"]
        if solver == "pegasos" and not _is_linear(kernel):
            raise ParamError("solver", "'pegasos' solves the linear primal; use kernel='linear' or 'smo'")
        rng = check_random_state(p["random_state"])
        k = len(classes)
        problems = _problems(codes, k, p["multi_class"])
        n_prob = len(problems)
        K_full = None
        # the batched solver (several problems, or Platt's CV fits) works on the whole Gram matrix;
        # a single problem gets its rows from KernelRows (dense when small, LRU otherwise)
        if solver == "smo" and (n_prob > 1 or p["probability"]) and 8.0 * n * n <= p["cache_size"] * 1e6:
            K_full = kernel(X)
        fitter = _Fitter(X, s, p, kernel, K_full, rng)
        if solver == "pegasos" and n_prob > 1 and p["multi_class"] == "ovr" and not p["probability"]:
            # one-vs-rest problems share X: all weight vectors advance together
            Y = np.stack([yb for _, yb in problems], axis=1)
            epochs = p["max_iter"] if p["max_iter"] > 0 else _PEGASOS_EPOCHS
            Wm, bm, ep = pegasos_multi(X, Y, np.repeat(s[:, None], n_prob, axis=1), p["C"], n_epochs=epochs,
                                       tol=p["tol"], rng=rng, ctx=ctx)
            models, probA, probB = [(Wm[q], float(bm[q]), ep) for q in range(n_prob)], [], []
        elif K_full is not None and (n_prob > 1 or p["probability"]):
            models, probA, probB = fitter.fit_batched(problems, ctx)
        else:
            share = 1.0 / n_prob
            models = []
            probA, probB = [], []
            for q, (idx, yb) in enumerate(problems):
                sub = ctx.child(q * share, (q + 1) * share)
                fit_ctx = sub.child(0.0, 1.0 / 6.0) if p["probability"] else sub
                model = fitter.fit(idx, yb, fit_ctx)
                models.append(model)
                if p["probability"]:
                    dec = fitter.cv_decision(idx, yb, sub.child(1.0 / 6.0, 1.0))
                    A, B = sigmoid_train(dec, yb)
                    probA.append(A)
                    probB.append(B)
                sub.step(1, 1, problem=q + 1, n_problems=n_prob)

        # ---- assemble fitted attributes (dropping optional ones left by an earlier fit) ----
        for stale in ("coef_", "probA_", "probB_", "_W", "_kernel", "_sv_cache"):
            self.__dict__.pop(stale, None)
        if solver == "pegasos":
            W = np.array([m[0] for m in models])
            b = np.array([m[1] for m in models])
            self.coef_ = W
            self.intercept_ = b
            self.support_ = np.zeros(0, dtype=np.intp)
            self.support_vectors_ = np.zeros((0, X.shape[1]))
            self.dual_coef_ = np.zeros((n_prob, 0))
            self.n_support_ = np.zeros(k, dtype=np.intp)
            self.n_iter_ = np.array([m[2] for m in models])
            self._linear_w = W
        else:
            coef_full = np.zeros((n_prob, n))
            for q, ((idx, yb), m) in enumerate(zip(problems, models, strict=True)):
                coef_full[q, idx] = yb * m.alpha
            is_sv = (coef_full != 0).any(axis=0)
            # support vectors grouped by class, ascending index within a class (as LIBSVM / SVC)
            order = np.lexsort((np.arange(n), codes))
            support = order[is_sv[order]]
            W = coef_full[:, support]
            b = -np.array([m.rho for m in models])
            self.support_ = support.astype(np.intp)
            self.support_vectors_ = X[support].copy()
            self.n_support_ = np.bincount(codes[support], minlength=k).astype(np.intp)
            ovo = p["multi_class"] == "ovo" and k > 2
            self.dual_coef_ = _libsvm_dual_coef(W, codes[support], k) if ovo else W
            self.intercept_ = b
            self.n_iter_ = np.array([m.n_iter for m in models])
            self._W = W
            self._kernel = kernel
            self._sv_cache = kernel.prepare(self.support_vectors_)
            if _is_linear(kernel):
                self.coef_ = W @ self.support_vectors_
            self._linear_w = self.coef_ if _is_linear(kernel) else None
        if p["probability"]:
            self.probA_ = np.array(probA)
            self.probB_ = np.array(probB)
        self._strategy = "binary" if k == 2 else p["multi_class"]
        self._shape = p["decision_function_shape"]
        self._probability = p["probability"]
        self.fit_status_ = 0 if solver == "pegasos" or all(m.converged for m in models) else 1
        self.classes_ = classes
        self.n_features_in_ = X.shape[1]
        return self

    # ------------------------------------------------------------------ predict
    def _raw_decision(self, X) -> np.ndarray:
        """Decision values of every binary problem, shape (n, n_problems)."""
        X = check_predict_input(self, X, "classes_")
        if self._linear_w is not None:
            return X @ self._linear_w.T + self.intercept_
        cache = self.__dict__.get("_sv_cache")
        if cache is None:
            cache = self._sv_cache = self._kernel.prepare(self.support_vectors_)
        return self._kernel.cross(X, self.support_vectors_, cache) @ self._W.T + self.intercept_

    def decision_function(self, X) -> np.ndarray:
        """f(x) per binary problem: (n,) for two classes, (n, k) for 'ovr', (n, k(k-1)/2) for 'ovo'."""
        dec = self._raw_decision(X)
        if self._strategy == "binary":
            return dec[:, 0]
        if self._strategy == "ovo" and self._shape == "ovr":
            return _ovr_decision_function(dec, len(self.classes_))
        return dec

    def predict(self, X):
        dec = self._raw_decision(X)
        k = len(self.classes_)
        if self._strategy == "binary":
            return self.classes_[(dec[:, 0] > 0).astype(np.intp)]
        if self._strategy == "ovr":
            return self.classes_[np.argmax(dec, axis=1)]
        Ei, Ej, D, base = _vote_matrices(k)
        votes = (dec > 0) @ D + base  # pos @ Ei + (~pos) @ Ej
        return self.classes_[np.argmax(votes, axis=1)]

    def _predict_proba(self, X) -> np.ndarray:
        """Platt-scaled probabilities (needs ``probability=True``), columns in ``classes_`` order."""
        dec = self._raw_decision(X)
        P = sigmoid_predict(dec, self.probA_, self.probB_)
        if self._strategy == "binary":
            return np.column_stack([1.0 - P[:, 0], P[:, 0]])
        if self._strategy == "ovr":
            P = np.clip(P, 1e-12, None)
            return P / P.sum(axis=1, keepdims=True)
        return pairwise_coupling(P, len(self.classes_))

    # ``predict_proba`` exists only when probability=True (as SVC): hasattr() says whether it can be called,
    # so callers such as the service's evaluation fall back to predict() otherwise.
    predict_proba = _ProbaDescriptor(_predict_proba)


# ---------------------------------------------------------------------- helpers
def _problems(codes: np.ndarray, k: int, strategy: str):
    """Binary problems: list of (sample indices, labels in {+1, -1})."""
    n = len(codes)
    if k == 2:
        return [(np.arange(n), np.where(codes == 1, 1.0, -1.0))]
    out = []
    if strategy == "ovr":
        for c in range(k):
            out.append((np.arange(n), np.where(codes == c, 1.0, -1.0)))
        return out
    for i in range(k):
        for j in range(i + 1, k):
            idx = np.flatnonzero((codes == i) | (codes == j))
            out.append((idx, np.where(codes[idx] == i, 1.0, -1.0)))
    return out


class _Fitter:
    """Fits one binary problem (SMO or Pegasos) and its cross-validated decision values."""

    def __init__(self, X, s, p, kernel, K_full, rng):
        self.X, self.s, self.p, self.kernel, self.K_full, self.rng = X, s, p, kernel, K_full, rng

    def fit(self, idx, yb, ctx):
        p = self.p
        Cvec = p["C"] * self.s[idx]
        if p["solver"] == "pegasos":
            epochs = p["max_iter"] if p["max_iter"] > 0 else _PEGASOS_EPOCHS
            return pegasos(self.X[idx], yb, self.s[idx], p["C"], n_epochs=epochs, tol=p["tol"],
                           rng=self.rng, ctx=ctx)
        rows = KernelRows(self.kernel, self.X, p["cache_size"], K_full=self.K_full, index=idx)
        return solve_smo(rows, yb, -np.ones(len(idx)), Cvec, tol=p["tol"], max_iter=p["max_iter"], ctx=ctx)

    def fit_batched(self, problems, ctx, n_folds=5):
        """All binary problems (and, with probability, their CV fits) by the batched SMO."""
        p, K = self.p, self.K_full
        probability = p["probability"]
        main_ctx = ctx.child(0.0, 1.0 / 6.0) if probability else ctx
        spec = [(idx, yb, p["C"] * self.s[idx]) for idx, yb in problems]
        models = solve_smo_batch(K, spec, tol=p["tol"], max_iter=p["max_iter"], ctx=main_ctx)
        main_ctx.step(1, 1)
        if not probability:
            return models, [], []
        decs = [np.zeros(len(idx)) for idx, _ in problems]
        folds = []
        for idx, _ in problems:
            m = len(idx)
            perm = self.rng.permutation(m)
            folds.append([(perm[f * m // n_folds:(f + 1) * m // n_folds],
                           np.concatenate([perm[: f * m // n_folds], perm[(f + 1) * m // n_folds:]]))
                          for f in range(n_folds)])
        # all folds of all problems are independent: one batched solve
        batch, where = [], []
        for f in range(n_folds):
            for q, (idx, yb) in enumerate(problems):
                test, train = folds[q][f]
                ytr = yb[train]
                npos = int((ytr > 0).sum())
                if npos == 0 or npos == len(train):
                    decs[q][test] = 1.0 if npos > 0 else -1.0
                    continue
                batch.append((idx[train], ytr, p["C"] * self.s[idx[train]]))
                where.append((q, test, train))
        cv_ctx = ctx.child(1.0 / 6.0, 1.0)
        if batch:
            res = solve_smo_batch(K, batch, tol=p["tol"], max_iter=p["max_iter"], ctx=cv_ctx)
            for (q, test, train), model in zip(where, res, strict=True):
                idx, yb = problems[q]
                coef = yb[train] * model.alpha
                nz = coef != 0
                Kt = K[np.ix_(idx[test], idx[train][nz])]
                decs[q][test] = Kt @ coef[nz] - model.rho
        cv_ctx.step(1, 1)
        probA, probB = [], []
        for q, (_, yb) in enumerate(problems):
            A, B = sigmoid_train(decs[q], yb)
            probA.append(A)
            probB.append(B)
        return models, probA, probB

    def cv_decision(self, idx, yb, ctx, n_folds=5):
        """Decision values of each sample from a model trained without its fold (LIBSVM's
        svm_binary_svc_probability: random permutation, 5 contiguous folds)."""
        m = len(idx)
        perm = self.rng.permutation(m)
        dec = np.zeros(m)
        for f in range(n_folds):
            lo, hi = f * m // n_folds, (f + 1) * m // n_folds
            test = perm[lo:hi]
            train = np.concatenate([perm[:lo], perm[hi:]])
            ytr = yb[train]
            npos = int((ytr > 0).sum())
            if npos == 0 or npos == len(train):
                dec[test] = 1.0 if npos > 0 else -1.0
                continue
            tr_idx, te_idx = idx[train], idx[test]
            fctx = ctx.child(f / n_folds, (f + 1) / n_folds)
            model = self.fit(tr_idx, ytr, fctx)
            if self.p["solver"] == "pegasos":
                w, b, _ = model
                dec[test] = self.X[te_idx] @ w + b
            else:
                coef = ytr * model.alpha
                nz = coef != 0
                if self.K_full is not None:
                    Kt = self.K_full[np.ix_(te_idx, tr_idx[nz])]
                else:
                    Kt = self.kernel(self.X[te_idx], self.X[tr_idx[nz]])
                dec[test] = Kt @ coef[nz] - model.rho
            fctx.step(1, 1)
        return dec


def _libsvm_dual_coef(W: np.ndarray, sv_codes: np.ndarray, k: int) -> np.ndarray:
    """One-vs-one coefficients in LIBSVM/SVC layout, shape (k-1, n_SV).

    For pair (i, j), i < j: the coefficients of class-i SVs are in row j-1,
    those of class-j SVs in row i.
    """
    out = np.zeros((k - 1, W.shape[1]))
    q = 0
    for i in range(k):
        for j in range(i + 1, k):
            mi = sv_codes == i
            mj = sv_codes == j
            out[j - 1, mi] = W[q, mi]
            out[i, mj] = W[q, mj]
            q += 1
    return out


def _ovr_decision_function(dec: np.ndarray, k: int) -> np.ndarray:
    """One-vs-one decision values -> (n, k) votes plus bounded confidences (as scikit-learn)."""
    Ei, Ej, D, base = _vote_matrices(k)
    votes = (dec >= 0) @ D + base  # (dec >= 0) @ Ei + (dec < 0) @ Ej
    conf = dec @ D
    return votes + conf / (3.0 * (np.abs(conf) + 1.0))


@lru_cache(maxsize=64)
def _vote_matrices(k: int):
    """(Ei, Ej, Ei - Ej, column sums of Ej) for the one-vs-one pairs (0,1), (0,2), ...: Ei[q, i] = 1
    for pair q = (i, j).  Cached per k (read-only), so predict does no per-call set-up."""
    pi, pj = np.triu_indices(k, 1)
    P = len(pi)
    Ei = np.zeros((P, k))
    Ej = np.zeros((P, k))
    Ei[np.arange(P), pi] = 1.0
    Ej[np.arange(P), pj] = 1.0
    out = (Ei, Ej, Ei - Ej, Ej.sum(axis=0))
    for a in out:
        a.flags.writeable = False
    return out
