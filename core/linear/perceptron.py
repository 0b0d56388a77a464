"""Rosenblatt perceptron, one-vs-rest or one-vs-one for several classes.

[Passerini §10, eq. 10.5-10.6], [Colombo §2.3, Algorithm 1, eq. 37], [da Silva Neto §1.3.1].
For targets t in {-1, +1}: a sample with t (w^T x + b) <= 0 is a mistake and triggers
w <- w + eta0 s_i t x, b <- b + eta0 s_i t (the perceptron criterion's SGD step).
Weights start at zero; samples are visited in a (per-epoch shuffled) order.
The notes loop "until converged", which need not terminate on non-separable
data ([Colombo §2.3]), so like sklearn.linear_model.Perceptron we stop after
``max_iter`` epochs, or when the epoch's perceptron loss sum max(0, -t z) has not
improved by ``tol * n`` for ``n_iter_no_change`` epochs, or when an epoch makes no
mistake.  Prediction follows sklearn: class +1 iff w^T x + b > 0 ([da Silva Neto §1.3.1]
writes g(0) = 1; the tie only matters on the boundary itself).

All binary sub-problems (one per class for OvR, one per pair for OvO) see the same
per-epoch order of the samples, each updating only on its own samples.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from ..base import Classifier
from ..context import NULL_CONTEXT
from ..params import Bool, Choice, Float, Int, Seed
from ..random import check_random_state
from ..registry import register
from ..validation import check_predict_input, check_sample_weight, check_X_y
from ._common import binary_labels, linear_scores

_BLOCK = 512  # rows of the epoch's order whose margins are computed with one product
_SLACK = 1e-8  # relative bound under which a margin from the running products is checked exactly
_STACK = 1 << 20  # floats of the (rows, m, d) stack the exact margins of several problems are computed in


def _train_perceptrons(X, T, s, p, rng, ctx):
    """T: (n, m) targets in {-1, 0, +1} (0 = sample not in sub-problem m).  Returns W (m, d), b (m,).

    The result is Rosenblatt's rule applied one sample at a time in the epoch's order, every sub-problem seeing
    the same order: at each sample of problem j the margin ``t (W x + b)[j]`` (one product with the whole
    ``W``) decides a mistake, which updates ``W[j] += eta0 s t x`` and ``b[j] += eta0 s t``.  Problems share
    only the order, so each is scanned on its own (``_Scan``) and only mistakes cost Python work; the margins,
    the updates, their order and the weights are those of the sample-by-sample loop, bit for bit.  Problems
    already stopped (``active`` False) are not scanned."""
    n, d = X.shape
    m = T.shape[1]
    tol, patience = p["tol"], p["n_iter_no_change"]
    # the stopping rule's per-problem state as Python numbers (the same float64 arithmetic as arrays, fewer calls)
    active = [True] * m
    best = [np.inf] * m
    stall = [0] * m
    in_problem = T != 0
    n_part = np.maximum(in_problem.sum(axis=0), 1)
    margin = [tol * k for k in n_part.tolist()] if tol is not None else None  # tol * n of each problem
    # problems on every sample (binary, one-vs-rest) are scanned block by block together; the others alone
    shared = bool(in_problem.all())
    groups = [list(range(m))] if shared else [[j] for j in range(m)]
    order = np.arange(n)
    # [x, 1] (or [x, 0] without intercept): the running margins and the updates carry the bias as a column
    Xa = np.empty((n, d + 1))
    Xa[:, :d] = X
    Xa[:, d] = 1.0 if p["fit_intercept"] else 0.0
    WA = np.zeros((m, d + 1))  # [W[j], b[j]] of each problem
    scan = _Scan(Xa, T, p["eta0"] * s, m, losses=tol is not None)
    n_iter = 0
    for n_iter in range(1, p["max_iter"] + 1):
        if p["shuffle"]:
            rng.shuffle(order)
        loss = np.zeros(m)
        mistakes = np.zeros(m)
        for group in groups:
            probs = [j for j in group if active[j]]
            if probs:
                rows = order if shared else order[in_problem[order, probs[0]]]
                scan.epoch(WA, rows, probs, loss, mistakes)
        ctx.step(n_iter, p["max_iter"])
        # per-problem stopping (sklearn's rule), frozen problems stop updating (a stopped problem stays stopped)
        for j, (lj, mj) in enumerate(zip(loss.tolist(), mistakes.tolist(), strict=True)):
            if not active[j]:
                continue
            if tol is not None:
                bj = best[j]
                stall[j] = stall[j] + 1 if lj > bj - margin[j] else 0
                if lj < bj or lj != lj:  # np.minimum's: the smaller, a NaN on either side kept
                    best[j] = lj
                if stall[j] >= patience:
                    active[j] = False
            if mj == 0:
                active[j] = False
        if not any(active):
            break
    return WA[:, :d].copy(), WA[:, d].copy(), n_iter


class _Scan:
    """One epoch of a group of problems over the same rows, in blocks of ``_BLOCK`` rows of the order.

    The block's margins ``t (x . w + b)`` of all its problems are one product, and each problem's are kept
    current after each of its updates ``w += u x_r`` by ``z_i += t_i u (x_i . x_r + 1)`` for the block's later
    rows (the products ``u (x_i . x_r + 1)`` are computed once per row ``r`` for all the problems updating there,
    then signed by each problem's ``t_i``); a row is a mistake candidate
    when its running margin is below a bound (``_SLACK`` relative) far above the rounding of the running
    products.  A candidate whose running margin is beyond the bound on either side is decided by it; one within
    it by its exact margin.  Updates do not depend on the margin's value (``u = eta0 s t``), so the block's
    updates are kept pending and applied at its end, for all its problems at once, by one cumulative sum (the
    same additions in the same order as ``w += u x`` one at a time); the exact margins of its mistakes, which
    the epoch's loss sums, are then computed from the weights before each update with the product a
    sample-by-sample loop computes (``W @ x``: a dot product for one problem, a matrix-vector product with all
    ``m`` rows of ``W`` for several)."""

    def __init__(self, Xa, T, scale, m, losses=True):
        n, d1 = Xa.shape
        # the epoch's loss only feeds the ``tol`` stopping rule: without it the mistakes' exact margins are not needed
        self.losses = losses
        d = d1 - 1
        size = min(_BLOCK, n)
        self.Xa, self.Tt, self.scale, self.m, self.d = Xa, np.ascontiguousarray(T.T), scale, m, d
        self.x_norm = np.sqrt(np.einsum("ij,ij->i", Xa[:, :d], Xa[:, :d])) + 1.0
        self.step_norm = np.abs(scale) * self.x_norm  # how much one update at a row can grow ||w|| + |b|
        self.unit = bool((scale == 1.0).all())  # eta0 s = 1 everywhere: the updates' rows are the rows themselves
        self.Xb = np.empty((size, d1))  # the block's rows [x, 1]
        self.Ub = np.empty((size, d1))  # eta0 s [x, 1]: an update at the row is t times it
        self.Xs = np.empty((size, d1))  # t [x, 1] of a group's only problem
        self.P = np.empty((size + 1, d1))  # [w, b] then the pending updates u [x, 1]
        self.C = np.empty((size + 1, d1))  # their cumulative sums: the weights after each update
        self.G = np.zeros((max(1, min(size, _STACK // (m * d or 1))), m, d)) if m > 1 else None

    def epoch(self, WA, rows, probs, loss, mistakes):
        """Scans ``rows`` (the epoch's order restricted to the group) for the problems ``probs``, updating their
        weights ``WA[j]`` = [w, b] in place and adding to their ``loss`` and ``mistakes``."""
        d = self.d
        for start in range(0, len(rows), _BLOCK):
            idx = rows[start : start + _BLOCK]
            size = len(idx)
            Xb = np.take(self.Xa, idx, axis=0, out=self.Xb[:size], mode="clip")
            # eta0 s [x, 1] (x * 1.0 is x: no product needed when every eta0 s is 1)
            Ub = Xb if self.unit else np.multiply(Xb, self.scale[idx][:, None], out=self.Ub[:size])
            self.U = Ub
            xn = self.x_norm[idx]
            step = self.step_norm[idx]
            grow = float(step.sum())
            Wp = WA[probs]
            norms = np.sqrt(np.einsum("ij,ij->i", Wp[:, :d], Wp[:, :d])) + np.abs(Wp[:, d]) + 1.0
            TB = np.take(self.Tt if len(probs) == self.m else self.Tt[probs], idx, axis=1)  # t of each problem
            V = Wp @ Xb.T  # x . w + b of each problem at the block's start
            V *= TB
            # the filter's bound, with the weights' largest possible norm in this block
            S = ((norms + grow) * _SLACK)[:, None] * xn
            V -= S  # running margins minus the filter's bound: a candidate where <= 0
            norms = norms.tolist()
            # a problem without a candidate at the block's start makes no update in it: its margins do not move
            scanned = (V <= 0.0).any(axis=1).tolist() if len(probs) > 1 else (True,)
            # one problem: its signed rows t [x, 1] once per block; several: each update's products are signed
            Xs = np.multiply(Xb, TB[0][:, None], out=self.Xs[:size]) if len(probs) == 1 else None
            block_pending = []
            products = {}  # r -> [x_i, 1] . u_r [x_r, 1] for the rows i after r: shared by the problems updating at r
            for q, j in enumerate(probs):
                if not scanned[q]:
                    continue
                tb, v, slack = TB[q], V[q], S[q]
                w_norm = norms[q]
                wa = WA[j]
                pending = []  # block positions of the pending updates
                pos = 0
                while pos < size:
                    r = pos + int((v[pos:] <= 0.0).argmax())
                    vr = v.item(r)
                    if vr > 0.0:
                        break
                    z = vr + slack.item(r)
                    bound = _SLACK * w_norm * xn.item(r)
                    pos = r + 1
                    if z > bound:
                        continue
                    if z >= -bound:  # too close to call from the running margin: apply the pending updates
                        self._flush(wa, pending, tb, j, loss, mistakes)
                        pending = []
                        dot = float(self._margins(wa[None], Xb[r : r + 1, :d], j)[0])
                        if tb.item(r) * (dot + float(wa[d])) > 0.0:
                            continue
                    pending.append(r)
                    w_norm += step.item(r)
                    if pos < size:
                        if Xs is None:
                            raw = products.get(r)
                            if raw is None:
                                raw = products[r] = Xb[pos:] @ Ub[r]
                            h = raw * tb[pos:]
                        else:
                            h = Xs[pos:] @ Ub[r]
                        if tb.item(r) > 0.0:
                            v[pos:] += h
                        else:
                            v[pos:] -= h
                if pending:
                    block_pending.append((q, j, pending))
            if block_pending:
                self._flush_block(WA, block_pending, TB, loss, mistakes)

    def _flush(self, wa, pending, tb, j, loss, mistakes):
        """Applies the pending updates at block positions ``pending`` to ``wa`` and adds their exact margins to
        ``loss[j]``."""
        k = len(pending)
        if not k:
            return
        d = self.d
        at = np.array(pending)
        tp = tb[at]
        P = self.P[: k + 1]
        P[0] = wa
        np.take(self.U, at, axis=0, out=P[1:], mode="clip")
        P[1:] *= tp[:, None]  # u [x, 1] with u = eta0 s t: the products of u * x (t = +-1 is exact)
        C = np.add.accumulate(P, axis=0, out=self.C[: k + 1])
        mistakes[j] += k
        if not self.losses:
            wa[:] = C[k]
            return
        dots = self._margins(C[:k], np.take(self.Xb, at, axis=0)[:, :d], j)
        margins = (dots + C[:k, d]) * tp
        total = float(loss[j])
        for mg in margins.tolist():
            if mg > 0.0:  # the running margin's bound is sound: a pending update is always a mistake
                raise AssertionError("perceptron block scan: a pending update is not a mistake")
            total -= mg
        loss[j] = total
        wa[:] = C[k]

    def _flush_block(self, WA, block_pending, TB, loss, mistakes):
        """``_flush`` of every problem of a block at once: ``block_pending`` holds (row of ``TB``, problem,
        pending block positions).  Each problem's updates are summed by its own cumulative sum (one
        ``accumulate`` over a zero-padded stack: adding 0.0 leaves a sum unchanged), and the exact margins are
        computed with ``_margins``'s products, item by item the same."""
        if len(block_pending) == 1:
            q, j, pending = block_pending[0]
            self._flush(WA[j], pending, TB[q], j, loss, mistakes)
            return
        d = self.d
        ks = [len(pend) for _, _, pend in block_pending]
        nq, kmax = len(ks), max(ks)
        qs = np.array([q for q, _, _ in block_pending])
        js = np.array([j for _, j, _ in block_pending])
        at = np.array([r for _, _, pend in block_pending for r in pend])
        slot = np.repeat(np.arange(nq), ks)  # the stack's problem of each update
        step = np.arange(len(at)) - np.repeat(np.cumsum(ks) - ks, ks) + 1  # its position 1..k in it
        tp = TB[qs[slot], at]
        P = np.zeros((nq, kmax + 1, self.d + 1))
        P[:, 0] = WA[js]
        P[slot, step] = self.U[at] * tp[:, None]  # u [x, 1] with u = eta0 s t (t = +-1 is exact)
        C = np.add.accumulate(P, axis=1, out=P)
        if self.losses:
            before = C[slot, step - 1]  # [w, b] before each update
            dots = self._margins(before, np.take(self.Xb, at, axis=0)[:, :d], js[slot])
            margins = ((dots + before[:, d]) * tp).tolist()
            i = 0
            for j, k in zip(js.tolist(), ks, strict=True):
                total = float(loss[j])
                for mg in margins[i : i + k]:
                    if mg > 0.0:  # the running margin's bound is sound: a pending update is always a mistake
                        raise AssertionError("perceptron block scan: a pending update is not a mistake")
                    total -= mg
                loss[j] = total
                i += k
        mistakes[js] += ks
        WA[js] = C[np.arange(nq), np.array(ks)]

    def _margins(self, Wa, Xm, j):
        """``(W @ x)[j]`` for each weight row ``Wa[i, :d]`` of problem ``j`` (one per row when ``j`` is an array)
        and sample ``Xm[i]``, computed as a
        sample-by-sample loop does: one dot product per row for one problem; for several, a matrix-vector
        product with the ``m`` rows of ``W``, row ``j`` being the problem's (the other rows do not enter row
        ``j``'s result)."""
        d = self.d
        if self.m == 1:
            return np.matmul(Wa[:, None, :d], Xm[:, :, None])[:, 0, 0]
        G = self.G
        out = np.empty(len(Xm))
        many = np.ndim(j) > 0
        for start in range(0, len(Xm), len(G)):
            stop = min(start + len(G), len(Xm))
            g = G[: stop - start]
            at = (np.arange(stop - start), j[start:stop]) if many else (slice(None), j)
            g[at] = Wa[start:stop, :d]
            out[start:stop] = np.matmul(g, Xm[start:stop, :, None])[at + (0,)]
        return out


@register
class Perceptron(Classifier):
    """Rosenblatt's mistake-driven linear classifier (no probabilities)."""

    name = "perceptron"
    summary = "Rosenblatt perceptron (mistake-driven updates), one-vs-rest or one-vs-one."
    supports_sample_weight = True
    needs_scaling = True
    reports_progress = True

    params = {
        "eta0": Float(1.0, gt=0.0, le=1e6, doc="Learning rate of the update w += eta0 t x."),
        "max_iter": Int(1000, ge=1, le=1_000_000, doc="Maximum number of epochs."),
        "tol": Float(
            1e-3, ge=0.0, le=1e6, nullable=True,
            doc="Stop when the epoch loss has not improved by tol*n for n_iter_no_change epochs (null: off).",
        ),
        "n_iter_no_change": Int(5, ge=1, le=100_000, doc="Epochs without improvement before stopping."),
        "shuffle": Bool(True, doc="Shuffle the samples every epoch."),
        "fit_intercept": Bool(True, doc="Learn a bias b."),
        "multi_class": Choice("ovr", choices=("ovr", "ovo"), doc="One-vs-rest or one-vs-one for k > 2."),
        "random_state": Seed(None),
    }

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y)
        classes, codes = self._encode_targets(y)
        k = len(classes)
        sw = check_sample_weight(sample_weight, X.shape[0])
        rng = check_random_state(p["random_state"])
        n = X.shape[0]
        if k == 2:
            mode, pairs = "binary", None
            T = np.where(codes == 1, 1.0, -1.0)[:, None]
        elif p["multi_class"] == "ovr":
            mode, pairs = "ovr", None
            T = -np.ones((n, k))
            T[np.arange(n), codes] = 1.0
        else:
            mode = "ovo"
            pairs = np.array(list(combinations(range(k), 2)), dtype=np.intp)
            T = np.zeros((n, len(pairs)))
            for j, (a, c) in enumerate(pairs):
                T[codes == a, j] = 1.0
                T[codes == c, j] = -1.0
        W, b, n_iter = _train_perceptrons(X, T, sw, p, rng, ctx)
        ctx.step(1, 1)
        if pairs is not None:
            A = np.zeros((len(pairs), k))
            A[np.arange(len(pairs)), pairs[:, 0]] = 1.0
            A[np.arange(len(pairs)), pairs[:, 1]] = -1.0
            self.pair_matrix_ = A
            self._pos, self._neg = (A > 0).astype(float), (A < 0).astype(float)
        self.classes_ = classes
        self.coef_ = W
        self.intercept_ = b
        self.multi_class_ = mode
        self.pairs_ = pairs
        self.n_iter_ = n_iter
        self.n_features_in_ = X.shape[1]
        return self

    def decision_function(self, X):
        """Binary: w^T x + b; OvR: one score per class; OvO: votes plus scaled confidences (as sklearn)."""
        X = check_predict_input(self, X, "coef_")
        if self.multi_class_ == "binary":
            return linear_scores(X, self.coef_, self.intercept_, binary=True)
        Z = linear_scores(X, self.coef_, self.intercept_)
        if self.multi_class_ == "ovr":
            return Z
        A = self.pair_matrix_  # +1 for the pair's first class, -1 for its second
        win = (Z > 0).astype(float)
        votes = win @ self._pos + (1.0 - win) @ self._neg
        conf = Z @ A
        return votes + conf / (3.0 * (np.abs(conf) + 1.0))

    def predict(self, X):
        Z = self.decision_function(X)
        if self.multi_class_ == "binary":
            return binary_labels(self.classes_, Z)
        return self.classes_[np.argmax(Z, axis=1)]
