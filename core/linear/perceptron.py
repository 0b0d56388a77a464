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

All binary sub-problems (one per class for OvR, one per pair for OvO) are trained
together in one pass over the samples, each updating only on its own samples.
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

_BLOCK = 256  # rows whose margins are computed with one matrix product
_SLACK = 1e-8  # relative bound under which a margin from the running products is checked exactly


def _train_perceptrons(X, T, s, p, rng, ctx):
    """T: (n, m) targets in {-1, 0, +1} (0 = sample not in sub-problem m).  Returns W (m, d), b (m,).

    Samples are visited one at a time, as Rosenblatt's rule says, but only mistakes cost Python work: the
    margins of a block of the epoch's order are one matrix product, kept current after each update
    ``w += u x_r`` by ``z_i += u (x_i . x_r + 1)`` for the block's later rows.  A row is checked exactly
    (``t (W x + b)`` with the current weights, as a sample-by-sample loop computes it) when its running margin
    is below a bound far above rounding (``_SLACK``), so the updates, their order and the weights are those
    of the sample-by-sample loop, bit for bit.  Problems already stopped (``active`` False) never update, so
    only active ones make a row a candidate."""
    n, d = X.shape
    m = T.shape[1]
    W = np.zeros((m, d))
    b = np.zeros(m)
    eta0 = p["eta0"]
    fit_intercept = p["fit_intercept"]
    tol = p["tol"]
    active = np.ones(m, dtype=bool)
    best = np.full(m, np.inf)
    stall = np.zeros(m, dtype=int)
    n_part = np.maximum((T != 0).sum(axis=0), 1)
    order = np.arange(n)
    in_problem = T != 0
    x_norm = np.sqrt(np.einsum("ij,ij->i", X, X)) + 1.0
    scale = eta0 * s
    n_iter = 0
    for n_iter in range(1, p["max_iter"] + 1):
        if p["shuffle"]:
            rng.shuffle(order)
        loss = np.zeros(m)
        mistakes = np.zeros(m)
        act = active.astype(float)
        if m == 1:  # one problem (two classes): scalars where the general loop has length-1 arrays
            loss[0], mistakes[0] = _epoch_binary(X, T[:, 0], scale, W, b, order, x_norm, fit_intercept)
            n_seen = 0
        else:
            n_seen = n
        for start in range(0, n_seen, _BLOCK):
            idx = order[start : start + _BLOCK]
            Xb, Tb = X[idx], T[idx]
            counts = in_problem[idx] & active
            Z = Xb @ W.T
            Z += b
            w_norm = float(np.sqrt(np.einsum("ij,ij->i", W, W)).max() + np.abs(b).max()) + 1.0
            slack = (_SLACK * w_norm) * x_norm[idx]
            pos = 0
            while pos < len(idx):
                cand = ((Tb[pos:] * Z[pos:] <= slack[pos:, None]) & counts[pos:]).any(axis=1)
                r = int(cand.argmax())
                if not cand[r]:
                    break
                r += pos
                i = idx[r]
                x = X[i]
                t = T[i]
                margin = t * (W @ x + b)
                mis = (margin <= 0.0) & (t != 0)
                if mis.any():
                    loss -= np.where(mis, margin, 0.0)
                    mistakes += mis
                    u = (scale[i] * act) * np.where(mis, t, 0.0)
                    W += np.outer(u, x)
                    if fit_intercept:
                        b += u
                    if r + 1 < len(idx):
                        k = Xb[r + 1 :] @ x
                        if fit_intercept:
                            k += 1.0
                        Z[r + 1 :] += k[:, None] * u
                        w_norm += float(np.abs(u).max()) * x_norm[i]
                        slack[r + 1 :] = (_SLACK * w_norm) * x_norm[idx[r + 1 :]]
                pos = r + 1
        ctx.step(n_iter, p["max_iter"])
        # per-problem stopping (sklearn's rule), frozen problems stop updating
        if tol is not None:
            worse = loss > best - tol * n_part
            stall = np.where(worse, stall + 1, 0)
            best = np.minimum(best, loss)
            active &= ~((stall >= p["n_iter_no_change"]) | (mistakes == 0))
        else:
            active &= mistakes != 0
        if not active.any():
            break
    return W, b, n_iter


def _epoch_binary(X, t_all, scale, W, b, order, x_norm, fit_intercept):
    """One epoch of ``_train_perceptrons`` with a single problem (targets +-1, active): the same block scan with
    the margins, bounds and bookkeeping of one problem as 1-d arrays and Python floats (the same IEEE operations
    in the same order as the general loop, so the same weights).  Updates ``W`` (1, d) and ``b`` (1,) in place;
    returns the epoch's (loss, mistakes)."""
    n = len(order)
    loss, mistakes = 0.0, 0.0
    w = W[0]
    for start in range(0, n, _BLOCK):
        idx = order[start : start + _BLOCK]
        Xb, tb = X[idx], t_all[idx]
        z = Xb @ w
        z += b[0]
        w_norm = float(np.sqrt(w @ w) + abs(b[0])) + 1.0
        bound = _SLACK * x_norm[idx]
        pos, size = 0, len(idx)
        while pos < size:
            cand = tb[pos:] * z[pos:] <= w_norm * bound[pos:]
            r = int(cand.argmax())
            if not cand[r]:
                break
            r += pos
            i = idx[r]
            x = X[i]
            t = float(tb[r])
            margin = t * float((W @ x + b)[0])
            if margin <= 0.0:
                loss -= margin
                mistakes += 1.0
                u = (scale[i] * 1.0) * t
                w += u * x
                if fit_intercept:
                    b[0] += u
                if r + 1 < size:
                    k = Xb[r + 1 :] @ x
                    if fit_intercept:
                        k += 1.0
                    k *= u
                    z[r + 1 :] += k
                    w_norm += abs(u) * x_norm[i]
            pos = r + 1
    return loss, mistakes


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
