"""Grid and random hyperparameter search with cross-validation ([Passerini §4]; [da Silva Neto §1.6]).

A search ``space`` maps hyperparameter names to either

* a list of values: ``{"max_depth": [2, 4, 8]}`` (grid: every value; random: uniform choice), or
* a range: ``{"C": {"low": 0.01, "high": 100, "log": true, "type": "float"}}``
  (random: uniform, or log-uniform when ``log``; ``type`` "int" draws integers in
  [low, high]; grid: ``n`` points, default 5, evenly spaced (geometrically when ``log``),
  rounded and de-duplicated for ints).

Every candidate is scored on the SAME folds; trials are ranked by the first
scoring name (greater-is-better aware; nan scores rank last; ties keep the
candidate order), and the best candidate is refitted on all the data.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping

import numpy as np

from ..base import clone
from ..context import NULL_CONTEXT, FitContext
from ..params import ParamError
from ..random import check_random_state
from ..validation import DataError
from .scoring import check_scoring
from .validation import as_array, cross_validate, shared_folds

__all__ = ["grid_search", "random_search", "GridSearch", "RandomSearch", "expand_grid", "sample_space"]


def check_range(name: str, spec: Mapping) -> dict:
    unknown = set(spec) - {"low", "high", "log", "type", "n"}
    if unknown:
        raise ParamError(
            "space", f"'{name}': unknown range key(s) {sorted(unknown)}; use low, high, log, type, n"
        )
    if "low" not in spec or "high" not in spec:
        raise ParamError("space", f"'{name}': a range needs 'low' and 'high'")
    kind = spec.get("type", "float")
    if kind not in ("int", "float"):
        raise ParamError("space", f"'{name}': type must be 'int' or 'float', got {kind!r}")
    try:
        low, high = float(spec["low"]), float(spec["high"])
    except (TypeError, ValueError):
        raise ParamError("space", f"'{name}': low and high must be numbers") from None
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise ParamError("space", f"'{name}': need finite low <= high, got [{low}, {high}]")
    log = bool(spec.get("log", False))
    if log and low <= 0:
        raise ParamError("space", f"'{name}': a log range needs low > 0")
    n = int(spec.get("n", 5))
    if n < 1:
        raise ParamError("space", f"'{name}': n must be at least 1")
    return {"low": low, "high": high, "log": log, "type": kind, "n": n}


def _check_space(estimator, space: Mapping) -> dict:
    if not isinstance(space, Mapping) or not space:
        raise ParamError("space", "must be a non-empty mapping {param: [values] | {low, high, log, type}}")
    specs = getattr(estimator, "params", {})
    out = {}
    for name, dom in space.items():
        if name not in specs:
            raise ParamError(
                "space", f"'{name}' is not a parameter of {type(estimator).__name__}; valid: {sorted(specs)}"
            )
        if isinstance(dom, Mapping):
            out[name] = check_range(name, dom)
        elif isinstance(dom, (list, tuple)):
            if not dom:
                raise ParamError("space", f"'{name}': the list of values is empty")
            out[name] = list(dom)
        else:
            raise ParamError("space", f"'{name}': expected a list of values or a range, got {dom!r}")
    return out


def range_grid(r: dict) -> list:
    if r["n"] == 1 or r["low"] == r["high"]:
        pts = np.array([r["low"]])
    elif r["log"]:
        pts = np.geomspace(r["low"], r["high"], r["n"])
    else:
        pts = np.linspace(r["low"], r["high"], r["n"])
    if r["type"] == "int":
        return sorted({int(round(v)) for v in pts})
    return [float(v) for v in pts]


def _range_sample(r: dict, rng: np.random.Generator):
    lo, hi = r["low"], r["high"]
    if r["type"] == "int":
        if r["log"]:
            v = math.exp(rng.uniform(math.log(lo), math.log(hi + 1)))
            return int(min(max(math.floor(v), math.ceil(lo)), math.floor(hi)))
        return int(rng.integers(math.ceil(lo), math.floor(hi) + 1))
    if r["log"]:
        return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
    return float(rng.uniform(lo, hi))


def expand_grid(space: dict) -> list[dict]:
    """All combinations of a checked space (ranges become ``n`` grid points), in key order."""
    keys = list(space)
    axes = [space[k] if isinstance(space[k], list) else range_grid(space[k]) for k in keys]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*axes)]


def sample_space(space: dict, n_iter: int, rng: np.random.Generator) -> list[dict]:
    """``n_iter`` random candidates (lists: uniform choice; ranges: uniform / log-uniform)."""
    out = []
    for _ in range(n_iter):
        cand = {}
        for k, dom in space.items():
            if isinstance(dom, list):
                cand[k] = dom[int(rng.integers(len(dom)))]
            else:
                cand[k] = _range_sample(dom, rng)
        out.append(cand)
    return out


def _validate_candidate(estimator, params: dict) -> dict:
    """Coerce each value through the estimator's spec (ParamError naming the param)."""
    specs = estimator.params
    return {k: specs[k].validate(v, k) for k, v in params.items()}


def _run_search(
    estimator,
    X,
    y,
    candidates,
    *,
    cv,
    scoring,
    refit,
    stratify,
    shuffle,
    random_state,
    fit_params,
    ctx: FitContext,
    kind: str,
) -> dict:
    X = as_array(X)
    scorers = check_scoring(estimator, scoring)
    primary = scorers[0]
    candidates = [_validate_candidate(estimator, c) for c in candidates]
    if not candidates:
        raise ParamError("space", "no candidate to evaluate")
    folds = shared_folds(cv, X, y, estimator, stratify=stratify, shuffle=shuffle, random_state=random_state)
    T = len(candidates)
    search_share = T / (T + 1) if refit else 1.0
    trials = []
    for t, cand in enumerate(candidates):
        est = clone(estimator, **cand)
        lo, hi = search_share * t / T, search_share * (t + 1) / T
        t0 = time.perf_counter()
        try:
            res = cross_validate(
                est,
                X,
                y,
                cv=folds,
                scoring=[s.name for s in scorers],
                fit_params=fit_params,
                ctx=ctx.child(lo, hi),
            )
            error = None
        except (DataError, ParamError, ArithmeticError, np.linalg.LinAlgError) as exc:
            res, error = None, f"{type(exc).__name__}: {exc}"
        trial = {
            "index": t,
            "params": cand,
            "mean": res["mean"] if res else {s.name: float("nan") for s in scorers},
            "std": res["std"] if res else {s.name: float("nan") for s in scorers},
            "scores": res["scores"] if res else {s.name: [] for s in scorers},
            "time": time.perf_counter() - t0,
        }
        if error:
            trial["error"] = error
        trials.append(trial)
        ctx.step(t + 1, T + (1 if refit else 0), trial=t, **{primary.name: trial["mean"][primary.name]})
    sign = primary.sign()
    keyed = [
        (
            -(sign * tr["mean"][primary.name]) if np.isfinite(tr["mean"][primary.name]) else math.inf,
            tr["index"],
        )
        for tr in trials
    ]
    order = sorted(range(T), key=lambda i: keyed[i])
    for rank, i in enumerate(order, start=1):
        trials[i]["rank"] = rank
    best = order[0]
    if not np.isfinite(trials[best]["mean"][primary.name]):
        raise DataError(
            "every candidate failed: " + "; ".join(tr.get("error", "nan score") for tr in trials[:3])
        )
    out = {
        "kind": kind,
        "metric": primary.name,
        "scoring": [s.name for s in scorers],
        "greater_is_better": primary.greater_is_better,
        "n_splits": folds.n_splits,
        "trials": trials,
        "ranking": order,
        "best_index": best,
        "best_params": dict(trials[best]["params"]),
        "best_score": trials[best]["mean"][primary.name],
        "best_estimator": None,
    }
    if refit:
        est = clone(estimator, **trials[best]["params"])
        est.fit(X, y, ctx=ctx.child(search_share, 1.0), **(fit_params or {}))
        ctx.step(1, 1)
        out["best_estimator"] = est
    return out


def grid_search(
    estimator,
    X,
    y,
    space,
    *,
    cv=5,
    scoring=None,
    refit: bool = True,
    stratify: bool = True,
    shuffle: bool = True,
    random_state=None,
    fit_params=None,
    ctx: FitContext = NULL_CONTEXT,
) -> dict:
    """Exhaustive search over ``space`` (see the module docstring) with k-fold CV.

    Returns ``{"kind": "grid", "metric", "scoring", "greater_is_better", "n_splits",
    "trials": [{"index", "params", "mean": {name}, "std": {name}, "scores": {name: [...]},
    "time", "rank", "error"?}], "ranking": [trial indices best first], "best_index",
    "best_params", "best_score", "best_estimator"}`` (the refitted estimator, or None).
    """
    checked = _check_space(estimator, space)
    return _run_search(
        estimator,
        X,
        y,
        expand_grid(checked),
        cv=cv,
        scoring=scoring,
        refit=refit,
        stratify=stratify,
        shuffle=shuffle,
        random_state=random_state,
        fit_params=fit_params,
        ctx=ctx,
        kind="grid",
    )


def random_search(
    estimator,
    X,
    y,
    space,
    *,
    n_iter: int = 10,
    cv=5,
    scoring=None,
    refit: bool = True,
    stratify: bool = True,
    shuffle: bool = True,
    random_state=None,
    fit_params=None,
    ctx: FitContext = NULL_CONTEXT,
) -> dict:
    """``n_iter`` random candidates from ``space`` (drawn with ``random_state``), scored as in grid_search."""
    if int(n_iter) < 1:
        raise ParamError("n_iter", "must be at least 1")
    checked = _check_space(estimator, space)
    rng = check_random_state(random_state)
    cands = sample_space(checked, int(n_iter), rng)
    cv_seed = int(rng.integers(0, 2**31 - 1)) if random_state is not None else None
    return _run_search(
        estimator,
        X,
        y,
        cands,
        cv=cv,
        scoring=scoring,
        refit=refit,
        stratify=stratify,
        shuffle=shuffle,
        random_state=cv_seed,
        fit_params=fit_params,
        ctx=ctx,
        kind="random",
    )


class _SearchBase:
    """Object form of the search functions: ``fit(X, y)`` then ``best_params_``, ``best_estimator_``...

    A subclass names its search function (``_search``) and the constructor arguments it passes on (``_options``).
    """

    _options = ("cv", "scoring", "refit", "stratify", "shuffle", "random_state")

    @staticmethod
    def _search(estimator, X, y, space, **kwargs) -> dict:
        raise NotImplementedError

    def fit(self, X, y, *, fit_params=None, ctx: FitContext = NULL_CONTEXT):
        options = {name: getattr(self, name) for name in self._options}
        return self._finish(self._search(self.estimator, X, y, self.space, fit_params=fit_params, ctx=ctx, **options))

    def _finish(self, res: dict):
        self.result_ = res
        self.trials_ = res["trials"]
        self.best_params_ = res["best_params"]
        self.best_score_ = res["best_score"]
        self.best_index_ = res["best_index"]
        self.best_estimator_ = res["best_estimator"]
        return self

    def predict(self, X):
        if getattr(self, "best_estimator_", None) is None:
            raise DataError("no refitted estimator: fit with refit=True first")
        return self.best_estimator_.predict(X)


class GridSearch(_SearchBase):
    _search = staticmethod(grid_search)

    def __init__(
        self,
        estimator,
        space,
        *,
        cv=5,
        scoring=None,
        refit=True,
        stratify=True,
        shuffle=True,
        random_state=None,
    ):
        self.estimator, self.space, self.cv, self.scoring = estimator, space, cv, scoring
        self.refit, self.stratify, self.shuffle, self.random_state = refit, stratify, shuffle, random_state


class RandomSearch(_SearchBase):
    _options = ("n_iter",) + _SearchBase._options
    _search = staticmethod(random_search)

    def __init__(
        self,
        estimator,
        space,
        *,
        n_iter=10,
        cv=5,
        scoring=None,
        refit=True,
        stratify=True,
        shuffle=True,
        random_state=None,
    ):
        self.estimator, self.space, self.n_iter, self.cv, self.scoring = estimator, space, n_iter, cv, scoring
        self.refit, self.stratify, self.shuffle, self.random_state = refit, stratify, shuffle, random_state
