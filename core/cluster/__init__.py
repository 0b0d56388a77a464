"""cluster: k-means, agglomerative, divisive (bisecting k-means) and spectral clustering."""

from . import (
    agglomerative,  # noqa: F401
    divisive,  # noqa: F401
    kmeans,  # noqa: F401
    spectral,  # noqa: F401
)
