"""Exact SHAP values of linear models: ``phi_j = w_j (x_j - E_background[x_j])``.

For ``f(x) = w . x + b`` the interventional game ``v(S) = E_z f(x_S, z_~S)`` is additive over the
players, so its Shapley values are the closed form above (summed over a group's columns for a grouped
player: exact, because the game is additive) [Lundberg et al.].  The explained output is the model's
linear score: the prediction of a linear regressor, the decision function (log-odds / per-class scores)
of a linear classifier.  Whether a model IS linear in its inputs is checked on the background sample,
not assumed: an estimator with ``coef_`` whose output is not ``X coef^T + b`` (a link function, a basis
expansion, one-vs-one votes) is refused, so callers fall back to the model-agnostic estimator.
"""

from __future__ import annotations

import numpy as np

__all__ = ["linear_weights", "linear_shap", "is_linear"]


def _raw_output(est, X: np.ndarray) -> np.ndarray | None:
    if hasattr(est, "classes_"):
        fn = getattr(est, "decision_function", None)
        if fn is None:
            return None
        out = np.asarray(fn(X), dtype=float)
    else:
        out = np.asarray(est.predict(X), dtype=float)
    return out[:, None] if out.ndim == 1 else out


def linear_weights(est, background: np.ndarray):
    """``(W (F, V), b (V,))`` with ``raw(X) == X W + b`` on ``background``, or None if not linear."""
    coef = getattr(est, "coef_", None)
    if coef is None:
        return None
    coef = np.asarray(coef, dtype=float)
    F = background.shape[1]
    if coef.ndim == 1:
        coef = coef[None, :]
    if coef.ndim != 2 or coef.shape[1] != F or not np.isfinite(coef).all():
        return None
    Z = np.asarray(background, dtype=float)
    if np.isnan(Z).any():
        return None
    try:
        out = _raw_output(est, Z)
    except Exception:  # noqa: BLE001 - any failure means "not a linear model we can explain exactly"
        return None
    if out is None or out.shape[1] != coef.shape[0]:
        return None
    W = coef.T
    lin = Z @ W
    b = (out - lin).mean(axis=0)
    # a probe beyond the background: a model linear on a degenerate sample is still checked off it
    rng = np.random.default_rng(0)
    probe = Z[rng.integers(0, Z.shape[0], size=min(8, Z.shape[0]))] + rng.normal(size=(min(8, Z.shape[0]), F))
    try:
        out_p = _raw_output(est, probe)
    except Exception:  # noqa: BLE001
        return None
    scale = 1.0 + np.abs(out).max() + np.abs(out_p).max()
    if np.abs(out - lin - b).max() > 1e-7 * scale or np.abs(out_p - probe @ W - b).max() > 1e-7 * scale:
        return None
    return W, b


def is_linear(est, background: np.ndarray) -> bool:
    return linear_weights(est, background) is not None


def linear_shap(W: np.ndarray, b: np.ndarray, X: np.ndarray, background: np.ndarray, groups=None):
    """``(phi (n, n_players, V), base (V,))`` of the linear function ``X W + b``."""
    X = np.asarray(X, dtype=float)
    mu = np.asarray(background, dtype=float).mean(axis=0)
    per_col = (X - mu)[:, :, None] * W[None, :, :]  # (n, F, V)
    base = mu @ W + b
    if groups is None:
        return per_col, base
    groups = np.asarray(groups, dtype=np.intp)
    G = int(groups.max()) + 1
    phi = np.zeros((X.shape[0], G, W.shape[1]))
    np.add.at(phi, (slice(None), groups), per_col)
    return phi, base
