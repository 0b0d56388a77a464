"""Pegasos: primal estimated sub-gradient solver for the linear soft-margin SVM.

Objective (seed 000 §11.4 eq. 11.17, with sample weights s_i = sample_weight_i * class_weight_{y_i})::

    min_w  lambda/2 ||w||^2 + (1 / sum_i s_i) sum_i s_i max(0, 1 - y_i <w, [x_i, 1]>),
    lambda = 1 / (C sum_i s_i)

which is the soft-margin primal 1/2 ||w||^2 + C sum_i s_i hinge_i divided by C sum_i s_i.
The intercept is the last coordinate of w on a constant feature 1, so it is
regularised like the weights (as LinearSVC with intercept_scaling=1; notes/000.md
§1.13 notes the seed's form has no bias).

Mini-batch Pegasos (Shalev-Shwartz, Singer, Srebro & Cotter 2011): step t uses a batch
B_t, eta_t = 1 / (lambda t), sub-gradient (eq. 11.19)
``lambda w - (1/|B_t|) sum_{i in B_t, y_i <w, x_i> < 1} s~_i y_i x_i`` (s~ = s / mean s),
followed by the projection onto the ball ||w|| <= 1/sqrt(lambda).  The returned
weights are the average of the iterates of the last half of the run (suffix
averaging), which removes most of the sub-gradient noise.
"""

from __future__ import annotations

import numpy as np

from ..context import NULL_CONTEXT

__all__ = ["pegasos"]


def pegasos(
    X: np.ndarray,
    y: np.ndarray,
    s: np.ndarray,
    C: float,
    *,
    n_epochs: int = 30,
    batch_size: int | None = None,
    tol: float = 1e-4,
    rng: np.random.Generator,
    ctx=NULL_CONTEXT,
) -> tuple[np.ndarray, float, int]:
    """Return (w, b, epochs run) for labels y in {-1, +1} and sample weights s."""
    n, d = X.shape
    keep = s > 0
    if not keep.all():
        X, y, s = X[keep], y[keep], s[keep]
        n = X.shape[0]
    S = float(s.sum())
    lam = 1.0 / (C * S)
    sw = s / (S / n)  # mean 1
    ys = y * sw
    if batch_size is None:
        batch_size = int(min(n, max(16, min(256, n // 20))))
    radius = 1.0 / np.sqrt(lam)
    w = np.zeros(d)
    b = 0.0
    w_avg = np.zeros(d)
    b_avg = 0.0
    n_avg = 0
    t = 0
    n_batches = (n + batch_size - 1) // batch_size
    total_steps = n_epochs * n_batches
    avg_start = total_steps // 2
    prev_obj = np.inf
    epoch = 0
    for epoch in range(1, n_epochs + 1):
        perm = rng.permutation(n)
        for start in range(0, n, batch_size):
            idx = perm[start : start + batch_size]
            t += 1
            eta = 1.0 / (lam * t)
            Xb = X[idx]
            margin = y[idx] * (Xb @ w + b)
            viol = margin < 1.0
            scale = 1.0 - eta * lam  # = 1 - 1/t
            w *= scale
            b *= scale
            if viol.any():
                coef = ys[idx][viol] * (eta / len(idx))
                w += coef @ Xb[viol]
                b += float(coef.sum())
            norm = np.sqrt(float(w @ w) + b * b)
            if norm > radius:
                f = radius / norm
                w *= f
                b *= f
            if t > avg_start:
                n_avg += 1
                w_avg += (w - w_avg) / n_avg
                b_avg += (b - b_avg) / n_avg
        wa, ba = (w_avg, b_avg) if n_avg else (w, b)
        hinge = np.maximum(0.0, 1.0 - y * (X @ wa + ba))
        obj = 0.5 * lam * (float(wa @ wa) + ba * ba) + float(sw @ hinge) / n
        ctx.step(epoch, n_epochs, epoch=epoch, objective=obj)
        if n_avg and abs(prev_obj - obj) <= tol * max(1.0, abs(obj)):
            break
        prev_obj = obj
    if n_avg:
        return w_avg.copy(), float(b_avg), epoch
    return w, float(b), epoch


def pegasos_multi(
    X: np.ndarray,
    Y: np.ndarray,
    S: np.ndarray,
    C: float,
    *,
    n_epochs: int = 30,
    batch_size: int | None = None,
    tol: float = 1e-4,
    rng: np.random.Generator,
    ctx=NULL_CONTEXT,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Several Pegasos problems on the same X at once (one-vs-rest): Y, S of shape (n, P).

    Column p is exactly the problem of :func:`pegasos` (its own lambda_p = 1 / (C sum_i S_ip));
    one mini-batch step updates all P weight vectors with matrix products.  Returns
    (W (P, d), b (P,), epochs run); stops when every problem's objective has settled.
    """
    n, d = X.shape
    P = Y.shape[1]
    Ssum = S.sum(axis=0)
    lam = 1.0 / (C * Ssum)
    SW = S / (Ssum / n)
    YS = Y * SW
    if batch_size is None:
        batch_size = int(min(n, max(16, min(256, n // 20))))
    radius = 1.0 / np.sqrt(lam)
    W = np.zeros((d, P))
    b = np.zeros(P)
    W_avg = np.zeros((d, P))
    b_avg = np.zeros(P)
    n_avg = 0
    t = 0
    n_batches = (n + batch_size - 1) // batch_size
    avg_start = (n_epochs * n_batches) // 2
    prev_obj = np.full(P, np.inf)
    epoch = 0
    for epoch in range(1, n_epochs + 1):
        perm = rng.permutation(n)
        for start in range(0, n, batch_size):
            idx = perm[start : start + batch_size]
            t += 1
            eta = 1.0 / (lam * t)
            Xb = X[idx]
            viol = Y[idx] * (Xb @ W + b) < 1.0
            scale = 1.0 - 1.0 / t  # = 1 - eta lambda
            W *= scale
            b *= scale
            coef = YS[idx] * viol
            coef *= eta / len(idx)
            W += Xb.T @ coef
            b += coef.sum(axis=0)
            norm = np.sqrt(np.einsum("dp,dp->p", W, W) + b * b)
            f = np.minimum(1.0, radius / np.maximum(norm, 1e-300))
            W *= f
            b *= f
            if t > avg_start:
                n_avg += 1
                W_avg += (W - W_avg) / n_avg
                b_avg += (b - b_avg) / n_avg
        Wa, ba = (W_avg, b_avg) if n_avg else (W, b)
        hinge = np.maximum(0.0, 1.0 - Y * (X @ Wa + ba))
        obj = 0.5 * lam * (np.einsum("dp,dp->p", Wa, Wa) + ba * ba) + np.einsum("np,np->p", SW, hinge) / n
        ctx.step(epoch, n_epochs, epoch=epoch, objective=float(obj.mean()))
        if n_avg and (np.abs(prev_obj - obj) <= tol * np.maximum(1.0, np.abs(obj))).all():
            break
        prev_obj = obj
    Wf, bf = (W_avg, b_avg) if n_avg else (W, b)
    return Wf.T.copy(), bf.copy(), epoch
