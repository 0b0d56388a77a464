"""The model-selection jobs: parents (cross-validate, compare, tune, automl, learning-curve, feature-selection)
fan their work out as ``trial`` child jobs and join them; a trial fits and scores one candidate on some folds.

Fan-out (docs/decisions/model-selection-jobs.md): the parent inserts the children's rows (kind ``trial``,
``payload.parent_id``), enqueues them through the worker's queue (``service.queue.fanout``) so that other
pool processes or RQ workers run them, and polls their rows. While it waits, it claims queued children and
runs them itself, through the same conditional claim as every worker: a child never runs twice, a single worker
still finishes, and parents occupying every worker cannot deadlock. Cancelling the parent cancels its children
(queued ones at once; running ones see the parent's flag at their next step). A child whose parent has ended
does not run.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from sqlalchemy import select, update

import core
from core import registry
from core.context import FitCancelled, FitContext
from core.model_selection import get_scorer
from core.params import ParamError, validate_params
from core.validation import DataError

from ..errors import Invalid
from ..queue import fanout
from ..storage.metadata import TERMINAL, jobs, utcnow
from . import datasets as ds
from .evaluation import evaluate_matrix
from .jobs import Outcome
from .selection import (
    TaskData,
    compare_pairs,
    corrected_ttest,
    fit_score,
    load_task_data,
    make_folds,
    subsample,
    summary,
)

CANDIDATE_ERRORS = (DataError, ParamError, np.linalg.LinAlgError, ArithmeticError, ValueError)
_DATA_KEYS = ("dataset_id", "target", "features", "task", "folds", "stratify", "seed")


# ------------------------------------------------------------------------------------------------
# trial (child) side
# ------------------------------------------------------------------------------------------------
def _task_data(art, p: dict) -> TaskData:
    return load_task_data(art, p["dataset_id"], p["features"], p["target"], p["task"])


_FOLD_CACHE: dict = {}


def _folds(data: TaskData, p: dict, repeats: int | None = None):
    """The folds of the parent's payload, drawn once per process (every trial of a parent shares them)."""
    r = repeats if repeats is not None else p.get("repeats", 1)
    key = (data.dataset_id, data.target, p["task"], p["folds"], p["stratify"], p["seed"], r, len(data.rows))
    hit = _FOLD_CACHE.get(key)
    if hit is None or hit[0] is not data:
        _FOLD_CACHE.clear()
        hit = _FOLD_CACHE[key] = (data, make_folds(data.y[data.rows], p["task"], p["folds"], p["stratify"],
                                                   p["seed"], r))
    return hit[1]


def run_trial(meta, art, job: dict, ctx: FitContext) -> dict:
    """Fit and score one candidate on the folds named in the payload (preprocessing fitted per training fold)."""
    from .jobs import worker_name

    p = job["payload"]
    parent_id = p["parent_id"]
    ids = [job["id"], parent_id]
    deadline = p.get("deadline")

    def cancelled() -> bool:
        stop = deadline is not None and time.time() > deadline
        if not stop:
            with meta.engine.connect() as conn:
                rows = conn.execute(select(jobs.c.cancel_requested, jobs.c.status).where(jobs.c.id.in_(ids))).all()
            stop = len(rows) < 2 or any(c or s in TERMINAL for c, s in rows)
        if stop:  # the trial's own row asks to stop too, so that its attempt ends "cancelled", not stale
            from .jobs import cancel

            cancel(meta, job["id"])
        return stop

    t_start = time.time()
    if cancelled():
        raise FitCancelled("the parent job has ended or the trial was cancelled")
    tctx = FitContext(is_cancelled=cancelled, cancel_interval=0.2)
    data = _task_data(art, p)
    cls = registry.get(p["algorithm"])
    params = validate_params(cls.params, p["params"])
    folds = _folds(data, p)
    fold_ids = p.get("fold_ids") or list(range(len(folds)))
    features = p.get("use_features") or p["features"]
    metrics = p["metrics"]
    size = p.get("train_size")
    perm_rng = np.random.default_rng(p["seed"] + 1) if size is not None else None
    perms = [perm_rng.permutation(tr) for tr, _ in folds] if perm_rng is not None else None
    out: dict[str, Any] = {"index": p.get("index", 0), "worker": worker_name(), "started": t_start,
                           "per_fold": {m: [] for m in metrics}, "fit_time": [], "n_train": [], "n_test": [],
                           "timings": {"setup": time.time() - t_start, "preprocess": 0.0, "estimator": 0.0,
                                       "score": 0.0}}
    if p.get("train_scores"):
        out["train_per_fold"] = {m: [] for m in metrics}
        out["train_sampled_rows"] = []  # per fold: the size of a lazy learner's sample, None for every row
    rows = data.rows
    try:
        for j, f in enumerate(fold_ids):
            tctx.step(j, len(fold_ids))
            tr, te = folds[f]
            if perms is not None:
                tr = perms[f][:size]
            frac = p.get("train_fraction")
            if frac is not None:
                seed = p["seed"] + 1000 * p.get("iteration", 0) + f
                tr = subsample(tr, frac, seed)
                if p.get("subsample_test", True):
                    te = subsample(te, frac, seed + 7)
            r = fit_score(data, cls, params, features, rows[tr], rows[te], metrics,
                          tctx.child(j / len(fold_ids), (j + 1) / len(fold_ids)),
                          train_scores=bool(p.get("train_scores")), sample_seed=p["seed"] + f)
            for m in metrics:
                out["per_fold"][m].append(r["test"][m])
                if "train" in r:
                    out["train_per_fold"][m].append(r["train"][m])
            if "train" in r:
                out["train_sampled_rows"].append(r.get("train_sampled_rows"))
            out["fit_time"].append(r["fit_time"])
            for k, v in r["timings"].items():
                out["timings"][k] += v
            out["n_train"].append(r["n_train"])
            out["n_test"].append(r["n_test"])
    except CANDIDATE_ERRORS as exc:  # this candidate cannot be fitted on this data: scored as failed
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["finished"] = time.time()
    return out


# ------------------------------------------------------------------------------------------------
# parent side
# ------------------------------------------------------------------------------------------------
class TrialFailed(Invalid):
    pass


class Fanout:
    """Children of one parent job: create, enqueue, join (running queued ones inline)."""

    def __init__(self, meta, art, job: dict, ctx: FitContext, poll: float = 0.05):
        self.meta, self.art, self.job, self.ctx, self.poll = meta, art, job, ctx, poll
        self.trials: list[dict] = []  # every child result, in completion order (the job's trial records)

    def _base(self) -> dict:
        p = self.job["payload"]
        return {k: p[k] for k in _DATA_KEYS} | {"parent_id": self.job["id"]}

    def run(self, specs: list[dict], *, lo: float = 0.0, hi: float = 1.0, deadline: float | None = None,
            on_result=None) -> list[dict | None]:
        """Run one child per spec (merged over the parent's data keys); results in spec order (None: not run
        before ``deadline``, a Unix time)."""
        if not specs:
            return []
        base = self._base()
        now = utcnow()
        rows = []
        for i, spec in enumerate(specs):
            payload = {**base, "index": i, **spec}
            if deadline is not None:
                payload["deadline"] = deadline
            rows.append({"id": ds.new_id("job"), "kind": "trial", "status": "queued", "progress": 0.0,
                         "message": "queued", "payload": payload, "model_id": None, "cancel_requested": False,
                         "created_at": now, "updated_at": now, "project": self.job.get("project") or "default"})
        with self.meta.engine.begin() as conn:
            conn.execute(jobs.insert(), rows)
        ids = [r["id"] for r in rows]
        pos = {jid: i for i, jid in enumerate(ids)}
        for jid in ids:
            fanout.enqueue(jid)
        results: list[dict | None] = [None] * len(ids)
        pending = set(ids)
        ctx = self.ctx.child(lo, hi)
        done = 0
        try:
            while pending:
                ctx.step(done, len(ids), trials=f"{done}/{len(ids)}")
                if deadline is not None and time.time() > deadline:
                    break
                with self.meta.engine.connect() as conn:
                    got = conn.execute(select(jobs.c.id, jobs.c.status, jobs.c.result, jobs.c.error)
                                       .where(jobs.c.id.in_(list(pending)))).all()
                queued, checked = [], False
                for jid, status, result, error in got:
                    if status == "succeeded":
                        pending.discard(jid)
                        results[pos[jid]] = result
                        self.trials.append(result)
                        done += 1
                        if on_result is not None:
                            on_result(pos[jid], result)
                    elif status in ("failed", "cancelled"):
                        # the parent's own cancel first: a trial sees it as soon as its parent does (it reads
                        # the parent's row), and the job the user cancelled must end cancelled, not failed (nor,
                        # near an AutoML deadline, with its trials taken for time-budget stops)
                        if not checked:  # once per look (at an AutoML deadline dozens stop together)
                            self.ctx.check_cancelled()
                            checked = True
                        if status == "cancelled" and deadline is not None and time.time() > deadline - 0.5:
                            pending.discard(jid)  # stopped by the time budget
                            continue
                        msg = (error or {}).get("message") or status
                        raise TrialFailed(f"trial {pos[jid]} ({specs[pos[jid]].get('algorithm', '')}) {status}: "
                                          f"{msg}")
                    elif status == "queued":
                        queued.append(jid)
                if not pending:
                    break
                if queued:  # nobody else has taken it: run it here (the claim makes sure it runs once)
                    from .jobs import CURRENT_SETTINGS, execute_job

                    # the other workers take children first-in first-out: the parent takes them from the back,
                    # so that it does not race them for the same child (under a deadline: cheapest first)
                    pick = min if deadline is not None else max
                    execute_job(self.meta, self.art, pick(queued, key=pos.get), CURRENT_SETTINGS[0])
                else:
                    time.sleep(self.poll)
        except BaseException:
            self.cancel(ids)
            raise
        if pending:
            self.cancel(list(pending))
        ctx.step(done, len(ids))
        return results

    def run_folds(self, specs: list[dict], n_folds: int, **kw) -> list[dict | None]:
        """One child per (spec, fold), so the work balances over the workers as finely as scikit-learn's
        per-fit dispatch; the folds' results are merged back into one result per spec (None when a fold did
        not run before the deadline)."""
        flat = [{**spec, "fold_ids": [f]} for spec in specs for f in range(n_folds)]
        res = self.run(flat, **kw)
        out: list[dict | None] = []
        for i in range(len(specs)):
            parts = res[i * n_folds:(i + 1) * n_folds]
            out.append(None if any(r is None for r in parts) else _merge(parts))
        return out

    def cancel(self, ids: list[str]) -> None:
        """Cancel children in one transaction (as ``jobs.cancel`` does one by one: queued ones at once, running
        ones asked to stop); a trial has no model to fail. One write, not one per child: at an AutoML deadline
        dozens are pending, and the workers are writing too."""
        if not ids:
            return
        now = utcnow()
        with self.meta.engine.begin() as conn:
            conn.execute(update(jobs).where(jobs.c.id.in_(ids), jobs.c.status == "queued")
                         .values(status="cancelled", cancel_requested=True, finished_at=now, updated_at=now,
                                 message="cancelled before it started"))
            conn.execute(update(jobs).where(jobs.c.id.in_(ids), jobs.c.status == "running")
                         .values(cancel_requested=True, updated_at=now, message="cancellation requested"))


def _merge(parts: list[dict]) -> dict:
    """The results of one candidate's folds (in fold order) as one result."""
    out: dict[str, Any] = {"index": parts[0].get("index"), "per_fold": {}, "fit_time": [], "n_train": [],
                           "n_test": [], "started": min(r["started"] for r in parts),
                           "finished": max(r["finished"] for r in parts),
                           "runs": [{"worker": r["worker"], "started": r["started"], "finished": r["finished"]}
                                    for r in parts]}
    out["worker"] = parts[0]["worker"]
    out["workers"] = sorted({r["worker"] for r in parts})
    out["runs"] = [{**run, "timings": r.get("timings")} for run, r in zip(out["runs"], parts, strict=True)]
    errors = [r["error"] for r in parts if r.get("error")]
    if errors:
        out["error"] = errors[0]
        return out
    for key in ("per_fold", "train_per_fold"):
        if key in parts[0]:
            out[key] = {m: [v for r in parts for v in r[key][m]] for m in parts[0][key]}
    for key in ("fit_time", "n_train", "n_test", "train_sampled_rows"):
        if key in parts[0]:
            out[key] = [v for r in parts for v in r[key]]
    return out


def _refit(meta, art, job: dict, cls, params: dict, ctx, cv_summary: dict) -> tuple[str, dict]:
    """Fit the chosen configuration on every row as an ordinary model (provenance: the model's ``job_id`` is the
    selection job; ``metrics.selection`` repeats it with the CV score). The model is recorded ``training`` and
    its bundle staged: the job lifecycle publishes both when the job succeeds. Returns (model id, the staged
    bundle and model columns for the job's ``Outcome``)."""
    from .training import fit_bundle, training_sample, training_sample_note

    p = job["payload"]
    data = _task_data(art, p)
    model_id = p["model_id"]
    bundle, X = fit_bundle(cls, params, data.features, data.target, data.columns, data.y, data.rows, ctx,
                            model_id)
    notes = []
    pick = training_sample(cls, data.rows, p["seed"])  # a lazy learner: the bounded sample of a training job
    if pick is None:
        training = evaluate_matrix(bundle, X, data.y[data.rows], include_curves=False)["metrics"]
    else:
        training = evaluate_matrix(bundle, X[pick], data.y[data.rows[pick]], include_curves=False)["metrics"]
        training["sampled_rows"] = int(len(pick))
        notes.append(training_sample_note(cls, len(pick), len(data.rows)))
    metrics = {"training": training,
               "validation": {**cv_summary, "folds": p["folds"]},
               "selection": {"job_id": job["id"], "kind": job["kind"], "metric": p["metric"], **cv_summary}}
    ctx.check_cancelled()
    staged, size = art.stage_bundle(model_id, bundle)
    if meta.get_model(model_id) is None:  # a retried attempt finds the row of the attempt before it
        meta.insert_model({"id": model_id, "name": p.get("name") or model_id, "algorithm": cls.name,
                           "task": cls.task, "params": _plain(params), "status": "training", "job_id": job["id"],
                           "dataset_id": p["dataset_id"], "features": bundle.features, "target": data.target,
                           "classes": None, "metrics": {}, "size_bytes": 0, "created_at": utcnow(),
                           "project": job.get("project") or "default"})
    from .explain import model_insight

    return model_id, {"staged": staged, "model": {
        "params": _plain(params), "algorithm": cls.name, "task": cls.task, "features": bundle.features,
        "classes": bundle.classes, "metrics": _clean(metrics), "size_bytes": size, "insight": model_insight(bundle),
        **({"notes": notes} if notes else {})}}


def _plain(params: dict) -> dict:
    from .training import jsonable_params

    return jsonable_params(params)


def _clean(obj):
    """JSON-ready: non-finite floats -> None, NumPy scalars -> Python."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _scores(result: dict | None, metric: str) -> list | None:
    if result is None or result.get("error"):
        return None
    return result["per_fold"][metric]


def _rank(items: list[dict], greater: bool) -> list[dict]:
    """Sort by mean (direction-aware; missing last; ties keep order) and number the ranks from 1."""
    def key(it):
        m = it.get("mean")
        return (0, -m if greater else m) if m is not None else (1, 0)

    ranked = sorted(items, key=key)
    for r, it in enumerate(ranked, start=1):
        it["rank"] = r
    return ranked


def _trial_record(res: dict, metric: str, **extra) -> dict:
    per = _scores(res, metric) or []
    s = summary(per) if res and not res.get("error") and None not in per else {"mean": None, "std": None}
    rec = {**extra, "mean": s["mean"], "std": s["std"], "per_fold": per,
           "fit_time": float(np.mean(res["fit_time"])) if res and res.get("fit_time") else None,
           "worker": res.get("worker") if res else None, "workers": res.get("workers") if res else None,
           "runs": res.get("runs") if res else None,
           "started": res.get("started") if res else None, "finished": res.get("finished") if res else None}
    if res and res.get("error"):
        rec["error"] = res["error"]
    return rec


def _ratio(res_list: list[dict]) -> float:
    for r in res_list:
        if r and r.get("n_train"):
            return float(np.mean(np.asarray(r["n_test"]) / np.asarray(r["n_train"])))
    return 0.25


# -- cross-validate -------------------------------------------------------------------------------
def run_cross_validate(meta, art, job, ctx) -> dict:
    p = job["payload"]
    specs = [{"algorithm": p["algorithm"], "params": p["params"], "metrics": p["metrics"], "fold_ids": [i]}
             for i in range(p["folds"])]
    fo = Fanout(meta, art, job, ctx)
    res = fo.run(specs)
    err = next((r["error"] for r in res if r.get("error")), None)
    if err:
        raise DataError(f"the fit failed on a fold: {err}")
    out = {"folds": p["folds"], "metrics": {}, "seed": p["seed"],
           "greater_is_better": {m: get_scorer(m).greater_is_better for m in p["metrics"]}}
    for m in p["metrics"]:
        per = [r["per_fold"][m][0] for r in res]
        out["metrics"][m] = {"per_fold": per, **summary(per)}
    ft = [r["fit_time"][0] for r in res]
    out["fit_time"] = {"per_fold": ft, "mean": float(np.mean(ft))}
    out["n_train"] = [r["n_train"][0] for r in res]
    out["n_test"] = [r["n_test"][0] for r in res]
    out["workers"] = sorted({r["worker"] for r in res})
    return _clean(out)


# -- compare --------------------------------------------------------------------------------------
def run_compare(meta, art, job, ctx) -> dict:
    p = job["payload"]
    metric = p["metric"]
    specs = [{**c, "metrics": [metric], "repeats": p["repeats"]} for c in p["candidates"]]
    res = Fanout(meta, art, job, ctx).run_folds(specs, p["folds"] * p["repeats"])
    for i, r in enumerate(res):
        if r.get("error") or None in r["per_fold"][metric]:
            raise DataError(f"candidate {i} ({p['candidates'][i]['algorithm']}) could not be scored: "
                            f"{r.get('error') or 'a non-finite score'}")
    scores = [r["per_fold"][metric] for r in res]
    greater = get_scorer(metric).greater_is_better
    ratio = _ratio(res)
    return _clean({
        "metric": metric, "greater_is_better": greater, "folds": p["folds"], "repeats": p["repeats"],
        "seed": p["seed"], "alpha": p["alpha"], "candidates": p["candidates"], "scores": scores,
        "means": [float(np.mean(s)) for s in scores], "stds": [summary(s)["std"] for s in scores],
        "test_train_ratio": ratio, "pairs": compare_pairs(scores, ratio, p["alpha"], greater),
    })


# -- tune -----------------------------------------------------------------------------------------
def halving_schedule(n_candidates: int, n_samples: int, n_splits: int, n_classes: int, factor: int,
                     task: str) -> list[tuple[int, int]]:
    """[(n_candidates, n_resources) per iteration] as ``HalvingGridSearchCV(resource="n_samples",
    min_resources="exhaust", aggressive_elimination=False)`` computes them."""
    smallest = 2 * n_splits * (n_classes if task == "classification" else 1)
    n_required = 1 + math.floor(math.log(n_candidates, factor)) if n_candidates > 1 else 1
    min_res = max(smallest, n_samples // factor ** (n_required - 1))
    n_possible = 1 + math.floor(math.log(n_samples // min_res, factor)) if n_samples >= min_res else 1
    n_iter = min(n_possible, n_required)
    out, n_c = [], n_candidates
    for it in range(n_iter):
        out.append((n_c, min(n_samples, min_res * factor ** it)))
        n_c = math.ceil(n_c / factor)
    return out


def run_tune(meta, art, job, ctx) -> dict:
    p = job["payload"]
    metric = p["metric"]
    greater = get_scorer(metric).greater_is_better
    cls = registry.get(p["algorithm"])
    cands = p["candidates"]
    fo = Fanout(meta, art, job, ctx)
    refit_share = 0.1 if p["refit"] else 0.0
    trials: list[dict] = []
    iterations = None
    if p["search"] == "halving":
        data = _task_data(art, p)
        n_classes = len(np.unique(data.y[data.rows])) if p["task"] == "classification" else 1
        sched = halving_schedule(len(cands), len(data.rows), p["folds"], n_classes, p["factor"], p["task"])
        alive = list(range(len(cands)))
        iterations = []
        for it, (_, n_res) in enumerate(sched):
            frac = n_res / len(data.rows)
            span = (1 - refit_share) / len(sched)
            res = fo.run_folds([{"algorithm": p["algorithm"], "params": cands[c], "metrics": [metric],
                                 "train_fraction": frac, "iteration": it} for c in alive], p["folds"],
                         lo=it * span, hi=(it + 1) * span)
            recs = [_trial_record(r, metric, index=c, params=cands[c], iteration=it, n_resources=n_res)
                    for c, r in zip(alive, res, strict=True)]
            trials += recs
            iterations.append({"iteration": it, "n_candidates": len(alive), "n_resources": n_res})
            if it + 1 < len(sched):
                keep = math.ceil(len(alive) / p["factor"])
                alive = [r["index"] for r in _rank([dict(r) for r in recs], greater)[:keep]]
        last = [t for t in trials if t["iteration"] == len(sched) - 1]
        ranked_last = _rank(last, greater)
        # earlier iterations rank after the last one's candidates (as sklearn's best is from the last iteration)
        earlier = _rank([t for t in trials if t["iteration"] < len(sched) - 1], greater)
        earlier.sort(key=lambda t: (-t["iteration"], t["rank"]))
        trials = ranked_last + earlier
        for r, t in enumerate(trials, start=1):
            t["rank"] = r
    else:
        res = fo.run_folds([{"algorithm": p["algorithm"], "params": c, "metrics": [metric]} for c in cands],
                           p["folds"], hi=1 - refit_share)
        trials = _rank([_trial_record(r, metric, index=i, params=cands[i]) for i, r in enumerate(res)], greater)
    best = trials[0]
    if best["mean"] is None:
        raise DataError("every candidate failed: " + "; ".join(t.get("error", "no score") for t in trials[:3]))
    out = {"metric": metric, "greater_is_better": greater, "search": p["search"], "folds": p["folds"],
           "seed": p["seed"], "n_candidates": len(cands), "trials": trials, "best_params": best["params"],
           "best_score": best["mean"], "best_std": best["std"], "model_id": None}
    if iterations is not None:
        out["iterations"] = iterations
    if p["refit"]:
        params = validate_params(cls.params, best["params"])
        out["model_id"], staged = _refit(meta, art, job, cls, params, ctx.child(1 - refit_share, 1.0),
                                         {"metric": metric, "mean": best["mean"], "std": best["std"],
                                          "search": p["search"]})
        return Outcome(_clean(out), **staged)
    return _clean(out)


# -- learning curve -------------------------------------------------------------------------------
def run_learning_curve(meta, art, job, ctx) -> dict:
    p = job["payload"]
    metric = p["metric"]
    sizes = p["train_sizes"]
    res = Fanout(meta, art, job, ctx).run_folds([{"algorithm": p["algorithm"], "params": p["params"],
                                                  "metrics": [metric], "train_size": int(m), "train_scores": True}
                                                 for m in sizes], p["folds"])
    out = {"metric": metric, "greater_is_better": get_scorer(metric).greater_is_better, "train_sizes": sizes,
           "folds": p["folds"], "seed": p["seed"], "train": {"mean": [], "std": [], "per_fold": []},
           "test": {"mean": [], "std": [], "per_fold": []}, "errors": []}
    sampled = []  # per size: the largest sample of training rows a lazy learner's train scores used, or None
    for m, r in zip(sizes, res, strict=True):
        if r.get("error"):  # e.g. one class only in a tiny subset
            out["errors"].append({"train_size": m, "error": r["error"]})
            for side in ("train", "test"):
                out[side]["mean"].append(None)
                out[side]["std"].append(None)
                out[side]["per_fold"].append([])
            sampled.append(None)
            continue
        rows = [v for v in r.get("train_sampled_rows") or [] if v is not None]
        sampled.append(max(rows) if rows else None)
        for side, key in (("train", "train_per_fold"), ("test", "per_fold")):
            per = r[key][metric]
            s = summary(per)
            out[side]["mean"].append(s["mean"])
            out[side]["std"].append(s["std"])
            out[side]["per_fold"].append(per)
    if not out["errors"]:
        del out["errors"]
    if any(v is not None for v in sampled):
        from .training import training_sample_note

        cls = registry.get(p["algorithm"])
        first = next(i for i, v in enumerate(sampled) if v is not None)
        out["train"]["sampled_rows"] = sampled
        note = training_sample_note(cls, sampled[first], int(sizes[first]), "the train score")
        out["notes"] = [*(p.get("notes") or []),
                        note + "; train.sampled_rows gives the sample size per train size (null: every row)"]
    return _clean(out)


# -- feature selection ----------------------------------------------------------------------------
def run_feature_selection(meta, art, job, ctx) -> dict:
    """Greedy forward/backward selection ([da Silva Neto §1.6.4]) by the k-fold mean; every subset on the same folds;
    "auto" (no n_features) stops when the best move does not improve the score by more than ``tol``."""
    p = job["payload"]
    metric = p["metric"]
    greater = get_scorer(metric).greater_is_better
    sign = 1.0 if greater else -1.0
    names = list(p["features"])
    M = len(names)
    target = p.get("n_features")
    forward = p["direction"] == "forward"
    fo = Fanout(meta, art, job, ctx)
    total = M * (M + 1) // 2 + 1

    def score_sets(sets: list[list[str]], done: int) -> list[float | None]:
        res = fo.run_folds([{"algorithm": p["algorithm"], "params": p["params"], "metrics": [metric],
                             "use_features": s} for s in sets], p["folds"], lo=done / total,
                           hi=(done + len(sets)) / total)
        return [summary(_scores(r, metric) or [])["mean"] if r and not r.get("error") else None for r in res]

    current = [] if forward else list(names)
    steps: list[dict] = []
    done = 0
    if forward:
        cur_score = -math.inf
    else:
        s0 = score_sets([current], 0)[0]
        done += 1
        cur_score = sign * s0 if s0 is not None else -math.inf
        steps.append({"features": list(current), "score": s0, "action": None})
    while True:
        if forward and (len(current) == M or (target is not None and len(current) >= target)):
            break
        if not forward and (len(current) == 1 or (target is not None and len(current) <= target)):
            break
        pool = [f for f in names if f not in current] if forward else list(current)
        sets = [current + [f] if forward else [c for c in current if c != f] for f in pool]
        scores = score_sets(sets, done)
        done += len(sets)
        best_i = min(range(len(pool)), key=lambda i: (-(sign * scores[i]) if scores[i] is not None else math.inf, i))
        best = sign * scores[best_i] if scores[best_i] is not None else -math.inf
        if target is None and (best <= cur_score + p["tol"] if forward else best < cur_score - p["tol"]):
            break
        f = pool[best_i]
        current = current + [f] if forward else [c for c in current if c != f]
        cur_score = best
        steps.append({"features": list(current), "score": scores[best_i], "action": "add" if forward else "remove",
                      "feature": f, "candidates": {pool[i]: scores[i] for i in range(len(pool))}})
    return _clean({"metric": metric, "greater_is_better": greater, "direction": p["direction"], "folds": p["folds"],
                   "seed": p["seed"], "steps": steps, "selected": current,
                   "score": (sign * cur_score) if math.isfinite(cur_score) else None})


# -- automl ---------------------------------------------------------------------------------------
def run_automl(meta, art, job, ctx) -> dict:
    p = job["payload"]
    metric = p["metric"]
    greater = get_scorer(metric).greater_is_better
    started = time.time()
    budget = float(p["time_budget_s"])
    # the budget covers the whole job: trials stop at 85% of it (at their next fit step), the refit takes the
    # rest; what the job cannot steer (a trial's last step, saving the model) is the 10% beyond it
    deadline = started + 0.85 * budget
    cands = p["candidates"]
    fo = Fanout(meta, art, job, ctx)
    res = fo.run_folds([{**c, "metrics": [metric]} for c in cands], p["folds"], hi=0.9, deadline=deadline)
    trials_end = time.time()
    per_algo: dict[str, dict] = {}
    not_run = []
    for c, r in zip(cands, res, strict=True):
        if r is None:
            not_run.append(c["algorithm"])
            continue
        rec = _trial_record(r, metric, algorithm=c["algorithm"], params=c["params"])
        if rec["mean"] is None:
            continue
        cur = per_algo.get(c["algorithm"])
        if cur is None or (rec["mean"] > cur["mean"] if greater else rec["mean"] < cur["mean"]):
            per_algo[c["algorithm"]] = rec
    failed = sorted({c["algorithm"] for c, r in zip(cands, res, strict=True) if r and r.get("error")}
                    - set(per_algo))
    if not per_algo:
        raise DataError("no algorithm finished within the time budget" if not failed else
                        f"every algorithm failed ({', '.join(failed)})")
    board = _rank(list(per_algo.values()), greater)
    best = board[0]
    ratio = _ratio([r for r in res if r])
    for row in board:
        row["p_value_vs_best"] = (None if row is best else
                                  corrected_ttest(row["per_fold"], best["per_fold"], ratio,
                                                  greater_is_better=greater)["p_value"])
    search_end = time.time()
    chosen, estimate = refit_choice(board, p["folds"], started + budget - search_end)
    cls = registry.get(chosen["algorithm"])
    model_id, staged = _refit(meta, art, job, cls, validate_params(cls.params, chosen["params"]),
                               ctx.child(0.9, 1.0),
                               {"metric": metric, "mean": chosen["mean"], "std": chosen["std"],
                                "algorithm": cls.name})
    end = time.time()
    return Outcome(_clean({
        "metric": metric, "greater_is_better": greater, "folds": p["folds"], "seed": p["seed"],
        "time_budget_s": budget, "elapsed_s": end - started, "search_s": search_end - started,
        "trials_s": trials_end - started,
        "refit_s": end - search_end,
        "leaderboard": [{k: r.get(k) for k in ("rank", "algorithm", "params", "mean", "std", "p_value_vs_best",
                                               "per_fold", "fit_time")} for r in board],
        "refitted": {"rank": chosen["rank"], "algorithm": chosen["algorithm"], "estimated_s": estimate,
                     "within_budget": estimate <= started + budget - search_end},
        "skipped": p.get("skipped", []), "failed": failed, "not_evaluated": sorted(set(not_run) - set(per_algo)),
        "n_trials": sum(r is not None for r in res), "best_model_id": model_id,
    }), **staged)


def refit_choice(board: list[dict], folds: int, left: float) -> tuple[dict, float]:
    """The leaderboard row to refit: the best-ranked whose estimated refit fits in ``left`` seconds (its mean
    fold fit time x k / (k - 1), a fold's training rows being (k - 1) / k of all rows), else the best one."""
    scale = folds / (folds - 1)
    for row in board:
        est = (row.get("fit_time") or 0.0) * scale
        if est <= left:
            return row, est
    return board[0], (board[0].get("fit_time") or 0.0) * scale


_ = core  # the registry is filled by importing core
