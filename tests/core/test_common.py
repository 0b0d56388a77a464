"""Common checks run on every registered estimator (the estimator contract of ``core/base.py``)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from core import registry
from core.base import TASKS
from core.context import FitCancelled, FitContext
from core.params import ParamError, params_json_schema
from core.validation import NotFittedError

NAMES = registry.names()


def _output(est, X):
    """The estimator's main output for its task."""
    if est.task in ("classification", "regression", "clustering", "reinforcement"):
        return est.predict(X)
    if est.task == "decomposition":
        return est.transform(X)
    if est.task == "density":
        return est.score_samples(X)
    raise AssertionError(est.task)


def _make(name, **extra):
    cls = registry.get(name)
    params = {**cls._example_params(), **extra}
    return cls(**params)


def _data(name, seed=0):
    cls = registry.get(name)
    return cls._example_data(np.random.default_rng(seed))


def _fit(est, X, y):
    return est.fit(X, y)


def test_registry_is_populated():
    assert len(NAMES) >= 1
    for name in NAMES:
        assert registry.get(name).name == name


def test_unknown_algorithm():
    with pytest.raises(registry.UnknownAlgorithm, match="unknown algorithm 'nope'"):
        registry.get("nope")


@pytest.mark.parametrize("name", NAMES)
def test_describe_is_json_and_well_formed(name):
    d = registry.describe(name)
    json.dumps(d)
    assert d["task"] in TASKS
    assert d["summary"], f"{name} needs a summary"
    assert d["params_schema"]["additionalProperties"] is False
    assert set(d["capabilities"]) == {
        "predict_proba", "predict_std", "transform", "native_missing",
        "native_categorical", "sample_weight", "progress", "explain",
    }
    supervised = d["task"] in ("classification", "regression")
    assert d["capabilities"]["explain"] in (("tree", "linear", "kernel") if supervised else (None,))


@pytest.mark.parametrize("name", NAMES)
def test_init_matches_specs(name):
    cls = registry.get(name)
    est = cls()
    for key, spec in cls.params.items():
        assert getattr(est, key) == spec.default or (
            getattr(est, key) is None and spec.default is None
        ), key
        # the default is itself valid
        spec.validate(spec.default, key)
    with pytest.raises(TypeError):
        cls(definitely_not_a_param=1)
    assert params_json_schema(cls.params)["type"] == "object"


@pytest.mark.parametrize("name", NAMES)
def test_invalid_params_rejected(name):
    cls = registry.get(name)
    X, y = _data(name)
    for key, spec in cls.params.items():
        for bad in spec.invalid_examples():
            est = _make(name, **{key: bad})
            with pytest.raises(ParamError) as info:
                est.fit(X, y)
            assert info.value.param.split("[")[0].split(".")[0] == key, (key, bad)
            assert not _is_fitted(est)


# (algorithm, parameter) pairs whose numbers may stay unbounded above, each with its reason. Empty: every
# number has a bound a user would never need to exceed (resource guards, docs/decisions/resource-guards.md).
UNBOUNDED_EXEMPT: dict[tuple[str, str], str] = {}


def _numbers_without_maximum(schema: dict, where: str):
    """Paths of integer/number schemas (anywhere: anyOf options, list items, object values) with no maximum."""
    if not isinstance(schema, dict):
        return
    if schema.get("type") in ("integer", "number") and "maximum" not in schema and "exclusiveMaximum" not in schema:
        yield where
    for i, sub in enumerate(schema.get("anyOf", [])):
        yield from _numbers_without_maximum(sub, f"{where}|{i}")
    if isinstance(schema.get("items"), dict):
        yield from _numbers_without_maximum(schema["items"], f"{where}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _numbers_without_maximum(schema["additionalProperties"], f"{where}{{}}")


@pytest.mark.parametrize("name", NAMES)
def test_every_number_param_has_an_upper_bound(name):
    """Every Int/Float parameter has a schema maximum (served by GET /v1/algorithms), so that a request such as
    n_estimators=1e9 is a 422 before anything is queued; lists of numbers have a maximum length where their
    length is a size (hidden layers)."""
    props = registry.describe(name)["params_schema"]["properties"]
    missing = [p for key, sch in props.items() if (name, key) not in UNBOUNDED_EXEMPT
               for p in _numbers_without_maximum(sch, key)]
    assert not missing, f"{name}: parameters without a maximum (add le=... to their spec): {missing}"
    for key, sch in props.items():
        if sch.get("type") == "array" and key.endswith("_sizes"):
            assert "maxItems" in sch, f"{name}.{key} needs max_items"


def _is_fitted(est):
    return any(k.endswith("_") and not k.startswith("_") for k in vars(est))


@pytest.mark.parametrize("name", NAMES)
def test_fit_returns_self_and_unfitted_raises(name):
    est = _make(name)
    X, y = _data(name)
    with pytest.raises(NotFittedError):
        _output(est, X)
    assert _fit(est, X, y) is est
    out = np.asarray(_output(est, X))
    assert out.shape[0] == X.shape[0]


@pytest.mark.parametrize("name", NAMES)
def test_single_row(name):
    est = _make(name)
    X, y = _data(name)
    est.fit(X, y)
    one = np.asarray(_output(est, X[:1]))
    full = np.asarray(_output(est, X))
    assert one.shape[0] == 1
    if np.issubdtype(full.dtype, np.number):
        np.testing.assert_allclose(one[0], full[0], rtol=1e-7, atol=1e-9)
    else:
        assert one[0] == full[0]


@pytest.mark.parametrize("name", NAMES)
def test_deterministic_and_global_rng_untouched(name):
    cls = registry.get(name)
    X, y = _data(name)
    extra = {"random_state": 0} if "random_state" in cls.params else {}
    np.random.seed(12345)
    before = np.random.get_state()[1].copy()
    a = np.asarray(_output(_make(name, **extra).fit(X, y), X))
    b = np.asarray(_output(_make(name, **extra).fit(X, y), X))
    after = np.random.get_state()[1]
    np.testing.assert_array_equal(before, after)
    if np.issubdtype(a.dtype, np.number):
        np.testing.assert_allclose(a, b)
    else:
        assert (a == b).all()


@pytest.mark.parametrize("name", NAMES)
def test_input_not_mutated(name):
    X, y = _data(name)
    X0 = X.copy()
    y0 = None if y is None else y.copy()
    est = _make(name).fit(X, y)
    _output(est, X)
    np.testing.assert_array_equal(X, X0)
    if y is not None:
        assert (np.asarray(y) == np.asarray(y0)).all()


@pytest.mark.parametrize("name", NAMES)
def test_pickle_round_trip(name):
    X, y = _data(name)
    est = _make(name).fit(X, y)
    blob = pickle.dumps(est)
    est2 = pickle.loads(blob)
    a, b = np.asarray(_output(est, X)), np.asarray(_output(est2, X))
    if np.issubdtype(a.dtype, np.number):
        np.testing.assert_allclose(a, b)
    else:
        assert (a == b).all()
    assert est2.__dict__.get("_core_version")


@pytest.mark.parametrize(
    "name", [n for n in NAMES if registry.get(n).capabilities()["predict_proba"]]
)
def test_probabilities_sum_to_one_and_follow_classes(name):
    X, y = _data(name)
    est = _make(name).fit(X, y)
    proba = est.predict_proba(X)
    assert proba.shape == (X.shape[0], len(est.classes_))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-8)
    assert (proba >= 0).all()
    if est.task == "classification":
        # predictions are original labels, matching the argmax column
        pred = est.predict(X)
        assert set(np.unique(pred)) <= set(est.classes_)


@pytest.mark.parametrize(
    "name", [n for n in NAMES if registry.get(n).capabilities()["predict_std"]]
)
def test_predict_std(name):
    X, y = _data(name)
    est = _make(name).fit(X, y)
    mean, std = est.predict(X, return_std=True)
    assert mean.shape == std.shape == (X.shape[0],)
    assert (std >= 0).all()


@pytest.mark.parametrize(
    "name", [n for n in NAMES if registry.get(n).capabilities()["sample_weight"]]
)
def test_sample_weight_accepted(name):
    X, y = _data(name)
    w = np.ones(X.shape[0])
    est = _make(name).fit(X, y, sample_weight=w)
    _output(est, X)


@pytest.mark.parametrize(
    "name", [n for n in NAMES if registry.get(n).capabilities()["progress"]]
)
def test_progress_and_cancellation(name):
    X, y = _data(name)
    seen = []
    ctx = FitContext(on_progress=lambda f, m: seen.append(f), min_interval=0.0)
    est = _make(name)
    est.fit(X, y, ctx=ctx)
    assert seen, "a progress-reporting estimator must call ctx.step"
    assert all(0.0 <= f <= 1.0 for f in seen)
    assert seen == sorted(seen)

    cancelled = _make(name)
    ctx = FitContext(is_cancelled=lambda: True, cancel_interval=0.0)
    with pytest.raises(FitCancelled):
        cancelled.fit(X, y, ctx=ctx)
    assert not _is_fitted(cancelled), "a cancelled fit must leave the estimator unfitted"
