"""Discrete AdaBoost with SAMME for multiclass ([Passerini §16.3, Algorithm 10]; [da Silva Neto §1.8.5]).

d^(0) = sample weights normalised; at round m a base learner f^(m) is fitted on
(X, y, d^(m-1)); weighted error err = sum_n d_n [y_n != f^(m)(x_n)] / sum_n d_n;
alpha_m = learning_rate * (log((1 - err) / err) + log(K - 1))  (SAMME, Zhu et al.
2009; for K = 2 this is twice the notes' 1/2 log((1-err)/err), which only rescales
the vote); d_n <- d_n exp(alpha_m [y_n != f^(m)(x_n)]), normalised.
Prediction: argmax_k sum_m alpha_m [f^(m)(x) = k]; predict_proba is the softmax of the
symmetric SAMME scores (see decision_function), as scikit-learn.

Edge cases (the notes leave them open, [Passerini §16] [GAP]):
* err = 0: the learner is perfect; it is kept with the large finite weight
  alpha = learning_rate * (log((1 - 1e-10) / 1e-10) + log(K - 1)) and boosting stops.
* err >= 1 - 1/K (no better than chance): the learner is discarded and boosting
  stops; if it is the first, fit fails (as scikit-learn).
"""

from __future__ import annotations

import numpy as np

from ..base import Classifier
from ..context import NULL_CONTEXT
from ..memory import forest_fit
from ..params import Any_, Choice, Float, Int, Seed, validate_params
from ..random import check_random_state, spawn_seeds
from ..registry import register
from ..tree._base import use_hist
from ..tree._binning import bin_features
from ..tree.decision_tree_classifier import DecisionTreeClassifier
from ..validation import (
    DataError,
    check_array,
    check_categorical_features,
    check_predict_input,
    check_sample_weight,
    check_target,
    column_or_1d,
)
from ._bagging import build_base

__all__ = ["AdaBoostClassifier"]

_ERR_FLOOR = 1e-10


@register
class AdaBoostClassifier(Classifier):
    name = "adaboost_classifier"
    fit_memory = forest_fit()  # peak memory model (core/memory.py)
    summary = "Discrete AdaBoost (SAMME for multiclass) over decision stumps or any weighted classifier."
    params = {
        "estimator": Any_(
            None, nullable=True,
            doc='Base learner {"name", "params"} accepting sample_weight (null: a depth-1 decision tree).',
        ),
        "n_estimators": Int(50, ge=1, le=10_000, doc="Maximum number of boosting rounds."),
        "learning_rate": Float(1.0, gt=0.0, le=1e6, doc="Shrinks each learner's weight alpha."),
        "algorithm": Choice("SAMME", choices=("SAMME",), doc="Discrete multiclass AdaBoost."),
        "random_state": Seed(),
    }
    supports_sample_weight = True
    native_missing = True
    native_categorical = True
    reports_progress = True

    def fit(self, X, y=None, *, sample_weight=None, categorical_features=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        spec = p["estimator"] or {"name": "decision_tree_classifier", "params": {"max_depth": 1}}
        cls, bparams = build_base(spec, "classification", need_sample_weight=True)
        X = check_array(X, allow_nan=cls.native_missing)
        y = check_target(y, X.shape[0])
        is_cat = check_categorical_features(categorical_features, X.shape[1])
        kw = {"categorical_features": is_cat} if (cls.native_categorical and is_cat.any()) else {}
        classes, codes = self._encode_targets(y)
        K = len(classes)
        d = check_sample_weight(sample_weight, X.shape[0])
        d = d / d.sum()
        rng = check_random_state(p["random_state"])
        M = p["n_estimators"]
        lr = p["learning_rate"]
        seeds = spawn_seeds(rng, M)
        members, alphas, errors = [], [], []
        if cls is DecisionTreeClassifier:
            # bin X once for every round (the trees only see new sample weights)
            tp = validate_params(cls.params, cls(**bparams).get_params())
            kw["_binned"] = bin_features(X, is_cat, hist=use_hist(tp, X.shape[0]), max_bins=tp["max_bins"],
                                         rng=check_random_state(0))
        for m in range(M):
            params = dict(bparams)
            if "random_state" in cls.params and "random_state" not in params:
                params["random_state"] = seeds[m]
            est = cls(**params).fit(X, codes, sample_weight=d, **kw)
            pred = np.asarray(est.predict(X), dtype=np.intp)
            wrong = pred != codes
            err = float(np.dot(d, wrong) / d.sum())
            if err <= 0:
                alpha = lr * (np.log((1 - _ERR_FLOOR) / _ERR_FLOOR) + np.log(K - 1))
                members.append(est)
                alphas.append(alpha)
                errors.append(0.0)
                ctx.step(M, M)
                break
            if err >= 1.0 - 1.0 / K:
                if not members:
                    raise DataError(
                        f"the first base learner is no better than chance (weighted error {err:.3f} >= "
                        f"{1 - 1 / K:.3f}); AdaBoost cannot be fitted"
                    )
                ctx.step(M, M)
                break
            alpha = lr * (np.log((1.0 - err) / err) + np.log(K - 1))
            members.append(est)
            alphas.append(alpha)
            errors.append(err)
            ctx.step(m + 1, M)
            if m < M - 1:
                d = d * np.exp(alpha * wrong * (d > 0))
                s = d.sum()
                if not np.isfinite(s) or s <= 0:
                    break
                d = d / s
        self.classes_ = classes
        self.n_classes_ = K
        self.n_features_in_ = X.shape[1]
        self.estimators_ = members
        self.estimator_weights_ = np.asarray(alphas)
        self.estimator_errors_ = np.asarray(errors)
        imps = [getattr(e, "feature_importances_", None) for e in members]
        if all(i is not None for i in imps):
            fi = np.average(np.stack(imps), axis=0, weights=self.estimator_weights_)
            self.feature_importances_ = fi / fi.sum() if fi.sum() > 0 else fi
        return self

    def decision_function(self, X):
        """(n, K) symmetric SAMME scores f_k = sum_m alpha_m c_mk / sum_m alpha_m, where
        c_mk = 1 if f^(m)(x) = k else -1/(K-1) (Zhu et al. 2009; scikit-learn's coding)."""
        X = check_predict_input(self, X, "estimators_", allow_nan=True)
        n, K = X.shape[0], self.n_classes_
        dec = np.zeros((n, K))
        rows = np.arange(n)
        for est, a in zip(self.estimators_, self.estimator_weights_, strict=True):
            dec[rows, np.asarray(est.predict(X), dtype=np.intp)] += a
        a = dec / self.estimator_weights_.sum()
        return a - (1.0 - a) / (K - 1)

    def predict_proba(self, X):
        """softmax(f / (K - 1)) for K > 2 and softmax(f) for K = 2 (as scikit-learn)."""
        K = self.n_classes_
        dec = self.decision_function(X) / (K - 1 if K > 2 else 1)
        dec = dec - dec.max(axis=1, keepdims=True)
        e = np.exp(dec)
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, X):
        dec = self.decision_function(X)
        return self.classes_[np.argmax(dec, axis=1)]

    def staged_score(self, X, y):
        """Accuracy after each boosting round."""
        X = check_predict_input(self, X, "estimators_", allow_nan=True)
        y = column_or_1d(y)
        n, K = X.shape[0], self.n_classes_
        dec = np.zeros((n, K))
        out = []
        for est, a in zip(self.estimators_, self.estimator_weights_, strict=True):
            dec[np.arange(n), np.asarray(est.predict(X), dtype=np.intp)] += a
            out.append(float(np.mean(self.classes_[np.argmax(dec, axis=1)] == y)))
        return out
