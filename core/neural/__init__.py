"""neural: multi-layer perceptrons (shared engine in ``_mlp_engine``)."""

from . import mlp_classifier, mlp_regressor  # noqa: F401
