"""Shared machinery of the stacking classifier and regressor.

[Passerini §16.2]: base models ``f^(i) = A^(i)(D)`` and a
meta-learner ``g = A_META([f^(1)..f^(m)], D')`` that **must be trained on data
the base models did not see**, otherwise it just trusts the base model that
overfits most.  Here ``D'`` is the out-of-fold predictions of a ``cv``-fold
cross-validation: for fold k each base model is fitted on the other folds and
predicts fold k, so every row's meta-feature comes from a model that never saw
it.  The base models are then refitted on all the data for prediction.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .. import registry
from ..params import ParamError
from ..random import check_random_state, spawn_seeds

__all__ = ["build_estimator", "check_estimator_specs", "fit_with", "seeded"]


def _check_one(spec, param: str, task: str):
    if not isinstance(spec, Mapping) or "name" not in spec:
        raise ParamError(param, f'must be an object {{"name": ..., "params": {{...}}}}, got {spec!r}')
    extra = set(spec) - {"name", "params"}
    if extra:
        raise ParamError(param, f"unknown key(s) {sorted(extra)}; allowed: name, params")
    name = spec["name"]
    if not isinstance(name, str):
        raise ParamError(param, f"name must be a string, got {name!r}")
    params = spec.get("params") or {}
    if not isinstance(params, Mapping):
        raise ParamError(param, f"params must be an object, got {params!r}")
    try:
        cls = registry.get(name)
    except registry.UnknownAlgorithm:
        raise ParamError(param, f"unknown algorithm {name!r}") from None
    if cls.task != task:
        raise ParamError(param, f"{name!r} is a {cls.task} algorithm; a {task} algorithm is needed")
    try:
        registry.create(name, dict(params))
    except ParamError as exc:
        raise ParamError(param, f"{name}: {exc}") from None
    except TypeError as exc:
        raise ParamError(param, f"{name}: {exc}") from None
    return name, dict(params)


def check_estimator_specs(estimators, final_estimator, task: str):
    """Validate the ``estimators`` list and ``final_estimator`` spec (ParamError names the param)."""
    if not isinstance(estimators, (list, tuple)) or len(estimators) == 0:
        raise ParamError("estimators", "must be a non-empty list of {name, params} objects")
    bases = [_check_one(s, "estimators", task) for s in estimators]
    final = _check_one(final_estimator, "final_estimator", task)
    return bases, final


def seeded(name: str, params: dict, seed: int) -> dict:
    """Give a sub-estimator a seed drawn from the parent unless the user fixed one."""
    cls = registry.get(name)
    if "random_state" in cls.params and params.get("random_state") is None:
        return {**params, "random_state": seed}
    return params


def build_estimator(name: str, params: dict):
    return registry.create(name, params)


def fit_with(est, X, y, sample_weight, ctx):
    """Fit ``est``, passing ``sample_weight`` only to estimators that accept it."""
    if sample_weight is not None and getattr(est, "supports_sample_weight", False):
        return est.fit(X, y, sample_weight=sample_weight, ctx=ctx)
    return est.fit(X, y, ctx=ctx)


def base_seeds(random_state, n_bases: int):
    rng = check_random_state(random_state)
    fold_seed = int(rng.integers(0, 2**32 - 1))
    return rng, fold_seed, spawn_seeds(rng, n_bases + 1)


def as_meta(blocks, X, passthrough: bool) -> np.ndarray:
    meta = np.column_stack(blocks) if blocks else np.empty((X.shape[0], 0))
    if passthrough:
        meta = np.column_stack([meta, X])
    return np.ascontiguousarray(meta, dtype=np.float64)


def fit_stack(bases, seeds, folds, X, y, w, final_spec, passthrough: bool, block_of, ctx):
    """Fit a stack: out-of-fold meta-features, the final estimator on them, then the bases on all rows.

    ``block_of(i, est, X_test)`` returns base ``i``'s meta-feature columns for ``X_test``. Row ``r`` of the
    meta-features always comes from a model fitted without row ``r`` (never in-sample predictions).
    Returns ``(fitted_bases, final_estimator)``; one ``ctx.step`` per fold fit, final fit and refit.
    """
    final_name, final_params = final_spec
    total = len(bases) * (len(folds) + 1) + 1
    done = 0

    def sub_ctx():
        return ctx.child(done / total, (done + 1) / total)

    blocks = []
    for i, ((name, params), seed) in enumerate(zip(bases, seeds, strict=False)):
        params = seeded(name, params, seed)
        block = None
        for train, test in folds:
            est = build_estimator(name, params)
            fit_with(est, X[train], y[train], None if w is None else w[train], sub_ctx())
            part = np.asarray(block_of(i, est, X[test]), dtype=np.float64).reshape(len(test), -1)
            if block is None:
                block = np.zeros((X.shape[0], part.shape[1]))
            block[test] = part
            done += 1
            ctx.step(done, total)
        blocks.append(block)
    meta = as_meta(blocks, X, passthrough)
    final = build_estimator(final_name, seeded(final_name, final_params, seeds[-1]))
    fit_with(final, meta, y, w, sub_ctx())
    done += 1
    ctx.step(done, total)
    fitted = []
    for (name, params), seed in zip(bases, seeds, strict=False):
        est = build_estimator(name, seeded(name, params, seed))
        fit_with(est, X, y, w, sub_ctx())
        fitted.append(est)
        done += 1
        ctx.step(done, total)
    return fitted, final
