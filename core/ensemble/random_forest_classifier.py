"""Random-forest classifier ([Passerini §2.4, §16.1.2]; [Santini §5.6]; [da Silva Neto §1.8.3]).

Bagged decision trees with a random feature subset at each split.  Combiners
([Passerini §16.1.2]): soft voting argmax_y (1/m) sum_i f_y^(i)(x) (default, as
scikit-learn) or hard (majority) voting argmax_y sum_i [y = yhat^(i)(x)].
``oob_score_`` is the accuracy of the out-of-bag soft vote (§16.1.1).
"""

from __future__ import annotations

import numpy as np

from ..base import Classifier
from ..context import NULL_CONTEXT
from ..memory import forest_fit
from ..registry import register
from ..tree._base import class_weight_vector, group_rare, prepare_X, regroup
from ..tree._tree import NodeTable
from ..validation import (
    DataError,
    check_array,
    check_is_fitted,
    check_n_features,
    check_sample_weight,
    column_or_1d,
)
from ._forest import fit_forest, forest_params, oob_values

__all__ = ["RandomForestClassifier"]


@register
class RandomForestClassifier(Classifier):
    name = "random_forest_classifier"
    fit_memory = forest_fit()  # peak memory model (core/memory.py)
    summary = "Random forest of decision trees (bootstrap + random feature subsets), soft or hard voting."
    params = forest_params(("gini", "entropy", "gain_ratio"), "gini", max_features_default="sqrt",
                           classifier=True)
    supports_sample_weight = True
    native_missing = True
    native_categorical = True
    reports_progress = True

    def fit(self, X, y=None, *, sample_weight=None, categorical_features=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        X, is_cat = prepare_X(X, categorical_features)
        X = group_rare(self, X, is_cat, p)
        if y is None:
            raise DataError("y is required for a supervised estimator")
        y = column_or_1d(y)
        if y.shape[0] != X.shape[0]:
            raise DataError(f"X has {X.shape[0]} samples but y has {y.shape[0]}")
        classes, codes = self._encode_targets(y)
        K = len(classes)
        w = check_sample_weight(sample_weight, X.shape[0])
        cw_fn = None
        if p["class_weight"] == "balanced_subsample":
            def cw_fn(yc, cnt, K=K):
                per = np.bincount(yc, weights=cnt, minlength=K)
                with np.errstate(divide="ignore"):
                    cwv = np.where(per > 0, cnt.sum() / (K * per), 0.0)
                return cwv[yc]
        else:
            cw = class_weight_vector(p["class_weight"], classes, codes)
            if cw is not None:
                w = w * cw[codes]
        trees, counts = fit_forest(X, codes, w, is_cat, p, regression=False, n_classes=K, ctx=ctx,
                                   class_weight_fn=cw_fn)
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
            with np.errstate(divide="ignore", invalid="ignore"):
                dec = np.where(n_oob[:, None] > 0, total / np.maximum(n_oob, 1)[:, None], np.nan)
            ok = n_oob > 0
            oob["oob_decision_function_"] = dec
            hit = np.argmax(dec[ok], axis=1) == codes[ok]
            oob["oob_score_"] = float(np.mean(hit)) if ok.any() else np.nan
        self.classes_ = classes
        self.n_classes_ = K
        self.n_features_in_ = X.shape[1]
        self.categorical_features_ = is_cat
        self.trees_ = trees
        self.feature_importances_ = imp / imp.sum() if imp.sum() > 0 else imp
        for k, v in oob.items():
            setattr(self, k, v)
        self._table = table
        return self

    def predict_proba(self, X):
        check_is_fitted(self, ["trees_"])
        X = check_array(X, allow_nan=True)
        X = regroup(self, X)
        check_n_features(self, X)
        if self.voting == "hard":
            vals = self._table.per_tree_values(X)
            votes = np.argmax(vals, axis=2)  # (n, T)
            K = self.n_classes_
            n, T = votes.shape
            counts = np.bincount((np.arange(n)[:, None] * K + votes).ravel(), minlength=n * K)
            return counts.reshape(n, K) / T
        return self._table.mean_value(X)

    @classmethod
    def _example_params(cls):
        return {"n_estimators": 5, "random_state": 0}
