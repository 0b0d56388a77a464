"""Common checks run on every registered estimator (the estimator contract of ``core/base.py``)."""

from __future__ import annotations

import copy
import json
import pickle

import numpy as np
import pytest

from core import registry
from core.base import TASKS
from core.context import FitCancelled, FitContext
from core.params import ParamError, params_json_schema
from core.validation import DataError, NotFittedError
from tests.core.example_params import example_data, example_params

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
    params = {**example_params(name), **extra}
    return cls(**params)


def _data(name, seed=0):
    return example_data(name, np.random.default_rng(seed))


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


# ---- checks after scikit-learn's estimator_checks ------------------------------------------------------------
# Each exemption names the algorithm and the reason; an exemption is never a bug left unfixed.
MATRIX_INPUT_EXEMPT: dict[str, str] = {
    name: "fitted on a transition table (a structured array of named columns), not a feature matrix; its "
          "columns are checked by name (tests/core/rl)"
    for name in NAMES if registry.get(name).task == "reinforcement"
}
SAMPLE_WEIGHT_EQUIVALENCE_EXEMPT: dict[str, str] = {
    "perceptron": "an online rule: weight 2 is one update twice as long, a duplicated row two updates, the second "
                  "skipped once the row is classified right (scikit-learn's Perceptron fails this check too)",
    "stacking_classifier": "the out-of-fold split draws rows: a duplicated row can sit in a training and a test "
                           "fold at once, a weighted one cannot",
    "stacking_regressor": "the out-of-fold split draws rows: a duplicated row can sit in a training and a test "
                          "fold at once, a weighted one cannot",
}
# Parameters under which the weighting check runs, where a default draws or counts rows; the reason each.
_NO_BOOTSTRAP = "a bootstrap sample draws rows: a duplicated row changes the draws (equal in distribution only)"
_ROWS_PER_LEAF = "min_samples_leaf counts rows, not weight, as scikit-learn's: a duplicated row counts twice"
SAMPLE_WEIGHT_CHECK_PARAMS: dict[str, tuple[dict, str]] = {
    "bagging_classifier": ({"bootstrap": False}, _NO_BOOTSTRAP),
    "bagging_regressor": ({"bootstrap": False}, _NO_BOOTSTRAP),
    "random_forest_classifier": ({"bootstrap": False}, _NO_BOOTSTRAP),
    "random_forest_regressor": ({"bootstrap": False}, _NO_BOOTSTRAP),
    "gradient_boosting_classifier": ({"min_samples_leaf": 1}, _ROWS_PER_LEAF),
    "gradient_boosting_regressor": ({"min_samples_leaf": 1}, _ROWS_PER_LEAF),
    "svm_classifier": ({"probability": False, "gamma": 0.3, "tol": 1e-8},
                       "gamma='scale' reads the unweighted variance of X and Platt scaling's folds draw rows (both "
                       "as scikit-learn's); a tight tol so the two dual solutions agree within the check's tolerance"),
    "svm_regressor": ({"gamma": 0.3, "tol": 1e-8},
                      "gamma='scale' reads the unweighted variance of X (as scikit-learn's); a tight tol so the two "
                      "dual solutions agree within the check's tolerance"),
    "divisive_clustering": ({"n_init": 20}, "initial centres are drawn over rows: a duplicated row changes the "
                                            "draws; with enough restarts both fits reach the same bisections"),
}


def _numeric_output(est, X) -> np.ndarray:
    """What a weighting or a refit could change: probabilities when the estimator has them, else the output
    (cluster labels renumbered in order of first appearance: a partition does not depend on its numbering)."""
    if callable(getattr(est, "predict_proba", None)) and getattr(est, "probability", True):
        return np.asarray(est.predict_proba(X), dtype=np.float64)
    if callable(getattr(est, "decision_function", None)) and est.task == "classification":
        return np.asarray(est.decision_function(X), dtype=np.float64)
    out = np.asarray(_output(est, X))
    if est.task == "clustering":
        _, first, inverse = np.unique(out, return_index=True, return_inverse=True)
        rank = np.empty(len(first), dtype=np.intp)
        rank[np.argsort(first)] = np.arange(len(first))
        return rank[inverse.reshape(-1)].astype(np.float64)
    return out.astype(np.float64) if np.issubdtype(out.dtype, np.number) else out


def _assert_same_output(a, b, *, rtol=1e-7, atol=1e-9, msg=""):
    if np.issubdtype(np.asarray(a).dtype, np.number):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=msg)
    else:
        assert (np.asarray(a) == np.asarray(b)).all(), msg


def _seeded(name, **extra):
    cls = registry.get(name)
    return _make(name, **({"random_state": 0} if "random_state" in cls.params else {}), **extra)


@pytest.mark.parametrize("name", [n for n in NAMES if registry.get(n).capabilities()["sample_weight"]
                                  and n not in SAMPLE_WEIGHT_EQUIVALENCE_EXEMPT])
def test_sample_weight_two_equals_a_duplicated_row(name):
    """Weight 2 on a row fits the same model as that row given twice (scikit-learn's
    check_sample_weight_equivalence), compared on the predicted probabilities or outputs."""
    X, y = _data(name)
    rng = np.random.default_rng(3)
    w = np.ones(X.shape[0])
    w[rng.choice(X.shape[0], X.shape[0] // 3, replace=False)] = 2.0
    repeat = w.astype(int)
    X_dup = np.repeat(X, repeat, axis=0)
    y_dup = None if y is None else np.repeat(y, repeat, axis=0)
    params = SAMPLE_WEIGHT_CHECK_PARAMS.get(name, ({}, ""))[0]
    weighted = _seeded(name, **params).fit(X, y, sample_weight=w)
    duplicated = _seeded(name, **params).fit(X_dup, y_dup)
    _assert_same_output(_numeric_output(weighted, X), _numeric_output(duplicated, X), rtol=1e-5, atol=1e-6,
                        msg=f"{name}: weight 2 differs from a duplicated row")


@pytest.mark.parametrize("name", NAMES)
def test_fit_is_idempotent(name):
    """Refitting forgets the previous fit: fit(A), fit(B), fit(A) predicts as fit(A) alone (B: A's rows in
    reverse order, which changes the model of the order-dependent learners)."""
    X, y = _data(name)
    if X.dtype.names is None:  # a feature matrix: the same rows in another order (valid for every family)
        X_other, y_other = X[::-1], None if y is None else y[::-1]
    else:  # a transition table
        X_other, y_other = _data(name, seed=1)
    est = _seeded(name).fit(X, y)
    first = _numeric_output(est, X)
    est.fit(X_other, y_other)
    est.fit(X, y)
    _assert_same_output(first, _numeric_output(est, X), msg=f"{name}: a refit depends on the previous fit")


@pytest.mark.parametrize("name", [n for n in NAMES if n not in MATRIX_INPUT_EXEMPT])
def test_predict_refuses_another_number_of_features(name):
    """A matrix with one column fewer or more than at fit is refused with a sentence naming the counts."""
    X, y = _data(name)
    est = _make(name).fit(X, y)
    d = X.shape[1]
    for bad in (X[:, : d - 1], np.column_stack([X, X[:, :1]])):
        with pytest.raises(DataError, match=rf"X has {bad.shape[1]} features, but the model was fitted with {d}"):
            _output(est, bad)


@pytest.mark.parametrize("name", [n for n in NAMES if n not in MATRIX_INPUT_EXEMPT])
def test_nan_refused_unless_native_missing(name):
    """NaN in X is refused at fit and at predict with a sentence saying so, unless the estimator declares
    ``native_missing``; then both work and the outputs are finite."""
    X, y = _data(name)
    X_nan = X.copy()
    X_nan[::7, 0] = np.nan
    cls = registry.get(name)
    if cls.native_missing:
        est = _make(name).fit(X_nan, y)
        out = np.asarray(_output(est, X_nan))
        assert out.shape[0] == X.shape[0]
        if np.issubdtype(out.dtype, np.number):
            assert np.isfinite(out).all()
        return
    with pytest.raises(DataError, match="NaN"):
        _make(name).fit(X_nan, y)
    est = _make(name).fit(X, y)
    with pytest.raises(DataError, match="NaN"):
        _output(est, X_nan)


def _same_value(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same_value(u, v) for u, v in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    return type(a) is type(b) and (a == b or (a != a and b != b))  # NaN equals NaN here


@pytest.mark.parametrize("name", NAMES)
def test_fit_leaves_hyperparameters_untouched(name):
    """fit neither changes a hyperparameter (nor anything inside one) nor sets a public attribute that is not a
    fitted one (trailing underscore), as scikit-learn's check_dont_overwrite_parameters."""
    est = _make(name)
    before = copy.deepcopy(est.get_params())
    attrs_before = set(vars(est))
    X, y = _data(name)
    est.fit(X, y)
    after = est.get_params()
    changed = [k for k in before if not _same_value(before[k], after[k])]
    assert not changed, f"{name}: fit changed the hyperparameter(s) {changed}"
    added = [k for k in set(vars(est)) - attrs_before if not k.endswith("_") and not k.startswith("_")]
    assert not added, f"{name}: fit set public attributes without a trailing underscore: {added}"


SUPERVISED = [n for n in NAMES if registry.get(n).task in ("classification", "regression")]


@pytest.mark.parametrize("name", SUPERVISED)
def test_missing_target_refused(name):
    """A missing label (NaN, or None among labels) is refused at fit with a sentence saying so, never learnt as a
    class of its own or averaged into a regression."""
    X, y = _data(name)
    if registry.get(name).task == "regression":
        bad = [np.asarray(y, dtype=np.float64).copy()]
        bad[0][1] = np.nan
    else:
        as_float = np.asarray(y).astype(np.float64) if np.asarray(y).dtype.kind in "iuf" else None
        as_object = np.asarray(y).astype(object)
        as_object[1] = None
        bad = [as_object] + ([] if as_float is None else [as_float])
        if as_float is not None:
            as_float[1] = np.nan
    for y_bad in bad:
        with pytest.raises(DataError, match="NaN|None|missing"):
            _make(name).fit(X, y_bad)
