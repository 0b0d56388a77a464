"""Sequential minimal optimisation for the SVM duals (the LIBSVM solver, in NumPy).

Solves the generic box-constrained QP of LIBSVM (Chang & Lin 2011, eq. 11)::

    min_a  1/2 a^T Q a + p^T a     s.t.  y^T a = const,  0 <= a_t <= C_t,
    Q_st = y_s y_t K(x_s, x_t),   y_t in {+1, -1}

* C-SVC ([Passerini §11.3, eq. 11.14]; [Colombo §6.4]): p = -1, y = labels, a^(0) = 0.
* epsilon-SVR: 2n variables a = [a+, a-], y = [+1.., -1..], p = [eps - z, eps + z].

Each iteration picks the working pair (i, j) by the second-order rule of Fan, Chen &
Lin (2005) ("WSS 2"): i = argmax_{t in I_up} -y_t G_t, then
j = argmin_{t in I_low, -y_t G_t < -y_i G_i} -b_it^2 / a_it with
a_it = K_ii + K_tt - 2 K_it, b_it = -y_i G_i + y_t G_t, and solves the
two-variable problem analytically (clipped to the box).  It stops when the
maximal violating pair satisfies m(a) - M(a) < tol (the KKT conditions to tol).

Per iteration the work is a handful of O(n) NumPy operations on two cached
kernel rows (the Python loop is over iterations only).  Kernel rows come from a
:class:`KernelRows` cache: the whole Gram matrix when it fits ``cache_size`` MB,
otherwise an LRU cache of rows computed on demand.  (LIBSVM's shrinking is not
implemented: with NumPy the gather/scatter on a shrunk active set costs about as
much as the full O(n) vector operations it would save; see docs/decisions/kernels.md.)
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ..context import NULL_CONTEXT
from ..kernels import BaseKernel, Kernel

__all__ = ["KernelRows", "solve_smo", "solve_smo_batch", "SMOResult"]

TAU = 1e-12
# Above this size, rows computed on demand (LRU) are cheaper than the full Gram matrix: SMO touches
# only a fraction of the rows (measured: n = 4000 binary rbf, 0.21 s LRU vs 0.37 s dense).
DENSE_MAX_N = 3000


class KernelRows:
    """Kernel rows K(x_i, X) of a training set, cached.

    ``dense`` is used when the full Gram matrix fits in ``cache_mb`` (and n <= DENSE_MAX_N); otherwise
    rows are computed on demand and kept in an LRU cache of that size.
    ``index`` restricts the problem to a subset of ``X`` (a precomputed Gram
    matrix ``K_full`` of all of ``X`` may be given; subsets then slice it).
    """

    def __init__(self, kernel: Kernel, X: np.ndarray, cache_mb: float = 200.0, K_full=None, index=None):
        self.kernel = kernel
        self.n = X.shape[0] if index is None else len(index)
        if K_full is not None:
            full = index is None or (len(index) == K_full.shape[0] and bool((np.diff(index) == 1).all()))
            self.dense = K_full if full else K_full[np.ix_(index, index)]
            self.X = None
        elif 8.0 * self.n * self.n <= cache_mb * 1e6 and self.n <= DENSE_MAX_N:
            Xs = X if index is None else X[index]
            self.dense = np.ascontiguousarray(kernel(Xs))
            self.X = None
        else:
            self.dense = None
            self.X = X if index is None else np.ascontiguousarray(X[index])
            self.capacity = max(2, int(cache_mb * 1e6 / (8.0 * self.n)))
            self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
            self._fast = kernel.row_kernel() if isinstance(kernel, BaseKernel) else None
            if self._fast is not None and self._fast[0] == "rbf":
                self._sq = np.einsum("ij,ij->i", self.X, self.X)
        self.hits = 0
        self.misses = 0
        self._diag = None

    def diag(self) -> np.ndarray:
        if self._diag is None:
            if self.dense is not None:
                self._diag = np.ascontiguousarray(np.diagonal(self.dense)).copy()
            else:
                self._diag = np.asarray(self.kernel.diag(self.X), dtype=np.float64)
        return self._diag

    def _compute(self, i: int) -> np.ndarray:
        X = self.X
        fast = self._fast
        if fast is not None:
            name, gamma, degree, coef0 = fast
            if name == "rbf":
                r = X @ X[i]
                r *= 2.0
                r -= self._sq
                r -= self._sq[i]
                r *= gamma
                np.minimum(r, 0.0, out=r)
                return np.exp(r, out=r)
            if name == "linear":
                return X @ X[i]
        return self.kernel(X[i : i + 1], X)[0]

    def row(self, i: int) -> np.ndarray:
        if self.dense is not None:
            return self.dense[i]
        cache = self._cache
        r = cache.get(i)
        if r is not None:
            cache.move_to_end(i)
            self.hits += 1
            return r
        self.misses += 1
        r = self._compute(i)
        cache[i] = r
        if len(cache) > self.capacity:
            cache.popitem(last=False)
        return r


class SMOResult:
    __slots__ = ("alpha", "rho", "n_iter", "obj", "converged", "G")

    def __init__(self, alpha, rho, n_iter, obj, converged, G):
        self.alpha, self.rho, self.n_iter = alpha, rho, n_iter
        self.obj, self.converged, self.G = obj, converged, G


def solve_smo(
    rows: KernelRows,
    y: np.ndarray,
    p: np.ndarray,
    C: np.ndarray,
    *,
    tol: float = 1e-3,
    max_iter: int = -1,
    ctx=NULL_CONTEXT,
    report_every: int = 200,
) -> SMOResult:
    """Minimise 1/2 a^T Q a + p^T a over the box and the equality y^T a = 0 (a^(0) = 0).

    ``rows`` serves kernel rows for the first n variables; when ``len(y) == 2 n``
    (SVR) variable t uses the row of sample t mod n, tiled twice.
    """
    m = y.shape[0]
    n = rows.n
    tiled = m == 2 * n
    y = y.astype(np.float64)
    C = np.asarray(C, dtype=np.float64)
    a = np.zeros(m)
    G = p.astype(np.float64).copy()
    QD = rows.diag()
    if tiled:
        QD = np.concatenate([QD, QD])
    ypos = y > 0
    yneg = ~ypos
    # I_up: can move "up" along y; I_low: can move down.
    up = (ypos & (a < C)) | (yneg & (a > 0))
    low = (yneg & (a < C)) | (ypos & (a > 0))
    if max_iter is None or max_iter < 0:
        max_iter = max(10_000_000, 100 * m)

    def krow(t):
        r = rows.row(t % n if tiled else t)
        return np.concatenate([r, r]) if tiled else r

    inf = np.inf
    it = 0
    converged = False
    yl = y.tolist()
    Cl = C.tolist()
    QDl = QD.tolist()
    yG = y * G  # maintained directly: y_t G_t (y_t^2 = 1 saves a multiply per iteration)
    tmp = np.empty(m)
    bl = np.empty(m)
    quad = np.empty(m)
    argmin = np.ndarray.argmin
    argmax = np.ndarray.argmax
    multiply = np.multiply
    maxreduce = np.maximum.reduce
    while it < max_iter:
        it += 1
        if it % report_every == 0:
            ctx.step(min(it / (it + 10.0 * m), 0.99), 1.0, iteration=it)
        # ---- working-set selection (WSS 2) ----
        # i = argmax_{I_up} -y_t G_t
        np.copyto(tmp, inf)
        np.copyto(tmp, yG, where=up)
        i = int(argmin(tmp))
        Gmax = -tmp[i]
        if Gmax == -inf:
            converged = True
            break
        # b_t = -y_i G_i + y_t G_t on I_low (else 0); stop when max_{I_low} b < tol (m(a) - M(a) < tol)
        np.add(yG, Gmax, out=bl)
        bl *= low
        np.maximum(bl, 0.0, out=bl)
        if maxreduce(bl) < tol:
            converged = True
            break
        Ki = krow(i)
        # a_it = K_ii + K_tt - 2 K_it (>= tau); j = argmax_{b_t > 0} b_t^2 / a_it
        multiply(Ki, -2.0, out=quad)
        quad += QD
        quad += QDl[i]
        np.maximum(quad, TAU, out=quad)
        bl *= bl
        bl /= quad
        j = int(argmax(bl))
        if bl[j] <= 0.0:
            converged = True
            break
        Kj = krow(j)
        # ---- analytic two-variable update (LIBSVM Solver::Solve) ----
        yi, yj = yl[i], yl[j]
        Ci, Cj = Cl[i], Cl[j]
        ai, aj = float(a[i]), float(a[j])
        Gi, Gj = yi * float(yG[i]), yj * float(yG[j])
        Kij = float(Ki[j])
        Qij = yi * yj * Kij
        if yi != yj:
            qc = QDl[i] + QDl[j] + 2.0 * Qij
            if qc <= 0:
                qc = TAU
            delta = (-Gi - Gj) / qc
            diff = ai - aj
            ai += delta
            aj += delta
            if diff > 0:
                if aj < 0:
                    aj = 0.0
                    ai = diff
            elif ai < 0:
                ai = 0.0
                aj = -diff
            if diff > Ci - Cj:
                if ai > Ci:
                    ai = Ci
                    aj = Ci - diff
            elif aj > Cj:
                aj = Cj
                ai = Cj + diff
        else:
            qc = QDl[i] + QDl[j] - 2.0 * Qij
            if qc <= 0:
                qc = TAU
            delta = (Gi - Gj) / qc
            s = ai + aj
            ai -= delta
            aj += delta
            if s > Ci:
                if ai > Ci:
                    ai = Ci
                    aj = s - Ci
            elif aj < 0:
                aj = 0.0
                ai = s
            if s > Cj:
                if aj > Cj:
                    aj = Cj
                    ai = s - Cj
            elif ai < 0:
                ai = 0.0
                aj = s
        dai = ai - float(a[i])
        daj = aj - float(a[j])
        a[i] = ai
        a[j] = aj
        # G_t += Q_ti dai + Q_tj daj = y_t (y_i dai K_ti + y_j daj K_tj), so y_t G_t += y_i dai K_ti + ...
        ci = yi * dai
        cj = yj * daj
        upd = Ki * ci
        upd += Kj * cj
        yG += upd
        up[i] = (ai < Ci) if yi > 0 else (ai > 0)
        low[i] = (ai < Ci) if yi < 0 else (ai > 0)
        up[j] = (aj < Cj) if yj > 0 else (aj > 0)
        low[j] = (aj < Cj) if yj < 0 else (aj > 0)
    G = y * yG
    rho = _calculate_rho(a, G, y, C)
    obj = 0.5 * float(a @ (G + p))
    return SMOResult(a, rho, it, obj, converged, G)


def _calculate_rho(a, G, y, C) -> float:
    """rho = mean of y_t G_t over free variables (LIBSVM calculate_rho), else the midpoint of bounds."""
    yG = y * G
    at_upper = a >= C
    at_lower = a <= 0
    free = ~(at_upper | at_lower)
    if free.any():
        return float(yG[free].mean())
    ypos = y > 0
    ub_mask = (at_upper & ~ypos) | (at_lower & ypos)
    lb_mask = (at_upper & ypos) | (at_lower & ~ypos)
    ub = yG[ub_mask].min() if ub_mask.any() else np.inf
    lb = yG[lb_mask].max() if lb_mask.any() else -np.inf
    if not np.isfinite(ub):
        ub = lb if np.isfinite(lb) else 0.0
    if not np.isfinite(lb):
        lb = ub
    return float((ub + lb) / 2.0)


def solve_smo_batch(
    K: np.ndarray,
    problems: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    *,
    tol: float = 1e-3,
    max_iter: int = -1,
    ctx=NULL_CONTEXT,
    report_every: int = 50,
) -> list[SMOResult]:
    """Solve several independent C-SVC duals (p = -1) at once, one SMO step of each per iteration.

    ``K`` is the Gram matrix of all samples; each problem is (global indices, labels
    in {+1, -1}, upper bounds C).  The problems are padded to a common length and every
    NumPy operation of the sequential solver (:func:`solve_smo`) acts on all of
    them together, so the Python overhead per iteration is shared by the k(k-1)/2
    one-vs-one problems (or the cross-validation fits of Platt scaling).  The
    working-pair selection and the two-variable step are the same (WSS 2, Fan et al.
    2005); the step is written as a_i += y_i t, a_j -= y_j t, t = min(t*, box limits),
    which is LIBSVM's clipped update.
    """
    P = len(problems)
    lens = np.array([len(g) for g, _, _ in problems])
    M = int(lens.max())
    GI = np.zeros((P, M), dtype=np.intp)
    Y = np.ones((P, M))
    Cm = np.zeros((P, M))
    for q, (g, yq, cq) in enumerate(problems):
        GI[q, : len(g)] = g
        Y[q, : len(g)] = yq
        Cm[q, : len(g)] = cq
    same_rows = all(len(g) == K.shape[0] for g, _, _ in problems) and all(
        np.array_equal(g, np.arange(K.shape[0])) for g, _, _ in problems
    )
    Kdiag = np.diagonal(K)
    QD = Kdiag[GI]
    # small one-vs-one sets: each problem's (padded) Gram matrix stacked, so a kernel row is one gather
    Ks = K[GI[:, :, None], GI[:, None, :]] if not same_rows and P * M * M <= _STACKED_GRAM_MAX else None
    unit_diag = 2.0 * float(Kdiag[0]) if Kdiag.size and np.all(Kdiag == Kdiag[0]) else None
    A = np.zeros((P, M))
    G = -Y.copy()  # holds y_t G_t (G = -1 at a = 0), updated without the y multiply
    ypos = Y > 0
    up = ypos & (Cm > 0)
    low = ~ypos & (Cm > 0)
    if max_iter is None or max_iter < 0:
        max_iter = max(10_000_000, 100 * M)
    results: list[SMOResult | None] = [None] * P
    act = np.arange(P)  # problem ids of the rows of the working arrays
    it = 0  # a problem found converged at iteration it made it - 1 steps; one stopped at max_iter made it
    inf = np.inf

    def finish(rows_done, converged):
        for r in rows_done:
            q = int(act[r])
            m = lens[q]
            yq, cq = Y[r, :m], Cm[r, :m]
            a, g = A[r, :m].copy(), G[r, :m] * yq
            rho = _calculate_rho(a, g, yq, cq)
            results[q] = SMOResult(a, rho, it - 1 if converged else it, 0.5 * float(a @ (g - 1.0)), converged, g)

    while act.size:
        if it >= max_iter:
            finish(range(act.size), False)
            break
        it += 1
        Pa = act.size
        r = np.arange(Pa)
        yG = G
        tmp = np.where(up, yG, inf)
        i = tmp.argmin(axis=1)
        Gmax = np.maximum(-tmp[r, i], -1e300)  # -inf (empty I_up) would give nan below
        bl = yG + Gmax[:, None]
        bl *= low
        np.maximum(bl, 0.0, out=bl)
        bmax = _max_reduce(bl, axis=1)  # ufunc reductions straight, without ndarray.max's Python wrapper
        if _min_reduce(bmax) < tol:
            done = bmax < tol
            finish(np.flatnonzero(done), True)
            keep = np.flatnonzero(~done)
            act = act[keep]
            if not act.size:
                break
            Y, G, A, Cm, QD, GI, up, low = (x[keep] for x in (Y, G, A, Cm, QD, GI, up, low))
            if Ks is not None:
                Ks = Ks[keep]
            i, Gmax, bl = i[keep], Gmax[keep], bl[keep]
            yG = G
            Pa = act.size
            r = np.arange(Pa)
        if it % report_every == 0:
            ctx.step(1.0 - act.size / P, 1.0, iteration=it, active_problems=int(act.size))
        # rows of the per-problem Gram matrices, gathered from K (a stacked (P, M, M) copy was measured
        # no faster and costs P M^2 memory)
        Ki = K[GI[r, i]] if same_rows else Ks[r, i] if Ks is not None else K[GI[r, i][:, None], GI]
        if unit_diag is not None:  # rbf-like kernels: K_tt = c, a_it = 2c - 2 K_it
            quad = Ki * -2.0
            quad += unit_diag
        else:
            quad = QD + QD[r, i][:, None]
            quad -= 2.0 * Ki
        np.maximum(quad, TAU, out=quad)
        bl *= bl
        bl /= quad
        j = bl.argmax(axis=1)
        Kj = K[GI[r, j]] if same_rows else Ks[r, j] if Ks is not None else K[GI[r, j][:, None], GI]
        if Pa <= _SCALAR_STEP_MAX:
            ci, cj = _step_scalar(i.tolist(), j.tolist(), Gmax.tolist(), Y, A, Cm, QD, Ki, yG, up, low)
        else:
            ci, cj = _step_vector(r, i, j, Gmax, Y, A, Cm, QD, Ki, yG, up, low)
        upd = Ki * ci[:, None]
        upd += Kj * cj[:, None]
        G += upd
    return results


# The stopping test's reductions, called straight (fmin: a NaN row does not hide a converged one).
_max_reduce, _min_reduce = np.maximum.reduce, np.fmin.reduce

# Up to this many problems the two-variable step runs on Python floats, problem by problem (the same IEEE
# operations as the array form, so the same iterates): for a few problems of ~100 samples (wine's three
# one-vs-one pairs) the ~30 NumPy calls of the array form cost more than the arithmetic.
_SCALAR_STEP_MAX = 8
# Largest stacked per-problem Gram matrices (floats) kept for the one-vs-one problems of ``solve_smo_batch``.
_STACKED_GRAM_MAX = 1 << 21


def _step_vector(r, i, j, Gmax, Y, A, Cm, QD, Ki, yG, up, low):
    """The clipped two-variable step of every problem as array operations; updates ``A``, ``up``, ``low`` and
    returns the coefficients (y_i da_i, y_j da_j) of the gradient update."""
    yi, yj = Y[r, i], Y[r, j]
    ai, aj = A[r, i], A[r, j]
    Ci, Cj = Cm[r, i], Cm[r, j]
    qij = np.maximum(QD[r, i] + QD[r, j] - 2.0 * Ki[r, j], TAU)
    tstar = (Gmax + yG[r, j]) / qij
    pi, pj = yi > 0, yj > 0
    ubi = np.where(pi, Ci - ai, ai)
    ubj = np.where(pj, aj, Cj - aj)
    t = np.minimum(np.minimum(tstar, ubi), ubj)
    ai_new = np.where(t >= ubi, np.where(pi, Ci, 0.0), ai + yi * t)
    aj_new = np.where(t >= ubj, np.where(pj, 0.0, Cj), aj - yj * t)
    ci = yi * (ai_new - ai)
    cj = yj * (aj_new - aj)
    A[r, i] = ai_new
    A[r, j] = aj_new
    up[r, i] = np.where(pi, ai_new < Ci, ai_new > 0)
    low[r, i] = np.where(pi, ai_new > 0, ai_new < Ci)
    up[r, j] = np.where(pj, aj_new < Cj, aj_new > 0)
    low[r, j] = np.where(pj, aj_new > 0, aj_new < Cj)
    return ci, cj


def _step_scalar(il, jl, Gm, Y, A, Cm, QD, Ki, yG, up, low):
    """``_step_vector`` on Python floats, one problem at a time (the same operations in the same order)."""
    cis, cjs = [], []
    for q, (i, j) in enumerate(zip(il, jl, strict=True)):
        yi, yj = Y.item(q, i), Y.item(q, j)
        ai, aj = A.item(q, i), A.item(q, j)
        Ci, Cj = Cm.item(q, i), Cm.item(q, j)
        qij = QD.item(q, i) + QD.item(q, j) - 2.0 * Ki.item(q, j)
        if not qij >= TAU:
            qij = TAU
        tstar = (Gm[q] + yG.item(q, j)) / qij
        pi, pj = yi > 0, yj > 0
        ubi = Ci - ai if pi else ai
        ubj = aj if pj else Cj - aj
        t = tstar if tstar <= ubi else ubi
        if not t <= ubj:
            t = ubj
        ai_new = (Ci if pi else 0.0) if t >= ubi else ai + yi * t
        aj_new = (0.0 if pj else Cj) if t >= ubj else aj - yj * t
        cis.append(yi * (ai_new - ai))
        cjs.append(yj * (aj_new - aj))
        A[q, i] = ai_new
        A[q, j] = aj_new
        up[q, i] = (ai_new < Ci) if pi else (ai_new > 0)
        low[q, i] = (ai_new > 0) if pi else (ai_new < Ci)
        up[q, j] = (aj_new < Cj) if pj else (aj_new > 0)
        low[q, j] = (aj_new > 0) if pj else (aj_new < Cj)
    return np.array(cis), np.array(cjs)
