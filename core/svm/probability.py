"""Probability outputs for SVMs: Platt scaling and pairwise coupling (as LIBSVM).

* Platt (1999) with the improved Newton method of Lin, Lin & Weng (2007):
  P(y = +1 | f) = 1 / (1 + exp(A f + B)), fitted on cross-validated decision
  values with regularised targets (N+ + 1)/(N+ + 2) and 1/(N- + 2).
* Multiclass: pairwise coupling, method 2 of Wu, Lin & Weng (2004) (LIBSVM's
  ``multiclass_probability``), solved exactly as one small linear system per sample,
  batched over samples.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.linalg import get_lapack_funcs

__all__ = ["sigmoid_train", "sigmoid_predict", "pairwise_coupling"]


def _fapb_loss(fApB, t):
    # t*fApB + log(1 + exp(-fApB)) written stably for both signs
    return np.where(
        fApB >= 0,
        t * fApB + np.log1p(np.exp(-np.abs(fApB))),
        (t - 1.0) * fApB + np.log1p(np.exp(-np.abs(fApB))),
    ).sum()


def sigmoid_train(dec: np.ndarray, labels: np.ndarray, sample_weight=None) -> tuple[float, float]:
    """Fit A, B of Platt's sigmoid by Newton's method with backtracking (Lin et al. 2007)."""
    dec = np.asarray(dec, dtype=np.float64)
    pos = labels > 0
    prior1 = float(pos.sum())
    prior0 = float(len(labels) - prior1)
    hi = (prior1 + 1.0) / (prior1 + 2.0)
    lo = 1.0 / (prior0 + 2.0)
    t = np.where(pos, hi, lo)
    A, B = 0.0, float(np.log((prior0 + 1.0) / (prior1 + 1.0)))
    fval = _fapb_loss(dec * A + B, t)
    sigma, min_step, eps = 1e-12, 1e-10, 1e-5
    for _ in range(100):
        fApB = dec * A + B
        e = np.exp(-np.abs(fApB))
        p = np.where(fApB >= 0, e / (1.0 + e), 1.0 / (1.0 + e))
        q = 1.0 - p
        d2 = p * q
        h11 = sigma + float(dec @ (dec * d2))
        h22 = sigma + float(d2.sum())
        h21 = float(dec @ d2)
        d1 = t - p
        g1 = float(dec @ d1)
        g2 = float(d1.sum())
        if abs(g1) < eps and abs(g2) < eps:
            break
        det = h11 * h22 - h21 * h21
        dA = -(h22 * g1 - h21 * g2) / det
        dB = -(-h21 * g1 + h11 * g2) / det
        gd = g1 * dA + g2 * dB
        step = 1.0
        while step >= min_step:
            nA, nB = A + step * dA, B + step * dB
            nf = _fapb_loss(dec * nA + nB, t)
            if nf < fval + 1e-4 * step * gd:
                A, B, fval = nA, nB, nf
                break
            step /= 2.0
        if step < min_step:
            break
    return float(A), float(B)


def sigmoid_predict(dec, A: float, B: float) -> np.ndarray:
    """1 / (1 + exp(A f + B)), computed without overflow."""
    fApB = np.asarray(dec, dtype=np.float64) * A + B
    e = np.exp(-np.abs(fApB))
    return np.where(fApB >= 0, e / (1.0 + e), 1.0 / (1.0 + e))


@lru_cache(maxsize=64)
def _kkt_layout(k: int):
    """Cached layout of the (k+1) x (k+1) KKT matrix, flattened: the template (ones border, zero
    corner), flat positions of Q[i, j] and Q[j, i] for the pairs (0,1), (0,2), ..., of the diagonal
    of Q, and the pair -> class incidence matrices (Ei[q, i] = 1, Ej[q, j] = 1 for pair q = (i, j))."""
    m = k + 1
    pi, pj = np.triu_indices(k, 1)
    P = len(pi)
    template = np.ones(m * m)
    template[m * m - 1] = 0.0
    Ei = np.zeros((P, k))
    Ej = np.zeros((P, k))
    Ei[np.arange(P), pi] = 1.0
    Ej[np.arange(P), pj] = 1.0
    e = np.zeros(m)
    e[k] = 1.0
    out = (template, pi * m + pj, pj * m + pi, np.arange(k) * (m + 1), Ei, Ej, e)
    for a in out:
        a.flags.writeable = False
    return out


_gesv = get_lapack_funcs("gesv", (np.empty(1),))


def pairwise_coupling(r: np.ndarray, k: int) -> np.ndarray:
    """Class probabilities from pairwise ones (Wu, Lin & Weng 2004, method 2).

    ``r`` has shape (n, k(k-1)/2): r[:, pair(i, j)] = P(y = i | y in {i, j}, x) for i < j,
    pairs in the order (0,1), (0,2), ..., (k-2, k-1).  Returns (n, k) rows summing to 1.

    Method 2 minimises p^T Q p subject to sum(p) = 1, with Q[t, t] = sum_{j != t} r_jt^2 and
    Q[t, j] = -r_jt r_tj.  Q is only positive semi-definite (singular when the r_ij are exactly
    consistent), so we solve the KKT system [[Q, 1], [1^T, 0]] [p; b] = [0; 1], which is
    non-singular; its solution is non-negative (Wu et al. 2004, Theorem 3).  A single row uses
    LAPACK gesv directly (no per-call overhead), a batch one stacked solve; LIBSVM iterates
    towards the same point, to 0.005/k.
    """
    n = r.shape[0]
    m = k + 1
    template, fij, fji, fdiag, Ei, Ej, e = _kkt_layout(k)
    r = np.clip(r, 1e-7, 1.0 - 1e-7)
    q = 1.0 - r  # r_ji
    S = np.empty((n, m * m))
    S[:] = template
    off = r * q
    np.negative(off, out=off)
    S[:, fij] = off  # Q[i, j] = Q[j, i] = -r_ij r_ji
    S[:, fji] = off
    # Q[t, t] = sum_{j != t} r_jt^2: pair (i, j) adds r_ji^2 to Q[i, i] and r_ij^2 to Q[j, j]
    S[:, fdiag] = (q * q) @ Ei + (r * r) @ Ej
    if n == 1:
        p = _gesv(S.reshape(m, m), e)[2][None, :k]
    else:
        rhs = np.zeros((n, m, 1))
        rhs[:, k, 0] = 1.0
        p = np.linalg.solve(S.reshape(n, m, m), rhs)[:, :k, 0]
    np.clip(p, 0.0, None, out=p)
    return p / p.sum(axis=1, keepdims=True)
