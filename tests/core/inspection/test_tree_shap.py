"""TreeSHAP against a brute-force Shapley enumeration, against shap's TreeExplainer, and additivity."""

import itertools
import math

import numpy as np
import pytest

from core import registry
from core.inspection import explain, tree_shap
from core.inspection._trees import tree_arrays


def brute_force(f, x, Z, groups):
    """Interventional Shapley values by enumerating every coalition of players."""
    G = int(groups.max()) + 1
    vals = {}
    for r in range(G + 1):
        for S in itertools.combinations(range(G), r):
            vals[S] = f(np.where(np.isin(groups, S), x, Z)).mean(axis=0)
    phi = np.zeros((G, len(vals[()])))
    for i in range(G):
        others = [j for j in range(G) if j != i]
        for r in range(G):
            w = math.factorial(r) * math.factorial(G - r - 1) / math.factorial(G)
            for S in itertools.combinations(others, r):
                phi[i] += w * (vals[tuple(sorted((*S, i)))] - vals[S])
    return phi


def _data(n=160, f=6, missing=0.0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    y_num = X[:, 0] + X[:, 1] * X[:, 2] + np.sin(X[:, 3])
    if missing:
        X[rng.random(X.shape) < missing] = np.nan
    return X, y_num


CASES = [
    ("decision_tree_regressor", {"max_depth": 6, "random_state": 0}, "reg"),
    ("decision_tree_classifier", {"max_depth": 5, "random_state": 0}, "clf3"),
    ("random_forest_regressor", {"n_estimators": 4, "max_depth": 5, "random_state": 0}, "reg"),
    ("random_forest_classifier", {"n_estimators": 3, "max_depth": 4, "random_state": 0}, "clf3"),
    ("gradient_boosting_regressor", {"max_iter": 6, "max_depth": 4}, "reg"),
    ("gradient_boosting_classifier", {"max_iter": 4, "max_depth": 3}, "clf2"),
    ("gradient_boosting_classifier", {"max_iter": 3, "max_depth": 3}, "clf3"),
]


def _fit(name, params, target, X, y_num):
    if target == "reg":
        y = y_num
    elif target == "clf2":
        y = np.where(y_num > 0, "yes", "no")
    else:
        y = np.digitize(y_num, [-0.5, 0.7])
    return registry.get(name)(**params).fit(X, y)


@pytest.mark.parametrize("missing", [0.0, 0.15])
@pytest.mark.parametrize("name,params,target", CASES)
def test_tree_shap_equals_brute_force(name, params, target, missing):
    X, y_num = _data(missing=missing)
    est = _fit(name, params, target, X, y_num)
    A = tree_arrays(est)
    # the adapter reproduces the model's additive output exactly
    ref = est.predict_proba(X) if A.output == "probability" else (
        est.decision_function(X) if A.output == "raw" else est.predict(X))
    ref = ref[:, None] if ref.ndim == 1 else ref
    np.testing.assert_allclose(A.predict(X), ref, rtol=0, atol=1e-12)
    Xe, Z = X[:5], X[20:45]
    phi, base = tree_shap(A, Xe, Z)
    for i in range(Xe.shape[0]):
        np.testing.assert_allclose(phi[i], brute_force(A.predict, Xe[i], Z, np.arange(X.shape[1])),
                                   rtol=0, atol=1e-9)
    np.testing.assert_allclose(base + phi.sum(axis=1), A.predict(Xe), rtol=0, atol=1e-9)


@pytest.mark.parametrize("name,params,target", CASES[:3] + CASES[4:6])
def test_grouped_players_are_one_player(name, params, target):
    X, y_num = _data(f=7, missing=0.05, seed=1)
    est = _fit(name, params, target, X, y_num)
    A = tree_arrays(est)
    groups = np.array([0, 0, 1, 2, 2, 2, 3])
    phi, base = tree_shap(A, X[:4], X[30:50], groups)
    assert phi.shape[1] == 4
    for i in range(4):
        np.testing.assert_allclose(phi[i], brute_force(A.predict, X[i], X[30:50], groups), rtol=0, atol=1e-9)


@pytest.mark.parametrize("name,params,target", [CASES[2], CASES[6]])
def test_leaf_tables_for_large_batches_equal_the_pairwise_walk(name, params, target):
    """Batches of >= tables_min_rows rows use per-leaf tables of the background; same values."""
    X, y_num = _data(n=300)
    est = _fit(name, params, target, X, y_num)
    A = tree_arrays(est)
    groups = np.array([0, 1, 1, 2, 3, 4])
    walk, base = tree_shap(A, X[:40], X[200:230], groups, tables_min_rows=10**9)
    tables, base2 = tree_shap(A, X[:40], X[200:230], groups, tables_min_rows=1)
    np.testing.assert_allclose(tables, walk, rtol=0, atol=1e-12)
    np.testing.assert_allclose(base + tables.sum(1), A.predict(X[:40]), atol=1e-9)
    np.testing.assert_allclose(tables[0], brute_force(A.predict, X[0], X[200:230], groups), atol=1e-9)


def test_categorical_splits_and_unseen_categories():
    rng = np.random.default_rng(3)
    n = 300
    cat = rng.integers(0, 4, size=n).astype(float)
    X = np.column_stack([cat, rng.normal(size=n), rng.normal(size=n)])
    y = np.where(cat == 2, 3.0, 0.0) + X[:, 1] + rng.normal(scale=0.1, size=n)
    mask = np.array([True, False, False])
    for name in ("decision_tree_regressor", "gradient_boosting_regressor"):
        est = registry.get(name)().fit(X, y, categorical_features=mask)
        A = tree_arrays(est)
        Xe = X[:4].copy()
        Xe[0, 0] = 7.0  # a category never seen in training: routed as missing
        Xe[1, 0] = np.nan
        np.testing.assert_allclose(A.predict(Xe)[:, 0], est.predict(Xe), atol=1e-12)
        phi, base = tree_shap(A, Xe, X[50:70])
        for i in range(4):
            np.testing.assert_allclose(phi[i], brute_force(A.predict, Xe[i], X[50:70], np.arange(3)), atol=1e-9)


def _sklearn_arrays(trees, n_features):
    """scikit-learn trees (the same fitted function) in the common array form; values averaged over trees."""
    from core.inspection._trees import LEAF, NUMERIC, TreeArrays

    parts, off = [], 0
    for sk in trees:
        t = sk.tree_
        inner = t.children_left >= 0
        ch = np.stack([t.children_left, t.children_right], 1)[inner].ravel() + off
        parts.append((np.where(inner, t.feature, 0), np.where(inner, NUMERIC, LEAF),
                      np.where(inner, t.threshold, np.nan), np.where(inner, 2, 0), ch,
                      np.where(inner[:, None], 0.0, t.value[:, 0, :]) / len(trees), off))
        off += t.node_count
    counts = np.concatenate([p[3] for p in parts])
    ptr = np.zeros(counts.size + 1, dtype=np.intp)
    np.cumsum(counts, out=ptr[1:])
    n_inner = int((counts > 0).sum())
    # scikit-learn goes left when x <= threshold, as TreeArrays does
    return TreeArrays(
        feature=np.concatenate([p[0] for p in parts]).astype(np.intp),
        kind=np.concatenate([p[1] for p in parts]).astype(np.int8),
        threshold=np.concatenate([p[2] for p in parts]), child_ptr=ptr,
        children=np.concatenate([p[4] for p in parts]).astype(np.intp), miss_frac=np.tile([1.0, 0.0], n_inner),
        cat_row=np.full(off, -1, dtype=np.intp), cat_pos=np.full((1, 1), -1, dtype=np.intp),
        value=np.concatenate([p[5] for p in parts]), roots=np.array([p[6] for p in parts], dtype=np.intp),
        offset=np.zeros(1), output="prediction", n_features=n_features)


@pytest.mark.parametrize("rows", [10, 40])  # the pairwise walk, and the per-leaf tables of larger batches
@pytest.mark.parametrize("kind", ["tree", "forest"])
def test_against_shap_tree_explainer(kind, rows):
    shap = pytest.importorskip("shap")
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.tree import DecisionTreeRegressor

    X, y = _data(n=300, f=5)
    if kind == "tree":
        sk = DecisionTreeRegressor(max_depth=5, random_state=0).fit(X, y)
        A = _sklearn_arrays([sk], 5)
    else:
        sk = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(X, y)
        A = _sklearn_arrays(sk.estimators_, 5)
    np.testing.assert_allclose(A.predict(X)[:, 0], sk.predict(X), atol=1e-12)
    Z = X[:40]
    phi, base = tree_shap(A, X[100 : 100 + rows], Z)
    ref = shap.TreeExplainer(sk, data=Z, feature_perturbation="interventional").shap_values(X[100 : 100 + rows])
    # shap's C++ kernel keeps thresholds and values in single precision: agreement to ~1e-7
    np.testing.assert_allclose(phi[:, :, 0], ref, rtol=0, atol=1e-6)


def test_explain_auto_picks_tree_and_expands_binary_scores():
    X, y_num = _data()
    est = _fit("gradient_boosting_classifier", {"max_iter": 4}, "clf2", X, y_num)
    r = explain(est, X[:3], X[10:30], output="margin")
    assert r["method"] == "tree" and r["output"] == "margin"
    assert r["phi"].shape == (3, 6, 2)
    np.testing.assert_allclose(r["phi"][:, :, 0], -r["phi"][:, :, 1])
    np.testing.assert_allclose(r["base"][1] + r["phi"][:, :, 1].sum(1), est.decision_function(X[:3]), atol=1e-9)
