"""Bagging regressor ([Passerini §16.1.2] "mean" combiner; [da Silva Neto §1.8.4]): yhat = (1/m) sum_i f^(i)(x)."""

from __future__ import annotations

import numpy as np

from ..base import Regressor
from ..context import NULL_CONTEXT
from ..memory import forest_fit
from ..registry import register
from ..tree._binning import resolve_categorical
from ..validation import (
    DataError,
    check_array,
    check_is_fitted,
    check_n_features,
    check_sample_weight,
    check_X_y,
)
from ._bagging import bagging_params, build_base, draw_bags, fit_member

__all__ = ["BaggingRegressor"]


@register
class BaggingRegressor(Regressor):
    name = "bagging_regressor"
    fit_memory = forest_fit()  # peak memory model (core/memory.py)
    summary = "Bagging: bootstrap aggregation of any registered regressor (mean prediction)."
    params = bagging_params("decision_tree_regressor")
    supports_sample_weight = True
    native_missing = True
    native_categorical = True
    reports_progress = True

    def fit(self, X, y=None, *, sample_weight=None, categorical_features=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        cls, bparams = build_base(p["estimator"], "regression")
        X, y = check_X_y(X, y, allow_nan=cls.native_missing, y_numeric=True)
        is_cat = resolve_categorical(categorical_features, X.shape[1])
        w = None if sample_weight is None else check_sample_weight(sample_weight, X.shape[0])
        if w is not None and not cls.supports_sample_weight:
            raise DataError(f"the base estimator {cls.name!r} does not accept sample_weight")
        bags = draw_bags(p, X.shape[0], X.shape[1])
        members, feats_list = [], []
        for i, (counts, feats, seed) in enumerate(bags):
            members.append(fit_member(cls, bparams, X, y, counts, feats, seed, w, is_cat))
            feats_list.append(feats)
            ctx.step(i + 1, len(bags))
        self.n_features_in_ = X.shape[1]
        self.estimators_ = members
        self.estimators_features_ = feats_list
        if p["oob_score"]:
            total = np.zeros(X.shape[0])
            n_oob = np.zeros(X.shape[0])
            for (counts, feats, _), est in zip(bags, members, strict=True):
                oob = np.flatnonzero(counts == 0)
                if oob.size:
                    total[oob] += est.predict(X[np.ix_(oob, feats)])
                    n_oob[oob] += 1
            ok = n_oob > 0
            pred = np.where(ok, total / np.maximum(n_oob, 1), np.nan)
            self.oob_prediction_ = pred
            yt = y[ok]
            ss = float(np.sum((yt - yt.mean()) ** 2)) if ok.any() else 0.0
            self.oob_score_ = 1.0 - float(np.sum((yt - pred[ok]) ** 2)) / ss if ss > 0 else np.nan
        return self

    def predict(self, X):
        check_is_fitted(self, ["estimators_"])
        X = check_array(X, allow_nan=True)
        check_n_features(self, X)
        total = np.zeros(X.shape[0])
        for est, feats in zip(self.estimators_, self.estimators_features_, strict=True):
            total += est.predict(X[:, feats])
        return total / len(self.estimators_)

    @classmethod
    def _example_params(cls):
        return {"n_estimators": 4, "random_state": 0}
