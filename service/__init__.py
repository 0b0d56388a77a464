"""Orchard's REST service (FastAPI)."""

__version__ = "0.1.0"
