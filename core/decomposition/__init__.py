"""decomposition: PCA, kernel PCA, FastICA and factor analysis."""

from . import factor_analysis, ica, kernel_pca, pca  # noqa: F401
