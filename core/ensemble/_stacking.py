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
from ..context import NULL_CONTEXT
from ..params import ParamError
from ..random import check_random_state, spawn_seeds
from ..validation import check_predict_input, check_sample_weight, check_X_y

__all__ = ["BaseStacking", "build_estimator", "check_estimator_specs", "fit_with", "seeded"]


class BaseStacking:
    """``fit`` and the meta-features of the stacking classifier and regressor, written once.

    The twins differ by hooks: ``_stack_methods`` (which output of each base feeds the meta-learner),
    ``_encode_y`` (the target the bases see, and the classes), ``_folds`` (stratified or plain) and
    ``_block`` (one base's meta-feature columns).
    """

    def _stack_methods(self, bases, p) -> list[str]:
        return ["predict"] * len(bases)

    def _encode_y(self, y):
        """``(target, classes)``: what the bases are fitted on, and the classes (None for a regressor)."""
        return y, None

    def _folds(self, cv: int, seed: int, X, target):  # pragma: no cover - abstract
        raise NotImplementedError

    def _block(self, est, method: str, X, n_classes) -> np.ndarray:
        return np.asarray(est.predict(X), dtype=np.float64)

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        bases, final_spec = check_estimator_specs(p["estimators"], p["final_estimator"], self.task)
        methods = self._stack_methods(bases, p)
        X, y = check_X_y(X, y, allow_nan=self.native_missing, y_numeric=self.task == "regression")
        target, classes = self._encode_y(y)
        n_classes = None if classes is None else len(classes)
        w = None if sample_weight is None else check_sample_weight(sample_weight, X.shape[0])
        _, fold_seed, seeds = base_seeds(p["random_state"], len(bases))
        folds = self._folds(p["cv"], fold_seed, X, target)
        fitted, final = fit_stack(
            bases, seeds, folds, X, target, w, final_spec, p["passthrough"],
            lambda i, est, Xt: self._block(est, methods[i], Xt, n_classes), ctx,
        )
        self.estimators_ = fitted
        self.final_estimator_ = final
        self._passthrough = p["passthrough"]
        self.stack_methods_ = methods
        if classes is not None:
            self.classes_ = classes
        self.n_features_in_ = X.shape[1]
        return self

    def _meta(self, X) -> np.ndarray:
        """The meta-features of ``X``: each fitted base's block (and ``X`` itself with ``passthrough``)."""
        X = check_predict_input(self, X, "final_estimator_", allow_nan=self.native_missing)
        n_classes = len(self.classes_) if hasattr(self, "classes_") else None
        # a stacking regressor pickled before the shared base has no stack_methods_: all its bases predicted
        methods = getattr(self, "stack_methods_", None) or ["predict"] * len(self.estimators_)
        blocks = [self._block(e, m, X, n_classes) for e, m in zip(self.estimators_, methods, strict=True)]
        return as_meta(blocks, X, self._passthrough)


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
