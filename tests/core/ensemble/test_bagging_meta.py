"""Bagging: any registered base, max_samples / max_features, OOB, bootstrap statistics ([Passerini §16.1.1])."""

from __future__ import annotations

import numpy as np
import pytest

from core import registry
from core.ensemble._bagging import draw_bags
from core.params import ParamError

BC = registry.get("bagging_classifier")
BR = registry.get("bagging_regressor")


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = np.where(X[:, 0] - X[:, 2] > 0, "up", "down")
    return X, y


def test_bootstrap_unique_fraction_matches_seed_w6():
    # [Passerini §16.1.1]: a bootstrap sample holds 1 - (1 - 1/N)^N of the examples on average
    n = 100
    p = {"max_samples": 1.0, "max_features": 1.0, "bootstrap": True, "bootstrap_features": False,
         "oob_score": False, "n_estimators": 400, "random_state": 0}
    frac = np.mean([(c > 0).mean() for c, _, _ in draw_bags(p, n, 3)])
    assert frac == pytest.approx(1 - (1 - 1 / n) ** n, abs=0.005)  # 0.633968 [Passerini §16.1.1]


def test_default_tree_base_with_oob():
    X, y = _data(500)
    m = BC(n_estimators=20, oob_score=True, random_state=0).fit(X[:400], y[:400])
    assert m.score(X[400:], y[400:]) > 0.85
    assert abs(m.oob_score_ - m.score(X[400:], y[400:])) < 0.1
    assert set(m.predict(X)) <= {"up", "down"}


def test_max_samples_and_max_features():
    X, y = _data()
    m = BC(n_estimators=5, max_samples=50, max_features=3, bootstrap=False, random_state=0).fit(X, y)
    for est, feats in zip(m.estimators_, m.estimators_features_, strict=True):
        assert len(feats) == 3 and len(set(feats.tolist())) == 3
        assert est.n_features_in_ == 3
        # without bootstrap and with a weighted base, 50 distinct rows of weight 1
        assert est.tree_.weighted_n_node_samples[0] == pytest.approx(50)
    with pytest.raises(ParamError, match="max_features"):
        BC(max_features=9).fit(X, y)


def test_other_registered_base_and_hard_vote():
    X, y = _data()
    m = BC(estimator={"name": "adaboost_classifier", "params": {"n_estimators": 5}}, n_estimators=3,
           random_state=0).fit(X, y)
    assert m.score(X, y) > 0.8
    # a regressor base for a classifier is refused, naming the parameter
    with pytest.raises(ParamError, match="estimator"):
        BC(estimator={"name": "decision_tree_regressor"}).fit(X, y)
    with pytest.raises(ParamError, match="estimator"):
        BC(estimator={"name": "no_such_algorithm"}).fit(X, y)
    with pytest.raises(ParamError, match="estimator"):
        BC(estimator={"name": "decision_tree_classifier", "params": {"max_depth": -1}}).fit(X, y)


def test_bagging_regressor_variance_reduction_and_oob():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(400, 2))
    y = np.sin(X[:, 0]) + 0.3 * rng.normal(size=400)
    single = registry.get("decision_tree_regressor")().fit(X[:300], y[:300]).score(X[300:], y[300:])
    bag = BR(n_estimators=25, oob_score=True, random_state=0).fit(X[:300], y[:300])
    assert bag.score(X[300:], y[300:]) > single + 0.05
    assert 0.4 < bag.oob_score_ < 1.0
    m = BR(estimator={"name": "random_forest_regressor", "params": {"n_estimators": 3}}, n_estimators=2,
           random_state=0).fit(X, y)
    assert m.predict(X).shape == (400,)


def test_single_class_bag_is_handled():
    X = np.arange(12, dtype=float).reshape(-1, 1)
    y = np.array([0] * 11 + [1])
    m = BC(n_estimators=15, max_samples=3, random_state=0).fit(X, y)
    p = m.predict_proba(X)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    assert any(type(e).__name__ == "ConstantMember" for e in m.estimators_)


def test_forests_and_bagging_score_out_of_bag_by_one_rule():
    """The same out-of-bag rule for the forests and bagging: R^2 1.0 on a constant target predicted exactly, the
    vote's accuracy for classifiers, NaN with fewer than two out-of-bag rows."""
    import numpy as np

    from core.ensemble._oob import oob_classification, oob_regression
    from core.registry import get

    X = np.random.default_rng(0).normal(size=(60, 3))
    for name in ("random_forest_regressor", "bagging_regressor"):
        est = get(name)(n_estimators=8, oob_score=True, random_state=0).fit(X, np.full(60, 3.0))
        assert est.oob_score_ == 1.0, name
    y = (X[:, 0] > 0).astype(int)
    scores = [get(name)(n_estimators=15, oob_score=True, random_state=0).fit(X, y).oob_score_
              for name in ("random_forest_classifier", "bagging_classifier")]
    assert all(0.5 < s <= 1.0 for s in scores)
    assert np.isnan(oob_regression(np.array([1.0, 0.0]), np.array([1, 0]), np.array([1.0, 2.0]))["oob_score_"])
    out = oob_classification(np.array([[2.0, 0.0], [0.0, 0.0]]), np.array([2, 0]), np.array([0, 1]))
    assert out["oob_score_"] == 1.0 and np.isnan(out["oob_decision_function_"][1]).all()
