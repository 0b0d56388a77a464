"""Parity of the decision trees with scikit-learn under the same stratified 5-fold splits."""

from __future__ import annotations

import numpy as np
import pytest

from core import registry
from core.model_selection.split import KFold, StratifiedKFold

sklearn_datasets = pytest.importorskip("sklearn.datasets")
sktree = pytest.importorskip("sklearn.tree")

LOADERS = {
    "iris": sklearn_datasets.load_iris,
    "wine": sklearn_datasets.load_wine,
    "breast_cancer": sklearn_datasets.load_breast_cancer,
    "digits": sklearn_datasets.load_digits,
}


def cv_accuracy(make, X, y, splits):
    return float(np.mean([np.mean(make().fit(X[tr], y[tr]).predict(X[te]) == y[te]) for tr, te in splits]))


def cv_r2(make, X, y, splits):
    out = []
    for tr, te in splits:
        p = make().fit(X[tr], y[tr]).predict(X[te])
        out.append(1 - np.sum((y[te] - p) ** 2) / np.sum((y[te] - y[te].mean()) ** 2))
    return float(np.mean(out))


@pytest.mark.parametrize("dataset", list(LOADERS))
@pytest.mark.parametrize("criterion", ["gini", "entropy"])
def test_tree_classifier_parity(dataset, criterion):
    X, y = LOADERS[dataset](return_X_y=True)
    splits = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))
    DTC = registry.get("decision_tree_classifier")
    ours = cv_accuracy(lambda: DTC(criterion=criterion, random_state=0), X, y, splits)
    SK = sktree.DecisionTreeClassifier
    ref = cv_accuracy(lambda: SK(criterion=criterion, random_state=0), X, y, splits)
    assert ours >= ref - 0.015, (ours, ref)


def test_gain_ratio_tree_is_competitive():
    X, y = LOADERS["breast_cancer"](return_X_y=True)
    splits = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))
    DTC = registry.get("decision_tree_classifier")
    ours = cv_accuracy(lambda: DTC(criterion="gain_ratio"), X, y, splits)
    SK = sktree.DecisionTreeClassifier
    ref = cv_accuracy(lambda: SK(criterion="entropy", random_state=0), X, y, splits)
    assert ours >= ref - 0.03, (ours, ref)


@pytest.mark.parametrize("criterion", ["squared_error", "absolute_error"])
def test_tree_regressor_parity_diabetes(criterion):
    X, y = sklearn_datasets.load_diabetes(return_X_y=True)
    splits = list(KFold(5, shuffle=True, random_state=0).split(X))
    DTR = registry.get("decision_tree_regressor")
    ours = cv_r2(lambda: DTR(criterion=criterion, max_depth=4), X, y, splits)
    ref = cv_r2(lambda: sktree.DecisionTreeRegressor(criterion=criterion, max_depth=4, random_state=0),
                X, y, splits)
    assert ours >= ref - 0.03, (ours, ref)
