"""Bagging classifier ([Passerini §16.1]; [da Silva Neto §1.8.4]): bootstrap aggregation of any registered classifier.

Combiner: soft vote (1/m) sum_i f^(i)(x) when every member has predict_proba,
else majority vote.  ``oob_score_``: accuracy of the out-of-bag vote.
"""

from __future__ import annotations

import numpy as np

from ..base import Classifier
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
    column_or_1d,
)
from ._bagging import bagging_params, build_base, draw_bags, fit_member

__all__ = ["BaggingClassifier"]


@register
class BaggingClassifier(Classifier):
    name = "bagging_classifier"
    fit_memory = forest_fit()  # peak memory model (core/memory.py)
    summary = "Bagging: bootstrap aggregation of any registered classifier (soft or majority vote)."
    params = bagging_params("decision_tree_classifier")
    supports_sample_weight = True
    native_missing = True
    native_categorical = True
    reports_progress = True

    def fit(self, X, y=None, *, sample_weight=None, categorical_features=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        cls, bparams = build_base(p["estimator"], "classification")
        X = check_array(X, allow_nan=cls.native_missing)
        is_cat = resolve_categorical(categorical_features, X.shape[1])
        if y is None:
            raise DataError("y is required for a supervised estimator")
        y = column_or_1d(y)
        if y.shape[0] != X.shape[0]:
            raise DataError(f"X has {X.shape[0]} samples but y has {y.shape[0]}")
        classes, codes = self._encode_targets(y)
        K = len(classes)
        w = None if sample_weight is None else check_sample_weight(sample_weight, X.shape[0])
        if w is not None and not cls.supports_sample_weight:
            raise DataError(f"the base estimator {cls.name!r} does not accept sample_weight")
        bags = draw_bags(p, X.shape[0], X.shape[1])
        members, feats_list = [], []
        for i, (counts, feats, seed) in enumerate(bags):
            members.append(fit_member(cls, bparams, X, codes, counts, feats, seed, w, is_cat,
                                      classification=True))
            feats_list.append(feats)
            ctx.step(i + 1, len(bags))
        soft = callable(getattr(cls, "predict_proba", None))
        self.classes_ = classes
        self.n_classes_ = K
        self.n_features_in_ = X.shape[1]
        self._soft = soft
        self.estimators_ = members
        self.estimators_features_ = feats_list
        if p["oob_score"]:
            total = np.zeros((X.shape[0], K))
            n_oob = np.zeros(X.shape[0])
            for (counts, feats, _), est in zip(bags, members, strict=True):
                oob = np.flatnonzero(counts == 0)
                if oob.size:
                    total[oob] += self._member_proba(est, X[np.ix_(oob, feats)])
                    n_oob[oob] += 1
            ok = n_oob > 0
            dec = np.where(ok[:, None], total / np.maximum(n_oob, 1)[:, None], np.nan)
            self.oob_decision_function_ = dec
            hit = np.argmax(total[ok], axis=1) == codes[ok]
            self.oob_score_ = float(np.mean(hit)) if ok.any() else np.nan
        return self

    def _member_proba(self, est, Xs):
        """Member's class probabilities (or one-hot vote) in the ensemble's class order."""
        K = self.n_classes_
        out = np.zeros((Xs.shape[0], K))
        cols = np.asarray(est.classes_, dtype=np.intp)  # members were fitted on class codes
        if self._soft:
            out[:, cols] = est.predict_proba(Xs)
        else:
            out[np.arange(Xs.shape[0]), np.asarray(est.predict(Xs), dtype=np.intp)] = 1.0
        return out

    def predict_proba(self, X):
        check_is_fitted(self, ["estimators_"])
        X = check_array(X, allow_nan=True)
        check_n_features(self, X)
        total = np.zeros((X.shape[0], self.n_classes_))
        for est, feats in zip(self.estimators_, self.estimators_features_, strict=True):
            total += self._member_proba(est, X[:, feats])
        return total / len(self.estimators_)

    @classmethod
    def _example_params(cls):
        return {"n_estimators": 4, "random_state": 0}
