"""Stacking: the meta-learner sees out-of-fold predictions only; refit on all data; passthrough."""

from __future__ import annotations

import numpy as np
import pytest

from core import registry
from core.base import Classifier, Regressor
from core.context import NULL_CONTEXT, FitCancelled, FitContext
from core.ensemble._stacking import base_seeds
from core.ensemble.stacking_classifier import StackingClassifier
from core.ensemble.stacking_regressor import StackingRegressor
from core.model_selection.split import KFold, StratifiedKFold
from core.params import ParamError
from core.validation import check_array


class _MemoriserClassifier(Classifier):
    """1-nearest-neighbour: its in-sample predictions are perfect (test-only)."""

    name = "_test_memoriser_classifier"
    summary = "test"
    params = {}

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT):
        self.classes_, codes = self._encode_targets(y, min_classes=1)
        self.X_, self.codes_ = check_array(X).copy(), codes
        return self

    def predict_proba(self, X):
        X = check_array(X)
        d = ((X[:, None, :] - self.X_[None, :, :]) ** 2).sum(axis=2)
        out = np.zeros((X.shape[0], len(self.classes_)))
        out[np.arange(X.shape[0]), self.codes_[np.argmin(d, axis=1)]] = 1.0
        return out


class _MemoriserRegressor(Regressor):
    name = "_test_memoriser_regressor"
    summary = "test"
    params = {}

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT):
        self.X_, self.y_ = check_array(X).copy(), np.asarray(y, dtype=float)
        return self

    def predict(self, X):
        X = check_array(X)
        d = ((X[:, None, :] - self.X_[None, :, :]) ** 2).sum(axis=2)
        return self.y_[np.argmin(d, axis=1)]


class _RecordingClassifier(Classifier):
    """Final estimator that remembers the meta-features it was trained on."""

    name = "_test_recording_classifier"
    summary = "test"
    params = {}

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT):
        self.classes_, codes = self._encode_targets(y)
        self.seen_X_ = np.array(X, copy=True)
        self.seen_w_ = sample_weight
        return self

    def predict_proba(self, X):
        # average the class-probability blocks of the base models (first columns)
        K = len(self.classes_)
        X = np.asarray(X)
        p1 = np.clip(X[:, 0], 0.0, 1.0) if K == 2 else None
        if K == 2:
            return np.column_stack([1 - p1, p1])
        m = X[:, :K]
        return (m + 1e-9) / (m + 1e-9).sum(axis=1, keepdims=True)


class _RecordingRegressor(Regressor):
    name = "_test_recording_regressor"
    summary = "test"
    params = {}

    def fit(self, X, y, *, sample_weight=None, ctx=NULL_CONTEXT):
        self.seen_X_ = np.array(X, copy=True)
        self.coef_, *_ = np.linalg.lstsq(np.column_stack([X, np.ones(len(X))]), y, rcond=None)
        return self

    def predict(self, X):
        return np.column_stack([X, np.ones(len(X))]) @ self.coef_


@pytest.fixture(autouse=True)
def _test_estimators(monkeypatch):
    for cls in (_MemoriserClassifier, _MemoriserRegressor, _RecordingClassifier, _RecordingRegressor):
        monkeypatch.setitem(registry._REGISTRY, cls.name, cls)


def _noisy_classification(n=120, seed=0, classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + rng.normal(scale=1.0, size=n) > 0).astype(int)
    if classes == 3:
        y = y + (X[:, 1] > 0.8)
    return X, np.array(["neg", "pos", "zzz"])[y]


def _expected_oof(X, codes, n_classes, cv, random_state, stratified=True):
    _, fold_seed, _ = base_seeds(random_state, 1)
    splitter = (StratifiedKFold if stratified else KFold)(cv, shuffle=True, random_state=fold_seed)
    folds = splitter.split(X, codes) if stratified else splitter.split(X)
    out = np.zeros((len(X), n_classes))
    for train, test in folds:
        m = _MemoriserClassifier().fit(X[train], codes[train])
        out[np.ix_(test, m.classes_)] = m.predict_proba(X[test])
    return out


@pytest.mark.parametrize("classes", [2, 3])
def test_meta_learner_is_trained_on_out_of_fold_predictions_only(classes):
    X, y = _noisy_classification(classes=classes)
    est = StackingClassifier(
        estimators=[{"name": "_test_memoriser_classifier"}],
        final_estimator={"name": "_test_recording_classifier"},
        cv=4,
        random_state=7,
    ).fit(X, y)
    seen = est.final_estimator_.seen_X_
    codes = np.searchsorted(est.classes_, y)
    expected = _expected_oof(X, codes, classes, 4, 7)
    if classes == 2:
        expected = expected[:, 1:]  # binary: probability of the second class only
    np.testing.assert_array_equal(seen, expected)
    # in-sample predictions of a memoriser are perfect; the out-of-fold ones are not
    in_sample = est.estimators_[0].predict_proba(X)
    assert (in_sample.argmax(axis=1) == codes).all()
    oof_pred = seen[:, 0] > 0.5 if classes == 2 else seen.argmax(axis=1)
    assert 0.5 < np.mean(oof_pred == codes) < 0.95
    # the base models are refitted on all rows
    assert est.estimators_[0].X_.shape[0] == X.shape[0]


def test_regressor_meta_learner_sees_out_of_fold_predictions():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2))
    y = X[:, 0] + rng.normal(size=80)
    est = StackingRegressor(
        estimators=[{"name": "_test_memoriser_regressor"}, {"name": "gradient_boosting_regressor",
                                                           "params": {"max_iter": 5, "min_samples_leaf": 5}}],
        final_estimator={"name": "_test_recording_regressor"},
        cv=5,
        passthrough=True,
        random_state=3,
    ).fit(X, y)
    seen = est.final_estimator_.seen_X_
    assert seen.shape == (80, 2 + 2)
    np.testing.assert_array_equal(seen[:, 2:], X)  # passthrough columns
    _, fold_seed, _ = base_seeds(3, 2)
    oof = np.zeros(80)
    for train, test in KFold(5, shuffle=True, random_state=fold_seed).split(X):
        oof[test] = _MemoriserRegressor().fit(X[train], y[train]).predict(X[test])
    np.testing.assert_array_equal(seen[:, 0], oof)
    assert not np.allclose(seen[:, 0], y)  # in-sample would equal y exactly
    # prediction = final(meta(X)) with refitted bases
    meta = np.column_stack([est.estimators_[0].predict(X), est.estimators_[1].predict(X), X])
    np.testing.assert_allclose(est.predict(X), est.final_estimator_.predict(meta))
    np.testing.assert_allclose(est.estimators_[0].predict(X), y)


def test_stack_method_predict_and_passthrough():
    X, y = _noisy_classification(classes=3)
    est = StackingClassifier(
        estimators=[{"name": "_test_memoriser_classifier"}],
        final_estimator={
            "name": "gradient_boosting_classifier",
            "params": {"max_iter": 5, "min_samples_leaf": 5},
        },
        stack_method="predict",
        passthrough=True,
        cv=3,
        random_state=0,
    ).fit(X, y)
    assert est.stack_methods_ == ["predict"]
    assert est.final_estimator_.n_features_in_ == 1 + 3
    assert set(np.unique(est.predict(X))) <= set(est.classes_)
    proba = est.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_stacking_gradient_boosting_on_iris():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    small = {"max_iter": 20, "min_samples_leaf": 5}
    est = StackingClassifier(
        estimators=[
            {"name": "gradient_boosting_classifier", "params": small},
            {"name": "gradient_boosting_classifier", "params": {**small, "max_depth": 1}},
        ],
        final_estimator={"name": "gradient_boosting_classifier", "params": small},
        cv=3,
        random_state=0,
    )
    scores = []
    for train, test in StratifiedKFold(3, shuffle=True, random_state=0).split(X, y):
        scores.append(est.fit(X[train], y[train]).score(X[test], y[test]))
    assert np.mean(scores) > 0.9


def test_invalid_specs_name_the_parameter():
    X, y = _noisy_classification()
    cases = [
        ({"estimators": []}, "estimators"),
        ({"estimators": [{"name": "no_such_algorithm"}]}, "estimators"),
        ({"estimators": [{"name": "gradient_boosting_regressor"}]}, "estimators"),
        ({"estimators": [{"name": "gradient_boosting_classifier", "params": {"max_iter": -1}}]},
         "estimators"),
        ({"estimators": [{"name": "gradient_boosting_classifier", "extra": 1}]}, "estimators"),
        ({"estimators": ["gradient_boosting_classifier"]}, "estimators"),
        ({"final_estimator": {"name": "nope"}}, "final_estimator"),
        ({"estimators": [{"name": "_test_memoriser_regressor"}]}, "estimators"),
    ]
    for params, param in cases:
        with pytest.raises(ParamError) as info:
            StackingClassifier(**params).fit(X, y)
        assert info.value.param == param, params
    with pytest.raises(ParamError) as info:
        StackingRegressor(final_estimator={"name": "gradient_boosting_classifier"}).fit(X, np.zeros(len(X)))
    assert info.value.param == "final_estimator"


def test_sample_weight_reaches_final_and_progress_and_cancel():
    X, y = _noisy_classification()
    w = np.linspace(1, 2, len(y))
    spec = dict(
        estimators=[{"name": "_test_memoriser_classifier"}],
        final_estimator={"name": "_test_recording_classifier"},
        cv=3,
    )
    _RecordingClassifier.supports_sample_weight = True
    try:
        est = StackingClassifier(**spec).fit(X, y, sample_weight=w)
    finally:
        _RecordingClassifier.supports_sample_weight = False
    np.testing.assert_array_equal(est.final_estimator_.seen_w_, w)
    seen = []
    ctx = FitContext(on_progress=lambda f, m: seen.append(f), min_interval=0)
    StackingClassifier(**spec).fit(X, y, ctx=ctx)
    assert len(seen) == 3 + 1 + 1 and seen[-1] == 1.0
    est = StackingClassifier(**spec)
    with pytest.raises(FitCancelled):
        est.fit(X, y, ctx=FitContext(is_cancelled=lambda: True, cancel_interval=0.0))
    assert not hasattr(est, "final_estimator_")
