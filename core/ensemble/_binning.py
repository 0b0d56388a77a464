"""Former home of the boosting bin mapper: models pickled before the engine moved to
``_hist_gradient_boosting`` name this module, so it keeps the name they load."""

from ._hist_gradient_boosting.binning import BinMapper  # noqa: F401
