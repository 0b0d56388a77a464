"""Former home of the fitted boosting trees: models pickled before the engine moved to
``_hist_gradient_boosting`` name this module, so it keeps the name they load."""

from ._hist_gradient_boosting.predictor import TreeEnsemble  # noqa: F401
