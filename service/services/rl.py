"""Reinforcement-learning models in the service: raw tables in, greedy actions / values / Q-values out.

RL estimators take the table itself (a dict of column arrays), not the one-hot/scaled matrix of the other
tasks: transition tables and logged experience carry labels (states, actions) whose identity matters. The
core estimators validate their input (``validate_input``) with messages that name the column or param;
this module turns those into 422s, before anything is queued, and shapes predict/evaluate answers as
API.md ("Reinforcement learning") says. See docs/decisions/reinforcement-learning.md.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from core.params import ParamError
from core.validation import DataError

from ..errors import invalid
from .tables import Column
from .tensors import as_text, bad, check_rows, label_datatype, typed

TASK = "reinforcement"
MATRIX_INPUT = ("lqr", "fitted_value_iteration")  # states are vectors (x_* columns), not labels


def raw_columns(cols: list[Column]) -> dict[str, np.ndarray]:
    """Columns as the core RL estimators read them: floats (booleans 0/1), or object arrays of strings."""
    return {c.name: c.as_model_input() for c in cols}


def check_submit(cls, params: dict, columns: dict[str, np.ndarray] | None, data_loc: list) -> None:
    """Run the estimator's own input validation synchronously; 422 naming the column or param."""
    est = cls(**params)
    try:
        if columns is None:
            if cls.name != "lqr":
                raise invalid(data_loc, f"{cls.name} needs a dataset: give dataset_id or data")
            est.validate_input(None)
        else:
            est.validate_input(columns)
    except ParamError as exc:
        raise invalid(["body", "params", exc.param.split("[")[0].split(".")[0]], exc.reason) from None
    except DataError as exc:
        raise invalid(data_loc, str(exc)) from None


def features_of(est, cls, columns: dict[str, np.ndarray] | None, types: dict[str, str]) -> list[dict]:
    """The model's inputs for predict: the state column, or the state vector's columns."""
    if cls.name in MATRIX_INPUT:
        return [{"name": n, "type": "numeric"} for n in est.state_columns_]
    name = est.get_params()["state_column"]
    return [{"name": name, "type": types.get(name, "categorical")}]


def fit(cls, params: dict, columns: dict[str, np.ndarray] | None, ctx):
    est = cls(**params)
    est.fit(columns, ctx=ctx)
    return est


def evaluate(est, columns: dict[str, np.ndarray] | None, n_rows: int) -> dict:
    try:
        metrics = est.evaluate(columns)
    except ParamError as exc:
        raise invalid(["body", "params", exc.param], exc.reason) from None
    except DataError as exc:
        raise invalid(["body", "data"], f"cannot evaluate on this table: {exc}") from None
    return {"task": TASK, "n_samples": int(n_rows), "metrics": _jsonable(metrics)}


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


# -- predict ----------------------------------------------------------------------------------------
def input_table(bundle, data: list, field: str) -> Any:
    """The estimator's predict input from ``instances`` (named) or ``rows`` (the model's feature order)."""
    names = [f["name"] for f in bundle.features]
    cols: dict[str, list] = {n: [] for n in names}
    for i, item in enumerate(data):
        if field == "instances":
            if not isinstance(item, dict):
                raise invalid(["body", field, i], "each instance must be an object, e.g. {\"state\": ...}")
            unknown = [k for k in item if k not in cols]
            if unknown:
                raise invalid(["body", field, i, unknown[0]],
                              f"unknown field {unknown[0]!r}; the model's inputs are: {', '.join(names)}")
            for n in names:
                if n not in item or item[n] is None:
                    raise invalid(["body", field, i, n], f"instance {i} lacks {n!r}")
                cols[n].append(item[n])
        else:
            if not isinstance(item, list) or len(item) != len(names):
                raise invalid(["body", field, i], f"row {i} must be a list of {len(names)} value(s) "
                                                  f"({', '.join(names)})")
            for n, v in zip(names, item, strict=True):
                if v is None:
                    raise invalid(["body", field, i, n], f"row {i} lacks {n!r}")
                cols[n].append(v)
    if bundle.algorithm in MATRIX_INPUT:
        try:
            A = np.array([cols[n] for n in names], dtype=np.float64).T
        except (TypeError, ValueError):
            raise invalid(["body", field], f"the state values ({', '.join(names)}) must be numbers") from None
        if not np.isfinite(A).all():
            raise invalid(["body", field], "the state values must be finite numbers")
        return A
    values = np.empty(len(data), dtype=object)
    values[:] = cols[names[0]]
    return {names[0]: values}


def predict(bundle, data: list, field: str) -> dict:
    X = input_table(bundle, data, field)
    est = bundle.estimator
    try:
        if bundle.algorithm == "lqr":
            return {"predictions": np.asarray(est.predict(X), dtype=float).tolist()}
        out = est.predict_all(X)
    except DataError as exc:
        raise invalid(["body", field], str(exc)) from None
    out["q_values"] = [{k: (v if math.isfinite(v) else None) for k, v in q.items()} for q in out["q_values"]]
    return out


# -- /v2 --------------------------------------------------------------------------------------------
def v2_outputs(bundle) -> list[dict]:
    est = bundle.estimator
    if bundle.algorithm == "lqr":
        return [{"name": "predict", "datatype": "FP64", "shape": [-1, int(est.n_controls_)]}]
    actions = est.actions_.tolist()
    return [{"name": "predict", "datatype": label_datatype(actions), "shape": [-1]},
            {"name": "value", "datatype": "FP64", "shape": [-1]},
            {"name": "q_values", "datatype": "FP64", "shape": [-1, len(actions)]}]


def v2_input(bundle, tensors, max_rows: int):
    """States from one tensor (BYTES or INT64 states of shape [n] / [n, 1]; FP64 [n, k] state vectors)."""
    names = [f["name"] for f in bundle.features]
    if bundle.algorithm in MATRIX_INPUT:
        if len(tensors) == 1 and tensors[0].name not in names:
            arr = tensors[0].array
            if arr.ndim == 1 and len(names) == 1:
                arr = arr.reshape(-1, 1)
            if arr.ndim != 2 or arr.shape[1] != len(names) or tensors[0].datatype == "BYTES":
                raise bad(f"input {tensors[0].name!r} must be a numeric tensor of shape [n, {len(names)}]")
            A = arr.astype(np.float64)
        else:
            by = {t.name: t for t in tensors}
            missing = [n for n in names if n not in by]
            if missing or len(by) != len(names):
                raise bad(f"inputs are the state columns {', '.join(names)} (one tensor each), or one tensor "
                          f"of shape [n, {len(names)}]")
            A = np.column_stack([by[n].array.reshape(-1).astype(np.float64) for n in names])
        check_rows(A.shape[0], max_rows)
        if not np.isfinite(A).all():
            raise bad("state values must be finite")
        return A
    if len(tensors) != 1:
        raise bad(f"send one input tensor of states (named {names[0]!r}), BYTES or INT64, shape [n] or [n, 1]")
    t = tensors[0]
    arr = t.array
    if not (arr.ndim == 1 or (arr.ndim == 2 and arr.shape[1] == 1)):
        raise bad(f"input {t.name!r} has shape {t.shape}; states have shape [n] or [n, 1]")
    flat = arr.reshape(-1)
    check_rows(len(flat), max_rows)
    values = np.empty(len(flat), dtype=object)
    values[:] = as_text(flat) if t.datatype == "BYTES" else flat.tolist()
    return {names[0]: values}


def v2_run(bundle, X, wanted: list[str]) -> dict[str, tuple[str, np.ndarray]]:
    est = bundle.estimator
    try:
        if bundle.algorithm == "lqr":
            return {"predict": ("FP64", np.asarray(est.predict(X), dtype=np.float64))}
        out = {}
        if "predict" in wanted:
            labels = np.asarray(est.predict(X), dtype=object).tolist()
            dt = label_datatype(est.actions_.tolist())
            if any(v is None for v in labels):
                dt = "BYTES"
                labels = ["" if v is None else v for v in labels]
            out["predict"] = (dt, typed(labels, dt))
        if "value" in wanted:
            out["value"] = ("FP64", np.asarray(est.predict_value(X), dtype=np.float64))
        if "q_values" in wanted:
            out["q_values"] = ("FP64", np.asarray(est.predict_q(X), dtype=np.float64))
    except DataError as exc:
        raise bad(str(exc)) from None
    return {k: out[k] for k in wanted if k in out}
