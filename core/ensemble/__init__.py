"""Ensembles: random forests, bagging, AdaBoost, histogram gradient boosting, stacking."""

from . import (  # noqa: F401
    adaboost_classifier,
    bagging_classifier,
    bagging_regressor,
    gradient_boosting_classifier,
    gradient_boosting_regressor,
    random_forest_classifier,
    random_forest_regressor,
    stacking_classifier,
    stacking_regressor,
)
