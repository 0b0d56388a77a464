"""Estimator base classes: the contract every Orchard algorithm follows.

1. ``__init__(**params)`` only stores keyword arguments; the hyperparameters are
   declared once as specs in the class attribute ``params``.
2. ``fit(X, y=None, *, sample_weight=None, ctx=NULL_CONTEXT)`` validates (via
   ``self._validated_params()``), works in local variables and sets the fitted
   attributes (trailing underscore) only at the end, returning ``self``.
3. ``predict``; ``predict_proba`` with columns in ``classes_`` order;
   ``transform``; ``score_samples``; ``predict(X, return_std=True)``.
4. Long fits call ``ctx.step(done, total, **metrics)`` once per iteration.
5. Randomness only from ``random_state`` through ``core.random.check_random_state``.
6. Estimators pickle cleanly and carry the core version.

Estimators that handle categorical features natively (``native_categorical``)
also accept ``fit(..., categorical_features=mask)``: a boolean mask (or list
of column indices) of columns holding non-negative integer category codes.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import numpy as np

from ._version import __version__ as _core_version
from .memory import FitMemory, generic_fit
from .params import Spec, validate_params
from .validation import DataError, column_or_1d

__all__ = [
    "Estimator",
    "Classifier",
    "Regressor",
    "Clusterer",
    "Transformer",
    "Density",
    "Reinforcement",
    "TASKS",
    "clone",
    "encode_labels",
    "encode_targets",
]

TASKS = ("classification", "regression", "clustering", "decomposition", "density", "reinforcement")


class Estimator:
    """Base of every algorithm.  Subclasses set the class attributes below."""

    name: ClassVar[str] = ""
    task: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    params: ClassVar[dict[str, Spec]] = {}

    # capability flags (served by /v1/algorithms)
    supports_sample_weight: ClassVar[bool] = False
    native_missing: ClassVar[bool] = False
    native_categorical: ClassVar[bool] = False
    reports_progress: ClassVar[bool] = False
    has_predict_std: ClassVar[bool] = False
    # whether the service should standardise numeric inputs before this estimator
    needs_scaling: ClassVar[bool] = False
    # lazy learners: predicting a row compares it with (many of) the training rows, so scoring the training set
    # costs ~ n^2; the service measures their training metrics on a bounded sample of rows
    lazy_learner: ClassVar[bool] = False
    # peak memory of a fit from the data's shape and the params (core/memory.py); families set their model
    fit_memory: ClassVar = classmethod(generic_fit)

    def __init__(self, **kwargs: Any):
        unknown = sorted(set(kwargs) - set(self.params))
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got unexpected parameter(s) {unknown}; "
                f"allowed: {sorted(self.params)}"
            )
        for key, spec in self.params.items():
            setattr(self, key, kwargs.get(key, copy.deepcopy(spec.default)))

    # -- parameters ---------------------------------------------------------------
    def get_params(self) -> dict:
        return {k: getattr(self, k) for k in self.params}

    def set_params(self, **kwargs) -> Estimator:
        unknown = sorted(set(kwargs) - set(self.params))
        if unknown:
            raise TypeError(f"{type(self).__name__} has no parameter(s) {unknown}")
        for k, v in kwargs.items():
            setattr(self, k, v)
        return self

    def _validated_params(self) -> dict:
        """All hyperparameters validated and coerced (raises ParamError)."""
        return validate_params(self.params, self.get_params())

    @classmethod
    def capabilities(cls) -> dict:
        explain = None
        if cls.task in ("classification", "regression"):
            from .inspection.methods import explain_method  # lazy: importing the package imports estimators

            explain = explain_method(cls)
        return {
            "predict_proba": callable(getattr(cls, "predict_proba", None)),
            "predict_std": bool(cls.has_predict_std),
            "transform": callable(getattr(cls, "transform", None)),
            "native_missing": bool(cls.native_missing),
            "native_categorical": bool(cls.native_categorical),
            "sample_weight": bool(cls.supports_sample_weight),
            "progress": bool(cls.reports_progress),
            "explain": explain,
        }

    @classmethod
    def estimate_fit_bytes(cls, n_samples: int, n_features: int, params: dict, n_outputs: int = 1) -> int:
        """Estimated peak bytes of ``fit`` on ``n_samples`` x ``n_features`` with validated ``params``
        (``n_outputs``: classes of a classifier, else 1). ``fit_memory`` also names the cause."""
        estimate: FitMemory = cls.fit_memory(int(n_samples), int(n_features), params, int(n_outputs))
        return int(estimate.bytes)

    # -- pickling ------------------------------------------------------------------
    def __getstate__(self):
        state = self.__dict__.copy()
        state["_core_version"] = _core_version
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self) -> str:
        changed = {
            k: getattr(self, k)
            for k, s in self.params.items()
            if not _equal(getattr(self, k), s.default)
        }
        inner = ", ".join(f"{k}={v!r}" for k, v in changed.items())
        return f"{type(self).__name__}({inner})"


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - arrays and odd values
        return False


def clone(est: Estimator, **overrides) -> Estimator:
    """A new unfitted estimator with the same hyperparameters (deep-copied)."""
    params = copy.deepcopy(est.get_params())
    params.update(overrides)
    return type(est)(**params)


def encode_labels(y) -> tuple[np.ndarray, np.ndarray]:
    """Map arbitrary hashable labels to 0..k-1.  Returns ``(classes, codes)``.

    ``classes`` is sorted (by value when the labels are mutually comparable,
    otherwise by their string form) and keeps the original label values.
    """
    y = column_or_1d(y)
    try:
        classes, codes = np.unique(y, return_inverse=True)
    except TypeError:
        uniq = list(dict.fromkeys(y.tolist()))
        uniq.sort(key=lambda v: (type(v).__name__, str(v)))
        classes = np.empty(len(uniq), dtype=object)
        classes[:] = uniq
        index = {v: i for i, v in enumerate(uniq)}
        codes = np.fromiter((index[v] for v in y.tolist()), dtype=np.intp, count=len(y))
    return classes, codes.astype(np.intp).reshape(-1)


def encode_targets(y, *, min_classes: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """A classifier's target as :func:`encode_labels`; raises ``DataError`` below ``min_classes`` classes."""
    classes, codes = encode_labels(y)
    if len(classes) < min_classes:
        raise DataError(
            f"y has {len(classes)} class(es) ({', '.join(map(str, classes[:3]))}); "
            f"a classifier needs at least {min_classes}"
        )
    return classes, codes


class Classifier(Estimator):
    """Supervised classification: ``classes_`` holds the original labels."""

    task = "classification"

    def _encode_targets(self, y, *, min_classes: int = 2) -> tuple[np.ndarray, np.ndarray]:
        return encode_targets(y, min_classes=min_classes)

    def predict(self, X):
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def score(self, X, y) -> float:
        return float(np.mean(self.predict(X) == column_or_1d(y)))


class Regressor(Estimator):
    task = "regression"

    def score(self, X, y) -> float:
        y = column_or_1d(y).astype(np.float64)
        pred = np.asarray(self.predict(X), dtype=np.float64)
        ss_res = float(np.sum((y - pred) ** 2))
        ss_tot = float(np.sum((y - y.mean()) ** 2))
        return 1.0 - ss_res / ss_tot if ss_tot > 0 else 0.0


class Clusterer(Estimator):
    """Clustering: ``labels_`` after fit; ``predict`` assigns new points."""

    task = "clustering"

    def fit_predict(self, X, y=None, **kw):
        return self.fit(X, y, **kw).labels_


class Transformer(Estimator):
    """Decomposition / dimensionality reduction: ``transform`` new points."""

    task = "decomposition"

    def fit_transform(self, X, y=None, **kw):
        return self.fit(X, y, **kw).transform(X)


class Density(Estimator):
    """Density estimation: ``score_samples`` returns log densities."""

    task = "density"

    def score(self, X, y=None) -> float:
        return float(np.mean(self.score_samples(X)))


class Reinforcement(Estimator):
    """Sequential decisions: fit from a transition table or logged transitions."""

    task = "reinforcement"
