"""Shared bagging machinery ([Passerini §16.1]; [da Silva Neto §1.8.4]).

m bootstrap datasets D^(i) (drawn with replacement, |D^(i)| = max_samples),
f^(i) = A(D^(i)) for any registered base algorithm A given as
``{"name": ..., "params": {...}}``, optionally on a random feature subset;
combined by soft vote (base with predict_proba), majority vote, or mean.
A base that accepts sample_weight gets the bootstrap as integer weights
(equivalent to resampling, as scikit-learn does); others get the resampled rows.
"""

from __future__ import annotations

import numpy as np

from .. import registry
from ..params import Any_, Bool, Int, OneOf, ParamError, Seed
from ..random import check_random_state, spawn_seeds
from ..tree._base import Fraction

__all__ = ["bagging_params", "build_base", "draw_bags"]


def bagging_params(default_base: str) -> dict:
    return {
        "estimator": Any_(
            {"name": default_base, "params": {}},
            doc='Base learner: {"name": registered algorithm, "params": {...}}.',
        ),
        "n_estimators": Int(10, ge=1, le=10_000),
        "max_samples": OneOf(1.0, options=[Fraction(gt=0.0, le=1.0), Int(ge=1, le=1_000_000_000)],
                             doc="Rows per bag (fraction or count)."),
        "max_features": OneOf(1.0, options=[Fraction(gt=0.0, le=1.0), Int(ge=1, le=1_000_000)],
                              doc="Features per bag (fraction or count)."),
        "bootstrap": Bool(True, doc="Draw rows with replacement."),
        "bootstrap_features": Bool(False, doc="Draw features with replacement."),
        "oob_score": Bool(False, doc="Out-of-bag score (needs bootstrap)."),
        "random_state": Seed(),
    }


def build_base(spec, task: str, *, need_sample_weight: bool = False, param: str = "estimator"):
    """Validate a ``{"name", "params"}`` spec and return (class, validated params)."""
    if not isinstance(spec, dict) or "name" not in spec:
        raise ParamError(param, 'must be an object {"name": ..., "params": {...}}')
    extra = set(spec) - {"name", "params"}
    if extra:
        raise ParamError(param, f"unknown keys {sorted(extra)}")
    try:
        cls = registry.get(spec["name"])
    except (registry.UnknownAlgorithm, TypeError):
        raise ParamError(param, f"unknown algorithm {spec['name']!r}") from None
    if cls.task != task:
        raise ParamError(param, f"{spec['name']!r} is a {cls.task} algorithm; a {task} one is needed")
    if need_sample_weight and not cls.supports_sample_weight:
        raise ParamError(param, f"{spec['name']!r} does not accept sample_weight")
    params = spec.get("params") or {}
    if not isinstance(params, dict):
        raise ParamError(param, "params must be an object")
    try:
        est = cls(**params)
        est._validated_params()
    except TypeError as exc:
        raise ParamError(param, str(exc)) from None
    except ParamError as exc:
        raise ParamError(param, f"{exc.param}: {exc.reason}") from None
    return cls, dict(params)


def draw_bags(p: dict, n: int, f: int):
    """Per estimator: (row counts, feature indices, seed)."""
    rng = check_random_state(p["random_state"])
    ms = p["max_samples"]
    n_draw = max(1, int(round(ms * n))) if isinstance(ms, float) else ms
    if n_draw > n and not p["bootstrap"]:
        raise ParamError("max_samples", f"must be <= n_samples ({n}) without bootstrap, got {ms}")
    mf = p["max_features"]
    n_feat = max(1, int(mf * f)) if isinstance(mf, float) else mf
    if n_feat > f:
        raise ParamError("max_features", f"must be <= n_features ({f}), got {mf}")
    if p["oob_score"] and not p["bootstrap"]:
        raise ParamError("oob_score", "out-of-bag estimation needs bootstrap=true")
    bags = []
    for seed in spawn_seeds(rng, p["n_estimators"]):
        r = np.random.default_rng(seed)
        if p["bootstrap"]:
            counts = np.bincount(r.integers(0, n, size=n_draw), minlength=n)
        else:
            counts = np.zeros(n, dtype=np.intp)
            counts[r.choice(n, size=n_draw, replace=False)] = 1
        if p["bootstrap_features"]:
            feats = r.integers(0, f, size=n_feat)
        else:
            feats = np.sort(r.choice(f, size=n_feat, replace=False)) if n_feat < f else np.arange(f)
        bags.append((counts, feats, int(r.integers(2**31))))
    return bags


class ConstantMember:
    """Stand-in member for a bag that holds a single class (a classifier cannot be fitted on it)."""

    def __init__(self, code: int, n_features: int):
        self.classes_ = np.array([code])
        self.n_features_in_ = n_features

    def predict_proba(self, X):
        return np.ones((np.asarray(X).shape[0], 1))

    def predict(self, X):
        return np.full(np.asarray(X).shape[0], self.classes_[0])


def fit_member(cls, params, X, y, counts, feats, seed, w, is_cat, classification=False):
    """Fit one base learner on its bag."""
    if classification:
        present = np.unique(y[counts > 0])
        if present.size == 1:
            return ConstantMember(int(present[0]), len(feats))
    params = dict(params)
    if "random_state" in cls.params and "random_state" not in params:
        params["random_state"] = seed
    est = cls(**params)
    kw = {}
    if cls.native_categorical and is_cat is not None and is_cat[feats].any():
        kw["categorical_features"] = is_cat[feats]
    if cls.supports_sample_weight:
        rows = np.flatnonzero(counts)
        sw = counts[rows].astype(np.float64) * (w[rows] if w is not None else 1.0)
        est.fit(X[np.ix_(rows, feats)], y[rows], sample_weight=sw, **kw)
    else:
        rows = np.repeat(np.arange(counts.size), counts)
        est.fit(X[np.ix_(rows, feats)], y[rows], **kw)
    return est
