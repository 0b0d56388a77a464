"""Cyclic coordinate descent for the lasso and the elastic net (scikit-learn's objective).

    1/(2n) sum_i s_i (y_i - b - x_i^T w)^2 + alpha * l1_ratio * ||w||_1
                                         + alpha * (1 - l1_ratio) / 2 * ||w||_2^2

(s normalised to sum to n; l1_ratio = 1 is the lasso.  [Colombo §1.3.2] writes the
lasso as 1/2 RSS + lambda/2 ||w||_1 and gives no solver; [Arias §2.8] uses
||y - X theta||^2 + lambda ||theta||_1.  All are the same problem up to a rescaling
of the penalty: alpha = lambda / (2n) for [Colombo]'s form.)

Each coordinate update is the closed-form soft-threshold

    w_j <- S(x_j^T r_j, n * alpha * l1_ratio) / (x_j^T x_j + n * alpha * (1 - l1_ratio))

with r_j the partial residual.  Updates run on the residual (O(n) per coordinate);
long fits with n >= p switch to the Gram matrix G = X^T X (O(p) per coordinate).
Convergence: as in scikit-learn, when the largest coefficient change of a sweep
is below ``tol * max|w|`` the duality gap is computed, and the fit stops when the
gap is below ``tol * ||y||^2``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg.blas import daxpy, ddot

from ..base import Regressor
from ..context import NULL_CONTEXT
from ..params import Bool, Choice, Float, Int, Seed
from ..random import check_random_state
from ..validation import check_predict_input, check_sample_weight, check_X_y

__all__ = ["enet_coordinate_descent", "CoordinateDescentRegressor"]


def _duality_gap(w, XtR, R_norm2, Ry, l1_reg, l2_reg):
    """scikit-learn's elastic-net duality gap (cd_fast.pyx) for 1/2||R||^2 + l1||w||_1 + l2/2||w||^2."""
    dual_norm = float(np.max(np.abs(XtR - l2_reg * w))) if w.size else 0.0
    w_norm2 = float(w @ w)
    if dual_norm > l1_reg:
        const = l1_reg / dual_norm
        gap = 0.5 * (R_norm2 + R_norm2 * const**2)
    else:
        const = 1.0
        gap = R_norm2
    gap += l1_reg * float(np.abs(w).sum()) - const * Ry + 0.5 * l2_reg * (1.0 + const**2) * w_norm2
    return gap


def _soft(tmp, l1_reg, dj):
    if tmp > l1_reg:
        return (tmp - l1_reg) / dj
    if tmp < -l1_reg:
        return (tmp + l1_reg) / dj
    return 0.0


def enet_coordinate_descent(
    X, y, l1_reg, l2_reg, *, w0=None, max_iter=1000, tol=1e-4, rng=None, selection="cyclic",
    ctx=NULL_CONTEXT,
):
    """Minimise 1/2||y - Xw||^2 + l1_reg ||w||_1 + l2_reg/2 ||w||^2 (X, y already centred/weighted).

    Sweeps start on the residual (two BLAS-1 calls per coordinate, like sklearn's
    cd_fast); when a fit needs many sweeps and n >= p, it switches to the Gram
    matrix (O(p) per coordinate), whose one-off O(n p^2) cost then pays off.
    Returns ``(w, gap, n_iter, converged)``.
    """
    n, p = X.shape
    w = np.zeros(p) if w0 is None else np.array(w0, dtype=float)
    yy = float(y @ y)
    tol_gap = tol * yy
    gap = math.inf
    converged = False
    gram_after = max(8, p // 4) if (n >= p and p <= 4000) else max_iter + 1
    Xf = np.asfortranarray(X)
    cols = [Xf[:, j] for j in range(p)]
    norms = np.einsum("ij,ij->j", Xf, Xf)
    denom = (norms + l2_reg).tolist()
    diag = norms.tolist()
    R = y - Xf @ w if w.any() else y.copy()
    G = q = Gw = None
    it = 0
    for it in range(1, max_iter + 1):
        use_gram = it > gram_after
        if use_gram and G is None:
            G = Xf.T @ Xf
            q = Xf.T @ y
            Gw = G @ w
        w_max = 0.0
        d_w_max = 0.0
        order = rng.permutation(p).tolist() if selection == "random" else range(p)
        if use_gram:
            for j in order:
                dj = denom[j]
                if dj == 0.0:
                    continue
                wj = float(w[j])
                new = _soft(float(q[j] - Gw[j]) + diag[j] * wj, l1_reg, dj)
                if new != wj:
                    w[j] = new
                    Gw += (new - wj) * G[j]
                    d_w_max = max(d_w_max, abs(new - wj))
                w_max = max(w_max, abs(new))
        else:
            for j in order:
                dj = denom[j]
                if dj == 0.0:
                    continue
                wj = float(w[j])
                xj = cols[j]
                new = _soft(ddot(xj, R) + diag[j] * wj, l1_reg, dj)
                if new != wj:
                    w[j] = new
                    daxpy(xj, R, a=wj - new)  # R -= (new - wj) x_j, in place
                    d_w_max = max(d_w_max, abs(new - wj))
                w_max = max(w_max, abs(new))
        if w_max == 0.0 or d_w_max / w_max < tol or it == max_iter:
            if use_gram:
                wq = float(w @ q)
                R_norm2 = max(yy - 2.0 * wq + float(w @ Gw), 0.0)
                gap = _duality_gap(w, q - Gw, R_norm2, yy - wq, l1_reg, l2_reg)
            else:
                gap = _duality_gap(w, Xf.T @ R, float(R @ R), float(R @ y), l1_reg, l2_reg)
            if gap < tol_gap:
                converged = True
        ctx.step(it, max_iter, max_change=d_w_max, gap=gap)
        if converged:
            break
    return w, gap, it, converged


class CoordinateDescentRegressor(Regressor):
    """Base of lasso_regression and elastic_net (not registered)."""

    supports_sample_weight = True
    needs_scaling = True
    reports_progress = True

    common_params = {
        "alpha": Float(1.0, ge=0.0, le=1e12, doc="Overall penalty strength (sklearn's alpha)."),
        "fit_intercept": Bool(True, doc="Fit an unpenalised intercept (by centring)."),
        "max_iter": Int(1000, ge=1, le=1_000_000, doc="Maximum number of coordinate-descent sweeps."),
        "tol": Float(1e-4, gt=0.0, le=1e6, doc="Duality-gap tolerance, relative to ||y||^2 (as sklearn)."),
        "warm_start": Bool(False, doc="Start from the previous fit's coefficients."),
        "selection": Choice(
            "cyclic", choices=("cyclic", "random"), doc="Coordinate order in each sweep."
        ),
        "random_state": Seed(None),
    }

    def _l1_ratio(self, p) -> float:
        return 1.0

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, y_numeric=True)
        n = X.shape[0]
        sw = check_sample_weight(sample_weight, n)
        sw = sw * (n / sw.sum())
        rng = check_random_state(p["random_state"])
        # one Fortran-ordered working copy (columns contiguous for the coordinate updates)
        Xc = np.array(X, order="F")
        if p["fit_intercept"]:
            s = sw / sw.sum()
            x_mean, y_mean = s @ X, float(s @ y)
            Xc -= x_mean
        else:
            x_mean, y_mean = np.zeros(X.shape[1]), 0.0
        yc = y - y_mean
        if sample_weight is not None:
            sq = np.sqrt(sw)
            Xc *= sq[:, None]
            yc = yc * sq
        l1_ratio = self._l1_ratio(p)
        w0 = None
        prev = getattr(self, "coef_", None)
        if p["warm_start"] and prev is not None and np.shape(prev) == (X.shape[1],):
            w0 = prev
        w, gap, n_iter, converged = enet_coordinate_descent(
            Xc, yc, p["alpha"] * l1_ratio * n, p["alpha"] * (1.0 - l1_ratio) * n,
            w0=w0, max_iter=p["max_iter"], tol=p["tol"], rng=rng, selection=p["selection"], ctx=ctx,
        )
        ctx.step(1, 1)
        self.coef_ = w
        self.intercept_ = float(y_mean - x_mean @ w)
        self.dual_gap_ = gap / n
        self.n_iter_ = n_iter
        self.converged_ = converged
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        X = check_predict_input(self, X, "coef_")
        return X @ self.coef_ + self.intercept_
