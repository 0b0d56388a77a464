"""Preprocessing: the table -> matrix transform stored in model bundles, and target label encoding."""

from .labels import LabelEncoder
from .table import FEATURE_TYPES, TablePreprocessor

__all__ = ["TablePreprocessor", "FEATURE_TYPES", "LabelEncoder"]
