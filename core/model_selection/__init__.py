"""Splitting, cross-validation, search and statistical comparison."""

from .split import KFold, LeaveOneOut, StratifiedKFold, bootstrap_indices, train_test_split_indices

__all__ = ["KFold", "StratifiedKFold", "LeaveOneOut", "train_test_split_indices", "bootstrap_indices"]
