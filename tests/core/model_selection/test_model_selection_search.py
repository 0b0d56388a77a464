"""Grid / random search, sequential feature selection, bootstrap and bias-variance estimates."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.datasets import load_iris

from core.context import FitContext
from core.model_selection import (
    FixedSplits,
    GridSearch,
    RandomSearch,
    bias_variance_decomposition,
    bootstrap_estimate,
    check_cv,
    cross_validate,
    grid_search,
    random_search,
    sequential_feature_selection,
)
from core.model_selection.search import expand_grid, sample_space
from core.params import ParamError
from tests.core.model_selection._selection_toys import LeastSquares, NearestCentroid


def _shifted_problem(seed=0, n=150, shift=3.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(1.0, 1.0, size=(n, 3))
    y = X @ [1.5, -2.0, 0.5] + shift + rng.normal(0, 0.2, n)
    return X, y


def test_grid_search_picks_the_known_best_param():
    # without an intercept, only offset = 3 (the true shift) removes the bias
    X, y = _shifted_problem()
    est = LeastSquares(fit_intercept=False)
    res = grid_search(
        est, X, y, {"offset": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]}, cv=5, scoring=["mse", "r2"], random_state=0
    )
    assert res["best_params"] == {"offset": 3.0}
    assert res["metric"] == "mse" and res["greater_is_better"] is False
    ranks = [t["rank"] for t in res["trials"]]
    # mse grows as the offset moves away from 3 on either side
    assert ranks[3] == 1 and ranks[2] < ranks[1] < ranks[0] and ranks[4] < ranks[5]
    assert sorted(ranks) == [1, 2, 3, 4, 5, 6]
    assert res["ranking"][0] == 3 and res["best_index"] == 3
    assert res["best_score"] == pytest.approx(min(t["mean"]["mse"] for t in res["trials"]))
    # every trial saw the same folds: recompute one with the same seed
    folds = check_cv(5, X, y, random_state=0)
    again = cross_validate(
        LeastSquares(fit_intercept=False, offset=1.0), X, y, cv=FixedSplits(folds), scoring="mse"
    )
    assert_allclose(res["trials"][1]["scores"]["mse"], again["scores"]["mse"], rtol=1e-12)
    best = res["best_estimator"]
    assert best.offset == 3.0 and best.intercept_ == 3.0 and hasattr(best, "coef_")
    # ranking by a greater-is-better metric picks the same
    res_r2 = grid_search(est, X, y, {"offset": [1.0, 3.0, 5.0]}, scoring="r2", refit=False, random_state=0)
    assert res_r2["best_params"] == {"offset": 3.0} and res_r2["best_estimator"] is None


def test_grid_expansion_and_ranges():
    space = {"alpha": {"low": 0.01, "high": 100, "log": True, "n": 5}, "fit_intercept": [True, False]}
    from core.model_selection.search import _check_space

    checked = _check_space(LeastSquares(), space)
    grid = expand_grid(checked)
    assert len(grid) == 10
    assert_allclose(sorted({g["alpha"] for g in grid}), [0.01, 0.1, 1.0, 10.0, 100.0], rtol=1e-12)
    ints = _check_space(LeastSquares(), {"alpha": {"low": 1, "high": 4, "type": "int", "n": 10}})
    assert [g["alpha"] for g in expand_grid(ints)] == [1, 2, 3, 4]
    rng = np.random.default_rng(0)
    draws = sample_space(checked, 400, rng)
    a = np.array([d["alpha"] for d in draws])
    assert a.min() >= 0.01 and a.max() <= 100
    # log-uniform: about half the draws below the geometric midpoint 1.0
    assert 0.4 < np.mean(a < 1.0) < 0.6
    ints = sample_space(
        _check_space(LeastSquares(), {"alpha": {"low": 2, "high": 5, "type": "int"}}), 200, rng
    )
    assert {d["alpha"] for d in ints} == {2, 3, 4, 5}


@pytest.mark.parametrize(
    "space, match",
    [
        ({"nope": [1]}, "'nope' is not a parameter"),
        ({"alpha": []}, "empty"),
        ({"alpha": {"low": 1}}, "needs 'low' and 'high'"),
        ({"alpha": {"low": 0, "high": 1, "log": True}}, "log range needs low > 0"),
        ({"alpha": {"low": 2, "high": 1}}, "low <= high"),
        ({"alpha": {"low": 0, "high": 1, "type": "complex"}}, "type must be"),
        ({"alpha": 3}, "expected a list of values or a range"),
        ({}, "non-empty"),
    ],
)
def test_invalid_spaces_raise_param_error(space, match):
    X, y = _shifted_problem(n=30)
    with pytest.raises(ParamError, match=match) as info:
        grid_search(LeastSquares(), X, y, space, cv=3)
    assert info.value.param == "space"


def test_invalid_candidate_value_names_the_param():
    X, y = _shifted_problem(n=30)
    with pytest.raises(ParamError, match="alpha") as info:
        grid_search(LeastSquares(), X, y, {"alpha": [1.0, -1.0]}, cv=3)
    assert info.value.param == "alpha"


def test_random_search_is_deterministic_and_finds_a_good_region():
    X, y = _shifted_problem(seed=1)
    est = LeastSquares(fit_intercept=False)
    space = {"offset": {"low": 0.0, "high": 6.0}}
    r1 = random_search(est, X, y, space, n_iter=12, cv=3, scoring="mse", random_state=5)
    r2 = random_search(est, X, y, space, n_iter=12, cv=3, scoring="mse", random_state=5)
    assert [t["params"] for t in r1["trials"]] == [t["params"] for t in r2["trials"]]
    assert r1["best_score"] == r2["best_score"]
    offsets = [t["params"]["offset"] for t in r1["trials"]]
    assert abs(r1["best_params"]["offset"] - 3.0) == min(abs(o - 3.0) for o in offsets)
    assert r1["kind"] == "random" and len(r1["trials"]) == 12


def test_search_objects_progress_and_classifier():
    X, y = load_iris(return_X_y=True)
    seen = []
    ctx = FitContext(on_progress=lambda f, m: seen.append(f), min_interval=0.0)
    gs = GridSearch(
        NearestCentroid(),
        {"temperature": [0.01, 1.0, 100.0]},
        cv=3,
        scoring=["log_loss", "accuracy"],
        random_state=0,
    ).fit(X, y, ctx=ctx)
    ll = {t["params"]["temperature"]: t["mean"]["log_loss"] for t in gs.trials_}
    assert gs.best_params_["temperature"] == min(ll, key=ll.get)
    assert gs.predict(X[:3]).shape == (3,)
    assert seen[-1] == 1.0 and seen == sorted(seen)
    rs = RandomSearch(
        NearestCentroid(),
        {"temperature": {"low": 0.1, "high": 10, "log": True}},
        n_iter=3,
        cv=3,
        random_state=1,
    ).fit(X, y)
    assert len(rs.trials_) == 3 and rs.best_estimator_ is not None


def _informative_problem(seed=0, n=200):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    y = 3 * X[:, 1] - 2 * X[:, 4] + 1.5 * X[:, 6] + rng.normal(0, 0.5, n)
    return X, y


def test_forward_selection_recovers_informative_features():
    X, y = _informative_problem()
    names = [f"x{i}" for i in range(8)]
    res = sequential_feature_selection(
        LeastSquares(),
        X,
        y,
        direction="forward",
        cv=5,
        scoring="r2",
        random_state=0,
        feature_names=names,
        tol=1e-3,
    )
    assert sorted(res["selected"]) == [1, 4, 6]
    assert res["selected"][0] == 1  # strongest first
    assert res["selected_names"] == [names[j] for j in res["selected"]]
    assert res["support"] == [j in (1, 4, 6) for j in range(8)]
    assert [h["action"] for h in res["history"]] == ["add"] * 3
    assert res["history"][-1]["score"] == res["score"] > 0.95
    # fixed size
    res2 = sequential_feature_selection(LeastSquares(), X, y, n_features=2, cv=4, random_state=0)
    assert sorted(res2["selected"]) == [1, 4]


def test_backward_selection_recovers_informative_features():
    X, y = _informative_problem(seed=1)
    res = sequential_feature_selection(
        LeastSquares(), X, y, direction="backward", n_features=3, cv=4, scoring="mse", random_state=0
    )
    assert sorted(res["selected"]) == [1, 4, 6]
    assert all(h["action"] == "remove" for h in res["history"]) and len(res["history"]) == 5
    # "auto": removing noise features never costs more than tol; stop before removing an informative one
    auto = sequential_feature_selection(
        LeastSquares(), X, y, direction="backward", cv=4, scoring="mse", random_state=0, tol=0.01
    )
    assert {1, 4, 6} <= set(auto["selected"])


def test_selection_for_classifier_and_errors():
    X, y = load_iris(return_X_y=True)
    rng = np.random.default_rng(0)
    Xn = np.column_stack([X[:, 2:4], rng.normal(size=(150, 3)) * 3])  # petal features + noise
    res = sequential_feature_selection(NearestCentroid(), Xn, y, n_features=1, cv=3, random_state=0)
    assert res["selected"][0] in (0, 1)
    with pytest.raises(ParamError, match="direction"):
        sequential_feature_selection(NearestCentroid(), Xn, y, direction="sideways")
    with pytest.raises(ParamError, match="n_features"):
        sequential_feature_selection(NearestCentroid(), Xn, y, n_features=9)


def test_bootstrap_estimate():
    X, y = load_iris(return_X_y=True)
    res = bootstrap_estimate(NearestCentroid(), X, y, n_bootstrap=20, random_state=0)
    assert res["metric"] == "accuracy" and len(res["oob_scores"]) == 20
    assert 0.8 < res["oob_mean"] <= 1.0
    assert res["interval"][0] <= res["oob_mean"] <= res["interval"][1]
    assert res["estimate_632"] == pytest.approx(0.368 * res["train_mean"] + 0.632 * res["oob_mean"])
    again = bootstrap_estimate(NearestCentroid(), X, y, n_bootstrap=20, random_state=0)
    assert again["oob_scores"] == res["oob_scores"]


def test_bias_variance_decomposition_squared_loss():
    # few, noisy samples: least squares has a large variance, a ridge penalty trades it for bias
    rng = np.random.default_rng(3)
    beta = np.array([0.0, 3.0, 0.0, 0.0, -2.0, 0.0, 1.5, 0.0])
    X = rng.normal(size=(30, 8))
    y = X @ beta + rng.normal(0, 3.0, 30)
    Xt = rng.normal(size=(200, 8))
    yt = Xt @ beta
    low = bias_variance_decomposition(
        LeastSquares(fit_intercept=False), X, y, X_test=Xt, y_test=yt, n_rounds=25, random_state=0
    )
    assert low["expected_loss"] == pytest.approx(low["bias_squared"] + low["variance"], rel=1e-12)
    high_pen = bias_variance_decomposition(
        LeastSquares(alpha=300.0, fit_intercept=False),
        X,
        y,
        X_test=Xt,
        y_test=yt,
        n_rounds=25,
        random_state=0,
    )
    # a heavy penalty trades variance for bias
    assert high_pen["bias_squared"] > low["bias_squared"]
    assert high_pen["variance"] < low["variance"]
    # with its own hold-out and for a classifier (0-1 loss)
    Xi, yi = load_iris(return_X_y=True)
    c = bias_variance_decomposition(NearestCentroid(), Xi, yi, n_rounds=10, random_state=0)
    assert c["loss"] == "0-1" and 0 <= c["bias"] <= c["expected_loss"] + c["variance"]


def test_selection_remaps_categorical_features():
    from core.model_selection.feature_selection import _subset_fit_params

    assert _subset_fit_params({"categorical_features": [0, 3]}, [1, 3], 4)[
        "categorical_features"
    ].tolist() == [
        False,
        True,
    ]
    mask = np.array([True, False, True])
    assert _subset_fit_params({"categorical_features": mask}, [0, 1], 3)["categorical_features"].tolist() == [
        True,
        False,
    ]
    assert _subset_fit_params(None, [0], 3) is None
