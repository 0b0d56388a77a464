"""Training: validate a request synchronously, record job + model, and run the job in a worker.

``submit_train`` does every check that can be done without fitting (algorithm,
params, dataset, target, features, class counts) so bad requests are a 422
before anything is queued.  ``run_train_job`` executes in a worker process: it
loads the dataset, fits preprocessing and estimator under a FitContext wired to
the job record, computes metrics and stages the signed bundle; ``services/jobs.py``
runs it (``RUNNERS["train"]``) and makes the model ready.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

import core
from core import registry
from core.context import FitContext
from core.model_selection import KFold, StratifiedKFold, train_test_split_indices
from core.params import ParamError, validate_params
from core.preprocessing import TablePreprocessor

from ..errors import Invalid, invalid
from ..storage.artifacts import ArtifactStore
from ..storage.metadata import MetadataStore, utcnow
from . import datasets as ds
from . import rl
from .bundle import ModelBundle
from .evaluation import evaluate_matrix
from .jobs import Outcome
from .resources import fit_memory_estimate, human_bytes
from .tables import Column, parse_json_table

log = logging.getLogger("orchard.training")

SUPERVISED = ("classification", "regression")


def jsonable_params(params: dict) -> dict:
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


def select_columns(record_columns: list[dict], target: str | None, features: list[str] | None, task: str,
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


IDENTIFIER_MIN_CATEGORIES = 20
IDENTIFIER_RATIO = 0.5


def identifier_like(col: dict, n_rows: int) -> bool:
    """A categorical column with about one category per row (a name, an id): useless and harmful as a feature.

    Threshold: at least IDENTIFIER_MIN_CATEGORIES categories and more than IDENTIFIER_RATIO of the rows
    where it is present (docs/decisions/training-defaults.md).
    """
    if col["type"] != "categorical":
        return False
    k = int((col.get("summary") or {}).get("n_categories", 0))
    present = n_rows - int(col.get("n_missing", 0))
    return k >= IDENTIFIER_MIN_CATEGORIES and k > IDENTIFIER_RATIO * present


def default_features(features: list[dict], n_rows: int, drop=()) -> tuple[list[dict], list[str]]:
    """The columns used when the request names no features: all but the dropped and the identifier-like ones
    (each left out with a note); 422 when none is left."""
    kept, notes = [], []
    for f in features:
        if f["name"] in drop:
            continue
        if identifier_like(f, n_rows):
            k = f["summary"]["n_categories"]
            notes.append(f"column {f['name']!r} was not used as a feature: {k} distinct values over "
                         f"{n_rows - f['n_missing']} rows look like an identifier (name it in features to use it)")
            continue
        kept.append(f)
    if not kept:
        raise invalid(["body", "features"], "no feature column is left (dropped or identifier-like: "
                      f"{', '.join(f['name'] for f in features)}); name the features to use")
    return kept, notes


def check_target_column(target_col: dict, task: str, n_rows: int, distinct: int | None = None,
                  max_numeric_classes: int = 50) -> None:
    name = target_col["name"]
    if target_col["n_missing"] >= n_rows:
        raise invalid(["body", "target"], f"target column {name!r} has no values")
    if target_col["type"] == "datetime":
        raise invalid(["body", "target"], f"target column {name!r} holds dates; a {task} target must be "
                      f"{'numeric' if task == 'regression' else 'labels'}")
    if task == "regression" and target_col["type"] == "categorical":
        raise invalid(["body", "target"], f"target column {name!r} is categorical (text); a regressor needs a "
                      "numeric target: use a classifier, or force the column numeric")
    if task == "classification":
        s = target_col["summary"]
        if target_col["type"] == "categorical":
            n_classes = int(s.get("n_categories", 0))
        elif target_col["type"] == "boolean":
            n_classes = int(s.get("true", 0) > 0) + int(s.get("false", 0) > 0)
        else:
            n_classes = 2 if s.get("min") is not None and s["min"] != s["max"] else 1
            if distinct is not None:
                n_classes = distinct
                present = n_rows - int(target_col["n_missing"])
                if distinct > max_numeric_classes and distinct > 0.2 * present:
                    raise invalid(["body", "target"],
                                  f"target column {name!r} holds {distinct} distinct numbers over {present} rows: "
                                  "it looks continuous; use a regressor (e.g. random_forest_regressor), or force "
                                  "the column categorical if these really are classes")
        if n_classes < 2:
            raise invalid(["body", "target"],
                          f"target column {name!r} has a single class; a classifier needs at least two")


def _check_validation(validation: dict | None, task: str, by_name: dict, n_rows: int) -> dict:
    v = {k: val for k, val in dict(validation or {}).items() if val is not None}
    if v.get("holdout") is not None and v.get("cv") is not None:
        raise invalid(["body", "validation"], "give either holdout or cv, not both")
    if v.get("holdout") == 0:
        v.pop("holdout")
    if v.get("refit") and not v.get("holdout"):
        raise invalid(["body", "validation", "refit"], "refit applies to a holdout (without one the model is "
                      "fitted on every row already)")
    tc = v.get("time_column")
    if tc is not None:
        if not v.get("holdout"):
            raise invalid(["body", "validation", "time_column"], "a time-ordered split needs a holdout fraction")
        if tc not in by_name:
            raise invalid(["body", "validation", "time_column"], f"column {tc!r} is not in the dataset")
        col = by_name[tc]
        if col["type"] not in ("datetime", "numeric"):
            raise invalid(["body", "validation", "time_column"], f"column {tc!r} is {col['type']}; a time column "
                          "must be a datetime (or numeric) column")
        if col["n_missing"]:
            raise invalid(["body", "validation", "time_column"], f"column {tc!r} has {col['n_missing']} missing "
                          "values; rows without a time cannot be ordered")
    if task not in SUPERVISED and task != "clustering" and v:
        # decomposition/density: validation metrics are still computed on a hold-out when asked
        pass
    return v


def _check_preprocessing(pre: dict | None, cls, by_name: dict, target: str | None) -> dict:
    pre = dict(pre or {})
    drop = list(pre.get("drop") or [])
    for i, c in enumerate(drop):
        if c not in by_name:
            raise invalid(["body", "preprocessing", "drop", i], f"column {c!r} is not in the dataset")
        if c == target:
            raise invalid(["body", "preprocessing", "drop", i], f"{c!r} is the target; it cannot be dropped")
    if pre.get("encode") == "native" and not cls.native_categorical:
        raise invalid(["body", "preprocessing", "encode"], f"{cls.name} does not split on categories natively; "
                      "use encode: onehot")
    scale = pre.get("scale") or ("standard" if cls.needs_scaling else "none")
    return {"impute": pre.get("impute") or "mean", "scale": scale,
            "encode": pre.get("encode") or ("native" if cls.native_categorical else "onehot"), "drop": drop}


def _check_positive_label(label, task: str, target_col: dict | None, distinct_values: list | None):
    if label is None:
        return None
    if task != "classification":
        raise invalid(["body", "positive_label"], "positive_label applies to classifiers")
    if target_col["type"] == "categorical":
        values = (target_col.get("categories") or [t["value"] for t in target_col["summary"].get("top", [])])
    elif target_col["type"] == "boolean":
        values = target_col["summary"].get("labels") or [False, True]
    else:
        values = distinct_values or []
    if len(values) != 2 and target_col["type"] != "categorical":
        raise invalid(["body", "positive_label"], f"positive_label applies to two classes; the target has "
                      f"{len(values)}")
    if target_col["type"] == "categorical" and int(target_col["summary"].get("n_categories", 0)) != 2:
        raise invalid(["body", "positive_label"], "positive_label applies to two classes; the target has "
                      f"{target_col['summary'].get('n_categories')}")
    for v in values:
        if v == label or str(v) == str(label) or (isinstance(v, bool) and str(v).lower() == str(label).lower()):
            return v
    raise invalid(["body", "positive_label"], f"{label!r} is not a class of the target (classes: "
                  f"{', '.join(map(str, values))})")


def distinct_numbers(art: ArtifactStore, record: dict | None, cols, name: str) -> list:
    if cols is not None:
        col = next(c for c in cols if c.name == name)
    else:
        col = ds.load_columns(art, record["id"], [name])[0]
    v = np.asarray(col.values, dtype=np.float64)
    u = np.unique(v[~np.isnan(v)])
    return [int(x) if float(x).is_integer() else float(x) for x in u[:1000].tolist()] if u.size <= 1000 else \
        list(range(int(u.size)))




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
                 max_numeric_classes: int = 50, max_train_bytes: int = 0) -> tuple[dict, str]:
    """Validate and enqueue a training job.  Returns (job record, model id)."""
    cls = resolve_algorithm(req["algorithm"])
    params = validate_algorithm_params(cls, req.get("params"))
    if cls.task == rl.TASK:
        return _submit_rl(meta, art, req, enqueue, cls, params)
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
    by_name = {c["name"]: c for c in record_columns}
    preprocessing = _check_preprocessing(req.get("preprocessing"), cls, by_name, req.get("target"))
    notes: list[str] = []
    features, target_col = select_columns(record_columns, req.get("target"), req.get("features"), cls.task)
    if req.get("features") is None:
        features, notes = default_features(features, n_rows, preprocessing["drop"])
    else:
        clash = [f["name"] for f in features if f["name"] in preprocessing["drop"]]
        if clash:
            raise invalid(["body", "preprocessing", "drop"], f"column {clash[0]!r} is both a feature and dropped")
    distinct = None
    if target_col is not None:
        if cls.task == "classification" and target_col["type"] == "numeric":
            distinct = distinct_numbers(art, record, cols, target_col["name"])
        check_target_column(target_col, cls.task, n_rows, None if distinct is None else len(distinct),
                      max_numeric_classes)
    target_info = dict(target_col or {})
    if target_col is not None and target_col["type"] == "categorical" and cols is None:
        target_info["categories"] = art.read_dataset_schema(record["id"])["columns"][
            [c["name"] for c in record_columns].index(target_col["name"])].get("categories")
    elif target_col is not None and cols is not None and target_col["type"] == "categorical":
        target_info["categories"] = next(c for c in cols if c.name == target_col["name"]).categories
    positive = _check_positive_label(req.get("positive_label"), cls.task, target_info or None, distinct)
    validation = _check_validation(req.get("validation"), cls.task, by_name, n_rows)
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
        "algorithm": cls.name, "params": jsonable_params(params), "dataset_id": record["id"],
        "target": target_col["name"] if target_col else None, "features": [f["name"] for f in features],
        "validation": validation, "model_id": model_id, "preprocessing": preprocessing, "notes": notes,
        "positive_label": positive,
    }
    job = {"id": job_id, "kind": "train", "status": "queued", "progress": 0.0, "message": "queued",
           "payload": payload, "model_id": model_id, "cancel_requested": False, "created_at": now,
           "updated_at": now}
    model = {"id": model_id, "name": req.get("name") or model_id, "algorithm": cls.name, "task": cls.task,
             "params": payload["params"], "status": "training", "job_id": job_id, "dataset_id": record["id"],
             "features": [{"name": f["name"], "type": f["type"]} for f in features],
             "target": payload["target"], "classes": None, "metrics": {}, "size_bytes": 0, "created_at": now,
             "notes": notes, "preprocessing": preprocessing}
    meta.insert_job_and_model(job, model)
    try:
        enqueue(job_id)
    except Exception as exc:  # noqa: BLE001 - stored: the reconciler enqueues it when the queue is back
        log.warning("job %s stored but not enqueued (%s); it is enqueued when the queue answers again", job_id, exc)
    return meta.get_job(job_id), model_id


def _submit_rl(meta, art, req, enqueue, cls, params) -> tuple[dict, str]:
    """Reinforcement learning: the table goes to the estimator as it is; its own checks run here (422)."""
    if req.get("target") is not None:
        raise invalid(["body", "target"], f"a {cls.task} algorithm takes no target; remove the target field")
    if req.get("features") is not None:
        raise invalid(["body", "features"], f"a {cls.task} algorithm reads its columns by role (see its *_column "
                                            "params); remove the features field")
    if req.get("validation"):
        raise invalid(["body", "validation"], f"a {cls.task} algorithm has no hold-out or cross-validation; its "
                                              "training metrics are computed on the table itself (use evaluate)")
    if req.get("dataset_id") is not None and req.get("data") is not None:
        raise invalid(["body", "dataset_id"], "give at most one of dataset_id or data")
    record, cols, loc = None, None, ["body", "dataset_id"]
    if req.get("data") is not None:
        data = req["data"]
        cols = parse_json_table(data["columns"], data["rows"], data.get("types"), loc=("body", "data"))
        loc = ["body", "data"]
    elif req.get("dataset_id") is not None:
        record = ds.get_record(meta, req["dataset_id"])
        cols = ds.load_columns(art, req["dataset_id"], mmap=False)
    rl.check_submit(cls, params, None if cols is None else rl.raw_columns(cols), loc)
    if record is None and cols is not None:
        record = ds.store_columns(meta, art, cols, (req.get("name") or "inline") + "-data")
    job_id = ds.new_id("job")
    model_id = ds.new_id("mdl")
    now = utcnow()
    dataset_id = record["id"] if record else None
    payload = {"algorithm": cls.name, "params": jsonable_params(params), "dataset_id": dataset_id,
               "target": None, "features": [], "validation": {}, "model_id": model_id}
    job = {"id": job_id, "kind": "train", "status": "queued", "progress": 0.0, "message": "queued",
           "payload": payload, "model_id": model_id, "cancel_requested": False, "created_at": now,
           "updated_at": now}
    model = {"id": model_id, "name": req.get("name") or model_id, "algorithm": cls.name, "task": cls.task,
             "params": payload["params"], "status": "training", "job_id": job_id, "dataset_id": dataset_id,
             "features": [], "target": None, "classes": None, "metrics": {}, "size_bytes": 0, "created_at": now}
    meta.insert_job_and_model(job, model)
    enqueue(job_id)
    return meta.get_job(job_id), model_id


def run_train_rl(meta: MetadataStore, art: ArtifactStore, job: dict, ctx: FitContext) -> Outcome:
    p = job["payload"]
    cls = registry.get(p["algorithm"])
    params = validate_params(cls.params, p["params"])
    columns, types, n = None, {}, 0
    if p["dataset_id"]:
        loaded = ds.load_columns(art, p["dataset_id"], mmap=False)
        columns = rl.raw_columns(loaded)
        types = {c.name: c.type for c in loaded}
        n = len(loaded[0].values) if loaded else 0
    est = rl.fit(cls, params, columns, ctx)
    metrics = {"training": rl.evaluate(est, columns, n)["metrics"]}
    features = rl.features_of(est, cls, columns, types)
    bundle = ModelBundle(model_id=p["model_id"], algorithm=cls.name, task=cls.task, params=params,
                         features=features, target=None, classes=None, preprocessor=None, estimator=est,
                         core_version=core.__version__)
    ctx.check_cancelled()
    staged, size = art.stage_bundle(p["model_id"], bundle)
    return Outcome({"model_id": p["model_id"], "n_rows_used": int(n), "metrics": metrics},
                   model={"metrics": metrics, "features": features, "classes": None, "size_bytes": size},
                   staged=staged)


# ------------------------------------------------------------------------------------------------
# execution (worker side)
# ------------------------------------------------------------------------------------------------
def target_values(col: Column, task: str) -> tuple[np.ndarray, np.ndarray]:
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
        if col.labels:  # a yes/no column: the labels as uploaded
            y = np.empty(len(col.values), dtype=object)
            y[present] = np.asarray(col.labels, dtype=object)[col.values[present].astype(np.intp)]
            return y, present
        y = np.zeros(len(col.values), dtype=bool)
        y[present] = col.values[present] == 1
        return y, present
    v = np.asarray(col.values, dtype=np.float64)
    if np.all(np.mod(v[present], 1) == 0) and np.all(np.abs(v[present]) < 2**53):
        y = np.zeros(len(v), dtype=np.int64)
        y[present] = v[present].astype(np.int64)
        return y, present
    return v, present


def make_preprocessor(cls, options: dict | None) -> TablePreprocessor:
    """The TablePreprocessor of a training request's ``preprocessing`` (defaults: the algorithm's needs)."""
    o = options or {}
    scale = o.get("scale") or ("standard" if cls.needs_scaling else "none")
    encode = o.get("encode") or ("native" if cls.native_categorical else "onehot")
    return TablePreprocessor(scale=scale != "none", scale_method=scale if scale != "none" else "standard",
                             impute=o.get("impute") or "mean", native_missing=bool(cls.native_missing),
                             native_categorical=encode == "native" and bool(cls.native_categorical))


def _settings():
    """The settings of the job this process runs (a fresh read of the environment outside a job)."""
    from ..settings import Settings
    from .jobs import CURRENT_SETTINGS

    return CURRENT_SETTINGS[0] or Settings()


def training_sample(cls, idx: np.ndarray, seed: int, limit: int | None = None) -> np.ndarray | None:
    """Positions (sorted) into ``idx`` of the training rows a lazy learner is scored on (the training metrics of
    a job or a refit, the train scores of model selection): a seeded random sample of ``limit`` rows (default:
    the settings' ``training_metrics_max_rows``) when it has more, else None (every row)."""
    if not getattr(cls, "lazy_learner", False):
        return None
    limit = _settings().training_metrics_max_rows if limit is None else limit
    if len(idx) <= limit:
        return None
    return np.sort(np.random.default_rng(seed).choice(len(idx), size=limit, replace=False))


def training_sample_note(cls, n_sampled: int, n_rows: int, what: str = "metrics.training") -> str:
    """The note that says a lazy learner's ``what`` was measured on a sample (see ``training_sample``)."""
    return (f"{what} was measured on a seeded random sample of {n_sampled} of the {n_rows} training rows: "
            f"{cls.name} predicts by comparing each row with the training rows, so scoring them all would cost "
            "their number squared (ORCHARD_TRAINING_METRICS_MAX_ROWS)")


def fit_bundle(cls, params, features, target, columns, y, idx, ctx, model_id, options=None, positive=None,
                timings: dict | None = None, prepared: tuple | None = None):
    """Preprocessing fitted on the rows ``idx``, then the estimator; ``timings`` (if given) receives the
    seconds of each (``preprocess``, ``estimator``). ``prepared``: ``(preprocessor, X)`` already fitted on
    exactly these rows and columns with ``make_preprocessor(cls, options)`` (model selection reuses a fold's)."""
    t0 = time.perf_counter()
    if prepared is not None:
        pre, X = prepared
    else:
        pre = make_preprocessor(cls, options)
        types = {f["name"]: f["type"] for f in features}
        cols_sub = {k: v[idx] for k, v in columns.items()}
        pre.fit(cols_sub, types)
        X = pre.transform(cols_sub)
    est_params = params
    if getattr(cls, "uses_hist_workers", False) and params.get("n_jobs") is None:
        est_params = {**params, "n_jobs": _settings().hist_workers}  # the model record keeps the request's params
    est = cls(**est_params)
    kw: dict[str, Any] = {"ctx": ctx}
    if cls.native_categorical and pre.categorical_mask_.any():
        kw["categorical_features"] = pre.categorical_mask_
    t1 = time.perf_counter()
    est.fit(X, None if y is None else y[idx], **kw)
    if timings is not None:
        timings["preprocess"] = t1 - t0
        timings["estimator"] = time.perf_counter() - t1
    feats = pre.describe_features()
    classes = np.asarray(est.classes_).tolist() if cls.task == "classification" else None
    bundle = ModelBundle(model_id=model_id, algorithm=cls.name, task=cls.task, params=params, features=feats,
                         target=target, classes=classes, preprocessor=pre, estimator=est,
                         core_version=core.__version__,
                         extra={"positive_label": positive, "preprocessing": options})
    return bundle, X


def run_train(meta: MetadataStore, art: ArtifactStore, job: dict, ctx: FitContext) -> Outcome:
    """The ``train`` runner: fit, measure and stage the bundle (services/jobs.py makes the model ready)."""
    p = job["payload"]
    cls = registry.get(p["algorithm"])
    if cls.task == rl.TASK:
        return run_train_rl(meta, art, job, ctx)
    params = validate_params(cls.params, p["params"])
    validation = p.get("validation") or {}
    options = p.get("preprocessing")
    positive = p.get("positive_label")
    notes = list(p.get("notes") or [])
    time_column = validation.get("time_column")
    names = list(p["features"]) + ([p["target"]] if p["target"] else [])
    loaded = names + ([time_column] if time_column and time_column not in names else [])
    cols = {c.name: c for c in ds.load_columns(art, p["dataset_id"], loaded, mmap=False)}
    features = [{"name": n, "type": cols[n].type} for n in p["features"]]
    columns = {n: cols[n].as_model_input() for n in p["features"]}
    n = len(next(iter(columns.values())))
    y = None
    rows = np.arange(n)
    dropped = 0
    if p["target"]:
        y, present = target_values(cols[p["target"]], cls.task)
        dropped = int((~present).sum())
        rows = rows[present]
    holdout = validation.get("holdout")
    seed = validation.get("random_state", 0)
    stratify = validation.get("stratify", True) and cls.task == "classification"
    result: dict[str, Any] = {"model_id": p["model_id"], "n_rows_used": int(len(rows))}
    if dropped:
        result["n_rows_dropped_missing_target"] = dropped
        notes.append(f"{dropped} rows without a target value were left out")
    metrics: dict[str, Any] = {}

    def fit(idx, c):
        return fit_bundle(cls, params, features, p["target"], columns, y, idx, c, p["model_id"], options,
                           positive)

    def measure(b, idx, X=None):
        X = b.matrix({kk: v[idx] for kk, v in columns.items()}) if X is None else X
        return evaluate_matrix(b, X, None if y is None else y[idx], include_curves=False)["metrics"]

    def measure_training(b, idx, X):
        """metrics.training: every training row, or a lazy learner's bounded sample (noted)."""
        pick = training_sample(cls, idx, seed)
        if pick is None:
            return measure(b, idx, X)
        m = measure(b, idx[pick], X[pick])
        m["sampled_rows"] = int(len(pick))
        notes.append(training_sample_note(cls, len(pick), len(idx)))
        return m

    if validation.get("cv"):
        k = int(validation["cv"])
        splitter = (StratifiedKFold(k, shuffle=True, random_state=seed) if stratify
                    else KFold(k, shuffle=True, random_state=seed))
        fold_metrics = []
        for i, (tr, te) in enumerate(splitter.split(rows, None if y is None else y[rows])):
            b, _ = fit(rows[tr], ctx.child(i / (k + 1), (i + 1) / (k + 1)))
            fold_metrics.append(measure(b, rows[te]))
        metrics["validation"] = _mean_metrics(fold_metrics)
        metrics["validation"]["folds"] = k
        bundle, Xtr = fit(rows, ctx.child(k / (k + 1), 1.0))
        metrics["training"] = measure_training(bundle, rows, Xtr)
    elif holdout:
        if time_column:
            t = cols[time_column].values[rows]
            order = np.argsort(t.astype("datetime64[us]").astype(np.int64) if t.dtype.kind == "M" else t,
                               kind="stable")
            n_test = max(1, int(round(len(rows) * float(holdout))))
            if n_test >= len(rows):
                raise Invalid(f"a holdout of {holdout} leaves no rows to train on")
            tr, te = order[:-n_test], order[-n_test:]
        else:
            tr, te = train_test_split_indices(len(rows), float(holdout),
                                              stratify=(y[rows] if stratify and y is not None else None),
                                              random_state=seed)
        train_idx, test_idx = rows[tr], rows[te]
        refit = bool(validation.get("refit"))
        bundle, Xtr = fit(train_idx, ctx.child(0.0, 0.5) if refit else ctx)
        metrics["validation"] = measure(bundle, test_idx)
        metrics["validation"]["holdout"] = float(holdout)
        if time_column:
            metrics["validation"]["time_column"] = time_column
        if refit:
            bundle, Xtr = fit(rows, ctx.child(0.5, 1.0))
            metrics["training"] = measure_training(bundle, rows, Xtr)
            notes.append(f"validation metrics come from a model fitted on {len(train_idx)} rows; the saved model "
                         f"was refitted on all {len(rows)} rows (refit: true)")
        else:
            metrics["training"] = measure_training(bundle, train_idx, Xtr)
            notes.append(f"the model was fitted on {len(train_idx)} rows; {len(test_idx)} rows were held out for "
                         "validation (set validation.refit to fit the saved model on every row)")
    else:
        bundle, Xtr = fit(rows, ctx)
        metrics["training"] = measure_training(bundle, rows, Xtr)
        if cls.task in SUPERVISED:
            notes.append(f"no validation was requested: the model was fitted on all {len(rows)} rows and "
                         "metrics.training is measured on those same rows (optimistic); ask for "
                         "validation.holdout or validation.cv for an honest estimate")
    ctx.check_cancelled()
    staged, size = art.stage_bundle(p["model_id"], bundle)
    result["metrics"] = metrics
    result["notes"] = notes
    from .explain import model_insight

    return Outcome(result, model={"metrics": metrics, "features": bundle.features, "classes": bundle.classes,
                                  "size_bytes": size, "insight": model_insight(bundle), "notes": notes},
                   staged=staged)


def _mean_metrics(folds: list[dict]) -> dict:
    out: dict[str, Any] = {}
    for key in folds[0]:
        vals = [f.get(key) for f in folds]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            out[key] = float(np.mean(vals))
            out[f"{key}_std"] = float(np.std(vals))
    return out
