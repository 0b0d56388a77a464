"""AdaBoost (SAMME): weights and errors by hand, error 0 / chance-level edge cases, progress."""

from __future__ import annotations

import numpy as np
import pytest

from core import registry
from core.context import FitCancelled, FitContext
from core.validation import DataError

ADA = registry.get("adaboost_classifier")


def test_first_round_alpha_and_weight_update_by_hand():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    m = ADA(n_estimators=2).fit(X, y)
    stump = m.estimators_[0]
    wrong = stump.predict(X) != y
    err = wrong.mean()
    assert m.estimator_errors_[0] == pytest.approx(err)
    assert m.estimator_weights_[0] == pytest.approx(np.log((1 - err) / err))  # K = 2: log(K-1) = 0
    # the second stump is fitted on the reweighted sample: misclassified rows weigh exp(alpha) more
    d = np.where(wrong, np.exp(m.estimator_weights_[0]), 1.0)
    d /= d.sum()
    ref = registry.get("decision_tree_classifier")(max_depth=1).fit(X, y, sample_weight=d)
    err2 = np.dot(d, ref.predict(X) != y)
    assert m.estimator_errors_[1] == pytest.approx(err2)


def test_samme_multiclass_weights_include_log_k_minus_1():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    m = ADA(n_estimators=3, learning_rate=0.5).fit(X, y)
    e = m.estimator_errors_[0]
    assert m.estimator_weights_[0] == pytest.approx(0.5 * (np.log((1 - e) / e) + np.log(2)))
    p = m.predict_proba(X)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert m.score(X, y) > 0.9


def test_perfect_learner_gets_large_finite_weight_and_stops():
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    y = np.array([0, 0, 1, 1])
    m = ADA(n_estimators=10).fit(X, y)
    assert len(m.estimators_) == 1
    assert np.isfinite(m.estimator_weights_[0]) and m.estimator_weights_[0] > 10
    assert m.score(X, y) == 1.0


def test_chance_level_learner_is_refused():
    # XOR: no stump beats chance -> error 0.5 >= 1 - 1/K
    X = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    y = np.array([0, 1, 1, 0])
    with pytest.raises(DataError, match="no better than chance"):
        ADA(n_estimators=5).fit(X, y)


def test_matches_sklearn_staged_behaviour_on_breast_cancer():
    sk = pytest.importorskip("sklearn.ensemble")
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    ours = ADA(n_estimators=10).fit(X, y)
    ref = sk.AdaBoostClassifier(n_estimators=10, random_state=0).fit(X, y)
    np.testing.assert_allclose(ours.estimator_errors_, ref.estimator_errors_, rtol=1e-6)
    np.testing.assert_allclose(ours.estimator_weights_, ref.estimator_weights_, rtol=1e-6)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-8)


def test_other_base_and_progress():
    X = np.random.default_rng(0).normal(size=(150, 3))
    y = (X[:, 0] > 0).astype(int)
    m = ADA(estimator={"name": "decision_tree_classifier", "params": {"max_depth": 2}}, n_estimators=4)
    steps = []
    m.fit(X, y, ctx=FitContext(on_progress=lambda f, _: steps.append(f), min_interval=0.0))
    assert steps and steps[-1] == 1.0 and steps == sorted(steps)
    with pytest.raises(FitCancelled):
        ADA(n_estimators=4).fit(X, y, ctx=FitContext(is_cancelled=lambda: True, cancel_interval=0.0))
    staged = m.staged_score(X, y)
    assert len(staged) == len(m.estimators_)
