"""What the common tests (and the service's all-algorithm and explanation tests) fit every registered algorithm
with: hyperparameters that make them fast (few iterations, small ensembles; estimators not listed run with their
defaults) and a small data set each can fit (by task, unless the algorithm's input is special: counts, discrete
codes, transition tables)."""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np

from core import registry

_SMALL_GBM = {"max_iter": 3, "min_samples_leaf": 3}

EXAMPLE_PARAMS: dict[str, dict] = {
    "adaboost_classifier": {"n_estimators": 5, "random_state": 0},
    "agglomerative_clustering": {"n_clusters": 3},
    "bagging_classifier": {"n_estimators": 4, "random_state": 0},
    "bagging_regressor": {"n_estimators": 4, "random_state": 0},
    "bayesian_network_classifier": {"max_iter": 5},
    "decision_tree_classifier": {"random_state": 0},
    "decision_tree_regressor": {"random_state": 0},
    "divisive_clustering": {"n_clusters": 3},
    "factor_analysis": {"n_components": 2, "max_iter": 30},
    "fitted_value_iteration": {"basis": "polynomial", "degree": 2, "max_iter": 20},
    "gaussian_mixture": {"n_components": 2, "max_iter": 20},
    "gaussian_process_classifier": {"max_iter_predict": 50},
    "gradient_boosting_classifier": {"max_iter": 5, "min_samples_leaf": 5},
    "gradient_boosting_regressor": {"max_iter": 5, "min_samples_leaf": 5},
    "ica": {"max_iter": 50},
    "kmeans": {"n_clusters": 3, "n_init": 2},
    "mlp_classifier": {"hidden_layer_sizes": [8], "max_iter": 30, "learning_rate_init": 0.01},
    "mlp_regressor": {"hidden_layer_sizes": [8], "max_iter": 30, "learning_rate_init": 0.01},
    "q_learning": {"n_epochs": 3},
    "random_forest_classifier": {"n_estimators": 5, "random_state": 0},
    "random_forest_regressor": {"n_estimators": 5, "random_state": 0},
    "sarsa": {"n_epochs": 3},
    "spectral_clustering": {"n_clusters": 3, "n_init": 2, "gamma": 0.2},
    "stacking_classifier": {
        "estimators": [
            {"name": "gradient_boosting_classifier", "params": _SMALL_GBM},
            {"name": "gradient_boosting_classifier", "params": {**_SMALL_GBM, "max_depth": 1}},
        ],
        "final_estimator": {"name": "gradient_boosting_classifier", "params": _SMALL_GBM},
        "cv": 3,
    },
    "stacking_regressor": {
        "estimators": [
            {"name": "gradient_boosting_regressor", "params": _SMALL_GBM},
            {"name": "gradient_boosting_regressor", "params": {**_SMALL_GBM, "max_depth": 1}},
        ],
        "final_estimator": {"name": "gradient_boosting_regressor", "params": _SMALL_GBM},
        "cv": 3,
    },
    "svm_classifier": {"probability": True},
    "td_learning": {"n_epochs": 3, "td_lambda": 0.5},
}


def example_params(name: str) -> dict:
    """A fresh copy of the fast hyperparameters of the algorithm ``name`` (empty: its defaults)."""
    return copy.deepcopy(EXAMPLE_PARAMS.get(name, {}))


# ----------------------------------------------------------------------------- data
def _task_default(task: str, rng: np.random.Generator):
    n = 60
    X = rng.normal(size=(n, 4))
    if task == "classification":
        y = np.array(["a", "b", "c"])[(X[:, 0] + 0.5 * X[:, 1] > 0).astype(int) + (X[:, 2] > 1)]
        return X, y
    if task == "regression":
        return X, X @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.1 * rng.normal(size=n)
    return X, None


def _bayesian_network(rng):
    n = 80
    X = rng.normal(size=(n, 3))
    y = np.array(["a", "b", "c"])[(X[:, 0] + 0.5 * X[:, 1] > 0).astype(int) + (X[:, 2] > 1)]
    cat = (X[:, 1] > 0).astype(float) + (X[:, 2] > 0.5)
    X = np.column_stack([X, cat])
    X[rng.random(n) < 0.1, 0] = np.nan
    X[rng.random(n) < 0.1, 3] = np.nan
    return X, y


def _bernoulli(rng):
    X = (rng.random((60, 4)) < np.array([0.2, 0.5, 0.7, 0.4])).astype(float)
    return X, None


def _categorical(rng):
    X = np.column_stack(
        [rng.integers(0, 3, 60), rng.choice(4, 60, p=[0.1, 0.2, 0.3, 0.4]), rng.integers(0, 2, 60)]
    )
    return X.astype(float), None


def _categorical_nb(rng):
    y = rng.integers(0, 3, size=80)
    X = np.column_stack([(y + rng.integers(0, 2, size=80)) % 4, rng.integers(0, 3, size=80), y % 2])
    return X.astype(float), np.array(["a", "b", "c"])[y]


def _multinomial_nb(rng):
    y = rng.integers(0, 3, size=60)
    lam = np.array([[4, 1, 1, 2], [1, 4, 1, 2], [1, 1, 4, 2]], dtype=float)
    X = rng.poisson(lam[y]).astype(float)
    return X, np.array(["a", "b", "c"])[y]


def _poisson(rng):
    X = rng.normal(size=(60, 4))
    y = rng.poisson(np.exp(0.3 * X[:, 0] - 0.2 * X[:, 1] + 0.5)).astype(float)
    return X, y


def _lqr(rng):
    n = 40
    A = np.array([[1.0, 0.1], [0.0, 1.0]])
    B = np.array([[0.0], [0.1]])
    Xs = rng.normal(size=(n, 2))
    U = rng.normal(size=(n, 1))
    Xn = Xs @ A.T + U @ B.T + 0.01 * rng.normal(size=(n, 2))
    dtype = [("x_0", "f8"), ("x_1", "f8"), ("u_0", "f8"), ("x_next_0", "f8"), ("x_next_1", "f8")]
    out = np.empty(n, dtype=dtype)
    out["x_0"], out["x_1"], out["u_0"] = Xs[:, 0], Xs[:, 1], U[:, 0]
    out["x_next_0"], out["x_next_1"] = Xn[:, 0], Xn[:, 1]
    return out, None


def example_table(rng, n_states: int = 6, n_actions: int = 2, terminal: bool = True) -> np.ndarray:
    """A small random MDP as a structured array (string states, one terminal state)."""
    rows = []
    for s in range(n_states - (1 if terminal else 0)):
        for a in range(n_actions):
            nxt = rng.choice(n_states, size=2, replace=False)
            pr = rng.dirichlet([1.0, 1.0])
            for j in range(2):
                rows.append((f"s{s}", f"a{a}", f"s{nxt[j]}", pr[j], float(rng.normal())))
    if terminal:
        rows.append((f"s{n_states - 1}", "a0", f"s{n_states - 1}", 1.0, 0.0))
    dtype = [("state", "U8"), ("action", "U8"), ("next_state", "U8"), ("probability", "f8"),
             ("reward", "f8"), ("terminal", "?")]
    return np.array([(*r, r[0] == f"s{n_states - 1}" and terminal) for r in rows], dtype=dtype)


def example_log(rng, n_episodes: int = 12) -> np.ndarray:
    """Logged episodes of a 5-state random walk (Sutton & Barto, Example 6.2) with random actions."""
    rows = []
    for e in range(n_episodes):
        s = 3
        while True:
            a = "left" if rng.random() < 0.5 else "right"
            s2 = s - 1 if a == "left" else s + 1
            done = s2 in (0, 6)
            rows.append((f"s{s}", a, 1.0 if s2 == 6 else 0.0, f"s{s2}", done, e))
            if done:
                break
            s = s2
    dtype = [("state", "U4"), ("action", "U8"), ("reward", "f8"), ("next_state", "U4"), ("done", "?"),
             ("episode", "i8")]
    return np.array(rows, dtype=dtype)


def example_continuous(rng, n: int = 200) -> np.ndarray:
    """A 1-d corridor: x' = x + 0.1 a + noise (a in {-1, +1}); reward 1 and done when x' >= 1."""
    x = rng.uniform(-1, 1, size=n)
    act = rng.choice([-1, 1], size=n)
    xn = x + 0.1 * act + 0.01 * rng.normal(size=n)
    done = xn >= 1.0
    out = np.empty(n, dtype=[("x_0", "f8"), ("action", "U8"), ("reward", "f8"), ("x_next_0", "f8"),
                             ("done", "?")])
    out["x_0"], out["x_next_0"], out["done"] = x, xn, done
    out["action"] = np.where(act > 0, "right", "left")
    out["reward"] = done.astype(float)
    return out


# algorithm -> rng -> (X, y); the others get the data of their task (_task_default)
EXAMPLE_DATA: dict[str, Callable[[np.random.Generator], tuple]] = {
    "bayesian_network_classifier": _bayesian_network,
    "bernoulli_density": _bernoulli,
    "categorical_density": _categorical,
    "categorical_nb": _categorical_nb,
    "fitted_value_iteration": lambda rng: (example_continuous(rng), None),
    "lqr": _lqr,
    "mdp_policy_iteration": lambda rng: (example_table(rng), None),
    "mdp_value_iteration": lambda rng: (example_table(rng), None),
    "multinomial_nb": _multinomial_nb,
    "poisson_regression": _poisson,
    "q_learning": lambda rng: (example_log(rng), None),
    "sarsa": lambda rng: (example_log(rng), None),
    "td_learning": lambda rng: (example_log(rng), None),
}


def example_data(name: str, rng: np.random.Generator) -> tuple:
    """A small ``(X, y)`` the algorithm ``name`` can fit (``y`` None when it takes none), drawn from ``rng``."""
    make = EXAMPLE_DATA.get(name)
    return make(rng) if make is not None else _task_default(registry.get(name).task, rng)
