"""Training: validate a request synchronously, record job + model, and run the job in a worker.

``submit_train`` does every check that can be done without fitting (algorithm,
params, dataset, target, features, class counts) so bad requests are a 422
before anything is queued.  ``run_train_job`` executes in a worker process: it
loads the dataset, fits preprocessing and estimator under a FitContext wired to
the job record, computes metrics and saves the signed bundle.
"""

from __future__ import annotations

import logging
import os
import socket
import traceback
from typing import Any

import numpy as np

import core
from core import registry
from core.context import FitCancelled, FitContext
from core.model_selection import KFold, StratifiedKFold, train_test_split_indices
from core.params import ParamError, validate_params
from core.preprocessing import TablePreprocessor
from core.validation import DataError

from ..errors import Invalid, NotFound, invalid
from ..storage.artifacts import ArtifactStore
from ..storage.metadata import MetadataStore, utcnow
from . import datasets as ds
from .bundle import ModelBundle
from .evaluation import evaluate_matrix
from .resources import fit_memory_estimate, human_bytes, memory_error_message
from .tables import Column, parse_json_table

log = logging.getLogger("orchard.training")

SUPERVISED = ("classification", "regression")


def _jsonable_params(params: dict) -> dict:
    def conv(v):
        if isinstance(v, tuple):
            return [conv(x) for x in v]
        if isinstance(v, list):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v
    return {k: conv(v) for k, v in params.items()}


def resolve_algorithm(name: str):
    try:
        return registry.get(name)
    except registry.UnknownAlgorithm:
        raise invalid(["body", "algorithm"],
                      f"unknown algorithm {name!r}; GET /v1/algorithms lists the available ones") from None


def validate_algorithm_params(cls, params: dict | None, loc=("body", "params")) -> dict:
    if params is not None and not isinstance(params, dict):
        raise invalid(list(loc), "params must be an object")
    try:
        return validate_params(cls.params, params or {})
    except ParamError as exc:
        raise invalid([*loc, exc.param.split("[")[0].split(".")[0]], exc.reason) from None


def _select(record_columns: list[dict], target: str | None, features: list[str] | None, task: str,
            loc_prefix=("body",)) -> tuple[list[dict], dict | None]:
    by_name = {c["name"]: c for c in record_columns}
    loc = list(loc_prefix)
    target_col = None
    if task in SUPERVISED:
        if not target:
            raise invalid([*loc, "target"], f"a {task} algorithm needs a target column")
        if target not in by_name:
            raise invalid([*loc, "target"],
                          f"target column {target!r} is not in the dataset (columns: {', '.join(by_name)})")
        target_col = by_name[target]
    elif target is not None:
        raise invalid([*loc, "target"], f"a {task} algorithm takes no target; remove the target field")
    if features is not None:
        if not features:
            raise invalid([*loc, "features"], "features must name at least one column")
        seen = set()
        for f in features:
            if f not in by_name:
                raise invalid([*loc, "features"], f"feature column {f!r} is not in the dataset")
            if f == target:
                raise invalid([*loc, "features"], f"the target {target!r} cannot also be a feature")
            if f in seen:
                raise invalid([*loc, "features"], f"feature {f!r} is listed twice")
            seen.add(f)
        chosen = [by_name[f] for f in features]
    else:
        chosen = [c for c in record_columns if c["name"] != target]
        if not chosen:
            raise invalid([*loc, "features"], "the dataset has no columns besides the target")
    return chosen, target_col


def _check_target(target_col: dict, task: str, n_rows: int) -> None:
    name = target_col["name"]
    if target_col["n_missing"] >= n_rows:
        raise invalid(["body", "target"], f"target column {name!r} has no values")
    if task == "regression" and target_col["type"] == "categorical":
        raise invalid(["body", "target"], f"target column {name!r} is categorical; a regressor needs a numeric target")
    if task == "classification":
        s = target_col["summary"]
        if target_col["type"] == "categorical":
            n_classes = int(s.get("n_categories", 0))
        elif target_col["type"] == "boolean":
            n_classes = int(s.get("true", 0) > 0) + int(s.get("false", 0) > 0)
        else:
            n_classes = 2 if s.get("min") is not None and s["min"] != s["max"] else 1
        if n_classes < 2:
            raise invalid(["body", "target"],
                          f"target column {name!r} has a single class; a classifier needs at least two")


def _check_validation(validation: dict | None, task: str) -> dict:
    v = dict(validation or {})
    if v.get("holdout") is not None and v.get("cv") is not None:
        raise invalid(["body", "validation"], "give either holdout or cv, not both")
    if task not in SUPERVISED and task != "clustering" and v:
        # decomposition/density: validation metrics are still computed on a hold-out when asked
        pass
    return v


def _check_memory(cls, params: dict, n_rows: int, features: list[dict], target_col: dict | None, limit: int,
                  inline: bool) -> None:
    """422 when the fit's estimated peak memory exceeds ``limit`` (ORCHARD_MAX_TRAIN_BYTES), naming the cause."""
    if not limit:
        return
    total, est = fit_memory_estimate(cls, params, n_rows, features, target_col)
    if total <= limit:
        return
    loc = ["body", "params", est.param] if est.param else ["body", "data" if inline else "dataset_id"]
    raise invalid(loc, f"training {cls.name} on {n_rows} rows would need about {human_bytes(total)} of memory "
                       f"({est.cause}), more than the limit of {human_bytes(limit)} (ORCHARD_MAX_TRAIN_BYTES); "
                       "use fewer rows or smaller parameters")


def submit_train(meta: MetadataStore, art: ArtifactStore, req: dict, enqueue,
                 max_train_bytes: int = 0) -> tuple[dict, str]:
    """Validate and enqueue a training job.  Returns (job record, model id)."""
    cls = resolve_algorithm(req["algorithm"])
    params = validate_algorithm_params(cls, req.get("params"))
    if (req.get("dataset_id") is None) == (req.get("data") is None):
        raise invalid(["body", "dataset_id"], "give exactly one of dataset_id or data")
    created_inline = None
    if req.get("data") is not None:
        data = req["data"]
        cols = parse_json_table(data["columns"], data["rows"], data.get("types"), loc=("body", "data"))
        record = None
    else:
        record = ds.get_record(meta, req["dataset_id"])
        cols = None
    record_columns = record["columns"] if record else [c.schema() for c in cols]
    n_rows = record["n_rows"] if record else len(cols[0].values)
    features, target_col = _select(record_columns, req.get("target"), req.get("features"), cls.task)
    if target_col is not None:
        _check_target(target_col, cls.task, n_rows)
    validation = _check_validation(req.get("validation"), cls.task)
    if n_rows < 2:
        raise invalid(["body", "dataset_id"], "the dataset needs at least two rows to train on")
    _check_memory(cls, params, n_rows, features, target_col, max_train_bytes, inline=cols is not None)
    if cols is not None:  # inline data becomes a dataset so that any worker can load it
        created_inline = ds.store_columns(meta, art, cols, (req.get("name") or "inline") + "-data")
        record = created_inline
    job_id = ds.new_id("job")
    model_id = ds.new_id("mdl")
    now = utcnow()
    payload = {
        "algorithm": cls.name, "params": _jsonable_params(params), "dataset_id": record["id"],
        "target": target_col["name"] if target_col else None, "features": [f["name"] for f in features],
        "validation": validation, "model_id": model_id,
    }
    job = {"id": job_id, "kind": "train", "status": "queued", "progress": 0.0, "message": "queued",
           "payload": payload, "model_id": model_id, "cancel_requested": False, "created_at": now,
           "updated_at": now}
    model = {"id": model_id, "name": req.get("name") or model_id, "algorithm": cls.name, "task": cls.task,
             "params": payload["params"], "status": "training", "job_id": job_id, "dataset_id": record["id"],
             "features": [{"name": f["name"], "type": f["type"]} for f in features],
             "target": payload["target"], "classes": None, "metrics": {}, "size_bytes": 0, "created_at": now}
    meta.insert_job_and_model(job, model)
    enqueue(job_id)
    return meta.get_job(job_id), model_id


# ------------------------------------------------------------------------------------------------
# execution (worker side)
# ------------------------------------------------------------------------------------------------
def _target_values(col: Column, task: str) -> tuple[np.ndarray, np.ndarray]:
    """Target array (labels keep their original type) and the mask of rows where it is present."""
    present = ~col.missing
    if task == "regression":
        return np.asarray(col.values, dtype=np.float64), present
    if col.type == "categorical":
        cats = np.asarray(col.categories, dtype=object)
        y = np.empty(len(col.values), dtype=object)
        y[present] = cats[col.values[present]]
        return y, present
    if col.type == "boolean":
        y = np.zeros(len(col.values), dtype=bool)
        y[present] = col.values[present] == 1
        return y, present
    v = np.asarray(col.values, dtype=np.float64)
    if np.all(np.mod(v[present], 1) == 0) and np.all(np.abs(v[present]) < 2**53):
        y = np.zeros(len(v), dtype=np.int64)
        y[present] = v[present].astype(np.int64)
        return y, present
    return v, present


def _fit_bundle(cls, params, features, target, columns, y, idx, ctx, model_id):
    pre = TablePreprocessor(scale=bool(cls.needs_scaling), native_missing=bool(cls.native_missing),
                            native_categorical=bool(cls.native_categorical))
    types = {f["name"]: f["type"] for f in features}
    cols_sub = {k: v[idx] for k, v in columns.items()}
    pre.fit(cols_sub, types)
    X = pre.transform(cols_sub)
    est = cls(**params)
    kw: dict[str, Any] = {"ctx": ctx}
    if cls.native_categorical and pre.categorical_mask_.any():
        kw["categorical_features"] = pre.categorical_mask_
    est.fit(X, None if y is None else y[idx], **kw)
    feats = pre.describe_features()
    classes = np.asarray(est.classes_).tolist() if cls.task == "classification" else None
    bundle = ModelBundle(model_id=model_id, algorithm=cls.name, task=cls.task, params=params, features=feats,
                         target=target, classes=classes, preprocessor=pre, estimator=est,
                         core_version=core.__version__)
    return bundle, X


def run_train(meta: MetadataStore, art: ArtifactStore, job: dict, ctx: FitContext) -> dict:
    p = job["payload"]
    cls = registry.get(p["algorithm"])
    params = validate_params(cls.params, p["params"])
    names = list(p["features"]) + ([p["target"]] if p["target"] else [])
    cols = {c.name: c for c in ds.load_columns(art, p["dataset_id"], names, mmap=False)}
    features = [{"name": n, "type": cols[n].type} for n in p["features"]]
    columns = {n: cols[n].as_model_input() for n in p["features"]}
    n = len(next(iter(columns.values())))
    y = None
    rows = np.arange(n)
    dropped = 0
    if p["target"]:
        y, present = _target_values(cols[p["target"]], cls.task)
        dropped = int((~present).sum())
        rows = rows[present]
    validation = p.get("validation") or {}
    holdout = validation.get("holdout")
    if holdout is None and validation.get("cv") is None and cls.task in SUPERVISED and len(rows) >= 10:
        holdout = 0.2  # default: a stratified 20% hold-out, so every model has validation metrics
    seed = validation.get("random_state", 0)
    stratify = validation.get("stratify", True) and cls.task == "classification"
    result: dict[str, Any] = {"model_id": p["model_id"], "n_rows_used": int(len(rows))}
    if dropped:
        result["n_rows_dropped_missing_target"] = dropped
    metrics: dict[str, Any] = {}
    if validation.get("cv"):
        k = int(validation["cv"])
        splitter = (StratifiedKFold(k, shuffle=True, random_state=seed) if stratify
                    else KFold(k, shuffle=True, random_state=seed))
        fold_metrics = []
        for i, (tr, te) in enumerate(splitter.split(rows, None if y is None else y[rows])):
            sub = ctx.child(i / (k + 1), (i + 1) / (k + 1))
            b, _ = _fit_bundle(cls, params, features, p["target"], columns, y, rows[tr], sub, p["model_id"])
            Xte = b.matrix({kk: v[rows[te]] for kk, v in columns.items()})
            fold_metrics.append(evaluate_matrix(b, Xte, None if y is None else y[rows[te]],
                                                include_curves=False)["metrics"])
        metrics["validation"] = _mean_metrics(fold_metrics)
        metrics["validation"]["folds"] = k
        train_idx = rows
        final_ctx = ctx.child(k / (k + 1), 1.0)
    elif holdout:
        tr, te = train_test_split_indices(len(rows), float(holdout),
                                          stratify=(y[rows] if stratify and y is not None else None),
                                          random_state=seed)
        train_idx, test_idx = rows[tr], rows[te]
        final_ctx = ctx
    else:
        train_idx, test_idx = rows, None
        final_ctx = ctx
    bundle, Xtr = _fit_bundle(cls, params, features, p["target"], columns, y, train_idx, final_ctx, p["model_id"])
    metrics["training"] = evaluate_matrix(bundle, Xtr, None if y is None else y[train_idx],
                                          include_curves=False)["metrics"]
    if not validation.get("cv") and holdout:
        Xte = bundle.matrix({kk: v[test_idx] for kk, v in columns.items()})
        metrics["validation"] = evaluate_matrix(bundle, Xte, None if y is None else y[test_idx],
                                                include_curves=False)["metrics"]
        metrics["validation"]["holdout"] = float(holdout)
    ctx.check_cancelled()
    size = art.save_bundle(p["model_id"], bundle)
    result["metrics"] = metrics
    meta.update_model(p["model_id"], status="ready", metrics=metrics, features=bundle.features,
                      classes=bundle.classes, size_bytes=size)
    return result


def _mean_metrics(folds: list[dict]) -> dict:
    out: dict[str, Any] = {}
    for key in folds[0]:
        vals = [f.get(key) for f in folds]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            out[key] = float(np.mean(vals))
            out[f"{key}_std"] = float(np.std(vals))
    return out


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def execute_job(meta: MetadataStore, art: ArtifactStore, job_id: str, poll_interval: float = 0.2) -> str:
    """Run one queued job to a terminal state.  Returns the final status."""
    if not meta.claim_job(job_id, worker_name()):
        job = meta.get_job(job_id)
        return job["status"] if job else "missing"
    job = meta.get_job(job_id)
    state = {"cancel": False}

    def on_progress(frac: float, metrics: dict) -> None:
        msg = "running " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                     for k, v in metrics.items()) if metrics else None
        state["cancel"] = meta.update_progress(job_id, frac, msg)

    def is_cancelled() -> bool:
        return state["cancel"] or meta.cancel_requested(job_id)

    ctx = FitContext(on_progress=on_progress, is_cancelled=is_cancelled, min_interval=0.25,
                     cancel_interval=poll_interval)
    model_id = job.get("model_id")
    try:
        if job["kind"] == "train":
            result = run_train(meta, art, job, ctx)
        else:
            raise Invalid(f"unknown job kind {job['kind']!r}")
        if meta.cancel_requested(job_id):
            raise FitCancelled("cancelled")
    except FitCancelled:
        meta.finish_job(job_id, "cancelled", message="cancelled while running")
        if model_id:
            art.delete_model(model_id)
            meta.update_model(model_id, status="failed", metrics={"error": "training was cancelled"})
        return "cancelled"
    except MemoryError:  # past the worker's address-space cap (ORCHARD_WORKER_MEMORY_BYTES): this job only
        msg = memory_error_message()
        log.warning("job %s failed: %s", job_id, msg)
        _fail(meta, art, job_id, model_id, "MemoryLimitExceeded", msg)
        return "failed"
    except (DataError, ParamError, Invalid, NotFound, ValueError) as exc:
        msg = getattr(exc, "detail", None) or str(exc)
        log.info("job %s failed: %s", job_id, msg)
        _fail(meta, art, job_id, model_id, type(exc).__name__, msg)
        return "failed"
    except Exception as exc:  # noqa: BLE001 - a job must always end in a terminal state
        log.error("job %s crashed:\n%s", job_id, traceback.format_exc())
        _fail(meta, art, job_id, model_id, type(exc).__name__, f"unexpected error: {exc}")
        return "failed"
    meta.finish_job(job_id, "succeeded", result=result, message="succeeded")
    return "succeeded"


def _fail(meta, art, job_id, model_id, etype, msg):
    meta.finish_job(job_id, "failed", error={"type": etype, "message": msg}, message=msg)
    if model_id:
        art.delete_model(model_id)
        meta.update_model(model_id, status="failed", metrics={"error": msg})


def recover_orphans(meta: MetadataStore, requeue) -> None:
    """After a restart of the embedded queue: running jobs failed, queued jobs re-enqueued."""
    for job in meta.jobs_in(["running"]):
        msg = ("the server stopped while this job was running (it was restarted or killed); "
               "submit the job again")
        meta.finish_job(job["id"], "failed", error={"type": "WorkerLost", "message": msg}, message=msg,
                        only_from=("running",))
        if job.get("model_id"):
            meta.update_model(job["model_id"], status="failed", metrics={"error": msg})
    for job in meta.jobs_in(["queued"]):
        requeue(job["id"])
