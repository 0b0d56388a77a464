"""tree."""

from . import (
    decision_tree_classifier,  # noqa: F401
    decision_tree_regressor,  # noqa: F401
)
