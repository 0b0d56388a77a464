"""mixture: Gaussian mixture models fitted by EM."""

from . import gaussian_mixture  # noqa: F401
