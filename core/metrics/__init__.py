"""Evaluation metrics: classification, ranking (ROC / precision-recall) and regression (clustering metrics live
in their own module)."""

from .classification import (
    accuracy_score,
    balanced_accuracy_score,
    confusion_matrix,
    f1_score,
    fbeta_score,
    hinge_loss,
    log_loss,
    precision_recall_fscore_support,
    precision_score,
    recall_score,
    zero_one_loss,
)
from .ranking import auc, average_precision_score, precision_recall_curve, roc_auc_score, roc_curve
from .regression import (
    adjusted_r2_score,
    aic,
    bic,
    gaussian_log_likelihood,
    mean_absolute_error,
    mean_squared_error,
    r2_score,
    root_mean_squared_error,
)

__all__ = [
    "accuracy_score",
    "auc",
    "average_precision_score",
    "balanced_accuracy_score",
    "confusion_matrix",
    "f1_score",
    "fbeta_score",
    "hinge_loss",
    "log_loss",
    "precision_recall_curve",
    "precision_recall_fscore_support",
    "precision_score",
    "recall_score",
    "roc_auc_score",
    "roc_curve",
    "zero_one_loss",
    "adjusted_r2_score",
    "aic",
    "bic",
    "gaussian_log_likelihood",
    "mean_absolute_error",
    "mean_squared_error",
    "r2_score",
    "root_mean_squared_error",
]
