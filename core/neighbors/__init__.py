"""neighbors: k-nearest-neighbour classifier and regressor."""

from . import knn_classifier, knn_regressor  # noqa: F401
