"""Classification metrics ([Passerini §4]; reference: ``sklearn.metrics``).

Every function here reproduces the numbers of the scikit-learn function of the
same name (checked to 1e-12 in tests/core/metrics/test_classification_metrics.py).
Labels may be any hashable values (strings included).  Differences from
scikit-learn, all additive conveniences, are recorded in docs/decisions/metrics.md:

* ``roc_auc_score`` defaults to ``multi_class="ovr"`` for multiclass targets
  (scikit-learn raises unless told) and accepts a 2-column probability matrix
  for binary targets (column 1 = the greater label).
* undefined ratios return the ``zero_division`` value silently (no warnings).
"""

from __future__ import annotations

import math

import numpy as np

from ..validation import DataError, column_or_1d

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
    "roc_curve",
    "auc",
    "roc_auc_score",
    "precision_recall_curve",
    "average_precision_score",
    "classification_report",
]


# ----------------------------------------------------------------------------- labels
def _as_1d(y, name: str) -> np.ndarray:
    arr = column_or_1d(y, name=name)
    if arr.shape[0] == 0:
        raise DataError(f"{name} is empty; at least one sample is required")
    return arr


def _check_lengths(*arrays) -> None:
    n = {len(a) for a in arrays if a is not None}
    if len(n) > 1:
        raise DataError(f"inconsistent numbers of samples: {sorted(n)}")


def _is_str_kind(a: np.ndarray) -> bool:
    if a.dtype.kind in "US":
        return True
    if a.dtype == object and len(a):
        return isinstance(a.flat[0], str)
    return False


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    try:
        return np.unique(values)
    except TypeError:
        uniq = list(dict.fromkeys(values.tolist()))
        uniq.sort(key=lambda v: (type(v).__name__, str(v)))
        out = np.empty(len(uniq), dtype=object)
        out[:] = uniq
        return out


def unique_labels(*ys) -> np.ndarray:
    """Sorted union of the labels in ``ys`` (like ``sklearn.utils.multiclass.unique_labels``).

    Raises DataError for a mix of string and numeric labels.
    """
    arrays = [np.asarray(y).ravel() for y in ys if y is not None]
    kinds = {_is_str_kind(a) for a in arrays if len(a)}
    if len(kinds) > 1:
        raise DataError("mix of string and numeric labels; labels must be all strings or all numbers")
    if len(arrays) == 1:
        return _sorted_unique(arrays[0])
    if any(a.dtype == object for a in arrays):
        arrays = [a.astype(object) for a in arrays]
    return _sorted_unique(np.concatenate(arrays))


def _encode(y: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Position of each ``y`` in ``labels`` (any order); -1 where absent."""
    k = len(labels)
    if k == 0:
        return np.full(len(y), -1, dtype=np.intp)
    try:
        sorter = np.argsort(labels, kind="stable")
        sorted_labels = labels[sorter]
        pos = np.searchsorted(sorted_labels, y)
        pos_c = np.minimum(pos, k - 1)
        found = sorted_labels[pos_c] == y
        found = np.asarray(found, dtype=bool)
        if found.shape != y.shape:
            raise TypeError
        return np.where(found, sorter[pos_c], -1).astype(np.intp)
    except TypeError:
        index = {v: i for i, v in enumerate(labels.tolist())}
        return np.fromiter((index.get(v, -1) for v in y.tolist()), dtype=np.intp, count=len(y))


def _weights(sample_weight, n: int) -> np.ndarray | None:
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
    if w.shape[0] != n:
        raise DataError(f"sample_weight has {w.shape[0]} entries, expected {n}")
    return w


def _zero_division_value(zero_division) -> float:
    if isinstance(zero_division, str):
        if zero_division == "warn":
            return 0.0
        if zero_division == "nan":
            return float("nan")
        raise DataError(f"zero_division must be 'warn', 0.0, 1.0 or nan, got {zero_division!r}")
    if zero_division is None:
        return 0.0
    value = float(zero_division)
    if not (value in (0.0, 1.0) or math.isnan(value)):
        raise DataError(f"zero_division must be 'warn', 0.0, 1.0 or nan, got {zero_division!r}")
    return value


def _divide(num: np.ndarray, den: np.ndarray, zero_division) -> np.ndarray:
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    mask = den == 0
    safe = np.where(mask, 1.0, den)
    out = num / safe
    if mask.any():
        out[mask] = _zero_division_value(zero_division)
    return out


# ----------------------------------------------------------------------------- simple scores
def accuracy_score(y_true, y_pred, *, normalize: bool = True, sample_weight=None) -> float:
    """Fraction (or count) of exact matches: ``(TP+TN)/N`` ([Passerini eq. 4.1, eq. 4.5])."""
    y_true = _as_1d(y_true, "y_true")
    y_pred = _as_1d(y_pred, "y_pred")
    _check_lengths(y_true, y_pred, sample_weight)
    unique_labels(y_true, y_pred)  # type consistency
    correct = np.asarray(y_true == y_pred, dtype=np.float64)
    w = _weights(sample_weight, len(y_true))
    if normalize:
        return float(np.average(correct, weights=w))
    return float(correct.sum() if w is None else correct @ w)


def zero_one_loss(y_true, y_pred, *, normalize: bool = True, sample_weight=None) -> float:
    """0/1 misclassification loss ``1 - accuracy`` (or the weighted count of errors)."""
    score = accuracy_score(y_true, y_pred, normalize=normalize, sample_weight=sample_weight)
    if normalize:
        return 1.0 - score
    n = len(_as_1d(y_true, "y_true")) if sample_weight is None else float(np.sum(sample_weight))
    return float(n - score)


def confusion_matrix(y_true, y_pred, *, labels=None, sample_weight=None, normalize=None) -> np.ndarray:
    """``C[i, j]`` = number of samples of class ``labels[i]`` predicted as ``labels[j]``
    ([Passerini §4 (multiclass confusion matrix)]).

    Rows are the truth, columns the prediction.  Samples whose true or predicted
    label is not in ``labels`` are ignored.  ``normalize`` in {None, "true", "pred", "all"}.
    Integer counts without ``sample_weight``, floats otherwise.
    """
    y_true = _as_1d(y_true, "y_true")
    y_pred = _as_1d(y_pred, "y_pred")
    _check_lengths(y_true, y_pred, sample_weight)
    if labels is None:
        labels = unique_labels(y_true, y_pred)
    else:
        labels = np.asarray(labels)
        if labels.ndim != 1 or labels.size == 0:
            raise DataError("'labels' should contain at least one label")
        if len(_sorted_unique(labels)) != len(labels):
            raise DataError("'labels' contains duplicates")
        if not np.isin(_encode(y_true, labels), -1, invert=True).any():
            raise DataError("at least one label in 'labels' must be present in y_true")
    if normalize not in (None, "true", "pred", "all"):
        raise DataError("normalize must be one of {'true', 'pred', 'all', None}")
    k = len(labels)
    t = _encode(y_true, labels)
    p = _encode(y_pred, labels)
    keep = (t >= 0) & (p >= 0)
    w = _weights(sample_weight, len(y_true))
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
    zd = _zero_division_value(zero_division)
    y_true = _as_1d(y_true, "y_true")
    y_pred = _as_1d(y_pred, "y_pred")
    _check_lengths(y_true, y_pred, sample_weight)
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
        extra = labels[_encode(labels, present) < 0]
        all_labels = np.concatenate([present.astype(object), extra.astype(object)]) if len(extra) else present
    k = len(all_labels)
    t = _encode(y_true, all_labels)
    p = _encode(y_pred, all_labels)
    w = _weights(sample_weight, len(y_true))
    ww = np.ones(len(y_true)) if w is None else w
    tp_all = np.bincount(t[t == p], weights=ww[t == p], minlength=k)
    true_all = np.bincount(t, weights=ww, minlength=k)
    pred_all = np.bincount(p, weights=ww, minlength=k)
    sel = _encode(labels, all_labels)
    tp_sum, true_sum, pred_sum = tp_all[sel], true_all[sel], pred_all[sel]
    if average == "micro":
        tp_sum, true_sum, pred_sum = (np.array([a.sum()]) for a in (tp_sum, true_sum, pred_sum))
    precision = _divide(tp_sum, pred_sum, zd)
    recall = _divide(tp_sum, true_sum, zd)
    if np.isposinf(beta):
        f = recall
    elif beta == 0:
        f = precision
    else:
        b2 = beta * beta
        f = _divide((1 + b2) * tp_sum, b2 * true_sum + pred_sum, zd)
    if average is None:
        support = true_sum if w is not None else true_sum.astype(np.int64)
        return precision, recall, f, support
    weights = true_sum if average == "weighted" else None
    return _nanaverage(precision, weights), _nanaverage(recall, weights), _nanaverage(f, weights), None


def _nanaverage(a: np.ndarray, weights=None) -> float:
    if a.shape[0] == 0:
        return float("nan")
    mask = np.isnan(a)
    if mask.all():
        return float("nan")
    if weights is None:
        return float(np.mean(a[~mask]))
    a, weights = a[~mask], np.asarray(weights, dtype=np.float64)[~mask]
    if weights.sum() == 0:
        return float(np.mean(a))
    return float(np.average(a, weights=weights))


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
    y_true = _as_1d(y_true, "y_true")
    proba = np.asarray(y_proba, dtype=np.float64)
    _check_lengths(y_true, proba, sample_weight)
    if proba.max() > 1:
        raise DataError(f"y_proba contains values greater than 1: {proba.max()}")
    if proba.min() < 0:
        raise DataError(f"y_proba contains values lower than 0: {proba.min()}")
    classes = unique_labels(y_true) if labels is None else unique_labels(np.asarray(labels))
    if len(classes) < 2:
        raise DataError(
            f"y_true contains only one label ({classes[0]!r}); pass all the labels with the labels argument"
        )
    codes = _encode(y_true, classes)
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
    w = _weights(sample_weight, len(y_true))
    if normalize:
        return float(np.average(loss, weights=w))
    return float(loss.sum() if w is None else loss @ w)


def hinge_loss(y_true, pred_decision, *, labels=None, sample_weight=None) -> float:
    """Mean hinge loss ``max(0, 1 - y f(x))`` ([Passerini eq. 11.12]).

    Binary: labels mapped to -1 (smaller) / +1 (greater), ``pred_decision`` 1-d.
    Multiclass (Crammer-Singer): margin = score of the true class minus the best other score.
    """
    y_true = _as_1d(y_true, "y_true")
    dec = np.asarray(pred_decision, dtype=np.float64)
    _check_lengths(y_true, dec, sample_weight)
    classes = unique_labels(y_true if labels is None else np.asarray(labels))
    w = _weights(sample_weight, len(y_true))
    if len(classes) > 2:
        if dec.ndim != 2 or dec.shape[1] != len(classes):
            raise DataError(
                f"with a multiclass target pred_decision must have shape (n_samples, {len(classes)}); "
                f"got {dec.shape}"
            )
        codes = _encode(y_true, classes)
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
            sign = np.where(_encode(y_true, bin_classes) == 1, 1.0, -1.0)
        margin = sign * dec
    losses = np.clip(1 - margin, 0, None)
    return float(np.average(losses, weights=w))


# ----------------------------------------------------------------------------- curves
def _positive_indicator(y_true: np.ndarray, pos_label) -> np.ndarray:
    if pos_label is None:
        classes = unique_labels(y_true)
        ok = (
            not _is_str_kind(classes)
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


def _binary_clf_curve(y_true, y_score, pos_label=None, sample_weight=None):
    """Cumulative false/true positives per distinct threshold (descending scores)."""
    y_true = _as_1d(y_true, "y_true")
    y_score = column_or_1d(np.asarray(y_score, dtype=np.float64), name="y_score")
    _check_lengths(y_true, y_score, sample_weight)
    if not np.isfinite(y_score).all():
        raise DataError("y_score contains NaN or infinity")
    y = _positive_indicator(y_true, pos_label)
    w = _weights(sample_weight, len(y))
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
    fps, tps, thr = _binary_clf_curve(y_true, y_score, pos_label, sample_weight)
    return _roc_from_counts(fps, tps, thr, drop_intermediate)


def _roc_from_counts(fps, tps, thr, drop_intermediate: bool = True):
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
    y_true = _as_1d(y_true, "y_true")
    S = np.asarray(y_score, dtype=np.float64)
    _check_lengths(y_true, S, sample_weight)
    w = _weights(sample_weight, len(y_true))
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
        y01 = (_encode(y_true, present) == 1).astype(np.float64)
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
    codes = _encode(y_true, classes)
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
    fps, tps, thr = _binary_clf_curve(y_true, y_score, pos_label, sample_weight)
    return _pr_from_counts(fps, tps, thr, drop_intermediate)


def _pr_from_counts(fps, tps, thr, drop_intermediate: bool = False):
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
    y_true = _as_1d(y_true, "y_true")
    S = np.asarray(y_score, dtype=np.float64)
    _check_lengths(y_true, S, sample_weight)
    w = _weights(sample_weight, len(y_true))
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
    codes = _encode(y_true, present)
    Y = (codes[:, None] == np.arange(len(present))[None, :]).astype(np.float64)
    return _average_ovr(_binary_ap, Y, S, average, w)


# ----------------------------------------------------------------------------- report
def _py(v):
    """A JSON-native Python value (nan/inf -> None)."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _py_list(a) -> list:
    return [_py(v) for v in np.asarray(a).tolist()]


def _downsample(n: int, max_points: int) -> np.ndarray:
    if n <= max_points:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, max_points)).astype(np.intp))


def classification_report(y_true, y_pred, proba=None, classes=None, *, max_curve_points: int = 200) -> dict:
    """Every classification metric the service returns from ``evaluate``, JSON-ready.

    ``classes`` is the column order of ``proba`` (the estimator's ``classes_``).  The
    report's labels are ``classes`` followed by any other label seen in ``y_true`` or
    ``y_pred`` (sorted); without ``classes`` they are the sorted labels seen.

    Keys: ``n_samples``, ``accuracy``, ``balanced_accuracy``, ``zero_one_loss``,
    ``precision_{macro,micro,weighted}``, ``recall_*``, ``f1_*`` (zero_division=0),
    ``per_class`` {str(label): {precision, recall, f1, support}},
    ``confusion_matrix`` {labels, matrix} (rows truth, columns prediction), and when
    ``proba`` is given: ``log_loss``, ``roc_auc`` (binary, or one-vs-rest macro),
    ``roc_auc_weighted`` (multiclass), ``average_precision`` (binary, or OvR macro),
    ``curves`` {"roc": {str(label): {fpr, tpr, thresholds}}, "precision_recall":
    {str(label): {precision, recall, thresholds}}} (binary: only the positive label =
    ``classes[1]``; multiclass: one-vs-rest per class), each downsampled to at most
    ``max_curve_points`` points.  Non-finite numbers (the ROC's first threshold = +inf,
    undefined scores) are ``None``.  ``notes`` lists anything that could not be computed.
    """
    y_true = _as_1d(y_true, "y_true")
    y_pred = _as_1d(y_pred, "y_pred")
    _check_lengths(y_true, y_pred)
    notes: list[str] = []
    seen = unique_labels(y_true, y_pred)
    if classes is not None:
        classes = np.asarray(classes)
        if classes.dtype.kind in "US" and seen.dtype == object:
            classes = classes.astype(object)
        extra = seen[_encode(seen, classes) < 0]
        labels = np.concatenate([classes.astype(object), extra.astype(object)]) if len(extra) else classes
    else:
        labels = seen
    report: dict = {"n_samples": int(len(y_true))}
    # one confusion matrix over every label gives all the label-based metrics (same formulas and
    # summation order as the individual functions, so the numbers are identical)
    k = len(labels)
    t = _encode(y_true, labels)
    pr = _encode(y_pred, labels)
    cm = np.bincount(t * k + pr, minlength=k * k).reshape(k, k).astype(np.int64)
    tp = np.diag(cm).astype(np.float64)
    true_sum = cm.sum(axis=1).astype(np.float64)
    pred_sum = cm.sum(axis=0).astype(np.float64)
    report["accuracy"] = float(np.average(np.asarray(y_true == y_pred, dtype=np.float64)))
    in_true = true_sum > 0
    report["balanced_accuracy"] = float(np.mean(tp[in_true] / true_sum[in_true]))
    report["zero_one_loss"] = 1.0 - report["accuracy"]
    prec = _divide(tp, pred_sum, 0.0)
    rec = _divide(tp, true_sum, 0.0)
    f1 = _divide(2.0 * tp, true_sum + pred_sum, 0.0)
    # averages over the labels seen in y_true or y_pred (scikit-learn's default)
    seen_mask = (true_sum + pred_sum) > 0
    seen_order = np.argsort(_encode(labels[seen_mask], seen))  # averages follow sorted label order
    ps, rs, fs, ts = (a[seen_mask][seen_order] for a in (prec, rec, f1, true_sum))
    micro_tp, micro_true, micro_pred = tp.sum(), true_sum.sum(), pred_sum.sum()
    averaged = {
        "macro": (_nanaverage(ps), _nanaverage(rs), _nanaverage(fs)),
        "micro": (
            float(_divide(np.array([micro_tp]), np.array([micro_pred]), 0.0)[0]),
            float(_divide(np.array([micro_tp]), np.array([micro_true]), 0.0)[0]),
            float(_divide(np.array([2.0 * micro_tp]), np.array([micro_true + micro_pred]), 0.0)[0]),
        ),
        "weighted": (_nanaverage(ps, ts), _nanaverage(rs, ts), _nanaverage(fs, ts)),
    }
    for avg, (pa, ra, fa) in averaged.items():
        report[f"precision_{avg}"] = _py(pa)
        report[f"recall_{avg}"] = _py(ra)
        report[f"f1_{avg}"] = _py(fa)
    report["per_class"] = {
        str(lab): {
            "precision": _py(prec[i]),
            "recall": _py(rec[i]),
            "f1": _py(f1[i]),
            "support": int(true_sum[i]),
        }
        for i, lab in enumerate(labels.tolist())
    }
    report["confusion_matrix"] = {"labels": [_py(v) for v in labels.tolist()], "matrix": cm.tolist()}
    if proba is not None:
        P = np.asarray(proba, dtype=np.float64)
        if classes is None:
            raise DataError("classes (the column order of proba) is required with proba")
        if P.ndim == 1:
            P = np.stack([1 - P, P], axis=1)
        if P.shape != (len(y_true), len(classes)):
            raise DataError(f"proba has shape {P.shape}, expected ({len(y_true)}, {len(classes)})")
        codes = _encode(y_true, classes)
        if (codes < 0).any():
            notes.append("y_true holds labels the model never saw; log_loss, roc_auc and curves are omitted")
        elif len(classes) < 2:
            notes.append("fewer than two classes; probability metrics are omitted")
        else:
            report["log_loss"] = _logloss_codes(codes, P)
            _proba_report(report, notes, codes, P, classes, max_curve_points)
    report["notes"] = notes
    return report


def _one_vs_rest(y01: np.ndarray, score: np.ndarray, max_points: int) -> tuple[float, float, dict, dict]:
    """AUC, AP and the downsampled ROC / PR curves of one class from a single sort."""
    fps, tps, thr = _binary_clf_curve(y01, score, 1)
    fpr, tpr, rthr = _roc_from_counts(fps, tps, thr, True)
    precision, recall, pthr = _pr_from_counts(fps, tps, thr, False)
    roc_auc = auc(fpr, tpr)
    ap = float(max(0.0, -np.sum(np.diff(recall) * precision[:-1])))
    keep = _downsample(len(fpr), max_points)
    roc = {"fpr": _py_list(fpr[keep]), "tpr": _py_list(tpr[keep]), "thresholds": _py_list(rthr[keep])}
    keep = _downsample(len(precision), max_points)
    pthr = np.concatenate([pthr, [np.nan]])  # the final (P=1, R=0) point has no threshold
    prc = {
        "precision": _py_list(precision[keep]),
        "recall": _py_list(recall[keep]),
        "thresholds": _py_list(pthr[keep]),
    }
    return roc_auc, ap, roc, prc


def _proba_report(report: dict, notes: list, codes, P, classes, max_points: int) -> None:
    k = len(classes)
    labels = classes.tolist()
    curves: dict = {"roc": {}, "precision_recall": {}}
    if k == 2:
        y01 = (codes == 1).astype(np.float64)
        if 0 < y01.sum() < len(y01):
            roc_auc, ap, roc, prc = _one_vs_rest(y01, P[:, 1], max_points)
            report["roc_auc"] = roc_auc
            report["average_precision"] = ap
            curves["roc"][str(labels[1])] = roc
            curves["precision_recall"][str(labels[1])] = prc
            report["positive_label"] = _py(labels[1])
        else:
            notes.append("only one class present in y_true; roc_auc is undefined")
        report["curves"] = curves
        return
    per_auc = np.full(k, np.nan)
    per_ap = np.full(k, np.nan)
    support = np.bincount(codes, minlength=k).astype(np.float64)
    for c in range(k):
        if 0 < support[c] < len(codes):
            y01 = (codes == c).astype(np.float64)
            per_auc[c], per_ap[c], roc, prc = _one_vs_rest(y01, P[:, c], max_points)
            curves["roc"][str(labels[c])] = roc
            curves["precision_recall"][str(labels[c])] = prc
    ok = ~np.isnan(per_auc)
    if not ok.all():
        notes.append("some classes are absent from y_true; roc_auc and average_precision average the others")
    report["roc_auc"] = float(np.mean(per_auc[ok])) if ok.any() else None
    report["roc_auc_weighted"] = (
        float(np.average(np.where(ok, per_auc, 0.0), weights=support)) if ok.any() else None
    )
    report["average_precision"] = float(np.mean(per_ap[ok])) if ok.any() else None
    report["curves"] = curves


def _logloss_codes(codes: np.ndarray, P: np.ndarray) -> float:
    eps = np.finfo(np.float64).eps
    p = np.clip(P[np.arange(len(codes)), codes], eps, 1 - eps)
    return float(np.mean(-np.log(p)))
