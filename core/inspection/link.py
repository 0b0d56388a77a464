"""Probability-space contributions of models that are additive in a margin (log-odds, class scores).

A boosted or logistic classifier is additive in its margin ``m(x)`` (one log-odds, or one score per
class) and predicts ``p(x) = link(m(x))`` (the logistic function, or softmax).  The exact explainers give,
for each background reference ``z``, margin contributions ``phi_j(x, z)`` with
``sum_j phi_j(x, z) = m(x) - m(z)`` (TreeSHAP per reference pair, ``w_j (x_j - z_j)`` for linear models).

Per reference, the probability contributions are a linear map of the margin ones,
``psi_j(x, z) = R(x, z) phi_j(x, z)``, with ``R`` the mean Jacobian of the link on the segment from
``m(z)`` to ``m(x)``; averaged over the background.  So ``sum_j psi_j(x, z) = p(x) - p(z)`` for every
reference and ``base_value + sum_j psi_j = p(x)`` with ``base_value = mean_z p(z)``, exactly.

* logistic: ``R = (sigma(m_x) - sigma(m_z)) / (m_x - m_z)`` (the derivative where ``m_x == m_z``):
  shap's ``TreeExplainer(model_output="probability", feature_perturbation="interventional")`` rescaling
  (DeepLIFT's rescale rule), which this reproduces.
* softmax: ``R = int_0^1 J(m_z + t (m_x - m_z)) dt`` (K x K), by Gauss-Legendre quadrature; the quadrature's
  residual is put along ``m_x - m_z`` so that ``R (m_x - m_z) = p(x) - p(z)`` holds exactly.  With two
  classes it is the logistic rule.

Each ``psi(x, z)`` is the Shapley value of the per-reference game ``p(z) + R(x, z) (v_z(S) - m(z))``,
``v_z`` the margin game of ``x`` against ``z``: the margin game carried through the link by the linear
map that agrees with the link at both ends.  It is not the Shapley value of ``p(x_S, z_~S)`` itself, which
has no polynomial-time form through a non-linear link; the two agree for one player and when the link is
linear between ``m(z)`` and ``m(x)``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, softmax

__all__ = ["detect_link", "link", "rescale", "probability_contributions"]

_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(32)
_T = 0.5 * (_NODES + 1.0)
_W = 0.5 * _WEIGHTS


def link(name: str, M: np.ndarray) -> np.ndarray:
    """Probabilities from margins: (n, 1) -> (n, 1) P(second class) for "logistic"; (n, K) for "softmax"."""
    return expit(M) if name == "logistic" else softmax(M, axis=1)


def detect_link(margin: np.ndarray, proba: np.ndarray, atol: float = 1e-9) -> str | None:
    """"logistic" or "softmax" if ``proba`` (n, K) is that function of ``margin`` (n, V), else None."""
    margin = np.asarray(margin, dtype=float)
    if margin.ndim == 1:
        margin = margin[:, None]
    proba = np.asarray(proba, dtype=float)
    if margin.ndim != 2 or proba.ndim != 2 or margin.shape[0] != proba.shape[0] or not np.isfinite(margin).all():
        return None
    if margin.shape[1] == 1 and proba.shape[1] == 2:
        return "logistic" if np.allclose(proba[:, 1], expit(margin[:, 0]), rtol=0, atol=atol) else None
    if margin.shape[1] == proba.shape[1] >= 2:
        return "softmax" if np.allclose(proba, softmax(margin, axis=1), rtol=0, atol=atol) else None
    return None


def rescale(name: str, mx: np.ndarray, mz: np.ndarray) -> np.ndarray:
    """``R`` (n, m, K, V) for every (instance, reference) pair; K = V = 1 for "logistic"."""
    if name == "logistic":
        a, b = mx[:, None, 0], mz[None, :, 0]
        d = a - b
        mid = expit(0.5 * (a + b))
        small = np.abs(d) <= 1e-9 * (1.0 + np.abs(a))
        r = np.where(small, mid * (1.0 - mid), (expit(a) - expit(b)) / np.where(small, 1.0, d))
        return r[:, :, None, None]
    n, K = mx.shape
    m = mz.shape[0]
    D = mx[:, None, :] - mz[None, :, :]  # (n, m, K)
    R = np.zeros((n, m, K, K))
    for t, w in zip(_T, _W, strict=True):
        p = softmax(mz[None, :, :] + t * D, axis=2)
        R += w * (p[..., :, None] * np.eye(K) - p[..., :, None] * p[..., None, :])
    dp = softmax(mx, axis=1)[:, None, :] - softmax(mz, axis=1)[None, :, :]
    res = dp - np.einsum("nmkc,nmc->nmk", R, D)
    norm = np.einsum("nmc,nmc->nm", D, D)
    ok = norm > 0
    R += np.where(ok[..., None, None], res[..., :, None] * D[..., None, :] / np.where(ok, norm, 1.0)[..., None, None],
                  0.0)
    return R


def probability_contributions(name: str, phi_ref: np.ndarray, mx: np.ndarray, mz: np.ndarray) -> np.ndarray:
    """``phi_ref`` (n, m, G, V) margin contributions per (instance, reference) -> (n, G, K) probability
    contributions averaged over the references (add ``link(mz).mean(0)`` for the base value)."""
    R = rescale(name, mx, mz)
    return np.einsum("nmkv,nmgv->ngk", R, phi_ref) / mz.shape[0]
