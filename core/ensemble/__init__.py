"""ensemble."""

from . import gradient_boosting_classifier  # noqa: F401, I001
from . import gradient_boosting_regressor  # noqa: F401, I001
from . import stacking_classifier  # noqa: F401, I001
from . import stacking_regressor  # noqa: F401, I001
