"""Explanations of a model bundle over its ORIGINAL features: SHAP values, partial dependence, insight.

The bundle's preprocessing maps each original column to its own model columns (a numeric column to
one imputed/scaled column, a categorical one to one code column or to its one-hot columns), so an
original column is one player of the explanation game: the group of its model columns
(``column_groups``).  The explainers of ``core.inspection`` run in the model's input space with these
groups; missing values are imputed, or routed by the model, exactly as in prediction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from core.inspection import (
    METHODS,
    NotApplicable,
    OutputNotApplicable,
    explain,
    partial_dependence,
    quantile_grid,
    resolve_method,
)
from core.validation import DataError

from ..errors import invalid
from . import datasets as ds

SUPERVISED = ("classification", "regression")
MAX_EXPLAIN_ROWS = 1000
MAX_KERNEL_ROWS = 100  # each row costs n_permutations * (features + 1) * background model calls
MAX_BACKGROUND = 1000
PD_MAX_ROWS = 1000


def column_groups(pre, n_out: int) -> np.ndarray:
    """Model column -> index of its original feature (in ``pre.feature_names_in_`` order)."""
    index = {name: i for i, name in enumerate(pre.feature_names_in_)}
    groups = np.full(n_out, -1, dtype=np.intp)
    for name, j in pre.numeric_outputs:
        groups[j] = index[name]
    for name, start, width in pre.category_outputs:
        groups[start : start + width] = index[name]
    if (groups < 0).any():  # pragma: no cover - every output column comes from one input
        raise DataError("the preprocessing has an output column of no input feature")
    return groups


def _require_supervised(bundle) -> None:
    if bundle.task not in SUPERVISED:
        raise invalid(["path", "model_id"], f"explanations apply to classification and regression models; this "
                                            f"model does {bundle.task}")


def _dataset_matrix(r, bundle, dataset_id: str, loc: list, *, n: int | None = None, seed: int = 0,
                    need_target: bool = False):
    """(model-space matrix of up to ``n`` sampled rows, the columns used, target column or None)."""
    ds.get_record(r.meta, dataset_id)
    cols = ds.read_columns(r.meta, r.art, dataset_id, mmap=False)
    by_name = {c.name: c for c in cols}
    missing = [f["name"] for f in bundle.features if f["name"] not in by_name]
    if missing:
        raise invalid(loc, f"dataset {dataset_id!r} lacks the model's feature column(s): {', '.join(missing)}")
    target = None
    if need_target:
        if bundle.target not in by_name:
            raise invalid(loc, f"dataset {dataset_id!r} lacks the target column {bundle.target!r}")
        target = by_name[bundle.target]
    table = {f["name"]: by_name[f["name"]].as_model_input() for f in bundle.features}
    n_rows = len(next(iter(table.values())))
    if n_rows == 0:
        raise invalid(loc, f"dataset {dataset_id!r} has no rows")
    rows = np.arange(n_rows)
    if n is not None and n_rows > n:
        rows = np.sort(np.random.default_rng(seed).choice(n_rows, size=n, replace=False))
        table = {k: v[rows] for k, v in table.items()}
    try:
        X = bundle.matrix(table)
    except DataError as exc:
        raise invalid(loc, str(exc)) from None
    return X, table, rows, target


def _background(r, bundle, body: dict) -> np.ndarray:
    bg = body.get("background") or {}
    n = int(bg.get("n", 100))
    dataset_id = bg.get("dataset_id")
    if dataset_id is None:
        record = r.meta.get_model(bundle.model_id) or {}
        dataset_id = record.get("dataset_id")
        if dataset_id is None or r.meta.get_dataset(dataset_id) is None:
            raise invalid(["body", "background", "dataset_id"],
                          "the model's training dataset is gone; give a background dataset_id")
    return _dataset_matrix(r, bundle, dataset_id, ["body", "background", "dataset_id"], n=n)[0]


def explain_payload(r, bundle, body: dict) -> dict:
    """The explain endpoint (body validated by ExplainRequest)."""
    _require_supervised(bundle)
    method = body.get("method") or "auto"
    if method not in METHODS:
        raise invalid(["body", "method"], f"unknown method {method!r}; one of {', '.join(METHODS)}")
    instances, rows = body.get("instances"), body.get("rows")
    if (instances is None) == (rows is None):
        raise invalid(["body", "instances"], "give exactly one of 'instances' or 'rows'")
    data = instances if instances is not None else rows
    field = "instances" if instances is not None else "rows"
    if not data:
        raise invalid(["body", field], "must be a non-empty list")
    if len(data) > MAX_EXPLAIN_ROWS:
        raise invalid(["body", field], f"at most {MAX_EXPLAIN_ROWS} rows per explanation request")
    X = bundle.matrix_from_payload(data, field)
    Z = _background(r, bundle, body)
    groups = column_groups(bundle.preprocessor, X.shape[1])
    output = body.get("output")
    try:
        chosen = resolve_method(bundle.estimator, X, Z, method, output)
        if len(data) > MAX_KERNEL_ROWS and chosen == "kernel":
            raise invalid(["body", field], f"at most {MAX_KERNEL_ROWS} rows per request with the model-agnostic "
                                           "estimator (method 'kernel'); send several requests")
        out = explain(bundle.estimator, X, Z, groups, method=method, output=output,
                      n_permutations=int(body.get("n_permutations") or 10),
                      random_state=body.get("random_state", 0))
    except OutputNotApplicable as exc:
        raise invalid(["body", "output"], str(exc)) from None
    except NotApplicable as exc:
        raise invalid(["body", "method"], str(exc)) from None
    except DataError as exc:
        raise invalid(["body", field], f"the model cannot use these values: {exc}") from None
    phi, base, se = out["phi"], out["base"], out["standard_error"]
    names = list(bundle.preprocessor.feature_names_in_)
    resp: dict[str, Any] = {"method": out["method"], "output": out["output"], "feature_names": names}
    explained = base + phi.sum(axis=1)
    if bundle.task == "classification":
        resp["classes"] = list(bundle.classes)
        resp["base_value"] = base.tolist()
        resp["contributions"] = phi.tolist()
        resp["predictions"] = explained.tolist()
        if se is not None:
            resp["standard_errors"] = se.tolist()
    else:
        resp["base_value"] = float(base[0])
        resp["contributions"] = phi[:, :, 0].tolist()
        resp["predictions"] = explained[:, 0].tolist()
        if se is not None:
            resp["standard_errors"] = se[:, :, 0].tolist()
    if out["method"] == "kernel":
        resp["additivity_tolerance"] = 1e-8  # each permutation chain telescopes: exact up to rounding
    return resp


def _model_output(bundle):
    est = bundle.estimator
    if bundle.task == "classification" and callable(getattr(est, "predict_proba", None)):
        return est.predict_proba, "probability"
    if bundle.task == "classification":
        classes = np.asarray(est.classes_)
        return (lambda A: (np.asarray(est.predict(A))[:, None] == classes[None, :]).astype(float)), "probability"
    if bundle.task == "regression":
        return est.predict, "prediction"
    raise invalid(["path", "model_id"], f"partial dependence applies to classification and regression models; "
                                        f"this model does {bundle.task}")


def partial_dependence_payload(r, bundle, body: dict) -> dict:
    f, output = _model_output(bundle)
    names = [ft["name"] for ft in bundle.features]
    feats = body["features"]
    if not feats:
        raise invalid(["body", "features"], "name at least one feature")
    for name in feats:
        if name not in names:
            raise invalid(["body", "features"],
                          f"unknown feature {name!r}; the model's features are: {', '.join(names)}")
    kind = body.get("kind") or "average"
    res = int(body.get("grid_resolution") or 20)
    X, table, _, _ = _dataset_matrix(r, bundle, body["dataset_id"], ["body", "dataset_id"], n=PD_MAX_ROWS)
    pre = bundle.preprocessor
    groups = column_groups(pre, X.shape[1])
    by_name = {ft["name"]: ft for ft in bundle.features}
    results = []
    for name in feats:
        ft = by_name[name]
        if ft["type"] == "categorical":
            grid_values: list = list(ft.get("categories") or pre.categories_.get(name, []))
        elif ft["type"] == "boolean":
            grid_values = [v for v in (0.0, 1.0) if np.any(table[name] == v)] or [0.0, 1.0]
        else:
            grid_values = quantile_grid(table[name], res).tolist()
        if not grid_values:
            raise invalid(["body", "features"], f"feature {name!r} has no values in the dataset to build a grid from")
        # the model-space columns of each grid value (preprocessing is column-wise)
        probe = {k: np.repeat(v[:1], len(grid_values)) for k, v in table.items()}
        probe[name] = np.asarray(grid_values, dtype=object if ft["type"] == "categorical" else float)
        cols = np.flatnonzero(groups == pre.feature_names_in_.index(name))
        grid_model = pre.transform(probe)[:, cols]
        avg, ice = partial_dependence(f, X, cols, grid_model)
        item: dict[str, Any] = {"feature": name, "grid": [_grid_value(v, ft["type"]) for v in grid_values]}
        squeeze = output != "probability"
        if kind in ("average", "both"):
            item["average"] = (avg[:, 0] if squeeze else avg).tolist()
        if kind in ("individual", "both"):
            item["individual"] = (ice[:, :, 0] if squeeze else ice).tolist()
        results.append(item)
    out: dict[str, Any] = {"results": results, "output": output, "n_rows": int(X.shape[0])}
    if bundle.task == "classification":
        out["classes"] = list(bundle.classes)
    return out


def _grid_value(v, typ):
    if typ == "boolean":
        return bool(v)
    return v


# ---------------------------------------------------------------------------------------- insight
def model_insight(bundle) -> dict | None:
    """Impurity importances and/or coefficients keyed by the original feature names."""
    if bundle.task not in SUPERVISED:
        return None
    try:
        return _insight(bundle)
    except Exception:  # noqa: BLE001 - insight is optional: it must never fail a training job
        return None


def _insight(bundle) -> dict | None:
    est, pre = bundle.estimator, bundle.preprocessor
    out_names = list(pre.feature_names_out_)
    groups = column_groups(pre, len(out_names))
    names_in = list(pre.feature_names_in_)
    insight: dict[str, Any] = {}
    imp = getattr(est, "feature_importances_", None)
    if imp is not None and np.ndim(imp) == 1 and len(imp) == len(out_names):
        summed = np.bincount(groups, weights=np.asarray(imp, dtype=float), minlength=len(names_in))
        total = summed.sum()
        if total > 0:
            summed = summed / total
        insight["feature_importances"] = {n: float(v) for n, v in zip(names_in, summed, strict=True)}
        insight["feature_importances_method"] = "impurity"
    coef = getattr(est, "coef_", None)
    if coef is not None:
        coef = np.asarray(coef, dtype=float)
        if coef.ndim == 1:
            coef = coef[None, :]
        if coef.ndim == 2 and coef.shape[1] == len(out_names) and np.isfinite(coef).all():
            # per unit of the original column: the model sees (x - center) / scale for scaled numeric columns
            scale = np.ones(len(out_names))
            for name, j in pre.numeric_outputs:
                scale[j] = pre.scale_.get(name, 1.0) if pre.scale else 1.0
            c = coef / scale[None, :]
            if c.shape[0] == 1:
                insight["coefficients"] = {n: float(v) for n, v in zip(out_names, c[0], strict=True)}
            else:
                labels = [str(x) for x in (bundle.classes or range(c.shape[0]))][: c.shape[0]]
                insight["coefficients"] = {n: {lab: float(c[k, j]) for k, lab in enumerate(labels)}
                                           for j, n in enumerate(out_names)}
            intercept = getattr(est, "intercept_", None)
            if intercept is not None and np.ndim(intercept) <= 1:
                offs = (coef / scale[None, :]) @ np.array([pre.center_.get(n, 0.0) if pre.scale else 0.0
                                                           for n in _out_centers(pre, out_names)])
                ic = np.atleast_1d(np.asarray(intercept, dtype=float)) - offs
                insight["intercept"] = float(ic[0]) if ic.size == 1 else ic.tolist()
    return insight or None


def _out_centers(pre, out_names):
    """Name of the numeric input of each output column ('' for category columns)."""
    names = [""] * len(out_names)
    for name, j in pre.numeric_outputs:
        names[j] = name
    return names
