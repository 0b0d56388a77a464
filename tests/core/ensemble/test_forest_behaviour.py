"""Random forests: bootstrap/OOB, voting, feature importances, missing values, threads, progress."""

from __future__ import annotations

import numpy as np
import pytest

from core import registry
from core.context import FitCancelled, FitContext
from core.params import ParamError

RFC = registry.get("random_forest_classifier")
RFR = registry.get("random_forest_regressor")


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


def test_oob_score_tracks_holdout_accuracy():
    X, y = _data(600)
    m = RFC(n_estimators=40, oob_score=True, random_state=0).fit(X[:400], y[:400])
    assert 0.7 < m.oob_score_ <= 1.0
    assert abs(m.oob_score_ - m.score(X[400:], y[400:])) < 0.08
    assert m.oob_decision_function_.shape == (400, 2)
    r = RFR(n_estimators=30, oob_score=True, random_state=0).fit(X[:400], X[:400, 0] * 2 + X[:400, 1])
    assert 0.6 < r.oob_score_ < 1.0
    with pytest.raises(ParamError, match="oob_score"):
        RFC(bootstrap=False, oob_score=True).fit(X, y)


def test_oob_matches_sklearn_definition_roughly():
    sk = pytest.importorskip("sklearn.ensemble")
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    ours = RFC(n_estimators=50, oob_score=True, random_state=0).fit(X, y).oob_score_
    ref = sk.RandomForestClassifier(n_estimators=50, oob_score=True, random_state=0).fit(X, y).oob_score_
    assert abs(ours - ref) < 0.02


def test_soft_and_hard_voting():
    X, y = _data()
    soft = RFC(n_estimators=15, random_state=1).fit(X, y)
    hard = RFC(n_estimators=15, random_state=1, voting="hard").fit(X, y)
    per_tree = soft._table.per_tree_values(X)  # (n, T, K)
    np.testing.assert_allclose(soft.predict_proba(X), per_tree.mean(axis=1))
    votes = np.argmax(per_tree, axis=2)
    frac1 = (votes == 1).mean(axis=1)
    np.testing.assert_allclose(hard.predict_proba(X)[:, 1], frac1)
    assert (hard.predict(X) == (frac1 > 0.5)).mean() > 0.99


def test_single_row_equals_batch_and_trees_differ():
    X, y = _data()
    m = RFC(n_estimators=10, random_state=0).fit(X, y)
    batch = m.predict_proba(X)
    for i in (0, 5, 17):
        np.testing.assert_allclose(m.predict_proba(X[i : i + 1])[0], batch[i])
    assert len({t.node_count for t in m.trees_}) > 1  # bootstrap + feature subsets make trees differ


def test_feature_importances_find_informative_features():
    X, y = _data(500)
    m = RFC(n_estimators=30, random_state=0).fit(X, y)
    assert m.feature_importances_.sum() == pytest.approx(1.0)
    assert set(np.argsort(m.feature_importances_)[-2:]) == {0, 1}
    r = RFR(n_estimators=20, random_state=0).fit(X, 3 * X[:, 3] + X[:, 4])
    assert np.argmax(r.feature_importances_) == 3


def test_threads_give_identical_forest():
    X, y = _data()
    a = RFC(n_estimators=8, random_state=3, n_jobs=1).fit(X, y)
    b = RFC(n_estimators=8, random_state=3, n_jobs=2).fit(X, y)
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X))
    with pytest.raises(ParamError, match="n_jobs"):
        RFC(n_jobs=0).fit(X, y)


def test_progress_one_step_per_tree_and_cancellation():
    X, y = _data()
    steps = []
    ctx = FitContext(on_progress=lambda f, m: steps.append(f), min_interval=0.0)
    RFC(n_estimators=7, random_state=0).fit(X, y, ctx=ctx)
    np.testing.assert_allclose(steps, np.arange(1, 8) / 7)
    calls = []

    def cancelled():
        calls.append(1)
        return len(calls) >= 3

    m = RFC(n_estimators=50, random_state=0)
    with pytest.raises(FitCancelled):
        m.fit(X, y, ctx=FitContext(is_cancelled=cancelled, cancel_interval=0.0))
    assert len(calls) == 3  # stopped after the third tree
    assert not hasattr(m, "trees_")


def test_missing_and_categorical_inputs():
    rng = np.random.default_rng(0)
    c = rng.integers(0, 5, size=400).astype(float)
    X = np.c_[c, rng.normal(size=(400, 3))]
    y = np.isin(c, [1, 3]).astype(int)
    X[rng.random(400) < 0.1, 0] = np.nan
    m = RFC(n_estimators=20, max_features=None, random_state=0).fit(X, y, categorical_features=[0])
    known = ~np.isnan(X[:, 0])
    assert m.score(X[known], y[known]) > 0.97
    p = m.predict_proba(X[~known])
    assert np.isfinite(p).all() and np.allclose(p.sum(axis=1), 1.0)


def test_regressor_close_to_truth_and_max_samples():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(500, 3))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1]
    m = RFR(n_estimators=30, random_state=0, max_samples=0.5).fit(X[:400], y[:400])
    assert m.score(X[400:], y[400:]) > 0.85
    with pytest.raises(ParamError, match="max_samples"):
        RFR(max_samples=10_000).fit(X, y)


def test_histogram_mode_forest():
    X, y = _data(2000)
    a = RFC(n_estimators=10, splitter="hist", max_bins=16, random_state=0).fit(X[:1500], y[:1500])
    b = RFC(n_estimators=10, splitter="exact", random_state=0).fit(X[:1500], y[:1500])
    assert abs(a.score(X[1500:], y[1500:]) - b.score(X[1500:], y[1500:])) < 0.04


def test_batched_fast_path_equals_general_path():
    # 3000 x 30 (sample, tree) pairs span several cache-sized batches and tree groups
    X, y = _data(3000)
    m = RFC(n_estimators=30, random_state=0).fit(X, y)
    table = m._table
    table_groups = table._GROUP_NODES
    try:
        table._GROUP_NODES = 2000  # force several tree groups
        fast = m.predict_proba(X)
    finally:
        table._GROUP_NODES = table_groups
    s, t, node, w = table.weighted_leaves(X)
    assert (w == 1.0).all()  # no missing values: one leaf per (sample, tree)
    leaves = np.empty((3000, 30), dtype=np.intp)
    leaves[s, t] = node
    np.testing.assert_array_equal(table.leaves(X), leaves)
    np.testing.assert_allclose(fast, table.value[leaves].mean(axis=1))


@pytest.mark.parametrize("cw", ["balanced", "balanced_subsample"])
def test_class_weight_raises_minority_recall(cw):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    y = (X[:, 0] + 0.8 * rng.normal(size=600) > 1.3).astype(int)  # ~10% positives
    plain = RFC(n_estimators=20, min_samples_leaf=10, random_state=0).fit(X, y)
    weighted = RFC(n_estimators=20, min_samples_leaf=10, class_weight=cw, random_state=0).fit(X, y)
    recall = lambda m: (m.predict(X)[y == 1] == 1).mean()  # noqa: E731
    assert recall(weighted) > recall(plain)
    RFC(n_estimators=3, bootstrap=False, class_weight=cw, random_state=0).fit(X, y)


def test_regression_tree_forest_with_missing_and_categorical():
    rng = np.random.default_rng(0)
    c = rng.integers(0, 4, size=500).astype(float)
    x = rng.normal(size=500)
    y = np.array([0.0, 5.0, -3.0, 2.0])[c.astype(int)] + x
    X = np.c_[c, x]
    X[rng.random(500) < 0.1, 1] = np.nan
    r = RFR(n_estimators=15, random_state=0).fit(X[:400], y[:400], categorical_features=[0])
    assert r.score(X[400:], y[400:]) > 0.85
    t = registry.get("decision_tree_regressor")(max_depth=1).fit(X, y, categorical_features=[0])
    assert t.tree_.kind[0] == 2
    np.testing.assert_allclose(t.predict(np.array([[1.0, 0.0]])), y[c == 1].mean())
