"""density: Gaussian, Bernoulli and categorical densities (MLE and conjugate Bayesian)."""

from . import bernoulli_density, categorical_density, gaussian_density  # noqa: F401
