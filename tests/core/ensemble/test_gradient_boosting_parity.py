"""Parity with scikit-learn's HistGradientBoosting* on bundled datasets, same folds for both."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, load_iris, load_wine
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits

from core.ensemble.gradient_boosting_classifier import GradientBoostingClassifier
from core.ensemble.gradient_boosting_regressor import GradientBoostingRegressor
from core.model_selection.split import KFold, StratifiedKFold


@pytest.fixture(autouse=True)
def _single_thread_sklearn():
    # scikit-learn's OpenMP threads spin badly on a shared, oversubscribed CI machine
    with threadpool_limits(1):
        yield


def _digits_subsample():
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    idx = np.sort(rng.choice(len(y), 600, replace=False))
    return X[idx], y[idx]


CLASSIFICATION = {
    "iris": (lambda: load_iris(return_X_y=True), {"max_iter": 50}),
    "wine": (lambda: load_wine(return_X_y=True), {"max_iter": 50}),
    "breast_cancer": (lambda: load_breast_cancer(return_X_y=True), {"max_iter": 100}),
    "digits": (_digits_subsample, {"max_iter": 20, "max_leaf_nodes": 15}),
}


def _cv_accuracy(X, y, params, folds):
    ours, theirs = [], []
    for train, test in folds:
        kw = dict(early_stopping=False, random_state=0, **params)
        a = GradientBoostingClassifier(**kw).fit(X[train], y[train])
        b = HistGradientBoostingClassifier(**kw).fit(X[train], y[train])
        ours.append(np.mean(a.predict(X[test]) == y[test]))
        theirs.append(np.mean(b.predict(X[test]) == y[test]))
    return np.mean(ours), np.mean(theirs)


@pytest.mark.parametrize("dataset", sorted(CLASSIFICATION))
def test_classifier_accuracy_parity(dataset):
    loader, params = CLASSIFICATION[dataset]
    X, y = loader()
    folds = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))
    ours, theirs = _cv_accuracy(X, y, params, folds)
    assert abs(ours - theirs) <= 0.015, (dataset, ours, theirs)
    assert ours > 0.85


def test_regressor_r2_parity_and_near_identical_predictions():
    X, y = load_diabetes(return_X_y=True)
    ours, theirs = [], []
    for train, test in KFold(5, shuffle=True, random_state=0).split(X):
        a = GradientBoostingRegressor(early_stopping=False, max_iter=50).fit(X[train], y[train])
        b = HistGradientBoostingRegressor(early_stopping=False, max_iter=50).fit(X[train], y[train])
        ours.append(a.score(X[test], y[test]))
        theirs.append(b.score(X[test], y[test]))
        # same binning, same gains: the models agree to rounding (ties aside)
        assert np.median(np.abs(a.predict(X[test]) - b.predict(X[test]))) < 1e-3
    assert abs(np.mean(ours) - np.mean(theirs)) <= 0.03, (ours, theirs)


def test_regressor_absolute_error_parity():
    X, y = load_diabetes(return_X_y=True)
    ours, theirs = [], []
    for train, test in KFold(5, shuffle=True, random_state=0).split(X):
        kw = dict(loss="absolute_error", early_stopping=False, max_iter=50)
        ours.append(GradientBoostingRegressor(**kw).fit(X[train], y[train]).score(X[test], y[test]))
        theirs.append(HistGradientBoostingRegressor(**kw).fit(X[train], y[train]).score(X[test], y[test]))
    assert abs(np.mean(ours) - np.mean(theirs)) <= 0.03, (ours, theirs)


def test_missing_values_parity():
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(0)
    X = X.copy()
    X[rng.random(X.shape) < 0.2] = np.nan
    folds = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))
    ours, theirs = _cv_accuracy(X, y, {"max_iter": 50}, folds)
    assert abs(ours - theirs) <= 0.02, (ours, theirs)
    assert ours > 0.9


def test_sample_weight_parity():
    X, y = load_wine(return_X_y=True)
    w = np.random.default_rng(0).integers(1, 4, len(y)).astype(float)
    ours, theirs = [], []
    for train, test in StratifiedKFold(5, shuffle=True, random_state=1).split(X, y):
        kw = dict(early_stopping=False, max_iter=30)
        a = GradientBoostingClassifier(**kw).fit(X[train], y[train], sample_weight=w[train])
        b = HistGradientBoostingClassifier(**kw).fit(X[train], y[train], sample_weight=w[train])
        ours.append(a.score(X[test], y[test]))
        theirs.append(b.score(X[test], y[test]))
    assert abs(np.mean(ours) - np.mean(theirs)) <= 0.02, (ours, theirs)


def test_native_categorical_parity():
    rng = np.random.default_rng(0)
    n = 1500
    c = rng.integers(0, 30, n).astype(float)
    good = np.isin(c, [1, 4, 6, 9, 13, 17, 22, 28])
    x = rng.normal(size=n)
    y = ((1.5 * good + x + rng.normal(scale=0.7, size=n)) > 0.75).astype(int)
    c[rng.random(n) < 0.1] = np.nan
    X = np.column_stack([c, x, rng.normal(size=n)])
    mask = np.array([True, False, False])
    ours, theirs = [], []
    for train, test in StratifiedKFold(5, shuffle=True, random_state=0).split(X, y):
        kw = dict(max_iter=30, early_stopping=False)
        a = GradientBoostingClassifier(**kw).fit(X[train], y[train], categorical_features=mask)
        b = HistGradientBoostingClassifier(categorical_features=mask, **kw).fit(X[train], y[train])
        ours.append(a.score(X[test], y[test]))
        theirs.append(b.score(X[test], y[test]))
    assert abs(np.mean(ours) - np.mean(theirs)) <= 0.015, (ours, theirs)
