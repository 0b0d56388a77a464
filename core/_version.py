"""The core's version (a leaf module: estimators record it in their pickles)."""

__version__ = "0.1.0"
