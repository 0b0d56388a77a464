"""neural: multi-layer perceptrons (shared engine in ``mlp_engine``)."""

from . import mlp_classifier, mlp_regressor  # noqa: F401
