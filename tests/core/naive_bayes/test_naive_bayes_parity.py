"""Naive Bayes parity with scikit-learn on bundled datasets (same stratified 5-fold splits)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from sklearn import naive_bayes as sknb
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine

from core import registry
from core.model_selection import StratifiedKFold

DATASETS = {"iris": load_iris, "wine": load_wine, "breast_cancer": load_breast_cancer, "digits": load_digits}


@functools.cache
def _data(name):
    X, y = DATASETS[name](return_X_y=True)
    return X.astype(np.float64), y


def _folds(y):
    return list(StratifiedKFold(5, shuffle=True, random_state=0).split(np.zeros(len(y)), y))


def _cv(ours, ref, X, y):
    acc_o, acc_r, dmax = [], [], 0.0
    for train, test in _folds(y):
        ours.fit(X[train], y[train])
        ref.fit(X[train], y[train])
        acc_o.append(np.mean(ours.predict(X[test]) == y[test]))
        acc_r.append(np.mean(ref.predict(X[test]) == y[test]))
        dmax = max(dmax, float(np.abs(ours.predict_proba(X[test]) - ref.predict_proba(X[test])).max()))
    return np.mean(acc_o), np.mean(acc_r), dmax


@pytest.mark.parametrize("dataset", list(DATASETS))
def test_gaussian_nb_parity(dataset):
    X, y = _data(dataset)
    for kw in ({}, {"var_smoothing": 1e-3}):
        a, r, d = _cv(registry.get("gaussian_nb")(**kw), sknb.GaussianNB(**kw), X, y)
        assert abs(a - r) <= 0.01
        assert d <= 1e-6, d


def test_gaussian_nb_priors_and_sample_weight_parity():
    X, y = _data("wine")
    w = np.random.default_rng(0).uniform(0.2, 3.0, size=len(y))
    ours = registry.get("gaussian_nb")(priors=[0.2, 0.3, 0.5]).fit(X, y, sample_weight=w)
    ref = sknb.GaussianNB(priors=[0.2, 0.3, 0.5]).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(ours.theta_, ref.theta_, rtol=1e-10)
    np.testing.assert_allclose(ours.var_, ref.var_, rtol=1e-9)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-8)


_DISCRETE = [
    ("multinomial_nb", sknb.MultinomialNB, {"alpha": 1.0}, None),
    ("multinomial_nb", sknb.MultinomialNB, {"alpha": 0.1, "fit_prior": False}, None),
    ("bernoulli_nb", sknb.BernoulliNB, {"alpha": 1.0, "binarize": 7.5}, None),
    ("categorical_nb", sknb.CategoricalNB, {"alpha": 1.0, "min_categories": 17}, None),
    ("categorical_nb", sknb.CategoricalNB, {"alpha": 0.5, "min_categories": 4}, "quartile"),
]
# raw integer codes exist only for digits (pixels 0..16); the other sets reach CategoricalNB via quartiles
_CASES = [(*case, ds) for case in _DISCRETE for ds in DATASETS
          if not (case[0] == "categorical_nb" and case[3] is None and ds != "digits")]


@pytest.mark.parametrize("name,ref_cls,kw,transform,dataset", _CASES)
def test_discrete_nb_parity(name, ref_cls, kw, transform, dataset):
    X, y = _data(dataset)
    if transform == "quartile":
        # categorical codes from per-feature quartiles (0..3)
        qs = np.quantile(X, [0.25, 0.5, 0.75], axis=0)
        X = (X[:, None, :] > qs[None, :, :]).sum(axis=1).astype(float)
    elif name == "bernoulli_nb" and dataset != "digits":
        kw = {**kw, "binarize": None}
        X = (X > np.median(X, axis=0)).astype(float)
    a, r, d = _cv(registry.get(name)(**kw), ref_cls(**kw), X, y)
    assert abs(a - r) <= 0.01
    assert d <= 1e-8, d
