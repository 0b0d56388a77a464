"""Splitting, cross-validation, search and statistical comparison."""

from .feature_selection import sequential_feature_selection
from .resampling import bias_variance_decomposition, bootstrap_estimate
from .scoring import SCORERS, Scorer, check_scoring, get_scorer
from .search import GridSearch, RandomSearch, grid_search, random_search
from .split import (
    KFold,
    LeaveOneOut,
    StratifiedKFold,
    bootstrap_indices,
    train_test_split_indices,
    train_val_test_split_indices,
)
from .validation import (
    FixedSplits,
    check_cv,
    compare_estimators,
    cross_validate,
    learning_curve,
    paired_ttest,
    summarize_scores,
)

__all__ = [
    "KFold",
    "StratifiedKFold",
    "LeaveOneOut",
    "FixedSplits",
    "train_test_split_indices",
    "train_val_test_split_indices",
    "bootstrap_indices",
    "check_cv",
    "cross_validate",
    "summarize_scores",
    "paired_ttest",
    "compare_estimators",
    "learning_curve",
    "grid_search",
    "random_search",
    "GridSearch",
    "RandomSearch",
    "sequential_feature_selection",
    "bootstrap_estimate",
    "bias_variance_decomposition",
    "SCORERS",
    "Scorer",
    "get_scorer",
    "check_scoring",
]
