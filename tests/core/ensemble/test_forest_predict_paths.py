"""Batch prediction paths of the stacked node table: the coded path (large batches, X ranked against
the forest's thresholds) must give exactly the leaves and the probabilities of the level-wise path."""

from __future__ import annotations

import numpy as np
import pytest

from core import registry
from core.tree._tree import NUMERIC, NodeTable

RFC = registry.get("random_forest_classifier")
RFR = registry.get("random_forest_regressor")
DTC = registry.get("decision_tree_classifier")


def _data(n, k=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    X[:, 4] = np.round(X[:, 4], 1)  # many ties
    s = X[:, 0] + 0.5 * X[:, 1] - 0.4 * X[:, 4] + 0.5 * rng.normal(size=n)
    y = np.digitize(s, np.quantile(s, np.linspace(0, 1, k + 1)[1:-1]))
    return X, y, s


def _both(table: NodeTable, X: np.ndarray, fn):
    """(coded path, level-wise path) results of ``fn(table, X)``."""
    assert table._use_coded(X.shape[0])
    coded = fn(table, X)
    saved = table._CODED_MIN_ROWS
    try:
        table._CODED_MIN_ROWS = 1 << 62
        assert not table._use_coded(X.shape[0])
        plain = fn(table, X)
    finally:
        table._CODED_MIN_ROWS = saved
    return coded, plain


def _probe_rows(table: NodeTable, X: np.ndarray, rng) -> np.ndarray:
    """Rows of X with entries replaced by split thresholds exactly (ties go left), +-inf and extremes."""
    Xq = X.copy()
    num = table.kind == NUMERIC
    for j in range(X.shape[1]):
        thr = table.thr0[num & (table.feat0 == j)]
        if thr.size:
            pick = rng.random(Xq.shape[0]) < 0.3
            Xq[pick, j] = rng.choice(thr, size=int(pick.sum()))
    Xq[:50, 0] = np.inf
    Xq[50:100, 1] = -np.inf
    Xq[100:150, 2] = 1e300
    return Xq


@pytest.mark.parametrize("k", [2, 3])
def test_coded_path_equals_levelwise_path_classifier(k):
    X, y, _ = _data(4000, k)
    m = RFC(n_estimators=25, random_state=0).fit(X, y)
    Xq = _probe_rows(m._table, X, np.random.default_rng(1))
    for Z in (X, Xq):
        coded, plain = _both(m._table, Z, lambda t, Z: t.leaves(Z))
        np.testing.assert_array_equal(coded, plain)
        coded, plain = _both(m._table, Z, lambda t, Z: t.mean_value(Z))
        np.testing.assert_array_equal(coded, plain)  # bit for bit: same summation order
    m.set_params(voting="hard")
    a, b = _both(m._table, X, lambda t, Z: m.predict_proba(Z))
    np.testing.assert_array_equal(a, b)


def test_coded_path_equals_levelwise_path_regressor_and_tree():
    X, _, s = _data(3000)
    r = RFR(n_estimators=25, max_depth=12, random_state=0).fit(X, s)
    Xq = _probe_rows(r._table, X, np.random.default_rng(2))
    coded, plain = _both(r._table, Xq, lambda t, Z: t.mean_value(Z))
    np.testing.assert_array_equal(coded, plain)  # V == 1: pairwise sums along the tree axis kept
    # one exact-mode tree (thousands of distinct thresholds: 16-bit codes) with many rows
    Xb, yb, _ = _data(8000, 3, seed=3)
    t = DTC(splitter="exact", random_state=0).fit(Xb, yb)
    t._table._CHUNK_PAIRS = 4096  # a single tree takes the coded path from 4096 rows on here
    t._table._CODED_MIN_TREES = 1
    assert t._table._coded()[4] == np.uint16
    Xq = _probe_rows(t._table, Xb, np.random.default_rng(4))
    coded, plain = _both(t._table, Xq, lambda tb, Z: tb.mean_value(Z))
    np.testing.assert_array_equal(coded, plain)
    coded, plain = _both(t._table, Xq, lambda tb, Z: tb.leaves(Z))
    np.testing.assert_array_equal(coded, plain)


def test_coded_path_blocks_and_drop_plans():
    X, y, _ = _data(5000)
    m = RFC(n_estimators=12, random_state=0).fit(X, y)
    table = m._table
    full = table.leaves(X)
    saved = table._CODED_ROWS
    try:
        table._CODED_ROWS = 1500  # several row blocks (4 blocks of 1250 rows)
        assert len(table._coded_blocks(5000)) == 4
        np.testing.assert_array_equal(table.leaves(X), full)
    finally:
        table._CODED_ROWS = saved
    # any drop plan gives the same leaves: none, every level
    _, _, _, _, _, plans = table._coded()
    try:
        table._coded_cache[5][:] = [(d, frozenset()) for d, _ in plans]
        np.testing.assert_array_equal(table.leaves(X), full)
        table._coded_cache[5][:] = [(d, frozenset(range(1, d))) for d, _ in plans]
        np.testing.assert_array_equal(table.leaves(X), full)
    finally:
        table._coded_cache[5][:] = plans


def test_coded_path_not_used_for_missing_or_categorical():
    X, y, _ = _data(3000)
    m = RFC(n_estimators=25, random_state=0).fit(X, y)
    Xn = X.copy()
    Xn[::7, 1] = np.nan
    # NaN rows take the fractional (general) path for the whole batch
    assert m._table.needs_general(Xn)
    p = m.predict_proba(Xn)
    assert np.allclose(p.sum(axis=1), 1.0)
    np.testing.assert_array_equal(p[1::7], m.predict_proba(X[1::7]))
    Xc = X.copy()
    Xc[:, 3] = (X[:, 3] > 0).astype(float) + (X[:, 3] > 1)
    mc = RFC(n_estimators=25, max_features=None, random_state=0).fit(Xc, y, categorical_features=[3])
    assert mc._table.has_cat and mc._table._coded() is None
    assert not mc._table._use_coded(3000)


def test_coded_tables_built_at_fit_and_not_pickled():
    import pickle

    X, y, _ = _data(3000)
    m = RFC(n_estimators=25, random_state=0).fit(X, y)
    assert m._table.__dict__.get("_coded_cache") is not None  # built by fit
    m2 = pickle.loads(pickle.dumps(m))
    assert "_coded_cache" not in m2._table.__dict__
    np.testing.assert_array_equal(m2.predict_proba(X), m.predict_proba(X))
    assert m2._table.__dict__.get("_coded_cache") is not None  # rebuilt by the large batch
