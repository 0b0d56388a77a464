"""decomposition: PCA, kernel PCA, FastICA and factor analysis."""

from . import kernel_pca, pca  # noqa: F401
