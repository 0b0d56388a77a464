"""cluster: k-means, agglomerative, divisive (bisecting k-means) and spectral clustering."""

from . import kmeans  # noqa: F401
from . import agglomerative  # noqa: F401
