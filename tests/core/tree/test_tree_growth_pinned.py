"""Growth is pinned: fixed-seed fits must give exactly the trees the reference implementation gave.

The digests below were computed with a reference growth implementation (per-row fraction arrays,
64-bit row state, unchunked routing); the memory-lean growth must reproduce them.  Any change of a
split, threshold, child fraction, value or count changes a digest.  If growth is changed on purpose, recompute them and
say why in the commit.

Floats are hashed rounded to 10 significant digits: NumPy's sums take different SIMD paths on different
CPUs (AVX-512 or not), so the last bits of thresholds, fractions and impurities are machine-specific
(exact-bit digests of ``dtc_missing_cat`` differ between machines with and without AVX-512).  A changed
split, threshold, fraction or count still changes a digest.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from core import registry

EXPECTED = {
    "dtc_hist": "f0dba76c171cc290",
    "dtc_exact_entropy": "9fedcd1d52316edb",
    "dtc_weights": "62ec8dc82228c5fe",
    "dtr_hist": "5bd96c28944af3f7",
    "dtc_missing_cat": "c237efb994bf6992",
    "dtr_missing_cat": "aca1eae7a8ed9774",
    "rfc": "196394297c4f2b7c",
    "rfc_missing": "4063f92d9aa72753",
}


def _digest(trees):
    h = hashlib.sha256()
    for t in trees:
        for a, dt in ((t.feature, np.int64), (t.threshold, np.float64), (t.kind, np.int64),
                      (t.child_ptr, np.int64), (t.children, np.int64), (t.child_frac, np.float64),
                      (t.value, np.float64), (t.impurity, np.float64), (t.n_node_samples, np.float64),
                      (t.weighted_n_node_samples, np.float64), (t.depth, np.int64)):
            a = np.asarray(a, dtype=dt)
            if dt is np.float64:
                a = np.array([float(f"{v:.10g}") for v in a.ravel().tolist()])
            h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


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
    y = np.digitize(s, np.quantile(s, [0.3, 0.7]))
    return X, y, s


def _fit(name):
    DTC = registry.get("decision_tree_classifier")
    DTR = registry.get("decision_tree_regressor")
    RFC = registry.get("random_forest_classifier")
    X, y, s = _data(8000, 10, 0)  # > 5000 rows: binned (hist) split finding
    Xm, ym, sm = _data(6000, 8, 1, missing=True, cat=True)
    fits = {
        "dtc_hist": lambda: DTC(random_state=0).fit(X, y).tree_,
        "dtc_exact_entropy": lambda: DTC(criterion="entropy", splitter="exact", random_state=0)
        .fit(X[:3000], y[:3000]).tree_,
        "dtc_weights": lambda: DTC(max_features=4, random_state=1)
        .fit(X, y, sample_weight=1 + (y == 2)).tree_,
        "dtr_hist": lambda: DTR(min_samples_leaf=3, random_state=0).fit(X, s).tree_,
        "dtc_missing_cat": lambda: DTC(criterion="gain_ratio", random_state=0)
        .fit(Xm, ym, categorical_features=[4]).tree_,
        "dtr_missing_cat": lambda: DTR(max_depth=8, random_state=0)
        .fit(Xm, sm, categorical_features=[4]).tree_,
        "rfc": lambda: RFC(n_estimators=5, random_state=0).fit(X, y).trees_,
        "rfc_missing": lambda: RFC(n_estimators=4, random_state=0).fit(Xm, ym).trees_,
    }
    out = fits[name]()
    return out if isinstance(out, list) else [out]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fitted_trees_unchanged(name):
    assert _digest(_fit(name)) == EXPECTED[name]
