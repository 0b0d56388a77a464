"""Preprocessing: the table -> matrix transform stored in model bundles."""

from .table import FEATURE_TYPES, TablePreprocessor

__all__ = ["TablePreprocessor", "FEATURE_TYPES"]
