"""Random-forest regressor ([Passerini §16.1.2] "mean" combiner; [da Silva Neto §1.8.3]).

yhat = (1/m) sum_i f^(i)(x) over bagged regression trees grown with a random
feature subset per split (default: all features, as scikit-learn's 1.0).
``oob_score_`` is the R^2 of the out-of-bag mean prediction.
"""

from __future__ import annotations

import numpy as np

from ..base import Regressor
from ..context import NULL_CONTEXT
from ..memory import forest_fit
from ..registry import register
from ..tree._base import group_rare, prepare_X, regroup
from ..tree._tree import NodeTable
from ..validation import (
    check_array,
    check_is_fitted,
    check_n_features,
    check_sample_weight,
    check_target,
)
from ._forest import fit_forest, forest_params, oob_values

__all__ = ["RandomForestRegressor"]


@register
class RandomForestRegressor(Regressor):
    name = "random_forest_regressor"
    fit_memory = forest_fit()  # peak memory model (core/memory.py)
    summary = "Random forest of regression trees (bootstrap + random feature subsets), mean prediction."
    params = forest_params(("squared_error", "absolute_error"), "squared_error", max_features_default=1.0,
                           classifier=False)
    supports_sample_weight = True
    native_missing = True
    native_categorical = True
    reports_progress = True

    def fit(self, X, y=None, *, sample_weight=None, categorical_features=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, is_cat = prepare_X(X, categorical_features)
        X = group_rare(self, X, is_cat, p)
        y = check_target(y, X.shape[0], numeric=True)
        w = check_sample_weight(sample_weight, X.shape[0])
        trees, counts = fit_forest(X, y, w, is_cat, p, regression=True, n_classes=1, ctx=ctx, y_raw=y)
        table = NodeTable(trees)
        table.prepare_batch()  # batch-predict tables (a fraction of a second for 100 deep trees)
        imp = np.zeros(X.shape[1])
        for t in trees:
            ti = t.feature_importances(X.shape[1])
            if ti.sum() > 0:
                imp += ti / ti.sum()
        oob = {}
        if counts is not None:
            total, n_oob = oob_values(table, X, counts)
            ok = n_oob > 0
            pred = np.where(ok, total[:, 0] / np.maximum(n_oob, 1), np.nan)
            oob["oob_prediction_"] = pred
            if ok.sum() > 1:
                yt = y[ok]
                ss = float(np.sum((yt - yt.mean()) ** 2))
                oob["oob_score_"] = 1.0 - float(np.sum((yt - pred[ok]) ** 2)) / ss if ss > 0 else 0.0
            else:
                oob["oob_score_"] = np.nan
        self.n_features_in_ = X.shape[1]
        self.categorical_features_ = is_cat
        self.trees_ = trees
        self.feature_importances_ = imp / imp.sum() if imp.sum() > 0 else imp
        for k, v in oob.items():
            setattr(self, k, v)
        self._table = table
        return self

    def predict(self, X):
        check_is_fitted(self, ["trees_"])
        X = check_array(X, allow_nan=True)
        X = regroup(self, X)
        check_n_features(self, X)
        return self._table.mean_value(X)[:, 0]

    @classmethod
    def _example_params(cls):
        return {"n_estimators": 5, "random_state": 0}
