"""Stacking regressor: a meta-learner on out-of-fold predictions of base regressors."""

from __future__ import annotations

import numpy as np

from ..base import Regressor
from ..context import NULL_CONTEXT
from ..model_selection.split import KFold
from ..params import Any_, Bool, Int, Seed
from ..registry import register
from ..validation import check_array, check_is_fitted, check_n_features, check_sample_weight, check_X_y
from ._stacking import as_meta, base_seeds, check_estimator_specs, fit_stack

__all__ = ["StackingRegressor"]


@register
class StackingRegressor(Regressor):
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

    @classmethod
    def _example_params(cls) -> dict:
        small = {"max_iter": 3, "min_samples_leaf": 3}
        return {
            "estimators": [
                {"name": "gradient_boosting_regressor", "params": small},
                {"name": "gradient_boosting_regressor", "params": {**small, "max_depth": 1}},
            ],
            "final_estimator": {"name": "gradient_boosting_regressor", "params": small},
            "cv": 3,
        }

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        bases, (final_name, final_params) = check_estimator_specs(
            p["estimators"], p["final_estimator"], "regression"
        )
        X, y = check_X_y(X, y, allow_nan=True, y_numeric=True)
        w = None if sample_weight is None else check_sample_weight(sample_weight, X.shape[0])
        _, fold_seed, seeds = base_seeds(p["random_state"], len(bases))
        folds = list(KFold(p["cv"], shuffle=True, random_state=fold_seed).split(X))
        fitted, final = fit_stack(
            bases, seeds, folds, X, y, w, (final_name, final_params), p["passthrough"],
            lambda i, est, Xt: est.predict(Xt), ctx,
        )
        self.estimators_ = fitted
        self.final_estimator_ = final
        self._passthrough = p["passthrough"]
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        check_is_fitted(self, ["final_estimator_"])
        X = check_array(X, allow_nan=True)
        check_n_features(self, X)
        blocks = [np.asarray(e.predict(X), dtype=np.float64) for e in self.estimators_]
        meta = as_meta(blocks, X, self._passthrough)
        return np.asarray(self.final_estimator_.predict(meta), dtype=np.float64)
