"""The fused split paths (numeric features without missing values: squared error, gini, entropy) must find
exactly the splits of the general path (``_entry_scores`` + ``_best_splits``): same trees bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from core import registry
from core.tree import _splitter

_FIELDS = ("feature", "threshold", "kind", "child_ptr", "children", "child_frac", "value", "impurity",
           "n_node_samples", "weighted_n_node_samples", "depth")


def _data(n, f, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    X[:, 1] = np.round(X[:, 1], 1)  # ties: several rows per bin
    s = X[:, 0] + 0.7 * X[:, 1] - 0.5 * X[:, 2] * X[:, 3] + 0.5 * rng.normal(size=n)
    return X, np.digitize(s, np.quantile(s, [0.3, 0.7])), s, 0.5 + rng.random(n)


CASES = {
    # name: (algorithm, params, target, weighted, rows)
    "dtr_full_depth": ("decision_tree_regressor", {}, "s", False, 400),
    "dtr_weighted_leaf3": ("decision_tree_regressor", {"min_samples_leaf": 3}, "s", True, 400),
    "dtr_max_features_hist": ("decision_tree_regressor", {"max_features": 3, "splitter": "hist", "max_bins": 16},
                              "s", False, 2000),
    "rfr_grouped": ("random_forest_regressor", {"n_estimators": 6}, "s", False, 300),
    "dtc_gini_weighted": ("decision_tree_classifier", {}, "y", True, 400),
    "dtc_entropy_leaf2": ("decision_tree_classifier", {"criterion": "entropy", "min_samples_leaf": 2}, "y", False,
                          400),
    "rfc_grouped": ("random_forest_classifier", {"n_estimators": 6, "max_features": 2}, "y", False, 300),
}


def _trees(name):
    algo, params, target, weighted, n = CASES[name]
    X, y, s, w = _data(n, 6, 3)
    m = registry.get(algo)(random_state=0, **params).fit(X, s if target == "s" else y,
                                                         sample_weight=w if weighted else None)
    return m.trees_ if hasattr(m, "trees_") else [m.tree_]


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_paths_give_the_general_paths_trees(name, monkeypatch):
    init = _splitter.Splitter.__init__
    used = []
    fused_best = _splitter.Splitter._simple_best

    def spy(self, *a, **k):
        used.append(1)
        return fused_best(self, *a, **k)

    monkeypatch.setattr(_splitter.Splitter, "_simple_best", spy)
    fused = _trees(name)
    assert used  # the fused path ran

    def general(self, *a, **k):
        init(self, *a, **k)
        self.simple = self.chan_major = False

    monkeypatch.setattr(_splitter.Splitter, "__init__", general)
    used.clear()
    ref = _trees(name)
    assert not used
    assert len(fused) == len(ref)
    for a, b in zip(fused, ref, strict=True):
        for f in _FIELDS:
            x, z = np.asarray(getattr(a, f)), np.asarray(getattr(b, f))
            assert x.dtype == z.dtype and x.shape == z.shape and x.tobytes() == z.tobytes(), f
