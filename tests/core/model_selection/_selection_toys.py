"""Test-only estimators following core.base (NOT registered): used by the model-selection tests."""

from __future__ import annotations

import numpy as np

from core.base import Classifier, Regressor
from core.context import NULL_CONTEXT
from core.params import Bool, Float, Seed
from core.validation import check_array, check_is_fitted, check_sample_weight, check_X_y


class LeastSquares(Regressor):
    """Ridge least squares ``min ||y - offset - Xw - b||^2 + alpha ||w||^2``; ``offset`` is a fixed shift."""

    name = "_test_least_squares"
    summary = "test-only ridge regressor"
    params = {
        "alpha": Float(0.0, ge=0.0),
        "fit_intercept": Bool(True),
        "offset": Float(0.0),
        "random_state": Seed(None),
    }
    supports_sample_weight = True

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y, y_numeric=True)
        w = check_sample_weight(sample_weight, X.shape[0])
        target = y - p["offset"]
        if p["fit_intercept"]:
            xm = np.average(X, axis=0, weights=w)
            ym = np.average(target, weights=w)
        else:
            xm, ym = np.zeros(X.shape[1]), 0.0
        Xc, yc = X - xm, target - ym
        sw = np.sqrt(w)[:, None]
        A = (Xc * sw).T @ (Xc * sw) + p["alpha"] * np.eye(X.shape[1])
        coef = np.linalg.lstsq(A, (Xc * sw).T @ (yc * sw[:, 0]), rcond=None)[0]
        ctx.step(1, 1)
        self.coef_ = coef
        self.intercept_ = float(ym - xm @ coef) + p["offset"]
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        check_is_fitted(self)
        X = check_array(X)
        return X @ self.coef_ + self.intercept_


class NearestCentroid(Classifier):
    """Nearest class mean; ``predict_proba`` = softmax(-||x - mu_c||^2 / (2 temperature))."""

    name = "_test_nearest_centroid"
    summary = "test-only nearest-centroid classifier"
    params = {"temperature": Float(1.0, gt=0.0)}

    def fit(self, X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, y = check_X_y(X, y)
        classes, codes = self._encode_targets(y)
        means = np.stack([X[codes == c].mean(axis=0) for c in range(len(classes))])
        ctx.step(1, 1)
        self.temperature_ = p["temperature"]
        self.classes_ = classes
        self.means_ = means
        self.n_features_in_ = X.shape[1]
        return self

    def predict_proba(self, X):
        check_is_fitted(self)
        X = check_array(X)
        d2 = ((X[:, None, :] - self.means_[None, :, :]) ** 2).sum(axis=2)
        z = -d2 / (2 * self.temperature_)
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)
