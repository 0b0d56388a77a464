"""Stacking regressor: a meta-learner on out-of-fold predictions of base regressors."""

from __future__ import annotations

import numpy as np

from ..base import Regressor
from ..model_selection.split import KFold
from ..params import Any_, Bool, Int, Seed
from ..registry import register
from ._stacking import BaseStacking

__all__ = ["StackingRegressor"]


@register
class StackingRegressor(BaseStacking, Regressor):
    """Stacked generalisation for regression ([Passerini §16.2]).

    The out-of-fold predictions of each base regressor (``cv`` shuffled folds)
    are the meta-features on which ``final_estimator`` is trained, so the
    meta-learner never sees an in-sample prediction; the base regressors are
    then refitted on all rows.  ``passthrough`` appends the raw features.
    """

    name = "stacking_regressor"
    summary = "Stacking: a final regressor trained on out-of-fold predictions of base regressors."
    params = {
        "estimators": Any_(
            [{"name": "gradient_boosting_regressor", "params": {}}],
            doc='Base regressors: a list of {"name": registry name, "params": {...}}.',
        ),
        "final_estimator": Any_(
            {"name": "ridge_regression", "params": {}},
            doc='Meta-learner {"name": ..., "params": {...}} trained on out-of-fold predictions.',
        ),
        "cv": Int(5, ge=2, le=100, doc="Number of (shuffled) folds for the out-of-fold predictions."),
        "passthrough": Bool(False, doc="Also give the original features to the meta-learner."),
        "random_state": Seed(doc="Seed of the fold shuffling and of the sub-estimators' seeds."),
    }
    supports_sample_weight = True
    reports_progress = True

    def _folds(self, cv: int, seed: int, X, target):
        return list(KFold(cv, shuffle=True, random_state=seed).split(X))

    def predict(self, X):
        meta = self._meta(X)
        return np.asarray(self.final_estimator_.predict(meta), dtype=np.float64)
