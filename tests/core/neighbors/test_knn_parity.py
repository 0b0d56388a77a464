"""kNN parity with scikit-learn on bundled datasets, same stratified 5-fold splits."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

from core import registry
from core.model_selection import StratifiedKFold

DATASETS = {"iris": load_iris, "wine": load_wine, "breast_cancer": load_breast_cancer, "digits": load_digits}


@functools.cache
def _data(name):
    X, y = DATASETS[name](return_X_y=True)
    return X.astype(np.float64), y


def _folds(y):
    return list(StratifiedKFold(5, shuffle=True, random_state=0).split(np.zeros(len(y)), y))


IDENTICAL = [(d, "euclidean") for d in DATASETS] + [
    (d, m) for d in ("iris", "wine", "breast_cancer") for m in ("manhattan", "cosine")
] + [("digits", "cosine")]


@pytest.mark.parametrize("dataset,metric", IDENTICAL)
def test_knn_classifier_identical_predictions_brute(dataset, metric):
    """Same neighbours, votes and probabilities as scikit-learn's brute force.

    Not for Manhattan/Chebyshev on digits: integer pixels make many exact distance ties,
    which scikit-learn breaks in an unspecified order (here: lower training index first);
    those are covered by the accuracy test below.
    """
    X, y = _data(dataset)
    # digits (1797 x 64) is the slow one: its distance-weighted variant runs on the others
    for weights in ("uniform",) if dataset == "digits" else ("uniform", "distance"):
        for train, test in _folds(y):
            ours = registry.get("knn_classifier")(
                n_neighbors=5, metric=metric, weights=weights, algorithm="brute"
            ).fit(X[train], y[train])
            ref = KNeighborsClassifier(
                n_neighbors=5, metric=metric, weights=weights, algorithm="brute"
            ).fit(X[train], y[train])
            np.testing.assert_array_equal(ours.predict(X[test]), ref.predict(X[test]))
            np.testing.assert_allclose(
                ours.predict_proba(X[test]), ref.predict_proba(X[test]), atol=1e-9
            )


@pytest.mark.parametrize("dataset", list(DATASETS))
def test_knn_classifier_accuracy_all_metrics_and_engines(dataset):
    """Every metric/engine within 1 pp of scikit-learn (Chebyshev ties on integer data are
    broken by training index here, in an unspecified order in scikit-learn)."""
    X, y = _data(dataset)
    folds = _folds(y)
    metrics = [("chebyshev", 2), ("manhattan", 1)] + ([] if dataset == "digits" else [("minkowski", 3)])
    for metric, p in metrics:
        # a kd-tree in 64 dimensions only costs time: digits checks the brute engine
        for algorithm in ("brute",) if dataset == "digits" else ("brute", "kd_tree"):
            acc_o, acc_r = [], []
            for train, test in folds:
                ours = registry.get("knn_classifier")(
                    n_neighbors=7, metric=metric, p=float(p), algorithm=algorithm
                ).fit(X[train], y[train])
                ref = KNeighborsClassifier(n_neighbors=7, metric=metric, p=p, algorithm="brute")
                ref.fit(X[train], y[train])
                acc_o.append(np.mean(ours.predict(X[test]) == y[test]))
                acc_r.append(np.mean(ref.predict(X[test]) == y[test]))
            assert abs(np.mean(acc_o) - np.mean(acc_r)) <= 0.01, (metric, p, algorithm)


@pytest.mark.parametrize("weights", ["uniform", "distance"])
def test_knn_regressor_matches_sklearn(weights):
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    train, test = np.arange(0, 442, 2), np.arange(1, 442, 2)
    for metric in ("euclidean", "manhattan", "cosine"):
        ours = registry.get("knn_regressor")(n_neighbors=6, metric=metric, weights=weights).fit(
            X[train], y[train]
        )
        ref = KNeighborsRegressor(n_neighbors=6, metric=metric, weights=weights, algorithm="brute")
        ref.fit(X[train], y[train])
        np.testing.assert_allclose(ours.predict(X[test]), ref.predict(X[test]), rtol=1e-10)
