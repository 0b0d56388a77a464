"""Metrics of a fitted bundle on a table: the evaluate endpoint and the validation metrics of training.

The JSON reports built here (``classification_metrics``, ``regression_metrics``) gather the metric functions
of ``core.metrics`` (each reproducing scikit-learn's number) into the documents the service returns.
"""

from __future__ import annotations

import math

import numpy as np

from core.metrics import adjusted_r2_score, mean_absolute_error, mean_squared_error, r2_score, root_mean_squared_error
from core.metrics.clustering import (
    adjusted_rand_score,
    calinski_harabasz_score,
    normalized_mutual_info_score,
    silhouette_score,
)
from core.metrics.labels import as_1d, check_lengths, label_codes, nanaverage, safe_divide, unique_labels
from core.metrics.ranking import auc, binary_clf_curve, pr_from_counts, roc_from_counts
from core.validation import DataError

SILHOUETTE_MAX_ROWS = 20_000


def evaluate_matrix(bundle, X: np.ndarray, y=None, *, include_curves: bool = True, positive_label=None) -> dict:
    """Metrics of ``bundle.estimator`` on the preprocessed matrix ``X`` (and labels ``y``).

    ``positive_label`` (binary classification): the positive class; default the one chosen at training.
    """
    est = bundle.estimator
    task = bundle.task
    out: dict = {"task": task, "n_samples": int(X.shape[0])}
    if task == "classification":
        proba = est.predict_proba(X) if hasattr(est, "predict_proba") else None
        pred = est.classes_[np.argmax(proba, axis=1)] if proba is not None else est.predict(X)
        if positive_label is None:
            positive_label = (getattr(bundle, "extra", None) or {}).get("positive_label")
        if len(est.classes_) != 2:
            positive_label = None
        report = classification_metrics(y, pred, proba=proba, classes=est.classes_, positive_label=positive_label)
        cm = report.pop("confusion_matrix", None)
        curves = report.pop("curves", None)
        out["metrics"] = _jsonable(report)
        if cm is not None:
            out["confusion_matrix"] = _jsonable(cm)
        if curves and include_curves:
            out["curves"] = _jsonable(curves)
    elif task == "regression":
        pred = np.asarray(est.predict(X), dtype=float)
        out["metrics"] = _jsonable(regression_metrics(np.asarray(y, dtype=float), pred, n_features=X.shape[1]))
    elif task == "clustering":
        labels = np.asarray(est.predict(X)).astype(int)
        out["metrics"] = _jsonable(clustering_metrics(X, labels, y))
    elif task == "decomposition":
        out["metrics"] = _jsonable(decomposition_metrics(est, X))
    elif task == "density":
        ll = np.asarray(est.score_samples(X), dtype=float)
        out["metrics"] = {"mean_log_density": float(ll.mean()), "total_log_likelihood": float(ll.sum())}
    else:  # pragma: no cover
        out["metrics"] = {}
    return out


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


def classification_metrics(y_true, y_pred, proba=None, classes=None, *, max_curve_points: int = 200,
                           positive_label=None) -> dict:
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
    ``positive_label`` (binary only; default ``classes[1]``, or the larger label seen): the class that
    ``precision``, ``recall``, ``f1``, ``roc_auc``, ``average_precision`` and the curves are about.
    """
    y_true = as_1d(y_true, "y_true")
    y_pred = as_1d(y_pred, "y_pred")
    check_lengths(y_true, y_pred)
    notes: list[str] = []
    seen = unique_labels(y_true, y_pred)
    if classes is not None:
        classes = np.asarray(classes)
        if classes.dtype.kind in "US" and seen.dtype == object:
            classes = classes.astype(object)
        extra = seen[label_codes(seen, classes) < 0]
        labels = np.concatenate([classes.astype(object), extra.astype(object)]) if len(extra) else classes
    else:
        labels = seen
    report: dict = {"n_samples": int(len(y_true))}
    # one confusion matrix over every label gives all the label-based metrics (same formulas and
    # summation order as the individual functions, so the numbers are identical)
    k = len(labels)
    t = label_codes(y_true, labels)
    pr = label_codes(y_pred, labels)
    cm = np.bincount(t * k + pr, minlength=k * k).reshape(k, k).astype(np.int64)
    tp = np.diag(cm).astype(np.float64)
    true_sum = cm.sum(axis=1).astype(np.float64)
    pred_sum = cm.sum(axis=0).astype(np.float64)
    report["accuracy"] = float(np.average(np.asarray(y_true == y_pred, dtype=np.float64)))
    in_true = true_sum > 0
    report["balanced_accuracy"] = float(np.mean(tp[in_true] / true_sum[in_true]))
    report["zero_one_loss"] = 1.0 - report["accuracy"]
    prec = safe_divide(tp, pred_sum, 0.0)
    rec = safe_divide(tp, true_sum, 0.0)
    f1 = safe_divide(2.0 * tp, true_sum + pred_sum, 0.0)
    # averages over the labels seen in y_true or y_pred (scikit-learn's default)
    seen_mask = (true_sum + pred_sum) > 0
    seen_order = np.argsort(label_codes(labels[seen_mask], seen))  # averages follow sorted label order
    ps, rs, fs, ts = (a[seen_mask][seen_order] for a in (prec, rec, f1, true_sum))
    micro_tp, micro_true, micro_pred = tp.sum(), true_sum.sum(), pred_sum.sum()
    averaged = {
        "macro": (nanaverage(ps), nanaverage(rs), nanaverage(fs)),
        "micro": (
            float(safe_divide(np.array([micro_tp]), np.array([micro_pred]), 0.0)[0]),
            float(safe_divide(np.array([micro_tp]), np.array([micro_true]), 0.0)[0]),
            float(safe_divide(np.array([2.0 * micro_tp]), np.array([micro_true + micro_pred]), 0.0)[0]),
        ),
        "weighted": (nanaverage(ps, ts), nanaverage(rs, ts), nanaverage(fs, ts)),
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
    binary = classes if classes is not None else seen
    if positive_label is not None and len(binary) != 2:
        raise DataError(f"positive_label applies to two classes; there are {len(binary)}")
    pos_index = 1
    if len(binary) == 2:
        if positive_label is not None:
            match = [i for i, c in enumerate(np.asarray(binary).tolist()) if c == positive_label
                     or str(c) == str(positive_label)]
            if not match:
                raise DataError(f"positive_label {positive_label!r} is not one of the classes "
                                f"{np.asarray(binary).tolist()}")
            pos_index = match[0]
        pos = label_codes(np.asarray(binary)[[pos_index]].astype(labels.dtype), labels)[0]
        report["positive_label"] = _py(np.asarray(binary).tolist()[pos_index])
        report["precision"] = _py(prec[pos])
        report["recall"] = _py(rec[pos])
        report["f1"] = _py(f1[pos])
    if proba is not None:
        P = np.asarray(proba, dtype=np.float64)
        if classes is None:
            raise DataError("classes (the column order of proba) is required with proba")
        if P.ndim == 1:
            P = np.stack([1 - P, P], axis=1)
        if P.shape != (len(y_true), len(classes)):
            raise DataError(f"proba has shape {P.shape}, expected ({len(y_true)}, {len(classes)})")
        codes = label_codes(y_true, classes)
        if (codes < 0).any():
            notes.append("y_true holds labels the model never saw; log_loss, roc_auc and curves are omitted")
        elif len(classes) < 2:
            notes.append("fewer than two classes; probability metrics are omitted")
        else:
            report["log_loss"] = _logloss_codes(codes, P)
            _proba_report(report, notes, codes, P, classes, max_curve_points, pos_index)
    report["notes"] = notes
    return report


def _one_vs_rest(y01: np.ndarray, score: np.ndarray, max_points: int) -> tuple[float, float, dict, dict]:
    """AUC, AP and the downsampled ROC / PR curves of one class from a single sort."""
    fps, tps, thr = binary_clf_curve(y01, score, 1)
    fpr, tpr, rthr = roc_from_counts(fps, tps, thr, True)
    precision, recall, pthr = pr_from_counts(fps, tps, thr, False)
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


def _proba_report(report: dict, notes: list, codes, P, classes, max_points: int, pos: int = 1) -> None:
    k = len(classes)
    labels = classes.tolist()
    curves: dict = {"roc": {}, "precision_recall": {}}
    if k == 2:
        y01 = (codes == pos).astype(np.float64)
        if 0 < y01.sum() < len(y01):
            roc_auc, ap, roc, prc = _one_vs_rest(y01, P[:, pos], max_points)
            report["roc_auc"] = roc_auc
            report["average_precision"] = ap
            curves["roc"][str(labels[pos])] = roc
            curves["precision_recall"][str(labels[pos])] = prc
            report["positive_label"] = _py(labels[pos])
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


def regression_metrics(y_true, y_pred, n_features: int | None = None) -> dict:
    """The regression metrics the service returns from ``evaluate``, JSON-ready.

    Keys: ``n_samples``, ``mse``, ``rmse``, ``mae``, ``r2``, and ``adjusted_r2`` when
    ``n_features`` is given (None when undefined).  Non-finite values are None.
    """
    out = {
        "n_samples": int(np.asarray(y_true).reshape(-1).shape[0]),
        "mse": mean_squared_error(y_true, y_pred),  # checks the shapes and values
        "rmse": root_mean_squared_error(y_true, y_pred),
        "mae": mean_absolute_error(y_true, y_pred),
        "r2": _py(r2_score(y_true, y_pred)),
    }
    if n_features is not None:
        out["adjusted_r2"] = _py(adjusted_r2_score(y_true, y_pred, n_features))
    return out


def clustering_metrics(X: np.ndarray, labels: np.ndarray, y=None) -> dict:
    m: dict = {}
    uniq = np.unique(labels)
    inertia = 0.0
    for k in uniq:
        pts = X[labels == k]
        inertia += float(((pts - pts.mean(axis=0)) ** 2).sum())
    m["inertia"] = inertia
    m["n_clusters"] = int(len(uniq))
    if 2 <= len(uniq) < X.shape[0]:
        if X.shape[0] > SILHOUETTE_MAX_ROWS:
            rng = np.random.default_rng(0)
            idx = rng.choice(X.shape[0], SILHOUETTE_MAX_ROWS, replace=False)
            m["silhouette"] = float(silhouette_score(X[idx], labels[idx]))
            m["silhouette_sampled"] = SILHOUETTE_MAX_ROWS
        else:
            m["silhouette"] = float(silhouette_score(X, labels))
        m["calinski_harabasz"] = float(calinski_harabasz_score(X, labels))
    else:
        m["silhouette"] = None
        m["calinski_harabasz"] = None
    if y is not None:
        y = np.asarray(y)
        m["ari"] = float(adjusted_rand_score(y, labels))
        m["nmi"] = float(normalized_mutual_info_score(y, labels))
    return m


def decomposition_metrics(est, X: np.ndarray) -> dict:
    m: dict = {}
    Z = est.transform(X)
    m["n_components"] = int(Z.shape[1])
    if hasattr(est, "inverse_transform"):
        try:
            R = est.inverse_transform(Z)
            m["reconstruction_mse"] = float(np.mean((X - R) ** 2))
        except Exception:  # noqa: BLE001 - not every decomposition can invert
            pass
    evr = getattr(est, "explained_variance_ratio_", None)
    if evr is not None:
        m["explained_variance_ratio"] = np.asarray(evr, dtype=float).tolist()
    return m


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(_jsonable_key(k)): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


def _jsonable_key(k):
    return k.item() if isinstance(k, np.generic) else k
