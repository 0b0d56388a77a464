"""First-order optimisers shared by the linear family.

* :func:`accelerated_gradient`: batch (proximal) gradient descent with step 1/L and
  Nesterov/FISTA momentum with adaptive restart (Beck & Teboulle 2009;
  O'Donoghue & Candes 2015).  Without a proximal operator it is batch gradient
  descent ([da Silva Neto §1.1.2], [Colombo eq. 16]) sped up by momentum; with the
  soft-threshold prox it solves L1 / elastic-net penalised problems.
* :func:`minibatch_sgd`: stochastic gradient descent over shuffled mini-batches
  ([Colombo §1.2.3], [da Silva Neto §1.1.2]) with a Robbins-Monro step
  ``eta_e = eta0 / sqrt(1 + e)`` ([Colombo eq. 17] is garbled; this is the intended
  sum(eta) = inf condition) and Polyak-Ruppert averaging of the iterates, plus an
  optional proximal step (truncated gradient) for L1 penalties.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from ..context import NULL_CONTEXT

__all__ = [
    "accelerated_gradient", "minibatch_sgd", "soft_threshold", "newton_minimize", "cholesky_direction",
]


def soft_threshold(z, t):
    """prox of t*|.|: sign(z) * max(|z| - t, 0)."""
    return np.sign(z) * np.maximum(np.abs(z) - t, 0.0)


def accelerated_gradient(grad, x0, L, *, prox=None, max_iter=1000, tol=1e-6, ctx=NULL_CONTEXT):
    """Minimise ``f(x) + h(x)`` with ``grad`` = grad f (L-Lipschitz) and ``prox(v, step)`` of h.

    Stops when the largest coordinate change of an iteration is at most
    ``tol * max(1, max|x|)``.  Returns ``(x, n_iter)``.
    """
    step = 1.0 / max(L, 1e-12)
    x = x0.copy()
    z = x0.copy()
    t = 1.0
    it = 0
    for it in range(1, max_iter + 1):
        g = grad(z)
        x_new = z - step * g
        if prox is not None:
            x_new = prox(x_new, step)
        dx = x_new - x
        # gradient-based adaptive restart: momentum is pointing uphill
        if np.vdot(z - x_new, dx) > 0:
            t = 1.0
            z = x_new.copy()
        else:
            t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
            z = x_new + ((t - 1.0) / t_new) * dx
            t = t_new
        x = x_new
        change = float(np.max(np.abs(dx))) if dx.size else 0.0
        ctx.step(it, max_iter, change=change)
        if change <= tol * max(1.0, float(np.max(np.abs(x))) if x.size else 0.0):
            break
    return x, it


def minibatch_sgd(
    grad_batch,
    x0,
    n_samples,
    *,
    eta0,
    rng,
    batch_size=32,
    max_iter=100,
    tol=1e-6,
    prox=None,
    shuffle=True,
    loss=None,
    n_iter_no_change=5,
    ctx=NULL_CONTEXT,
):
    """Mini-batch SGD; ``grad_batch(x, idx)`` is the gradient of the mean loss on rows ``idx``
    plus the smooth penalty.  One iteration is one epoch.  Returns ``(x_averaged, n_epochs)``.

    With ``loss`` (the full objective), stops when the averaged iterate's objective has not
    improved by ``tol * max(1, |best|)`` for ``n_iter_no_change`` epochs (sklearn's SGD rule);
    otherwise when the averaged iterate moves by at most ``tol * max(1, max|x|)`` in an epoch.
    """
    x = x0.copy()
    avg = x0.copy()
    n_avg = 0
    order = np.arange(n_samples)
    bs = max(1, min(batch_size, n_samples))
    epoch = 0
    best = np.inf
    stall = 0
    for epoch in range(1, max_iter + 1):
        eta = eta0 / np.sqrt(epoch)
        if shuffle:
            rng.shuffle(order)
        prev = avg.copy()
        for start in range(0, n_samples, bs):
            idx = order[start : start + bs]
            x -= eta * grad_batch(x, idx)
            if prox is not None:
                x = prox(x, eta)
            if epoch > 1:  # averaging skips the first (transient) epoch
                n_avg += 1
                avg += (x - avg) / n_avg
        if epoch == 1:
            avg = x.copy()
            n_avg = 1
        change = float(np.max(np.abs(avg - prev))) if avg.size else 0.0
        if loss is not None:
            f = float(loss(avg))
            ctx.step(epoch, max_iter, loss=f)
            stall = stall + 1 if f > best - tol * max(1.0, abs(best) if np.isfinite(best) else 0.0) else 0
            best = min(best, f)
            if stall >= n_iter_no_change:
                break
        else:
            ctx.step(epoch, max_iter, change=change)
            if epoch > 1 and change <= tol * max(1.0, float(np.max(np.abs(avg))) if avg.size else 0.0):
                break
    return avg, epoch


def newton_minimize(loss_grad, direction, x0, *, max_iter=100, tol=1e-4, ctx=NULL_CONTEXT):
    """Damped Newton: ``d = direction(x, g)`` (solves H d = -g), Armijo backtracking line search.

    Stops when max|g| <= tol.  Near the optimum, where the loss no longer changes
    beyond rounding, a full step that does not raise the loss by more than
    rounding and reduces the gradient is accepted.  Returns ``(x, n_iter)``.
    """
    x = x0.copy()
    f, g = loss_grad(x)
    n_iter = 0
    for it in range(1, max_iter + 1):
        g_max = float(np.max(np.abs(g))) if g.size else 0.0
        if g_max <= tol:
            break
        n_iter = it
        d = direction(x, g)
        slope = float(g @ d)
        if not np.isfinite(slope) or slope >= 0:  # not a descent direction: fall back to the gradient
            d, slope = -g, -float(g @ g)
        t = 1.0
        round_off = 64 * np.finfo(float).eps * max(1.0, abs(f))
        while True:
            f_new, g_new = loss_grad(x + t * d)
            if f_new <= f + 1e-4 * t * slope:
                break
            if t == 1.0 and f_new <= f + round_off and np.max(np.abs(g_new)) < g_max:
                break
            if t < 1e-10:
                break
            t *= 0.5
        if t < 1e-10 and f_new > f:
            break  # no progress possible
        x = x + t * d
        f, g = f_new, g_new
        ctx.step(it, max_iter, loss=f)
    return x, n_iter


def cholesky_direction(H, g):
    """Newton direction -H^{-1} g by Cholesky; least squares when H is singular."""
    try:
        cf = linalg.cho_factor(H, check_finite=False)
        return -linalg.cho_solve(cf, g, check_finite=False)
    except linalg.LinAlgError:
        return -linalg.lstsq(H, g, check_finite=False)[0]
