"""A forest grows its trees in groups (one pass per level for the whole group); every tree must be
exactly the tree grown alone: same splits, thresholds, fractions, values and counts, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import core.ensemble._forest as forest_mod
from core import registry

_FIELDS = ("feature", "threshold", "kind", "child_ptr", "children", "child_frac", "value", "impurity",
           "n_node_samples", "weighted_n_node_samples", "depth")


def _data(n, f, seed, missing=False, cat=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    X[:, 1] = np.round(X[:, 1], 1)
    s = X[:, 0] + 0.7 * X[:, 1] - 0.5 * X[:, 2] * X[:, 3] + 0.5 * rng.normal(size=n)
    if cat:
        X[:, 4] = rng.integers(0, 5, n)
        s += (X[:, 4] == 2) - 0.5 * (X[:, 4] == 4)
    if missing:
        X[rng.random((n, f)) < 0.05] = np.nan
    return X, np.digitize(s, np.quantile(s, [0.3, 0.7])), s


CASES = {
    "rfr_missing_cat": ("random_forest_regressor", {}, True, True, "s"),
    "rfr_max_features": ("random_forest_regressor", {"max_features": 0.5}, False, False, "s"),
    "rfr_mae": ("random_forest_regressor", {"criterion": "absolute_error", "max_depth": 4}, False, False, "s"),
    "rfc_entropy_subsample": ("random_forest_classifier",
                              {"criterion": "entropy", "class_weight": "balanced_subsample"}, True, False, "y"),
    "rfc_ratio_no_bootstrap": ("random_forest_classifier",
                               {"criterion": "gain_ratio", "bootstrap": False, "max_features": 3}, False, False, "y"),
    "rfc_decrease_ccp_cat": ("random_forest_classifier", {"min_impurity_decrease": 1e-3, "ccp_alpha": 1e-3},
                             True, True, "y"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_grouped_trees_equal_trees_grown_alone(name, monkeypatch):
    algo, params, missing, cat, target = CASES[name]
    X, y, s = _data(400 if "mae" in name else 1500, 8, 3, missing=missing, cat=cat)
    yy = s if target == "s" else y
    kw = {"categorical_features": [4]} if cat else {}
    cls = registry.get(algo)
    grouped = cls(n_estimators=6, random_state=0, **params).fit(X, yy, **kw)
    monkeypatch.setattr(forest_mod, "_GROUP_TREES", 1)
    alone = cls(n_estimators=6, random_state=0, **params).fit(X, yy, **kw)
    assert len(grouped.trees_) == len(alone.trees_) == 6
    for a, b in zip(grouped.trees_, alone.trees_, strict=True):
        assert a.node_count > 3
        for k in _FIELDS:
            np.testing.assert_array_equal(getattr(a, k), getattr(b, k), err_msg=k)
    np.testing.assert_array_equal(grouped.predict(X), alone.predict(X))
