"""Orchard's algorithm core: NumPy + SciPy only, no service code."""

from . import _moved
from ._version import __version__

_moved.install()  # old module paths named by model bundles pickled before a move

from . import algorithms as _algorithms  # noqa: E402,F401 - fills the registry
from . import registry  # noqa: E402

__all__ = ["registry", "__version__"]
