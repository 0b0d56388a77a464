"""Parity of forests, bagging and AdaBoost with scikit-learn under the same 5-fold splits."""

from __future__ import annotations

import numpy as np
import pytest

from core import registry
from core.model_selection.split import KFold, StratifiedKFold

sklearn_datasets = pytest.importorskip("sklearn.datasets")
ske = pytest.importorskip("sklearn.ensemble")

LOADERS = {
    "iris": sklearn_datasets.load_iris,
    "wine": sklearn_datasets.load_wine,
    "breast_cancer": sklearn_datasets.load_breast_cancer,
    "digits": sklearn_datasets.load_digits,
}
# small ensembles on digits keep the suite fast
SIZE = {"iris": 30, "wine": 30, "breast_cancer": 30, "digits": 15}


def cv_accuracy(make, X, y, splits):
    return float(np.mean([np.mean(make().fit(X[tr], y[tr]).predict(X[te]) == y[te]) for tr, te in splits]))


def cv_r2(make, X, y, splits):
    out = []
    for tr, te in splits:
        p = make().fit(X[tr], y[tr]).predict(X[te])
        out.append(1 - np.sum((y[te] - p) ** 2) / np.sum((y[te] - y[te].mean()) ** 2))
    return float(np.mean(out))


def _splits(X, y):
    return list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))


@pytest.mark.parametrize("dataset", list(LOADERS))
def test_random_forest_classifier_parity(dataset):
    X, y = LOADERS[dataset](return_X_y=True)
    n = SIZE[dataset]
    ours = cv_accuracy(lambda: registry.get("random_forest_classifier")(n_estimators=n, random_state=0),
                       X, y, _splits(X, y))
    ref = cv_accuracy(lambda: ske.RandomForestClassifier(n_estimators=n, random_state=0), X, y, _splits(X, y))
    assert ours >= ref - 0.015, (ours, ref)


@pytest.mark.parametrize("dataset", list(LOADERS))
def test_bagging_classifier_parity(dataset):
    X, y = LOADERS[dataset](return_X_y=True)
    n = SIZE[dataset] // 3 * 2
    ours = cv_accuracy(lambda: registry.get("bagging_classifier")(n_estimators=n, random_state=0),
                       X, y, _splits(X, y))
    ref = cv_accuracy(lambda: ske.BaggingClassifier(n_estimators=n, random_state=0), X, y, _splits(X, y))
    assert ours >= ref - 0.015, (ours, ref)


@pytest.mark.parametrize("dataset", list(LOADERS))
def test_adaboost_parity(dataset):
    X, y = LOADERS[dataset](return_X_y=True)
    n = 20 if dataset == "digits" else 50
    ours = cv_accuracy(lambda: registry.get("adaboost_classifier")(n_estimators=n, random_state=0),
                       X, y, _splits(X, y))
    ref = cv_accuracy(lambda: ske.AdaBoostClassifier(n_estimators=n, random_state=0), X, y, _splits(X, y))
    assert ours >= ref - 0.015, (ours, ref)


@pytest.mark.parametrize("name,ref_cls", [("random_forest_regressor", "RandomForestRegressor"),
                                          ("bagging_regressor", "BaggingRegressor")])
def test_regressor_parity_diabetes(name, ref_cls):
    X, y = sklearn_datasets.load_diabetes(return_X_y=True)
    splits = list(KFold(5, shuffle=True, random_state=0).split(X))
    n = 30 if name.startswith("random") else 20
    ours = cv_r2(lambda: registry.get(name)(n_estimators=n, random_state=0), X, y, splits)
    ref = cv_r2(lambda: getattr(ske, ref_cls)(n_estimators=n, random_state=0), X, y, splits)
    assert ours >= ref - 0.03, (ours, ref)
