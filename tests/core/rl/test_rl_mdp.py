"""MDP solvers: worked examples, exact solves, finite horizon, validation of transition tables."""

import itertools

import numpy as np
import pytest

from core.params import ParamError
from core.rl.mdp_policy_iteration import MDPPolicyIteration
from core.rl.mdp_value_iteration import MDPValueIteration
from core.validation import DataError
from tests.core.rl._envs import dense, grid_4x3, random_mdp

# [Russell & Norvig] Fig. 17.3 (R(s) = -0.04, gamma = 1), the grid world behind [Passerini §15]
AIMA_U = {(1, 1): 0.705, (2, 1): 0.655, (3, 1): 0.611, (4, 1): 0.388, (1, 2): 0.762, (3, 2): 0.660,
          (1, 3): 0.812, (2, 3): 0.868, (3, 3): 0.918}
AIMA_POLICY = {(1, 1): "up", (1, 2): "up", (1, 3): "right", (2, 3): "right", (3, 3): "right",
               (3, 2): "up", (2, 1): "left", (3, 1): "left", (4, 1): "left"}


@pytest.mark.parametrize("cls", [MDPValueIteration, MDPPolicyIteration])
def test_grid_world_4x3_utilities_and_policy(cls):
    tab, terminals = grid_4x3()
    m = cls(gamma=1.0, terminal_states=terminals, tol=1e-12).fit(tab)
    states = [str(c) for c in AIMA_U]
    np.testing.assert_allclose(m.predict_value(states), list(AIMA_U.values()), atol=1e-3)
    assert m.predict(states).tolist() == [AIMA_POLICY[c] for c in AIMA_U]
    assert m.predict(terminals).tolist() == [None, None]
    ev = m.evaluate(tab)
    assert ev["policy_agreement"] == 1.0 and ev["bellman_residual"] < 1e-6
    assert ev["expected_return"] == pytest.approx(ev["optimal_expected_return"], abs=1e-6)


def _exact_optimum(tab, S, A, gamma):
    """Brute force over every deterministic policy, each evaluated by an exact dense linear solve."""
    P, R = dense(tab, S, A)
    best = np.full(S, -np.inf)
    for pol in itertools.product(range(A), repeat=S):
        Pp = P[list(pol), np.arange(S)]
        rp = R[list(pol), np.arange(S)]
        best = np.maximum(best, np.linalg.solve(np.eye(S) - gamma * Pp, rp))
    return best


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_value_and_policy_iteration_equal_brute_force_linear_solves(seed):
    rng = np.random.default_rng(seed)
    tab = random_mdp(rng, S=5, A=3, density=0.5)
    exact = _exact_optimum(tab, 5, 3, 0.9)
    for m in (MDPValueIteration(gamma=0.9, tol=1e-12).fit(tab),
              MDPPolicyIteration(gamma=0.9, evaluation="linear").fit(tab),
              MDPPolicyIteration(gamma=0.9, evaluation="iterative", tol=1e-12).fit(tab)):
        np.testing.assert_allclose(m.predict_value(np.arange(5)), exact, atol=1e-8)


def test_policy_evaluation_linear_equals_iterative_on_a_larger_mdp():
    tab = random_mdp(np.random.default_rng(5), S=60, A=4, density=0.1)
    a = MDPPolicyIteration(gamma=0.95, evaluation="linear").fit(tab)
    b = MDPPolicyIteration(gamma=0.95, evaluation="iterative", eval_sweeps=20, tol=1e-12).fit(tab)
    c = MDPValueIteration(gamma=0.95, tol=1e-12).fit(tab)
    np.testing.assert_allclose(a.v_, c.v_, atol=1e-8)
    np.testing.assert_allclose(b.v_, c.v_, atol=1e-8)
    assert (a.policy_ == c.policy_).all()
    # the Bellman optimality equation holds for the exact policy values
    P, R = dense(tab, 60, 4)
    Q = R + 0.95 * P @ a.v_
    np.testing.assert_allclose(Q.max(axis=0), a.v_, atol=1e-9)


def test_finite_horizon_backward_induction_single_max():
    """[da Silva Neto §4] erratum: V_t = max_a (R + gamma P V_{t+1}), one max over the sum."""
    # state 0: action 'safe' gives 1 and stays; 'risky' gives 0 now and moves to state 1, which pays 3 per step
    rows = {"state": [0, 0, 1], "action": ["safe", "risky", "safe"], "next_state": [0, 1, 1],
            "probability": [1.0, 1.0, 1.0], "reward": [1.0, 0.0, 3.0]}
    for cls in (MDPValueIteration, MDPPolicyIteration):
        m1 = cls(gamma=1.0, horizon=1).fit(rows)
        assert m1.predict([0]).tolist() == ["safe"] and m1.predict_value([0])[0] == 1.0
        m3 = cls(gamma=1.0, horizon=3).fit(rows)
        assert m3.predict([0]).tolist() == ["risky"] and m3.predict_value([0])[0] == 6.0
        # the notes' two separate maxima would give max R + max P V = 1 + 6 = 7 at t = 0
        assert m3.values_by_step_[0, 0] == 6.0
        assert m3.policy_by_step_[2, 0] == m3.actions_.tolist().index("safe")
        assert m3.evaluate(rows)["bellman_residual"] == 0.0


def test_labels_of_any_type_and_numeric_text():
    tab = {"state": np.array([1.0, 1.0, 2.0]), "action": np.array(["go", "stay", "go"], dtype=object),
           "next_state": np.array([2.0, 1.0, 2.0]), "probability": np.ones(3), "reward": np.array([1.0, 0.0, 0.0])}
    m = MDPValueIteration(gamma=0.5).fit(tab)
    assert m.states_.tolist() == [1, 2]
    assert m.predict([1]).tolist() == ["go"] and m.predict(["1"]).tolist() == ["go"]
    with pytest.raises(DataError, match="does not know"):
        m.predict([7])


def _base():
    return {"state": ["a", "a", "b"], "action": ["x", "x", "x"], "next_state": ["a", "b", "b"],
            "probability": [0.5, 0.5, 1.0], "reward": [1.0, 0.0, 0.0]}


@pytest.mark.parametrize("change, match", [
    ({"probability": [0.5, 0.4, 1.0]}, "sum to 0.9"),
    ({"probability": [1.5, -0.5, 1.0]}, "probability"),
    ({"probability": [-0.5, 1.5, 1.0]}, "negative probability"),
    ({"reward": [np.inf, 0.0, 0.0]}, "'reward' must hold finite"),
    ({"reward": [np.nan, 0.0, 0.0]}, "'reward' must hold finite"),
    ({"next_state": ["a", "zz", "b"]}, "'zz'"),
])
def test_bad_tables_are_named(change, match):
    tab = {**_base(), **change}
    with pytest.raises(DataError, match=match):
        MDPValueIteration().fit({k: np.asarray(v) for k, v in tab.items()})


def test_missing_columns_are_named_and_remapping_works():
    tab = _base()
    del tab["reward"]
    with pytest.raises(DataError, match="'reward'"):
        MDPValueIteration().fit(tab)
    tab = {("r" if k == "reward" else k): v for k, v in _base().items()}
    assert MDPValueIteration(reward_column="r").fit(tab).predict(["a"]).tolist() == ["x"]


def test_probability_tolerance_and_terminal_next_states():
    tab = {**_base(), "probability": [0.5, 0.5 + 5e-7, 1.0]}
    MDPValueIteration().fit(tab)  # within 1e-6
    tab = {**_base(), "next_state": ["a", "goal", "goal"]}
    m = MDPValueIteration(terminal_states=["goal"], gamma=1.0).fit(tab)
    assert m.predict(["goal"]).tolist() == [None] and m.predict_value(["goal"])[0] == 0.0


def test_gamma_one_needs_terminal_states_or_horizon():
    tab = _base()
    with pytest.raises(ParamError) as info:
        MDPValueIteration(gamma=1.0).fit(tab)
    assert info.value.param == "gamma"
    MDPValueIteration(gamma=1.0, horizon=4).fit(tab)
    with pytest.raises(ParamError):
        MDPValueIteration(gamma=1.5).fit(tab)


def test_gamma_one_with_an_improper_initial_policy():
    """Policy iteration with gamma = 1: a policy that never terminates makes the linear system singular."""
    tab = {"state": ["a", "a"], "action": ["stay", "go"], "next_state": ["a", "end"],
           "probability": [1.0, 1.0], "reward": [-1.0, -2.0]}
    m = MDPPolicyIteration(gamma=1.0, terminal_states=["end"]).fit(tab)
    assert m.predict(["a"]).tolist() == ["go"] and m.predict_value(["a"])[0] == pytest.approx(-2.0)
