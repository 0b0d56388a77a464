"""Metrics of a fitted bundle on a table: the evaluate endpoint and the validation metrics of training."""

from __future__ import annotations

import numpy as np

from core.metrics import classification_report, regression_report
from core.metrics.clustering import (
    adjusted_rand_score,
    calinski_harabasz_score,
    normalized_mutual_info_score,
    silhouette_score,
)

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
        report = classification_report(y, pred, proba=proba, classes=est.classes_, positive_label=positive_label)
        cm = report.pop("confusion_matrix", None)
        curves = report.pop("curves", None)
        out["metrics"] = _jsonable(report)
        if cm is not None:
            out["confusion_matrix"] = _jsonable(cm)
        if curves and include_curves:
            out["curves"] = _jsonable(curves)
    elif task == "regression":
        pred = np.asarray(est.predict(X), dtype=float)
        out["metrics"] = _jsonable(regression_report(np.asarray(y, dtype=float), pred, n_features=X.shape[1]))
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
