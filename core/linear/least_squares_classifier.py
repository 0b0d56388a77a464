"""Least squares for classification: regress coded targets, predict the argmax.

[Colombo §2.2, eq. 35]: W = (X~^T X~)^{-1} X~^T T with 1-of-K targets T.  Solved by
LAPACK least squares (minimum-norm, rank-deficient safe) or, with ``alpha`` > 0, by
ridge (Cholesky), with an unpenalised intercept (centring).  ``target_encoding``:
``one_hot`` (the notes' 0/1 coding) or ``pm1`` (+1/-1, sklearn RidgeClassifier);
both give the same argmax up to the penalty.  Two classes use one column
(sign decides).  No probabilities: the outputs are not calibrated ([Colombo §2.2.1]).
"""

from __future__ import annotations

import numpy as np

from ..base import Classifier
from ..context import NULL_CONTEXT
from ..params import Bool, Choice, Float
from ..registry import register
from ..validation import check_predict_input, check_sample_weight, check_X_y
from ._common import binary_labels, center_data, linear_scores, solve_lstsq, solve_ridge_cholesky


@register
class LeastSquaresClassifier(Classifier):
    """Linear discriminants y_k(x) = w_k^T x + b_k fitted to coded targets by least squares."""

    name = "least_squares_classifier"
    summary = "Least-squares classification on one-hot or +/-1 targets (argmax of linear outputs)."
    supports_sample_weight = True
    needs_scaling = True

    params = {
        "alpha": Float(0.0, ge=0.0, le=1e12, doc="Optional L2 penalty (0: plain least squares)."),
        "fit_intercept": Bool(True, doc="Fit unpenalised intercepts (by centring)."),
        "target_encoding": Choice("pm1", choices=("pm1", "one_hot"), doc="+1/-1 or 1/0 targets."),
    }

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y)
        classes, codes = self._encode_targets(y)
        n, k = X.shape[0], len(classes)
        sw = check_sample_weight(sample_weight, n)
        neg = -1.0 if p["target_encoding"] == "pm1" else 0.0
        if k == 2:
            T = np.where(codes == 1, 1.0, neg)[:, None]
        else:
            T = np.full((n, k), neg)
            T[np.arange(n), codes] = 1.0
        Xc, Tc, x_mean, t_mean = center_data(X, T, sw, p["fit_intercept"])
        sq = np.sqrt(sw)
        Xs, Ts = Xc * sq[:, None], Tc * sq[:, None]
        if p["alpha"] > 0:
            coef = solve_ridge_cholesky(Xs, Ts, p["alpha"])
        else:
            coef = solve_lstsq(Xs, Ts)[0]
        ctx.step(1, 1)
        self.classes_ = classes
        self.coef_ = coef.T.copy()  # (outputs, features)
        self.intercept_ = t_mean - x_mean @ coef
        self.threshold_ = 0.0 if neg == -1.0 else 0.5
        self.n_features_in_ = X.shape[1]
        return self

    def decision_function(self, X):
        X = check_predict_input(self, X, "coef_")
        if self.coef_.shape[0] == 1:
            return linear_scores(X, self.coef_, self.intercept_, binary=True) - self.threshold_
        return linear_scores(X, self.coef_, self.intercept_)

    def predict(self, X):
        Z = self.decision_function(X)
        if Z.ndim == 1:
            return binary_labels(self.classes_, Z)
        return self.classes_[np.argmax(Z, axis=1)]
