"""Orchard's algorithm core: NumPy + SciPy only, no service code."""

__version__ = "0.1.0"

from . import algorithms as _algorithms  # noqa: E402,F401 - fills the registry
from . import registry  # noqa: E402

__all__ = ["registry", "__version__"]
