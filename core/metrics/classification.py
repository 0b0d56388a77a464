"""Classification metrics from labels (ranking metrics: ``ranking.py``; [Passerini §4]; reference: ``sklearn.metrics``).

Every function here reproduces the numbers of the scikit-learn function of the
same name (checked to 1e-12 in tests/core/metrics/test_classification_metrics.py).
Labels may be any hashable values (strings included).  Differences from
scikit-learn, all additive conveniences, are recorded in docs/decisions/metrics.md:

* undefined ratios return the ``zero_division`` value silently (no warnings).
"""

from __future__ import annotations

import numpy as np

from ..validation import DataError, column_or_1d
from .labels import (
    as_1d,
    check_lengths,
    label_codes,
    metric_weights,
    nanaverage,
    safe_divide,
    sorted_unique,
    unique_labels,
    zero_division_value,
)

__all__ = [
    "unique_labels",
    "accuracy_score",
    "balanced_accuracy_score",
    "confusion_matrix",
    "precision_recall_fscore_support",
    "precision_score",
    "recall_score",
    "f1_score",
    "fbeta_score",
    "zero_one_loss",
    "hinge_loss",
    "log_loss",
]


# ----------------------------------------------------------------------------- simple scores
def accuracy_score(y_true, y_pred, *, normalize: bool = True, sample_weight=None) -> float:
    """Fraction (or count) of exact matches: ``(TP+TN)/N`` ([Passerini eq. 4.1, eq. 4.5])."""
    y_true = as_1d(y_true, "y_true")
    y_pred = as_1d(y_pred, "y_pred")
    check_lengths(y_true, y_pred, sample_weight)
    unique_labels(y_true, y_pred)  # type consistency
    correct = np.asarray(y_true == y_pred, dtype=np.float64)
    w = metric_weights(sample_weight, len(y_true))
    if normalize:
        return float(np.average(correct, weights=w))
    return float(correct.sum() if w is None else correct @ w)


def zero_one_loss(y_true, y_pred, *, normalize: bool = True, sample_weight=None) -> float:
    """0/1 misclassification loss ``1 - accuracy`` (or the weighted count of errors)."""
    score = accuracy_score(y_true, y_pred, normalize=normalize, sample_weight=sample_weight)
    if normalize:
        return 1.0 - score
    n = len(as_1d(y_true, "y_true")) if sample_weight is None else float(np.sum(sample_weight))
    return float(n - score)


def confusion_matrix(y_true, y_pred, *, labels=None, sample_weight=None, normalize=None) -> np.ndarray:
    """``C[i, j]`` = number of samples of class ``labels[i]`` predicted as ``labels[j]``
    ([Passerini §4 (multiclass confusion matrix)]).

    Rows are the truth, columns the prediction.  Samples whose true or predicted
    label is not in ``labels`` are ignored.  ``normalize`` in {None, "true", "pred", "all"}.
    Integer counts without ``sample_weight``, floats otherwise.
    """
    y_true = as_1d(y_true, "y_true")
    y_pred = as_1d(y_pred, "y_pred")
    check_lengths(y_true, y_pred, sample_weight)
    if labels is None:
        labels = unique_labels(y_true, y_pred)
    else:
        labels = np.asarray(labels)
        if labels.ndim != 1 or labels.size == 0:
            raise DataError("'labels' should contain at least one label")
        if len(sorted_unique(labels)) != len(labels):
            raise DataError("'labels' contains duplicates")
        if not np.isin(label_codes(y_true, labels), -1, invert=True).any():
            raise DataError("at least one label in 'labels' must be present in y_true")
    if normalize not in (None, "true", "pred", "all"):
        raise DataError("normalize must be one of {'true', 'pred', 'all', None}")
    k = len(labels)
    t = label_codes(y_true, labels)
    p = label_codes(y_pred, labels)
    keep = (t >= 0) & (p >= 0)
    w = metric_weights(sample_weight, len(y_true))
    flat = t[keep] * k + p[keep]
    if w is None:
        cm = np.bincount(flat, minlength=k * k).reshape(k, k).astype(np.int64)
    else:
        cm = np.bincount(flat, weights=w[keep], minlength=k * k).reshape(k, k)
    if normalize is not None:
        cm = cm.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            if normalize == "true":
                cm = cm / cm.sum(axis=1, keepdims=True)
            elif normalize == "pred":
                cm = cm / cm.sum(axis=0, keepdims=True)
            else:
                cm = cm / cm.sum()
        cm = np.nan_to_num(cm)
    return cm


def balanced_accuracy_score(y_true, y_pred, *, sample_weight=None, adjusted: bool = False) -> float:
    """Mean per-class recall over the classes present in ``y_true`` (cost rebalancing, [Passerini §4 (accuracy)]).

    ``adjusted`` rescales so that chance level is 0: ``(score - 1/k) / (1 - 1/k)``.
    """
    cm = confusion_matrix(y_true, y_pred, sample_weight=sample_weight).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_class = np.diag(cm) / cm.sum(axis=1)
    per_class = per_class[~np.isnan(per_class)]
    score = float(np.mean(per_class))
    if adjusted:
        chance = 1.0 / len(per_class)
        score = (score - chance) / (1.0 - chance)
    return score


def precision_recall_fscore_support(
    y_true,
    y_pred,
    *,
    beta: float = 1.0,
    labels=None,
    pos_label=1,
    average: str | None = None,
    sample_weight=None,
    zero_division="warn",
):
    """Precision ``TP/(TP+FP)``, recall ``TP/(TP+FN)``, F-beta and support
    ([Passerini eq. 4.2-4.4, §4 (per-class precision / recall)]).

    ``F_beta = (1+beta^2) TP / ((1+beta^2) TP + beta^2 FN + FP)``.
    ``average``: None (per class, in ``labels`` order), "binary" (class ``pos_label``),
    "micro" (pooled counts), "macro" (unweighted mean), "weighted" (mean weighted by support).
    A ratio with a zero denominator takes ``zero_division`` (0 for "warn", 1, or nan;
    nan entries are left out of averages).  Returns ``(precision, recall, fbeta, support)``;
    support is None when averaged.
    """
    if beta < 0:
        raise DataError("beta must be non-negative")
    if average not in (None, "binary", "micro", "macro", "weighted"):
        raise DataError("average must be one of None, 'binary', 'micro', 'macro', 'weighted'")
    zd = zero_division_value(zero_division)
    y_true = as_1d(y_true, "y_true")
    y_pred = as_1d(y_pred, "y_pred")
    check_lengths(y_true, y_pred, sample_weight)
    present = unique_labels(y_true, y_pred)
    if average == "binary":
        if len(present) > 2:
            raise DataError(
                "target is multiclass but average='binary'; choose average in "
                "None, 'micro', 'macro', 'weighted'"
            )
        if len(present) == 2 and not any(v == pos_label for v in present.tolist()):
            raise DataError(
                f"pos_label={pos_label!r} is not a valid label; it should be one of {present.tolist()}"
            )
        labels = np.asarray([pos_label])
    if labels is None:
        labels = present
        all_labels = present
    else:
        labels = np.asarray(labels)
        extra = labels[label_codes(labels, present) < 0]
        all_labels = np.concatenate([present.astype(object), extra.astype(object)]) if len(extra) else present
    k = len(all_labels)
    t = label_codes(y_true, all_labels)
    p = label_codes(y_pred, all_labels)
    w = metric_weights(sample_weight, len(y_true))
    ww = np.ones(len(y_true)) if w is None else w
    tp_all = np.bincount(t[t == p], weights=ww[t == p], minlength=k)
    true_all = np.bincount(t, weights=ww, minlength=k)
    pred_all = np.bincount(p, weights=ww, minlength=k)
    sel = label_codes(labels, all_labels)
    tp_sum, true_sum, pred_sum = tp_all[sel], true_all[sel], pred_all[sel]
    if average == "micro":
        tp_sum, true_sum, pred_sum = (np.array([a.sum()]) for a in (tp_sum, true_sum, pred_sum))
    precision = safe_divide(tp_sum, pred_sum, zd)
    recall = safe_divide(tp_sum, true_sum, zd)
    if np.isposinf(beta):
        f = recall
    elif beta == 0:
        f = precision
    else:
        b2 = beta * beta
        f = safe_divide((1 + b2) * tp_sum, b2 * true_sum + pred_sum, zd)
    if average is None:
        support = true_sum if w is not None else true_sum.astype(np.int64)
        return precision, recall, f, support
    weights = true_sum if average == "weighted" else None
    return nanaverage(precision, weights), nanaverage(recall, weights), nanaverage(f, weights), None


def precision_score(
    y_true, y_pred, *, labels=None, pos_label=1, average="binary", sample_weight=None, zero_division="warn"
):
    """Precision ``TP/(TP+FP)`` (see ``precision_recall_fscore_support``)."""
    return precision_recall_fscore_support(
        y_true,
        y_pred,
        labels=labels,
        pos_label=pos_label,
        average=average,
        sample_weight=sample_weight,
        zero_division=zero_division,
    )[0]


def recall_score(
    y_true, y_pred, *, labels=None, pos_label=1, average="binary", sample_weight=None, zero_division="warn"
):
    """Recall ``TP/(TP+FN)`` (see ``precision_recall_fscore_support``)."""
    return precision_recall_fscore_support(
        y_true,
        y_pred,
        labels=labels,
        pos_label=pos_label,
        average=average,
        sample_weight=sample_weight,
        zero_division=zero_division,
    )[1]


def fbeta_score(
    y_true,
    y_pred,
    *,
    beta: float,
    labels=None,
    pos_label=1,
    average="binary",
    sample_weight=None,
    zero_division="warn",
):
    """F-beta ``(1+b^2) P R / (b^2 P + R)`` ([Passerini eq. 4.4])."""
    return precision_recall_fscore_support(
        y_true,
        y_pred,
        beta=beta,
        labels=labels,
        pos_label=pos_label,
        average=average,
        sample_weight=sample_weight,
        zero_division=zero_division,
    )[2]


def f1_score(
    y_true, y_pred, *, labels=None, pos_label=1, average="binary", sample_weight=None, zero_division="warn"
):
    """F1, the harmonic mean of precision and recall."""
    return fbeta_score(
        y_true,
        y_pred,
        beta=1.0,
        labels=labels,
        pos_label=pos_label,
        average=average,
        sample_weight=sample_weight,
        zero_division=zero_division,
    )


# ----------------------------------------------------------------------------- losses on scores
def log_loss(y_true, y_proba, *, normalize: bool = True, sample_weight=None, labels=None) -> float:
    """Cross-entropy ``-(1/N) sum_i log p_i[y_i]`` with ``p`` clipped to ``[eps, 1-eps]``.

    Columns of ``y_proba`` follow ``labels`` sorted (or the sorted labels of ``y_true``);
    a 1-d ``y_proba`` is the probability of the greater of two labels.
    """
    y_true = as_1d(y_true, "y_true")
    proba = np.asarray(y_proba, dtype=np.float64)
    check_lengths(y_true, proba, sample_weight)
    if proba.max() > 1:
        raise DataError(f"y_proba contains values greater than 1: {proba.max()}")
    if proba.min() < 0:
        raise DataError(f"y_proba contains values lower than 0: {proba.min()}")
    classes = unique_labels(y_true) if labels is None else unique_labels(np.asarray(labels))
    if len(classes) < 2:
        raise DataError(
            f"y_true contains only one label ({classes[0]!r}); pass all the labels with the labels argument"
        )
    codes = label_codes(y_true, classes)
    if (codes < 0).any():
        raise DataError("y_true contains labels not in labels")
    if proba.ndim == 1:
        proba = proba[:, None]
    if proba.shape[1] == 1:
        proba = np.concatenate([1 - proba, proba], axis=1)
    if proba.shape[1] != len(classes):
        raise DataError(
            f"y_proba has {proba.shape[1]} columns but there are {len(classes)} classes "
            f"({classes.tolist()}); pass the labels explicitly"
        )
    eps = np.finfo(np.float64).eps
    proba = np.clip(proba, eps, 1 - eps)
    loss = -np.log(proba[np.arange(len(codes)), codes])
    w = metric_weights(sample_weight, len(y_true))
    if normalize:
        return float(np.average(loss, weights=w))
    return float(loss.sum() if w is None else loss @ w)


def hinge_loss(y_true, pred_decision, *, labels=None, sample_weight=None) -> float:
    """Mean hinge loss ``max(0, 1 - y f(x))`` ([Passerini eq. 11.12]).

    Binary: labels mapped to -1 (smaller) / +1 (greater), ``pred_decision`` 1-d.
    Multiclass (Crammer-Singer): margin = score of the true class minus the best other score.
    """
    y_true = as_1d(y_true, "y_true")
    dec = np.asarray(pred_decision, dtype=np.float64)
    check_lengths(y_true, dec, sample_weight)
    classes = unique_labels(y_true if labels is None else np.asarray(labels))
    w = metric_weights(sample_weight, len(y_true))
    if len(classes) > 2:
        if dec.ndim != 2 or dec.shape[1] != len(classes):
            raise DataError(
                f"with a multiclass target pred_decision must have shape (n_samples, {len(classes)}); "
                f"got {dec.shape}"
            )
        codes = label_codes(y_true, classes)
        if (codes < 0).any():
            raise DataError("y_true contains labels not in labels")
        rows = np.arange(len(codes))
        true_score = dec[rows, codes]
        others = dec.copy()
        others[rows, codes] = -np.inf
        margin = true_score - others.max(axis=1)
    else:
        dec = column_or_1d(dec, name="pred_decision")
        bin_classes = unique_labels(y_true)
        if len(bin_classes) == 1:
            sign = -np.ones(len(y_true))
        else:
            sign = np.where(label_codes(y_true, bin_classes) == 1, 1.0, -1.0)
        margin = sign * dec
    losses = np.clip(1 - margin, 0, None)
    return float(np.average(losses, weights=w))
