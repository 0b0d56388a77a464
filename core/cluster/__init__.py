"""cluster: k-means, agglomerative, divisive (bisecting k-means) and spectral clustering."""

from . import kmeans  # noqa: F401
