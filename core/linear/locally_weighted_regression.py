"""Locally weighted linear regression (LWR), solved per query point.

Seed 004 §1.2.1 (A5): for a query x, minimise sum_i w_i (y_i - theta^T x_i)^2 with
w_i = exp(-||x_i - x||^2 / (2 tau^2)) (the notes write the scalar form; we use the
Euclidean norm).  The weighted normal equations

    (Z^T W Z + alpha D) theta = Z^T W y,     Z = [1, X - x]

are built per query (one BLAS product each) and solved for a batch of queries at
once (stacked ``np.linalg.solve``); the weights of a batch come from one matrix product.
Centring the design on the query makes the prediction the local intercept and
keeps the systems well conditioned.  ``alpha`` is a tiny ridge on the slopes only
(0 gives the exact weighted least-squares solution; systems that are still
singular fall back to the pseudo-inverse, i.e. the minimum-norm solution).
Non-parametric: the training set is stored and every prediction solves a
(d+1) x (d+1) system.
"""

from __future__ import annotations

import numpy as np

from ..base import Regressor
from ..context import NULL_CONTEXT
from ..params import Bool, Float
from ..registry import register
from ..validation import check_array, check_is_fitted, check_n_features, check_sample_weight, check_X_y

_CHUNK_ELEMS = 4_000_000  # queries * n_train per batch (weight matrix size)


@register
class LocallyWeightedRegression(Regressor):
    """Gaussian-kernel weighted least squares fitted afresh at every query point."""

    name = "locally_weighted_regression"
    summary = "Locally weighted linear regression (Gaussian weights, bandwidth tau), solved per query."
    supports_sample_weight = True
    needs_scaling = True

    params = {
        "tau": Float(1.0, gt=0.0, doc="Bandwidth of the Gaussian weights."),
        "fit_intercept": Bool(True, doc="Local model has an intercept (recommended)."),
        "alpha": Float(1e-8, ge=0.0, doc="Tiny ridge on the local slopes, for numerical stability."),
    }

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, y_numeric=True)
        sw = check_sample_weight(sample_weight, X.shape[0])
        ctx.step(1, 1)
        self.X_fit_ = X.copy()
        self.y_fit_ = y.copy()
        self.sample_weight_ = sw
        self._sq_norms = np.sum(X * X, axis=1)
        self.params_ = p
        self.n_features_in_ = X.shape[1]
        return self

    def _weights(self, Q):
        """Gaussian weights (queries x train), rescaled so each row's largest is 1 (no underflow)."""
        tau = self.params_["tau"]
        sq = np.sum(Q * Q, axis=1)[:, None] + self._sq_norms[None, :] - 2.0 * (Q @ self.X_fit_.T)
        np.maximum(sq, 0.0, out=sq)
        logw = -sq / (2.0 * tau * tau)
        logw -= logw.max(axis=1, keepdims=True)
        return np.exp(logw) * self.sample_weight_[None, :]

    def _predict_chunk(self, Q):
        X, y = self.X_fit_, self.y_fit_
        W = self._weights(Q)  # (q, n)
        fit_intercept = self.params_["fit_intercept"]
        n, d = X.shape
        k = d + 1 if fit_intercept else d
        A = np.empty((Q.shape[0], k, k))
        b = np.empty((Q.shape[0], k))
        Z = np.empty((n, k))
        if fit_intercept:
            Z[:, 0] = 1.0
        else:
            Z[:] = X
        # one (k x n) @ (n x k) BLAS product per query beats a stacked 3-d matmul here
        for i in range(Q.shape[0]):
            if fit_intercept:
                np.subtract(X, Q[i], out=Z[:, 1:])
            ZWt = (Z * W[i][:, None]).T
            A[i] = ZWt @ Z
            b[i] = ZWt @ y
        ridge = self.params_["alpha"] * np.ones(k)
        if fit_intercept:
            ridge[0] = 0.0
        A[:, np.arange(k), np.arange(k)] += ridge
        try:
            theta = np.linalg.solve(A, b[:, :, None])[:, :, 0]
            if not np.isfinite(theta).all():
                raise np.linalg.LinAlgError
        except np.linalg.LinAlgError:
            theta = (np.linalg.pinv(A) @ b[:, :, None])[:, :, 0]
        if fit_intercept:
            return theta[:, 0]
        return np.sum(theta * Q, axis=1)

    def predict(self, X):
        check_is_fitted(self, ["X_fit_"])
        X = check_array(X)
        check_n_features(self, X)
        n, d = self.X_fit_.shape
        step = max(1, _CHUNK_ELEMS // max(1, n))
        if X.shape[0] <= step:
            return self._predict_chunk(X)
        return np.concatenate([self._predict_chunk(X[i : i + step]) for i in range(0, X.shape[0], step)])
