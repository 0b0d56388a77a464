"""tree."""

from . import decision_tree_classifier  # noqa: F401
from . import decision_tree_regressor  # noqa: F401
