"""Stacking classifier: a meta-learner on out-of-fold predictions of base classifiers."""

from __future__ import annotations

import numpy as np

from ..base import Classifier
from ..model_selection.split import StratifiedKFold
from ..params import Any_, Bool, Choice, Int, ParamError, Seed
from ..registry import get as get_algorithm
from ..registry import register
from ._stacking import BaseStacking

__all__ = ["StackingClassifier"]


@register
class StackingClassifier(BaseStacking, Classifier):
    """Stacked generalisation for classification ([Passerini §16.2]).

    Each base classifier in ``estimators`` is cross-validated with ``cv``
    stratified folds; its out-of-fold class probabilities (``stack_method``
    ``predict_proba``; for two classes only the second column, as scikit-learn)
    or predicted class codes (``predict``) form the meta-features on which
    ``final_estimator`` is trained.  The meta-learner never sees an in-sample
    prediction.  The base classifiers are then refitted on all rows; at predict
    time their outputs feed the meta-learner.  ``passthrough`` appends the raw
    features to the meta-features.
    """

    name = "stacking_classifier"
    summary = "Stacking: a final classifier trained on out-of-fold predictions of base classifiers."
    params = {
        "estimators": Any_(
            [{"name": "gradient_boosting_classifier", "params": {}}],
            doc='Base classifiers: a list of {"name": registry name, "params": {...}}.',
        ),
        "final_estimator": Any_(
            {"name": "logistic_regression", "params": {}},
            doc='Meta-learner {"name": ..., "params": {...}} trained on out-of-fold predictions.',
        ),
        "cv": Int(5, ge=2, le=100, doc="Number of stratified folds for the out-of-fold predictions."),
        "stack_method": Choice(
            "auto",
            ["auto", "predict_proba", "predict"],
            doc="Base output used as meta-feature ('auto': predict_proba when available).",
        ),
        "passthrough": Bool(False, doc="Also give the original features to the meta-learner."),
        "random_state": Seed(doc="Seed of the fold shuffling and of the sub-estimators' seeds."),
    }
    supports_sample_weight = True
    native_missing = False
    reports_progress = True

    def _stack_methods(self, bases, p) -> list[str]:
        return [self._method(name, p["stack_method"]) for name, _ in bases]

    @staticmethod
    def _method(name: str, requested: str) -> str:
        has_proba = callable(getattr(get_algorithm(name), "predict_proba", None))
        if requested == "auto":
            return "predict_proba" if has_proba else "predict"
        if requested == "predict_proba" and not has_proba:
            raise ParamError("stack_method", f"{name!r} has no predict_proba")
        return requested

    def _encode_y(self, y):
        classes, codes = self._encode_targets(y)
        return codes, classes

    def _folds(self, cv: int, seed: int, X, target):
        return list(StratifiedKFold(cv, shuffle=True, random_state=seed).split(X, target))

    def _block(self, est, method: str, X, n_classes) -> np.ndarray:
        """Meta-feature block of one fitted base classifier (its classes_ are class codes)."""
        if method == "predict_proba":
            proba = est.predict_proba(X)
            full = np.zeros((X.shape[0], n_classes))
            full[:, np.asarray(est.classes_, dtype=np.intp)] = proba
            return full[:, 1:] if n_classes == 2 else full
        return np.asarray(est.predict(X), dtype=np.float64)[:, None]

    def predict_proba(self, X):
        meta = self._meta(X)
        final = self.final_estimator_
        cols = np.asarray(final.classes_, dtype=np.intp)
        out = np.zeros((meta.shape[0], len(self.classes_)))
        if callable(getattr(final, "predict_proba", None)):
            out[:, cols] = final.predict_proba(meta)
        else:
            out[np.arange(meta.shape[0]), np.asarray(final.predict(meta), dtype=np.intp)] = 1.0
        return out

    def predict(self, X):
        meta = self._meta(X)
        return self.classes_[np.asarray(self.final_estimator_.predict(meta), dtype=np.intp)]
