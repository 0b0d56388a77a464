"""Losses of histogram gradient boosting: value, gradient, hessian, baseline.

Raw predictions ``F`` have shape ``(n,)`` (one tree per iteration) or ``(n, K)``
(multiclass: one tree per class per iteration).  Gradients and hessians are of
the loss with respect to ``F`` ([Colombo §3.4] describes boosting in words; the
second-order step is Friedman's / XGBoost's Newton step, as in scikit-learn):

* squared error  ``l = (F - y)^2 / 2``:           ``g = F - y``,  ``h = 1``
* absolute error ``l = |F - y|``:                 ``g = sign(F - y)``, ``h = 1``
  (leaves are then re-set to the median residual, like scikit-learn)
* binary log-loss ``l = log(1 + e^F) - y F``:     ``g = p - y``,  ``h = p (1 - p)``
* softmax log-loss ``l = logsumexp(F) - F_y``:    ``g_k = p_k - [y = k]``,  ``h_k = p_k (1 - p_k)``
  (diagonal of the Hessian, as in Friedman 2001 / scikit-learn)

All values are multiplied by ``sample_weight`` and averaged with it.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_softmax, logsumexp, softmax

__all__ = ["SquaredError", "AbsoluteError", "BinaryLogLoss", "MultinomialLogLoss", "weighted_median"]


def weighted_median(values: np.ndarray, weights: np.ndarray | None) -> float:
    if weights is None:
        return float(np.median(values))
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cw = np.cumsum(w)
    return float(v[np.searchsorted(cw, 0.5 * cw[-1])])


class SquaredError:
    n_outputs = 1
    constant_hessian = True

    @staticmethod
    def baseline(y, w):
        return np.array([np.average(y, weights=w)])

    @staticmethod
    def loss(y, raw, w):
        return float(0.5 * np.average((raw - y) ** 2, weights=w))

    @staticmethod
    def grad_hess(y, raw, w, g, h):
        np.subtract(raw, y, out=g)
        if w is not None:
            g *= w
            h[:] = w
        else:
            h[:] = 1.0


class AbsoluteError(SquaredError):
    @staticmethod
    def baseline(y, w):
        return np.array([weighted_median(y, w)])

    @staticmethod
    def loss(y, raw, w):
        return float(np.average(np.abs(raw - y), weights=w))

    @staticmethod
    def grad_hess(y, raw, w, g, h):
        np.sign(raw - y, out=g)
        if w is not None:
            g *= w
            h[:] = w
        else:
            h[:] = 1.0


def _sigmoid(raw):
    """``1 / (1 + e^-raw)``, within 4 ulps of ``scipy.special.expit``: with NumPy's vectorised exp the
    log-loss gradients of 50,000 rows take ~150 us against ~330 us (``bench/boosting_parts.py gradients``).
    ``e^-raw`` overflows to inf below raw ~ -709.8, where the result is 0, as expit's."""
    with np.errstate(over="ignore"):
        p = np.exp(np.negative(raw))
    p += 1.0
    return np.reciprocal(p, out=p)


class BinaryLogLoss:
    """y in {0, 1}; raw = log-odds of class 1."""

    n_outputs = 1
    constant_hessian = False

    @staticmethod
    def baseline(y, w):
        p = np.clip(np.average(y, weights=w), 1e-12, 1 - 1e-12)
        return np.array([np.log(p / (1 - p))])

    @staticmethod
    def loss(y, raw, w):
        # log(1 + e^F) - y F, computed stably
        return float(np.average(np.logaddexp(0.0, raw) - y * raw, weights=w))

    @staticmethod
    def grad_hess(y, raw, w, g, h):
        p = _sigmoid(raw)
        np.subtract(p, y, out=g)
        np.multiply(p, 1.0 - p, out=h)
        if w is not None:
            g *= w
            h *= w

    @staticmethod
    def proba(raw):
        p1 = expit(raw)
        return np.column_stack([1.0 - p1, p1])


class MultinomialLogLoss:
    """y in {0..K-1} (int codes); raw has shape (n, K)."""

    constant_hessian = False

    def __init__(self, n_classes: int):
        self.n_outputs = n_classes

    def baseline(self, y, w):
        counts = np.bincount(y, weights=w, minlength=self.n_outputs)
        p = np.clip(counts / counts.sum(), 1e-12, None)
        logp = np.log(p)
        return logp - logp.mean()

    @staticmethod
    def loss(y, raw, w):
        ll = logsumexp(raw, axis=1) - raw[np.arange(raw.shape[0]), y]
        return float(np.average(ll, weights=w))

    def grad_hess(self, y, raw, w, g, h):
        """Fill g, h of shape (K, n) (class-major, for per-class trees)."""
        p = softmax(raw, axis=1).T  # (K, n)
        g[:] = p
        g[y, np.arange(raw.shape[0])] -= 1.0
        np.multiply(p, 1.0 - p, out=h)
        if w is not None:
            g *= w
            h *= w

    @staticmethod
    def proba(raw):
        return np.exp(log_softmax(raw, axis=1))
