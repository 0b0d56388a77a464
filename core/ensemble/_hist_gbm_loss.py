"""Former home of the boosting losses: models pickled before the engine moved to
``_hist_gradient_boosting`` name this module, so it keeps the name they load."""

from ._hist_gradient_boosting.loss import AbsoluteError, BinaryLogLoss, MultinomialLogLoss, SquaredError  # noqa: F401
