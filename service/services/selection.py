"""Model selection over REST: synchronous validation (422 before anything is queued) and the pieces every
selection job shares (the task's data, the folds, one fold's fit and scores, the paired t-tests).

The jobs themselves (parents and their ``trial`` children) are in ``selection_jobs``. The table preprocessing
(imputation, scaling, one-hot, label handling) is part of every fold's fit: ``fit_score`` fits it on the
training rows of the fold only (``training.fit_bundle``), never on rows of the test fold.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from core import registry
from core.model_selection import check_cv, get_scorer, paired_ttest
from core.model_selection.search import check_range, range_grid, sample_space
from core.params import ParamError, validate_params

from ..errors import invalid
from ..storage.metadata import MetadataStore, utcnow
from . import datasets as ds
from .training import (
    SUPERVISED,
    check_target_column,
    default_features,
    distinct_numbers,
    jsonable_params,
    resolve_algorithm,
    select_columns,
    target_values,
    validate_algorithm_params,
)

MAX_CANDIDATES = 10_000
DEFAULT_TRAIN_SIZES = [0.1, 0.325, 0.55, 0.775, 1.0]


# ------------------------------------------------------------------------------------------------
# data, folds, one fold
# ------------------------------------------------------------------------------------------------
@dataclass
class TaskData:
    dataset_id: str
    target: str
    task: str
    features: list[dict]            # [{"name", "type"}]
    columns: dict[str, np.ndarray]  # model input per feature (all rows)
    y: np.ndarray                   # all rows (labels keep their type)
    rows: np.ndarray                # rows whose target is present


_CACHE: dict[tuple, TaskData] = {}


def load_task_data(art, dataset_id: str, features: list[str], target: str, task: str) -> TaskData:
    """The dataset's feature columns and target (cached per process: datasets never change)."""
    key = (dataset_id, tuple(features), target, task)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    cols = {c.name: c for c in ds.load_columns(art, dataset_id, [*features, target], mmap=False)}
    y, present = target_values(cols[target], task)
    data = TaskData(dataset_id, target, task, [{"name": n, "type": cols[n].type} for n in features],
                    {n: cols[n].as_model_input() for n in features}, y, np.flatnonzero(present))
    _CACHE.clear()  # one dataset at a time per process: a tune's trials share it
    _CACHE[key] = data
    return data


def make_folds(y_rows: np.ndarray, task: str, k: int, stratify: bool, seed: int, repeats: int = 1
               ) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) positions into the rows with a target: ``core.model_selection.check_cv`` with ``seed``
    (repeat r > 0 uses ``seed + r``), shuffled, stratified for classifiers when ``stratify``."""
    out = []
    X = np.empty((len(y_rows), 0))
    for r in range(repeats):
        out += check_cv(k, X, y_rows, classifier=task == "classification", stratify=stratify, shuffle=True,
                        random_state=(seed + r) % 2**32)
    return out


def subsample(idx: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """A random ``fraction`` of ``idx`` without replacement, in order (halving search, learning curves)."""
    if fraction >= 1.0:
        return idx
    m = max(1, int(fraction * len(idx)))
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(idx, size=m, replace=False))


def fit_score(data: TaskData, cls, params: dict, features: list[str], train: np.ndarray, test: np.ndarray,
              metrics: list[str], ctx, *, train_scores: bool = False, sample_seed: int = 0) -> dict:
    """Fit preprocessing + estimator on the ``train`` rows only, score on ``test``. Returns
    ``{"test": {metric: v}, "train"?: {...}, "train_sampled_rows"?, "fit_time", "n_train", "n_test",
    "timings"}``. The train scores of a lazy learner use the bounded sample of the training rows that a training
    job's metrics.training uses (``training.training_sample``, drawn with ``sample_seed``); ``train_sampled_rows``
    is its size then."""
    from .training import fit_bundle, training_sample

    feats = [f for f in data.features if f["name"] in set(features)]
    cols = {f["name"]: data.columns[f["name"]] for f in feats}
    t0 = time.perf_counter()
    timings: dict = {}
    fold = _fold_matrices(data, cls, feats, cols, train, test)
    cached = fold[4]  # a kept matrix is copied: an estimator may scale its input in place
    bundle, Xtr = fit_bundle(cls, params, feats, data.target, cols, data.y, train, ctx, "selection",
                              timings=timings, prepared=(fold[0], fold[1].copy() if cached else fold[1]))
    timings["preprocess"] += fold[3]
    t1 = time.perf_counter()
    Xte = fold[2].copy() if cached else fold[2]
    scorers = [get_scorer(m) for m in metrics]
    out = {"test": {s.name: _finite(s(bundle.estimator, Xte, data.y[test])) for s in scorers},
           "fit_time": t1 - t0, "n_train": int(len(train)), "n_test": int(len(test))}
    if train_scores:
        ytr = data.y[train]
        pick = training_sample(cls, train, sample_seed)
        if pick is not None:
            Xtr, ytr = Xtr[pick], ytr[pick]
            out["train_sampled_rows"] = int(len(pick))
        out["train"] = {s.name: _finite(s(bundle.estimator, Xtr, ytr)) for s in scorers}
    out["timings"] = {"preprocess": timings["preprocess"], "estimator": timings["estimator"],
                      "score": time.perf_counter() - t1}
    return out


_FOLDS: OrderedDict = OrderedDict()  # (data, preprocessing, fold rows) -> (preprocessor, X train, X test)
_FOLDS_MAX = 12
_FOLD_MAX_BYTES = 64 << 20  # larger folds are not kept (a worker's memory cap counts every copy)
_FOLDS_LOCK = threading.Lock()
_FOLDS_MAX_BYTES = 256 << 20


def _fold_matrices(data: TaskData, cls, feats: list[dict], cols: dict, train: np.ndarray, test: np.ndarray):
    """The table preprocessing of one fold fitted on its training rows, and both matrices: kept per process
    for the other candidates of the same fold (the preprocessing depends on the algorithm only through
    ``make_preprocessor``); folds over ``_FOLD_MAX_BYTES`` are not kept. Returns (preprocessor, X train,
    X test, seconds spent here, whether the matrices are kept)."""
    from .training import make_preprocessor

    t0 = time.perf_counter()
    pre = make_preprocessor(cls, None)
    key = (data.dataset_id, data.target, data.task, tuple(f["name"] for f in feats), pre.scale, pre.scale_method,
           pre.impute, pre.native_missing, pre.native_categorical, len(train), hash(train.tobytes()), len(test),
           hash(test.tobytes()))
    with _FOLDS_LOCK:
        hit = _FOLDS.get(key)
        if hit is not None:
            _FOLDS.move_to_end(key)
    if hit is not None and np.array_equal(hit[3], train) and np.array_equal(hit[4], test):
        return hit[0], hit[1], hit[2], time.perf_counter() - t0, True
    types = {f["name"]: f["type"] for f in feats}
    sub = {k: v[train] for k, v in cols.items()}
    pre.fit(sub, types)
    Xtr = pre.transform(sub)
    Xte = pre.transform({k: v[test] for k, v in cols.items()})
    if Xtr.nbytes + Xte.nbytes > _FOLD_MAX_BYTES:
        return pre, Xtr, Xte, time.perf_counter() - t0, False
    with _FOLDS_LOCK:  # threads of the embedded queue without worker processes share it
        _FOLDS[key] = (pre, Xtr, Xte, train.copy(), test.copy())
        while len(_FOLDS) > _FOLDS_MAX or (len(_FOLDS) > 1 and sum(
                v[1].nbytes + v[2].nbytes for v in _FOLDS.values()) > _FOLDS_MAX_BYTES):
            _FOLDS.popitem(last=False)
    return pre, Xtr, Xte, time.perf_counter() - t0, True


def _finite(v) -> float | None:
    v = float(v)
    return v if math.isfinite(v) else None


# ------------------------------------------------------------------------------------------------
# statistics
# ------------------------------------------------------------------------------------------------
def corrected_ttest(a, b, test_train_ratio: float, *, alpha: float = 0.05, greater_is_better: bool = True
                    ) -> dict:
    """Corrected resampled t-test (Nadeau & Bengio 2003): ``t = mean(d) / sqrt((1/J + n_test/n_train) s^2)``,
    ``s^2`` the sample variance (ddof = 1) of the J paired differences, J - 1 degrees of freedom. The plain
    paired t-test's ``1/J`` ignores that training sets overlap between folds, which inflates its t."""
    from scipy import stats

    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    J = d.size
    mean = float(d.mean())
    s2 = float(d.var(ddof=1))
    if s2 > 0 and np.ptp(d) > 1e-12 * max(float(np.abs(d).max()), 1e-300):
        t = mean / math.sqrt((1.0 / J + test_train_ratio) * s2)
        p = float(2.0 * stats.t.sf(abs(t), J - 1))
    elif mean == 0:
        t, p = 0.0, 1.0
    else:
        t, p = math.copysign(math.inf, mean), 0.0
    return {"t_statistic": t, "p_value": p, "verdict": _verdict(p, mean, alpha, greater_is_better)}


def _verdict(p: float, mean: float, alpha: float, greater_is_better: bool) -> str:
    if not p < alpha or mean == 0:
        return "no_significant_difference"
    return "a_better" if (mean > 0) == greater_is_better else "b_better"


def compare_pairs(scores: list[list[float]], ratio: float, alpha: float, greater_is_better: bool) -> list[dict]:
    """Every pair (a < b): the paired t-test (= ``scipy.stats.ttest_rel``) and the corrected one, whose verdict
    is reported."""
    out = []
    for a in range(len(scores)):
        for b in range(a + 1, len(scores)):
            plain = paired_ttest(scores[a], scores[b], alpha, greater_is_better=greater_is_better)
            corr = corrected_ttest(scores[a], scores[b], ratio, alpha=alpha, greater_is_better=greater_is_better)
            out.append({"a": a, "b": b, "mean_difference": plain["mean_difference"],
                        "t_statistic": _num(plain["statistic"]), "df": plain["df"], "p_value": plain["p_value"],
                        "t_statistic_corrected": _num(corr["t_statistic"]), "p_value_corrected": corr["p_value"],
                        "verdict": corr["verdict"]})
    return out


def _num(v: float):
    """JSON has no infinity: +-inf (identical differences) as the strings "inf" / "-inf"."""
    return v if math.isfinite(v) else ("inf" if v > 0 else "-inf")


def summary(values: list) -> dict:
    v = np.asarray([x for x in values if x is not None], dtype=float)
    if not v.size:
        return {"mean": None, "std": None}
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else 0.0}


# ------------------------------------------------------------------------------------------------
# submit-side validation
# ------------------------------------------------------------------------------------------------
def _supervised(cls, loc) -> None:
    if cls.task not in SUPERVISED:
        raise invalid(list(loc), f"{cls.name!r} is a {cls.task} algorithm; model selection needs a "
                                 "classification or regression algorithm")


def check_metrics(names: list[str] | None, task: str, loc, *, proba_ok: bool = True) -> list[str]:
    if names is None:
        return ["accuracy" if task == "classification" else "r2"]
    if not names:
        raise invalid(list(loc), "give at least one metric name")
    out = []
    for n in names:
        try:
            s = get_scorer(n)
        except ParamError:
            from core.model_selection import SCORERS

            raise invalid(list(loc), f"unknown metric {n!r}; valid: {', '.join(sorted(SCORERS))}") from None
        if s.task != task:
            raise invalid(list(loc), f"{n!r} is a {s.task} metric but the algorithm does {task}")
        if s.needs == "proba" and not proba_ok:
            raise invalid(list(loc), f"{n!r} needs predicted probabilities, which this algorithm does not give")
        if s.name not in out:
            out.append(s.name)
    return out


def _has_proba(cls) -> bool:
    return callable(getattr(cls, "predict_proba", None))


def resolve_data(meta: MetadataStore, art, req: dict, task: str, max_numeric_classes: int = 50) -> dict:
    """Dataset, target, features and the folds check: folds <= rows of the smallest class (classifiers) or
    <= rows (regressors). The target and the default features follow the rules of training (a continuous target
    for a classifier, text for a regressor: 422; identifier-like columns left out, with a note). Returns the
    payload part ``{dataset_id, target, features, folds, stratify, seed, notes}``."""
    record = ds.get_record(meta, req["dataset_id"])
    features, target_col = select_columns(record["columns"], req.get("target"), req.get("features"), task)
    notes: list[str] = []
    if req.get("features") is None:
        features, notes = default_features(features, record["n_rows"])
    distinct = None
    if task == "classification" and target_col["type"] == "numeric":
        distinct = len(distinct_numbers(art, record, None, target_col["name"]))
    check_target_column(target_col, task, record["n_rows"], distinct, max_numeric_classes)
    col = ds.load_columns(art, record["id"], [target_col["name"]], mmap=True)[0]
    y, present = target_values(col, task)
    k = int(req.get("folds", 5))
    if task == "classification":
        _, counts = np.unique(y[present], return_counts=True)
        if k > counts.min():
            raise invalid(["body", "folds"], f"folds={k} exceeds the {int(counts.min())} rows of the smallest class "
                                             f"of {target_col['name']!r}; use at most {int(counts.min())} folds")
    elif k > int(present.sum()):
        raise invalid(["body", "folds"], f"folds={k} exceeds the {int(present.sum())} rows with a target")
    seed = req.get("random_state")
    if seed is None:
        seed = int(np.random.default_rng().integers(0, 2**31 - 1))
    return {"dataset_id": record["id"], "target": target_col["name"], "features": [f["name"] for f in features],
            "feature_types": {f["name"]: f["type"] for f in features}, "n_rows": int(present.sum()),
            "folds": k, "stratify": bool(req.get("stratify", True)), "seed": int(seed), "notes": notes}


def _algo(req_algorithm: str, params: dict | None, loc=("body",)) -> tuple[Any, dict]:
    try:
        cls = resolve_algorithm(req_algorithm)
    except Exception as exc:  # re-raise with the candidate's location
        if loc != ("body",):
            raise invalid([*loc, "algorithm"], exc.detail) from None
        raise
    _supervised(cls, [*loc, "algorithm"])
    return cls, validate_algorithm_params(cls, params, loc=(*loc, "params"))


def new_job(meta: MetadataStore, kind: str, payload: dict, enqueue, model_id: str | None = None) -> dict:
    job_id = ds.new_id("job")
    now = utcnow()
    meta.insert_job({"id": job_id, "kind": kind, "status": "queued", "progress": 0.0, "message": "queued",
                     "payload": payload, "model_id": model_id, "cancel_requested": False, "created_at": now,
                     "updated_at": now})
    enqueue(job_id)
    return meta.get_job(job_id)


def submit_cross_validate(meta, art, req: dict, enqueue, max_numeric_classes: int = 50) -> dict:
    cls, params = _algo(req["algorithm"], req.get("params"))
    metrics = check_metrics(req.get("metrics"), cls.task, ["body", "metrics"], proba_ok=_has_proba(cls))
    data = resolve_data(meta, art, req, cls.task, max_numeric_classes)
    payload = {**data, "task": cls.task, "algorithm": cls.name, "params": jsonable_params(params),
               "metrics": metrics}
    return new_job(meta, "cross-validate", payload, enqueue)


def submit_compare(meta, art, req: dict, enqueue, max_numeric_classes: int = 50) -> dict:
    cands = req.get("candidates") or []
    if len(cands) < 2:
        raise invalid(["body", "candidates"], "compare needs at least two candidates")
    checked = []
    for i, c in enumerate(cands):
        cls, params = _algo(c["algorithm"], c.get("params"), loc=("body", "candidates", i))
        checked.append((cls, params))
    tasks = {cls.task for cls, _ in checked}
    if len(tasks) > 1:
        raise invalid(["body", "candidates"], f"the candidates mix tasks ({', '.join(sorted(tasks))}); compare "
                                              "algorithms of one task")
    task = tasks.pop()
    proba = all(_has_proba(cls) for cls, _ in checked)
    metric = check_metrics([req["metric"]] if req.get("metric") else None, task, ["body", "metric"],
                           proba_ok=proba)[0]
    data = resolve_data(meta, art, req, task, max_numeric_classes)
    payload = {**data, "task": task, "repeats": int(req.get("repeats", 1)), "metric": metric,
               "alpha": float(req.get("alpha", 0.05)),
               "candidates": [{"algorithm": cls.name, "params": jsonable_params(p)} for cls, p in checked]}
    return new_job(meta, "compare", payload, enqueue)


def expand_space(cls, space: dict, base: dict, search: str, n_iter: int | None, seed: int) -> list[dict]:
    """The candidates of a search, each validated against the param schema (422 naming the param)."""
    if not isinstance(space, dict) or not space:
        raise invalid(["body", "space"], "the search space is empty; give {param: [values] | {low, high}}")
    checked: dict[str, Any] = {}
    for name, dom in space.items():
        loc = ["body", "space", name]
        if name not in cls.params:
            raise invalid(loc, f"{name!r} is not a parameter of {cls.name}; valid: {', '.join(sorted(cls.params))}")
        if name in base:
            raise invalid(loc, f"{name!r} is both fixed in params and searched in space")
        if isinstance(dom, dict):
            rng = {k: v for k, v in dom.items() if v is not None}
            try:
                r = check_range(name, rng)
            except ParamError as exc:
                raise invalid(loc, exc.reason) from None
            for end in (r["low"], r["high"]):  # both ends (and so the whole range) must be valid values
                _validate_value(cls, name, int(round(end)) if r["type"] == "int" else end, loc)
            checked[name] = r
        else:
            if not dom:
                raise invalid(loc, f"the list of values of {name!r} is empty")
            checked[name] = list(dom)
    lists_only = all(isinstance(v, list) for v in checked.values())
    grid_size = math.prod(len(v) if isinstance(v, list) else len(range_grid(v)) for v in checked.values())
    rng = np.random.default_rng(seed)
    if search in ("grid", "halving") or (search == "random" and lists_only):
        if grid_size > MAX_CANDIDATES:
            raise invalid(["body", "space"], f"the grid has {grid_size} points; at most {MAX_CANDIDATES}")
        from core.model_selection.search import expand_grid

        cands = expand_grid(checked)
        if search == "random" and n_iter is None:
            n_iter = min(10, grid_size)
        if n_iter is not None:
            if n_iter > grid_size:
                raise invalid(["body", "n_iter"], f"n_iter={n_iter} exceeds the {grid_size} points of the grid")
            if n_iter < grid_size:  # a random subset of the grid, without replacement (in grid order)
                keep = np.sort(rng.choice(grid_size, size=n_iter, replace=False))
                cands = [cands[i] for i in keep]
    else:
        cands = sample_space(checked, int(n_iter or 10), rng)
    out = []
    for c in cands:
        for k, v in c.items():
            _validate_value(cls, k, v, ["body", "space", k])
        try:
            out.append(jsonable_params(validate_params(cls.params, {**base, **c})))
        except ParamError as exc:
            raise invalid(["body", "space", exc.param.split("[")[0].split(".")[0]], exc.reason) from None
    return out


def _validate_value(cls, name, value, loc) -> None:
    try:
        cls.params[name].validate(value, name)
    except ParamError as exc:
        raise invalid(loc, f"{value!r} is outside the schema of {name!r}: {exc.reason}") from None


def submit_tune(meta, art, req: dict, enqueue, max_numeric_classes: int = 50) -> dict:
    cls, base = _algo(req["algorithm"], req.get("params"))
    metric = check_metrics([req["metric"]] if req.get("metric") else None, cls.task, ["body", "metric"],
                           proba_ok=_has_proba(cls))[0]
    space = {k: (v if isinstance(v, list) else dict(v)) for k, v in (req.get("space") or {}).items()}
    seed0 = req.get("random_state")
    search = req.get("search", "grid")
    cand_seed = int(np.random.default_rng().integers(0, 2**31 - 1)) if seed0 is None else int(seed0)
    fixed = {k: v for k, v in (req.get("params") or {}).items()}
    candidates = expand_space(cls, space, fixed, search, req.get("n_iter"), cand_seed)
    data = resolve_data(meta, art, req, cls.task, max_numeric_classes)
    model_id = ds.new_id("mdl") if req.get("refit", True) else None
    payload = {**data, "task": cls.task, "algorithm": cls.name, "search": search, "metric": metric,
               "candidates": candidates, "factor": int(req.get("factor", 3)), "refit": bool(req.get("refit", True)),
               "model_id": model_id, "name": req.get("name")}
    return new_job(meta, "tune", payload, enqueue, model_id=model_id)


def submit_learning_curve(meta, art, req: dict, enqueue, max_numeric_classes: int = 50) -> dict:
    cls, params = _algo(req["algorithm"], req.get("params"))
    metric = check_metrics([req["metric"]] if req.get("metric") else None, cls.task, ["body", "metric"],
                           proba_ok=_has_proba(cls))[0]
    data = resolve_data(meta, art, req, cls.task, max_numeric_classes)
    sizes = list(req.get("train_sizes") or DEFAULT_TRAIN_SIZES)
    k = data["folds"]
    max_train = data["n_rows"] - math.ceil(data["n_rows"] / k)
    if all(float(s) <= 1.0 for s in sizes):
        if any(float(s) <= 0 for s in sizes):
            raise invalid(["body", "train_sizes"], "fractions must be in (0, 1]")
        counts = [max(1, int(math.floor(float(s) * max_train))) for s in sizes]
    else:
        if any(float(s) != int(s) or not 1 <= int(s) <= max_train for s in sizes):
            raise invalid(["body", "train_sizes"], f"row counts must be whole numbers in [1, {max_train}] "
                                                   "(or give fractions in (0, 1])")
        counts = [int(s) for s in sizes]
    payload = {**data, "task": cls.task, "algorithm": cls.name, "params": jsonable_params(params),
               "metric": metric, "train_sizes": sorted(set(counts))}
    return new_job(meta, "learning-curve", payload, enqueue)


def submit_feature_selection(meta, art, req: dict, enqueue, max_numeric_classes: int = 50) -> dict:
    cls, params = _algo(req["algorithm"], req.get("params"))
    metric = check_metrics([req["metric"]] if req.get("metric") else None, cls.task, ["body", "metric"],
                           proba_ok=_has_proba(cls))[0]
    data = resolve_data(meta, art, req, cls.task, max_numeric_classes)
    M = len(data["features"])
    nf = req.get("n_features")
    if nf is not None and not 1 <= int(nf) <= M:
        raise invalid(["body", "n_features"], f"n_features must be in [1, {M}] (the number of features)")
    payload = {**data, "task": cls.task, "algorithm": cls.name, "params": jsonable_params(params),
               "metric": metric, "direction": req.get("direction", "forward"), "n_features": nf,
               "tol": float(req.get("tol", 0.0))}
    return new_job(meta, "feature-selection", payload, enqueue)


# AutoML: small grids per algorithm, cheapest first. Names or values the registry does not accept are dropped.
AUTOML_GRIDS: dict[str, list[tuple[str, dict]]] = {
    "classification": [
        ("gaussian_nb", {}),
        ("linear_discriminant_analysis", {}),
        ("logistic_regression", {"C": [0.1, 1.0, 10.0]}),
        ("multinomial_nb", {"alpha": [0.1, 1.0]}),
        ("knn_classifier", {"n_neighbors": [5, 15]}),
        ("decision_tree_classifier", {"max_depth": [4, 8]}),
        ("random_forest_classifier", {"n_estimators": [100]}),
        ("gradient_boosting_classifier", {"learning_rate": [0.1]}),
        ("svm_classifier", {"C": [1.0, 10.0]}),
        ("mlp_classifier", {}),
    ],
    "regression": [
        ("linear_regression", {}),
        ("ridge_regression", {"alpha": [0.1, 1.0, 10.0]}),
        ("lasso_regression", {"alpha": [0.01, 0.1, 1.0]}),
        ("knn_regressor", {"n_neighbors": [5, 15]}),
        ("decision_tree_regressor", {"max_depth": [4, 8]}),
        ("random_forest_regressor", {"n_estimators": [100]}),
        ("gradient_boosting_regressor", {"learning_rate": [0.1]}),
        ("kernel_ridge_regression", {"alpha": [0.1, 1.0]}),
        ("svm_regressor", {"C": [1.0, 10.0]}),
        ("gaussian_process_regressor", {}),
        ("mlp_regressor", {}),
    ],
}
# kernel methods build n x n matrices (SMO, Cholesky): past these row counts they are skipped
ROW_BUDGET = {"svm_classifier": 5_000, "svm_regressor": 5_000, "kernel_ridge_regression": 5_000,
              "gaussian_process_regressor": 2_000, "kernel_perceptron": 5_000, "locally_weighted_regression": 2_000}
NONNEGATIVE = {"multinomial_nb"}


def automl_skip_reason(name: str, n_rows: int, columns: list[dict]) -> str | None:
    if name in ROW_BUDGET and n_rows > ROW_BUDGET[name]:
        return f"{n_rows} rows exceed the kernel method's budget of {ROW_BUDGET[name]}"
    if name in NONNEGATIVE:
        neg = [c["name"] for c in columns if c["type"] == "numeric" and (c["summary"].get("min") or 0) < 0]
        if neg:
            return f"negative values in {', '.join(neg[:3])} (counts or frequencies needed)"
    return None


def automl_plan(task: str, algorithms: list[str] | None, n_rows: int, columns: list[dict]) -> tuple[list, list]:
    """(candidates [{"algorithm", "params"}], skipped [{"algorithm", "reason"}])."""
    grids = dict(AUTOML_GRIDS[task])
    names = algorithms if algorithms is not None else [n for n, _ in AUTOML_GRIDS[task]]
    cands, skipped = [], []
    for name in names:
        try:
            cls = registry.get(name)
        except registry.UnknownAlgorithm:
            continue  # only the built-in list can name a missing one; requests are checked before
        reason = automl_skip_reason(name, n_rows, columns)
        if reason:
            skipped.append({"algorithm": name, "reason": reason})
            continue
        grid = {k: v for k, v in grids.get(name, {}).items() if k in cls.params}
        from core.model_selection.search import expand_grid

        for point in expand_grid(grid) if grid else [{}]:
            try:
                cands.append({"algorithm": name, "params": jsonable_params(validate_params(cls.params, point))})
            except ParamError:
                continue
    return cands, skipped


def submit_automl(meta, art, req: dict, enqueue, max_numeric_classes: int = 50) -> dict:
    record = ds.get_record(meta, req["dataset_id"])
    by_name = {c["name"]: c for c in record["columns"]}
    task = req.get("task")
    algos = req.get("algorithms")
    if algos is not None:
        if not algos:
            raise invalid(["body", "algorithms"], "give at least one algorithm (or leave algorithms out)")
        tasks = set()
        for i, name in enumerate(algos):
            try:
                cls = registry.get(name)
            except registry.UnknownAlgorithm:
                raise invalid(["body", "algorithms", i], f"unknown algorithm {name!r}") from None
            _supervised(cls, ["body", "algorithms", i])
            tasks.add(cls.task)
        if len(tasks) > 1 or (task and task not in tasks):
            raise invalid(["body", "algorithms"], "the algorithms must all be of one task (and match task)")
        task = tasks.pop()
    if task is None:
        tcol = by_name.get(req.get("target"))
        task = "classification" if tcol is not None and tcol["type"] in ("categorical", "boolean") else "regression"
    metric = check_metrics([req["metric"]] if req.get("metric") else None, task, ["body", "metric"])[0]
    data = resolve_data(meta, art, req, task, max_numeric_classes)
    cols = [by_name[f] for f in data["features"]]
    cands, skipped = automl_plan(task, algos, data["n_rows"], cols)
    if get_scorer(metric).needs == "proba":
        kept = []
        for c in cands:
            if _has_proba(registry.get(c["algorithm"])):
                kept.append(c)
            elif not any(s["algorithm"] == c["algorithm"] for s in skipped):
                skipped.append({"algorithm": c["algorithm"], "reason": f"{metric} needs predicted probabilities"})
        cands = kept
    if not cands:
        raise invalid(["body", "algorithms"], "no algorithm suits this data: "
                      + "; ".join(f"{s['algorithm']}: {s['reason']}" for s in skipped))
    model_id = ds.new_id("mdl")
    payload = {**data, "task": task, "metric": metric, "candidates": cands, "skipped": skipped,
               "time_budget_s": float(req.get("time_budget_s", 300)), "model_id": model_id, "name": req.get("name")}
    return new_job(meta, "automl", payload, enqueue, model_id=model_id)
