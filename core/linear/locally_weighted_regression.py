"""Locally weighted linear regression (LWR), solved per query point.

[da Silva Neto §1.2.1]: for a query x, minimise sum_i w_i (y_i - theta^T x_i)^2 with
w_i = exp(-||x_i - x||^2 / (2 tau^2)) (the notes write the scalar form; we use the
Euclidean norm).  The weighted normal equations

    (Z^T W Z + alpha D) theta = Z^T W y,     Z = [1, X - x]

are built per query: the augmented design [1, X, y] is stored at fit, one broadcast
subtraction centres it on the query, its rows are scaled by sqrt(w_i) and one Gram
product gives Z^T W Z and Z^T W y together; the SPD system is solved by LAPACK posv
(Cholesky).  Centring the design on the query makes the prediction the local intercept
and keeps the systems well conditioned.  ``alpha`` is a tiny ridge on the slopes only
(0 gives the exact weighted least-squares solution; a system that is still singular
falls back to the pseudo-inverse, i.e. the minimum-norm solution).
Non-parametric: the training set is stored and every prediction solves a
(d+1) x (d+1) system.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import get_lapack_funcs

from ..base import Regressor
from ..context import NULL_CONTEXT
from ..params import Bool, Float
from ..registry import register
from ..validation import check_predict_input, check_sample_weight, check_X_y

_posv = get_lapack_funcs("posv", (np.empty(1),))


@register
class LocallyWeightedRegression(Regressor):
    """Gaussian-kernel weighted least squares fitted afresh at every query point."""

    name = "locally_weighted_regression"
    lazy_learner = True
    summary = "Locally weighted linear regression (Gaussian weights, bandwidth tau), solved per query."
    supports_sample_weight = True
    needs_scaling = True

    params = {
        "tau": Float(1.0, gt=0.0, le=1e12, doc="Bandwidth of the Gaussian weights."),
        "fit_intercept": Bool(True, doc="Local model has an intercept (recommended)."),
        "alpha": Float(1e-8, ge=0.0, le=1e12, doc="Tiny ridge on the local slopes, for numerical stability."),
    }

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, y_numeric=True)
        sw = check_sample_weight(sample_weight, X.shape[0])
        ctx.step(1, 1)
        self.X_fit_ = X.copy()
        self.y_fit_ = y.copy()
        self.sample_weight_ = sw
        k = X.shape[1] + 1 if p["fit_intercept"] else X.shape[1]
        Ay = np.empty((X.shape[0], k + 1))  # augmented design [1, X, y] (or [X, y])
        Ay[:, k - X.shape[1] : k] = X
        Ay[:, k] = y
        if p["fit_intercept"]:
            Ay[:, 0] = 1.0
        ridge = np.full(k, p["alpha"])
        if p["fit_intercept"]:
            ridge[0] = 0.0
        self._Ay = Ay
        self._k = k
        self._intercept = p["fit_intercept"]
        self._ridge = ridge
        self._sqrt_sw = np.sqrt(sw)
        self._inv4tau2 = 1.0 / (4.0 * p["tau"] ** 2)
        self.params_ = p
        self.n_features_in_ = X.shape[1]
        return self

    def _predict_one(self, x):
        """Local prediction at one query ``x`` (shape (d,)).

        With the precomputed augmented design ``A = [1, X, y]`` (or ``[X, y]``), one broadcast
        subtraction gives ``[1, X - x, y]``; scaling its rows by sqrt(w_i) and one Gram product
        ``R^T R`` yields both ``Z^T W Z`` and ``Z^T W y``.  The SPD system is solved by LAPACK
        ``posv`` (Cholesky); a singular system falls back to the pseudo-inverse.
        """
        k = self._k
        if self._intercept:
            R = self._Ay - self._shift(x)
            D = R[:, 1:k]
        else:
            R = self._Ay.copy()
            D = self.X_fit_ - x
        sq = np.einsum("ij,ij->i", D, D)
        # sqrt of the Gaussian weights, rescaled so the largest is 1 (no underflow)
        r = np.exp((sq.min() - sq) * self._inv4tau2)
        r *= self._sqrt_sw
        R *= r[:, None]
        M = R.T @ R
        G = M[:k, :k]
        G.flat[:: k + 1] += self._ridge
        g = M[:k, k]
        _, theta, info = _posv(G, g)
        if info != 0:
            theta = np.linalg.pinv(G) @ g
        if self._intercept:
            return theta[0]
        return theta @ x

    def _shift(self, x):
        s = np.zeros(self._k + 1)
        s[1 : self._k] = x
        return s

    def predict(self, X):
        X = check_predict_input(self, X, "X_fit_")
        if X.shape[0] == 1:
            return np.array([self._predict_one(X[0])])
        return np.array([self._predict_one(x) for x in X])
