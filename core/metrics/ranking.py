"""Ranking metrics: ROC and precision-recall curves and the areas under them ([Passerini §4]; reference:
``sklearn.metrics``, reproduced to 1e-12 in tests/core/metrics/test_classification_metrics.py).

``roc_auc_score`` defaults to ``multi_class="ovr"`` for multiclass targets (scikit-learn raises unless told)
and accepts a 2-column probability matrix for binary targets (column 1 = the greater label)
(docs/decisions/metrics.md). ``binary_clf_curve`` and the ``*_from_counts`` functions are the steps the
curves share, for callers that need several curves from one sort.
"""

from __future__ import annotations

import numpy as np

from ..validation import DataError, column_or_1d
from .labels import as_1d, check_lengths, is_str_kind, label_codes, metric_weights, unique_labels

__all__ = [
    "roc_curve",
    "auc",
    "roc_auc_score",
    "precision_recall_curve",
    "average_precision_score",
    "binary_clf_curve",
    "roc_from_counts",
    "pr_from_counts",
]


def _positive_indicator(y_true: np.ndarray, pos_label) -> np.ndarray:
    if pos_label is None:
        classes = unique_labels(y_true)
        ok = (
            not is_str_kind(classes)
            and len(classes) <= 2
            and (
                np.array_equal(classes, [0, 1])
                or np.array_equal(classes, [-1, 1])
                or np.array_equal(classes, [0])
                or np.array_equal(classes, [-1])
                or np.array_equal(classes, [1])
            )
        )
        if not ok:
            raise DataError(
                f"y_true takes values in {classes.tolist()}; pass pos_label to say which is positive "
                "(it is inferred only for labels {0, 1} or {-1, 1})"
            )
        pos_label = 1
    return np.asarray(y_true == pos_label, dtype=np.float64)


def binary_clf_curve(y_true, y_score, pos_label=None, sample_weight=None):
    """Cumulative false/true positives per distinct threshold (descending scores)."""
    y_true = as_1d(y_true, "y_true")
    y_score = column_or_1d(np.asarray(y_score, dtype=np.float64), name="y_score")
    check_lengths(y_true, y_score, sample_weight)
    if not np.isfinite(y_score).all():
        raise DataError("y_score contains NaN or infinity")
    y = _positive_indicator(y_true, pos_label)
    w = metric_weights(sample_weight, len(y))
    if w is not None:
        nz = w != 0
        y, y_score, w = y[nz], y_score[nz], w[nz]
    order = np.argsort(-y_score, kind="stable")
    y_score = y_score[order]
    y = y[order]
    if w is not None:
        w = w[order]
    distinct = np.flatnonzero(np.diff(y_score))
    idx = np.concatenate([distinct, [len(y) - 1]])
    if w is None:
        tps = np.cumsum(y)[idx]
        fps = 1 + idx.astype(np.float64) - tps
    else:
        tps = np.cumsum(y * w)[idx]
        fps = np.cumsum((1 - y) * w)[idx]
    return fps, tps, y_score[idx]


def roc_curve(y_true, y_score, *, pos_label=None, sample_weight=None, drop_intermediate: bool = True):
    """ROC curve ``(fpr, tpr, thresholds)``; ``thresholds[0] = inf`` so the curve starts at (0, 0).

    ``drop_intermediate`` removes collinear points that do not change the plotted curve.
    """
    fps, tps, thr = binary_clf_curve(y_true, y_score, pos_label, sample_weight)
    return roc_from_counts(fps, tps, thr, drop_intermediate)


def roc_from_counts(fps, tps, thr, drop_intermediate: bool = True):
    if drop_intermediate and len(fps) > 2:
        keep = np.flatnonzero(
            np.concatenate([[True], np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), [True]])
        )
        fps, tps, thr = fps[keep], tps[keep], thr[keep]
    tps = np.concatenate([[0.0], tps])
    fps = np.concatenate([[0.0], fps])
    thr = np.concatenate([[np.inf], thr])
    fpr = np.full(fps.shape, np.nan) if fps[-1] <= 0 else fps / fps[-1]
    tpr = np.full(tps.shape, np.nan) if tps[-1] <= 0 else tps / tps[-1]
    return fpr, tpr, thr


def auc(x, y) -> float:
    """Area under a curve by the trapezoidal rule (``x`` monotonic)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.shape[0] < 2:
        raise DataError(f"at least 2 points are needed to compute an area under a curve, got {x.shape[0]}")
    dx = np.diff(x)
    direction = 1.0
    if np.any(dx < 0):
        if np.all(dx <= 0):
            direction = -1.0
        else:
            raise DataError("x is neither increasing nor decreasing")
    return float(direction * np.trapezoid(y, x))


def _binary_roc_auc(y01: np.ndarray, score: np.ndarray, w) -> float:
    if len(np.unique(y01)) != 2:
        return float("nan")
    fpr, tpr, _ = roc_curve(y01, score, sample_weight=w)
    return auc(fpr, tpr)


def _average_ovr(metric, Y: np.ndarray, S: np.ndarray, average, w) -> float | np.ndarray:
    """scikit-learn's ``_average_binary_score`` for an indicator matrix ``Y``."""
    if average == "micro":
        ww = None if w is None else np.repeat(w, Y.shape[1])
        return metric(Y.ravel(), S.ravel(), ww)
    scores = np.array([metric(Y[:, c], S[:, c], w) for c in range(Y.shape[1])])
    if average is None:
        return scores
    if average == "weighted":
        aw = Y.sum(axis=0) if w is None else (Y * w[:, None]).sum(axis=0)
        if np.isclose(aw.sum(), 0.0):
            return 0.0
        scores = scores.copy()
        scores[aw == 0] = 0.0
        return float(np.average(scores, weights=aw))
    if average == "macro":
        return float(np.mean(scores))
    raise DataError("average must be one of 'macro', 'weighted', 'micro' or None")


def roc_auc_score(
    y_true,
    y_score,
    *,
    average: str | None = "macro",
    multi_class: str = "ovr",
    labels=None,
    sample_weight=None,
):
    """Area under the ROC curve.

    Binary: ``y_score`` is the score of the greater label (a 2-column probability
    matrix is also accepted; column 1 is used).  Multiclass: one-vs-rest AUC per
    class of ``labels`` (default: sorted labels of ``y_true``; columns of ``y_score``
    follow them), averaged "macro", "weighted" (by prevalence) or "micro".
    An AUC with a single class present is undefined (nan).
    """
    y_true = as_1d(y_true, "y_true")
    S = np.asarray(y_score, dtype=np.float64)
    check_lengths(y_true, S, sample_weight)
    w = metric_weights(sample_weight, len(y_true))
    present = unique_labels(y_true)
    multiclass = len(present) > 2 or (S.ndim == 2 and S.shape[1] > 2)
    if not multiclass:
        if S.ndim == 2:
            if S.shape[1] == 2:
                S = S[:, 1]
            else:
                S = column_or_1d(S, name="y_score")
        if len(present) < 2:
            return float("nan")
        y01 = (label_codes(y_true, present) == 1).astype(np.float64)
        return _binary_roc_auc(y01, S, w)
    if multi_class != "ovr":
        raise DataError("only multi_class='ovr' is supported for multiclass ROC AUC")
    if S.ndim != 2:
        raise DataError(
            f"y_score must have shape (n_samples, n_classes) for a multiclass target, got {S.shape}"
        )
    if not np.allclose(1, S.sum(axis=1)):
        raise DataError("target scores must be probabilities for multiclass roc_auc (rows summing to 1)")
    classes = present if labels is None else np.asarray(labels)
    if len(classes) != S.shape[1]:
        raise DataError(f"{len(classes)} classes but y_score has {S.shape[1]} columns")
    codes = label_codes(y_true, classes)
    if (codes < 0).any():
        raise DataError("y_true contains labels not in labels")
    Y = (codes[:, None] == np.arange(len(classes))[None, :]).astype(np.float64)
    return _average_ovr(_binary_roc_auc, Y, S, average, w)


def precision_recall_curve(
    y_true, y_score, *, pos_label=None, sample_weight=None, drop_intermediate: bool = False
):
    """Precision-recall pairs for every distinct threshold ([Passerini §4 (Precision–Recall curve)]).

    Returns ``(precision, recall, thresholds)``: precision and recall have one more
    entry than thresholds, ending at (1, 0); recall is decreasing.
    """
    fps, tps, thr = binary_clf_curve(y_true, y_score, pos_label, sample_weight)
    return pr_from_counts(fps, tps, thr, drop_intermediate)


def pr_from_counts(fps, tps, thr, drop_intermediate: bool = False):
    if drop_intermediate and len(fps) > 2:
        keep = np.flatnonzero(
            np.concatenate([[True], np.logical_or(np.diff(tps[:-1]), np.diff(tps[1:])), [True]])
        )
        fps, tps, thr = fps[keep], tps[keep], thr[keep]
    ps = tps + fps
    precision = np.divide(tps, ps, out=np.zeros_like(tps), where=ps != 0)
    recall = np.ones_like(tps) if tps[-1] == 0 else tps / tps[-1]
    return (
        np.concatenate([precision[::-1], [1.0]]),
        np.concatenate([recall[::-1], [0.0]]),
        thr[::-1],
    )


def _binary_ap(y01, score, w) -> float:
    precision, recall, _ = precision_recall_curve(y01, score, pos_label=1, sample_weight=w)
    return float(max(0.0, -np.sum(np.diff(recall) * precision[:-1])))


def average_precision_score(
    y_true, y_score, *, average: str | None = "macro", pos_label=1, sample_weight=None
):
    """Average precision ``AP = sum_n (R_n - R_{n-1}) P_n`` (step integral of the PR curve).

    Binary: ``y_score`` scores ``pos_label``.  Multiclass: one-vs-rest over the sorted
    labels of ``y_true`` (columns of ``y_score``), averaged like ``roc_auc_score``.
    """
    y_true = as_1d(y_true, "y_true")
    S = np.asarray(y_score, dtype=np.float64)
    check_lengths(y_true, S, sample_weight)
    w = metric_weights(sample_weight, len(y_true))
    present = unique_labels(y_true)
    if len(present) <= 2 and S.ndim == 1:
        if len(present) == 2 and not any(v == pos_label for v in present.tolist()):
            raise DataError(
                f"pos_label={pos_label!r} is not a valid label; it should be one of {present.tolist()}"
            )
        y01 = np.asarray(y_true == pos_label, dtype=np.float64)
        return _binary_ap(y01, S, w)
    if S.ndim != 2 or S.shape[1] != len(present):
        raise DataError(f"y_score must have shape (n_samples, {len(present)}) for a multiclass target")
    codes = label_codes(y_true, present)
    Y = (codes[:, None] == np.arange(len(present))[None, :]).astype(np.float64)
    return _average_ovr(_binary_ap, Y, S, average, w)
