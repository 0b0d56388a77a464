"""Independent component analysis by FastICA (registry name ``ica``).

Source: [da Silva Neto §3.5]: x = A s with independent non-Gaussian sources, unmixing W = A^{-1}.
The notes maximise l(W) by stochastic gradient ascent with an unspecified source density;
we use FastICA (Hyvarinen 1999), the fixed-point maximisation of negentropy approximations
with contrast G: ``logcosh`` (g = tanh(a u)), ``exp`` (g = u exp(-u^2/2)), ``cube`` (g = u^3).
After whitening Z = K (X - mean)^T (K from the SVD, unit covariance), each row w is updated by
w <- E[z g(w^T z)] - E[g'(w^T z)] w, followed by symmetric decorrelation
W <- (W W^T)^{-1/2} W (``parallel``) or Gram-Schmidt against earlier rows (``deflation``);
convergence when max |(|<w_new, w_old>| - 1)| < tol.
``components_`` = W K (unmixing applied to centred data), ``mixing_`` = pinv(components_).
``whiten="unit-variance"`` rescales the sources to unit variance (scikit-learn's default).
Sign convention: largest |entry| of each row of ``components_`` positive.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from ..base import Transformer
from ..context import NULL_CONTEXT
from ..params import Choice, Float, Int, Seed
from ..random import check_random_state
from ..registry import register
from ..validation import check_array, check_inverse_input, check_predict_input
from ._utils import flip_rows


def _logcosh(x, alpha=1.0):
    gx = np.tanh(alpha * x)
    return gx, (alpha * (1.0 - gx**2)).mean(axis=-1)


def _exp(x, alpha=1.0):
    e = np.exp(-(x**2) / 2.0)
    return x * e, ((1.0 - x**2) * e).mean(axis=-1)


def _cube(x, alpha=1.0):
    return x**3, (3.0 * x**2).mean(axis=-1)


_FUNS = {"logcosh": _logcosh, "exp": _exp, "cube": _cube}


def _sym_decorrelation(W):
    """(W W^T)^{-1/2} W."""
    s, u = linalg.eigh(W @ W.T)
    s = np.clip(s, np.finfo(W.dtype).tiny, None)
    return (u * (1.0 / np.sqrt(s))) @ u.T @ W


def _ica_parallel(X, g, alpha, max_iter, tol, W0, ctx):
    W = _sym_decorrelation(W0)
    p = float(X.shape[1])
    n_iter = 0
    for it in range(1, max_iter + 1):
        n_iter = it
        gwtx, g_wtx = g(W @ X, alpha)
        W1 = _sym_decorrelation(gwtx @ X.T / p - g_wtx[:, None] * W)
        lim = float(np.max(np.abs(np.abs(np.einsum("ij,ij->i", W1, W)) - 1.0)))
        W = W1
        ctx.step(it, max_iter, change=lim)
        if lim < tol:
            break
    return W, n_iter


def _ica_deflation(X, g, alpha, max_iter, tol, W0, ctx):
    k = W0.shape[0]
    W = np.zeros((k, k))
    iters = []
    for j in range(k):
        w = W0[j].copy()
        w /= np.sqrt((w**2).sum())
        i_done = 0
        for it in range(1, max_iter + 1):
            i_done = it
            gwtx, g_wtx = g(w @ X, alpha)
            w1 = (X * gwtx).mean(axis=1) - g_wtx.mean() * w
            w1 -= (w1 @ W[:j].T) @ W[:j]  # Gram-Schmidt against the found rows
            w1 /= np.sqrt((w1**2).sum())
            lim = float(abs(abs((w1 * w).sum()) - 1.0))
            w = w1
            ctx.step(j * max_iter + it, k * max_iter, component=j, change=lim)
            if lim < tol:
                break
        iters.append(i_done)
        W[j] = w
    return W, max(iters)


@register
class FastICA(Transformer):
    name = "ica"
    summary = "Independent component analysis by FastICA (parallel or deflation; logcosh/exp/cube)"
    params = {
        "n_components": Int(None, ge=1, le=10_000, doc="Number of sources (null: min(n_samples, n_features))."),
        "algorithm": Choice("parallel", choices=("parallel", "deflation")),
        "whiten": Choice("unit-variance", choices=("unit-variance", "arbitrary-variance", False)),
        "fun": Choice("logcosh", choices=("logcosh", "exp", "cube")),
        "alpha": Float(1.0, ge=1.0, le=2.0, doc="Parameter a of the logcosh contrast."),
        "max_iter": Int(200, ge=1, le=1_000_000),
        "tol": Float(1e-4, gt=0.0, le=1e6),
        "whiten_solver": Choice("svd", choices=("svd", "eigh")),
        "random_state": Seed(),
    }
    reports_progress = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X = check_array(X, min_samples=2)
        n, d = X.shape
        k = min(n, d) if p["n_components"] is None else min(p["n_components"], n, d)
        rng = check_random_state(p["random_state"])
        whiten = p["whiten"]
        XT = X.T
        mean = None
        K = None
        if whiten:
            mean = X.mean(axis=0)
            XT = XT - mean[:, None]
            if p["whiten_solver"] == "eigh":
                s2, u = linalg.eigh(XT @ XT.T)
                order = np.argsort(-s2)
                s = np.sqrt(np.maximum(s2[order], np.finfo(float).eps))
                u = u[:, order]
            else:
                u, s = linalg.svd(XT, full_matrices=False, check_finite=False)[:2]
            u = u * np.sign(u[0])
            K = (u / s).T[:k]
            X1 = (K @ XT) * np.sqrt(n)
        else:
            X1 = XT
        W0 = rng.normal(size=(k, k))
        solver = _ica_parallel if p["algorithm"] == "parallel" else _ica_deflation
        W, n_iter = solver(X1, _FUNS[p["fun"]], p["alpha"], p["max_iter"], p["tol"], W0, ctx)
        if whiten:
            comps = W @ K  # unmixing of centred data (as scikit-learn, without the sqrt(n) factor)
            if whiten == "unit-variance":
                S = XT.T @ comps.T
                comps = comps / S.std(axis=0)[:, None]
        else:
            comps = W
        flip_rows(comps)
        self.components_ = comps
        self.mixing_ = linalg.pinv(comps)
        self.mean_ = mean if mean is not None else np.zeros(d)
        self.whitening_ = K
        self.n_iter_ = n_iter
        self.n_features_in_ = d
        self.n_components_ = k
        return self

    def transform(self, X):
        """Estimated sources S = (X - mean) components_^T."""
        X = check_predict_input(self, X, "components_")
        return (X - self.mean_) @ self.components_.T

    def inverse_transform(self, S):
        """Mixed signals X = S mixing_^T + mean."""
        S = check_inverse_input(self, S, "components_", lambda est: est.components_.shape[0], name="S")
        return S @ self.mixing_.T + self.mean_
