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
from ..context import NULL_CONTEXT
from ..params import Any_, Bool, Int, OneOf, ParamError, Seed, validate_params
from ..random import check_random_state, spawn_seeds
from ..tree._base import Fraction
from ..validation import DataError, check_categorical_features, check_predict_input, check_sample_weight

__all__ = ["BaseBagging", "bagging_params", "build_base", "draw_bags"]


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
        validate_params(cls.params, cls(**params).get_params())
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


class BaseBagging:
    """``fit`` written once for the bagging twins (as scikit-learn's ``BaseBagging``).

    Hooks: ``_validate_X_y`` (checks and the target the members are fitted on, plus the fitted
    attributes describing it), ``_member_output`` (a member's prediction or class probabilities in
    the ensemble's class order) and ``_oob_score_and_attributes``.
    """

    _classification: bool = False

    def fit(self, X, y=None, *, sample_weight=None, categorical_features=None, ctx=NULL_CONTEXT):
        p = self._validated_params()
        cls, bparams = build_base(p["estimator"], self.task)
        X, y_fit, attrs = self._validate_X_y(X, y, cls)
        is_cat = check_categorical_features(categorical_features, X.shape[1])
        w = None if sample_weight is None else check_sample_weight(sample_weight, X.shape[0])
        if w is not None and not cls.supports_sample_weight:
            raise DataError(f"the base estimator {cls.name!r} does not accept sample_weight")
        bags = draw_bags(p, X.shape[0], X.shape[1])
        members, feats_list = [], []
        for i, (counts, feats, seed) in enumerate(bags):
            members.append(fit_member(cls, bparams, X, y_fit, counts, feats, seed, w, is_cat,
                                      classification=self._classification))
            feats_list.append(feats)
            ctx.step(i + 1, len(bags))
        for k, v in attrs.items():
            setattr(self, k, v)
        self.n_features_in_ = X.shape[1]
        self.estimators_ = members
        self.estimators_features_ = feats_list
        if p["oob_score"]:
            total = None
            n_oob = np.zeros(X.shape[0])
            for (counts, feats, _), est in zip(bags, members, strict=True):
                oob = np.flatnonzero(counts == 0)
                if oob.size:
                    out = self._member_output(est, X[np.ix_(oob, feats)])
                    if total is None:
                        total = np.zeros((X.shape[0],) + out.shape[1:])
                    total[oob] += out
                    n_oob[oob] += 1
            if total is None:
                total = np.zeros((X.shape[0],) + self._output_shape())
            for k, v in self._oob_score_and_attributes(total, n_oob, y_fit).items():
                setattr(self, k, v)
        return self

    def _mean_output(self, X) -> np.ndarray:
        """Average of the members' outputs."""
        X = check_predict_input(self, X, "estimators_", allow_nan=True)
        total = None
        for est, feats in zip(self.estimators_, self.estimators_features_, strict=True):
            out = self._member_output(est, X[:, feats])
            total = out if total is None else total + out
        return total / len(self.estimators_)

    # ------------------------------------------------------------------ hooks
    def _validate_X_y(self, X, y, cls):
        raise NotImplementedError

    def _member_output(self, est, Xs) -> np.ndarray:
        raise NotImplementedError

    def _output_shape(self) -> tuple:
        raise NotImplementedError

    def _oob_score_and_attributes(self, total, n_oob, y) -> dict:
        raise NotImplementedError
