"""Permutation-importance jobs (kind ``importance``): validation at submit, execution in a worker.

The job record carries the model id in its payload, not in ``jobs.model_id`` (which marks the model a
job trains: a failed or cancelled importance job must not touch the model).  On success the model's
``insight.feature_importances`` become the permutation importances of this run.
"""

from __future__ import annotations

import numpy as np

from core.inspection import permutation_importance
from core.model_selection import get_scorer
from core.params import ParamError

from ..errors import invalid
from ..storage.metadata import utcnow
from . import datasets as ds
from .explain import SUPERVISED, column_groups
from .jobs import Outcome
from .training import target_values

DEFAULT_METRIC = {"classification": "accuracy", "regression": "r2"}


def submit_importance(r, model_id: str, req: dict) -> dict:
    bundle = r.cache.get(model_id)  # 404 / 409 for a model that is unknown or not ready
    if bundle.task not in SUPERVISED:
        raise invalid(["path", "model_id"], f"permutation importance applies to classification and regression "
                                            f"models; this model does {bundle.task}")
    metric = req.get("metric") or DEFAULT_METRIC[bundle.task]
    try:
        scorer = get_scorer(metric)
    except ParamError as exc:
        raise invalid(["body", "metric"], exc.reason) from None
    if scorer.task != bundle.task:
        raise invalid(["body", "metric"], f"{metric!r} is a {scorer.task} metric; this model does {bundle.task}")
    if scorer.needs == "proba" and not callable(getattr(bundle.estimator, "predict_proba", None)):
        raise invalid(["body", "metric"], f"{metric!r} needs class probabilities, which this model does not give")
    record = ds.get_record(r.meta, req["dataset_id"])
    names = {c["name"] for c in record["columns"]}
    if bundle.target not in names:
        raise invalid(["body", "dataset_id"], f"dataset {req['dataset_id']!r} lacks the target column "
                                              f"{bundle.target!r} needed for permutation importance")
    lacking = [f["name"] for f in bundle.features if f["name"] not in names]
    if lacking:
        raise invalid(["body", "dataset_id"], f"dataset {req['dataset_id']!r} lacks the model's feature column(s): "
                                              f"{', '.join(lacking)}")
    job_id = ds.new_id("job")
    now = utcnow()
    payload = {"model_id": model_id, "dataset_id": req["dataset_id"], "metric": scorer.name,
               "n_repeats": int(req.get("n_repeats") or 5), "random_state": req.get("random_state", 0)}
    job = {"id": job_id, "kind": "importance", "status": "queued", "progress": 0.0, "message": "queued",
           "payload": payload, "model_id": None, "cancel_requested": False, "created_at": now, "updated_at": now}
    r.meta.insert_job(job)
    r.queue.enqueue(job_id)
    return r.meta.get_job(job_id)


def run_importance(meta, art, job: dict, ctx) -> Outcome:
    """The ``importance`` runner: the job's result (services/jobs.py ends the job)."""
    p = job["payload"]
    bundle = art.load_bundle(p["model_id"])
    cols = {c.name: c for c in ds.load_columns(art, p["dataset_id"], mmap=False)}
    y, present = target_values(cols[bundle.target], bundle.task)
    table = {f["name"]: cols[f["name"]].as_model_input()[present] for f in bundle.features}
    y = y[present]
    if bundle.task == "classification" and bundle.classes and all(isinstance(c, str) for c in bundle.classes):
        y = np.asarray([str(v) for v in y.tolist()], dtype=object)
    X = bundle.matrix(table)
    scorer = get_scorer(p["metric"])
    est = bundle.estimator
    groups = column_groups(bundle.preprocessor, X.shape[1])
    out = permutation_importance(lambda A, t: scorer(est, A, t), X, y, groups, n_repeats=p["n_repeats"],
                                 random_state=p["random_state"], greater_is_better=scorer.greater_is_better,
                                 ctx=ctx)
    names = list(bundle.preprocessor.feature_names_in_)
    features = [{"name": n, "mean": float(m), "std": float(s)}
                for n, m, s in zip(names, out["mean"], out["std"], strict=True)]
    ctx.check_cancelled()
    record = meta.get_model(p["model_id"])
    if record is not None:
        insight = dict(record.get("insight") or {})
        insight["feature_importances"] = {f["name"]: f["mean"] for f in features}
        insight["feature_importances_method"] = "permutation"
        insight["feature_importances_metric"] = p["metric"]
        meta.update_model(p["model_id"], insight=insight)
    return Outcome({"model_id": p["model_id"], "metric": p["metric"], "baseline": out["baseline"],
                    "n_repeats": p["n_repeats"], "n_samples": int(X.shape[0]), "features": features})
