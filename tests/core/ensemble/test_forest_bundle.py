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


def _exact_forest():
    """A forest whose thresholds are all exact in float32: features on a 1/1024 grid, so split midpoints are
    multiples of 1/2048."""
    X, y = load_diabetes(return_X_y=True)
    X = np.round(X * 1024) / 1024
    return registry.get("random_forest_regressor")(n_estimators=10, random_state=0).fit(X, y), X


def test_the_compact_format_itself():
    """What a pickled forest holds, field by field: thresholds and counts as float32 where exact (no
    exceptions here), child offsets and children as int32, and the stacked table as its trees only (each
    node's leaf value once, not once in the trees and again in the table). The size test above passes without
    some of these; this one does not."""
    m, X = _exact_forest()
    for t in m.trees_:
        state = t.__getstate__()
        for k in ("threshold", "n_node_samples", "weighted_n_node_samples"):
            packed = state[k]
            assert isinstance(packed, tuple) and packed[0] == "f32", k
            assert packed[1].dtype == np.float32 and packed[1].shape == getattr(t, k).shape, k
            assert packed[2].size == 0 and packed[3].size == 0, k  # exact: no float64 exceptions
        assert state["child_ptr"].dtype == np.int32 and state["children"].dtype == np.int32
        assert t.child_ptr.dtype == np.intp  # the working dtype in memory
    assert set(m._table.__getstate__()) == {"_trees"}
    assert all(np.shares_memory(t.value, m._table.value) for t in m.trees_)
    # bytes: the forest pickles to its trees (no second copy of the stacked arrays), and the trees to well
    # under their float64 / int64 layout
    whole, trees = len(pickle.dumps(m)), len(pickle.dumps(m.trees_))
    plain = len(pickle.dumps([t.__dict__ for t in m.trees_]))
    assert whole <= trees + 4096
    assert trees <= 0.8 * plain, (trees, plain)
    m2 = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(m2.predict(X), m.predict(X))
    for a, b in zip(m.trees_, m2.trees_, strict=True):
        np.testing.assert_array_equal(a.threshold, b.threshold)
        assert b.threshold.dtype == np.float64


def test_counts_pack_to_float32_even_when_thresholds_stay_float64():
    m, _, _ = _forest()  # diabetes thresholds: mostly inexact in float32, kept as float64
    state = m.trees_[0].__getstate__()
    assert isinstance(state["n_node_samples"], tuple) and state["n_node_samples"][1].dtype == np.float32
    assert isinstance(state["weighted_n_node_samples"], tuple)
    assert state["child_ptr"].dtype == np.int32
