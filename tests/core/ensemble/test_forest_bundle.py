"""Fitted forests pickle compactly and load back bit for bit; tables and trees pickled whole (older
bundles) still load."""

from __future__ import annotations

import pickle

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.ensemble import RandomForestRegressor as SkRFR

from core import registry
from core.tree._predictor import NodeTable
from core.tree._tree import Tree, _pack_f64, _unpack_f64

_FIELDS = ("feature", "threshold", "kind", "child_ptr", "children", "child_frac", "value", "impurity",
           "n_node_samples", "weighted_n_node_samples", "depth")


def _forest():
    X, y = load_diabetes(return_X_y=True)
    X = X.copy()
    X[:, 1] = (X[:, 1] > 0).astype(float)  # thresholds 0.5: exact in float32
    return registry.get("random_forest_regressor")(n_estimators=20, random_state=0).fit(X, y), X, y


def test_round_trip_is_bit_for_bit_and_the_table_is_rebuilt():
    m, X, _ = _forest()
    m2 = pickle.loads(pickle.dumps(m))
    for a, b in zip(m.trees_, m2.trees_, strict=True):
        for k in _FIELDS:
            x, y = getattr(a, k), getattr(b, k)
            assert x.dtype == y.dtype, k
            np.testing.assert_array_equal(x, y, err_msg=k)
    np.testing.assert_array_equal(m2.predict(X), m.predict(X))
    # the loaded trees' values are views into the rebuilt stacked table (one copy in memory)
    assert np.shares_memory(m2.trees_[3].value, m2._table.value)
    Xb = np.repeat(X, 6, axis=0)  # the coded batch path, rebuilt lazily after loading
    np.testing.assert_array_equal(m2.predict(Xb), m.predict(Xb))


def test_pickled_forest_within_1_2x_of_scikit_learn():
    m, X, y = _forest()
    sk = SkRFR(n_estimators=20, random_state=0).fit(X, y)
    ours, theirs = len(pickle.dumps(m)), len(pickle.dumps(sk))
    n_ours = sum(t.node_count for t in m.trees_)
    n_sk = sum(e.tree_.node_count for e in sk.estimators_)
    assert ours / n_ours <= 1.2 * theirs / n_sk  # bytes per node


def test_float32_packing_keeps_inexact_values_exactly():
    a = np.array([0.5, np.nan, 0.1, 3.0, 1e300, -2.25, np.inf])
    packed = _pack_f64(a)
    assert isinstance(packed, tuple) and packed[1].dtype == np.float32
    np.testing.assert_array_equal(_unpack_f64(packed), a)
    dense = np.random.default_rng(0).normal(size=100)  # mostly inexact: kept as float64
    assert _pack_f64(dense) is dense


def test_whole_table_and_tree_states_from_older_bundles_load():
    m, X, _ = _forest()
    old_trees = []
    for t in m.trees_:
        nt = Tree.__new__(Tree)
        nt.__setstate__(dict(t.__dict__))  # a tree pickled as its plain __dict__
        old_trees.append(nt)
    state = dict(m._table.__dict__)
    state["_trees"] = old_trees
    table = NodeTable.__new__(NodeTable)
    table.__setstate__(state)  # a table pickled whole
    np.testing.assert_array_equal(table.mean_value(X), m._table.mean_value(X))
