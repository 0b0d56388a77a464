"""min_category_count and categories beyond max_bins: rare categories share one 'other' group."""

import numpy as np
import pytest

from core.ensemble.gradient_boosting_regressor import GradientBoostingRegressor
from core.ensemble.random_forest_regressor import RandomForestRegressor
from core.tree._binning import apply_category_groups, group_categories
from core.tree.decision_tree_regressor import DecisionTreeRegressor


def test_group_categories_maps_rare_and_unseen_codes_to_other():
    X = np.array([[0.0], [0], [0], [1], [2], [2], [2], [np.nan]])
    Xg, maps = group_categories(X, np.array([True]), 2)
    assert list(maps) == [0]
    assert Xg[:, 0].tolist()[:7] == [0, 0, 0, 2, 1, 1, 1] and np.isnan(Xg[7, 0])  # code 1 seen once -> other (2)
    assert apply_category_groups(np.array([[5.0], [2.0]]), maps)[:, 0].tolist() == [2, 1]  # unseen 5 -> other
    same, none = group_categories(X, np.array([True]), 1)
    assert none == {} and same is X


def _table(n=600, k=400, seed=0):
    rng = np.random.default_rng(seed)
    cat = rng.integers(0, k, n).astype(float)
    x = rng.normal(size=n)
    y = 3 * x + (cat < 5) * 2.0 + rng.normal(scale=0.1, size=n)
    return np.column_stack([cat, x]), y


def test_boosting_groups_categories_beyond_max_bins_instead_of_failing():
    X, y = _table()
    est = GradientBoostingRegressor(max_iter=20, max_bins=32, random_state=0)
    est.fit(X, y, categorical_features=[0])
    pred = est.predict(np.array([[999.0, 0.5], [1.0, 0.5]]))  # an unseen category predicts fine
    assert np.isfinite(pred).all()
    assert len(set(est._category_maps[0].tolist())) <= 32


@pytest.mark.parametrize("cls", [DecisionTreeRegressor, RandomForestRegressor, GradientBoostingRegressor])
def test_min_category_count_groups_rare_categories(cls):
    X, y = _table(k=200)
    params = {"random_state": 0}
    if cls is RandomForestRegressor:
        params["n_estimators"] = 10
    if cls is GradientBoostingRegressor:
        params["max_iter"] = 10
    plain = cls(**params).fit(X, y, categorical_features=[0])
    grouped = cls(min_category_count=5, **params).fit(X, y, categorical_features=[0])
    assert getattr(plain, "_category_maps", None) is None
    maps = grouped._category_maps
    assert maps is not None and 0 in maps
    counts = np.bincount(X[:, 0].astype(int))
    rare = np.flatnonzero((counts > 0) & (counts < 5))
    assert rare.size and np.all(maps[0][rare] == maps[0].max())  # every rare category shares the other group
    assert np.isfinite(grouped.predict(np.array([[12345.0, 0.0]]))).all()
