"""ensemble."""

from . import (
    adaboost_classifier,  # noqa: F401
    bagging_classifier,  # noqa: F401
    bagging_regressor,  # noqa: F401
    random_forest_classifier,  # noqa: F401
    random_forest_regressor,  # noqa: F401
)
