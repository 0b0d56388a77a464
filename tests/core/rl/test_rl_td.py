"""Q-learning, SARSA and TD(lambda) against exact answers; LQR against SciPy; fitted value iteration."""

import numpy as np
import pytest
from scipy.linalg import solve_discrete_are

from core.context import FitCancelled, FitContext
from core.params import ParamError
from core.rl.fitted_value_iteration import FittedValueIteration
from core.rl.lqr import LQR
from core.rl.mdp_value_iteration import MDPValueIteration
from core.rl.q_learning import QLearning
from core.rl.sarsa import Sarsa
from core.rl.td_learning import TDLearning
from core.validation import DataError
from tests.core.example_params import example_continuous, example_data
from tests.core.rl._envs import cliff_walking, random_mdp, random_walk


def _optimal_q(tab, gamma, **kw):
    return MDPValueIteration(gamma=gamma, tol=1e-12, **kw).fit(tab)


def _uniform_log(tab, rng, n):
    """n transitions with uniformly random (state, action), next states sampled from the table."""
    by_sa = {}
    for s, a, s2, p, r in zip(tab["state"], tab["action"], tab["next_state"], tab["probability"], tab["reward"],
                              strict=True):
        by_sa.setdefault((s, a), []).append((s2, p, r))
    keys = list(by_sa)
    rows = {"state": [], "action": [], "reward": [], "next_state": [], "done": []}
    for k in rng.integers(len(keys), size=n):
        (s, a), outs = keys[k], by_sa[keys[k]]
        j = rng.choice(len(outs), p=[o[1] for o in outs])
        for col, v in zip(rows, (s, a, outs[j][2], outs[j][0], False), strict=True):
            rows[col].append(v)
    return {k: np.asarray(v) for k, v in rows.items()}


def _empirical_table(log):
    """The maximum-likelihood MDP of a log: what Q-learning sweeps over that log converge to."""
    counts, totals, rewards = {}, {}, {}
    for s, a, r, n in zip(log["state"], log["action"], log["reward"], log["next_state"], strict=True):
        counts[(s, a, n)] = counts.get((s, a, n), 0) + 1
        totals[(s, a)] = totals.get((s, a), 0) + 1
        rewards[(s, a, n)] = r
    keys = list(counts)
    return {"state": np.array([k[0] for k in keys]), "action": np.array([k[1] for k in keys]),
            "next_state": np.array([k[2] for k in keys]),
            "probability": np.array([counts[k] / totals[k[:2]] for k in keys]),
            "reward": np.array([rewards[k] for k in keys])}


@pytest.mark.parametrize("batch_size", [1, 64])
def test_q_learning_from_logged_transitions_converges_to_optimal_q(batch_size):
    tab = random_mdp(np.random.default_rng(3), S=6, A=2, density=0.5)
    log = _uniform_log(tab, np.random.default_rng(4), 6000)
    target = _optimal_q(_empirical_table(log), 0.8)
    m = QLearning(gamma=0.8, alpha_schedule="visits", alpha_power=0.6, n_epochs=30,
                  batch_size=batch_size).fit(log)
    np.testing.assert_allclose(m.predict_q(np.arange(6)), target.q_, atol=0.05)
    np.testing.assert_allclose(m.predict_q(np.arange(6)), _optimal_q(tab, 0.8).q_, atol=0.4)
    assert m.evaluate(tab)["expected_return"] > 0.95 * m.evaluate(tab)["optimal_expected_return"]
    assert m.evaluate(log)["bellman_residual"] < 1.5


@pytest.mark.parametrize("n_envs", [1, 32])
def test_q_learning_by_simulation_converges_to_optimal_q(n_envs):
    tab = random_mdp(np.random.default_rng(3), S=6, A=2, density=0.5)
    opt = _optimal_q(tab, 0.8)
    m = QLearning(gamma=0.8, simulate={"episodes": 400, "max_steps": 40}, epsilon=0.5, alpha_schedule="visits",
                  alpha_power=0.7, n_envs=n_envs, random_state=0).fit(tab)
    np.testing.assert_allclose(m.q_, opt.q_, atol=0.25)
    assert m.evaluate(tab)["policy_agreement"] == 1.0
    again = QLearning(**m.get_params()).fit(tab)
    np.testing.assert_array_equal(again.q_, m.q_)


def _greedy_path(model, start="3,0", goal="3,11", limit=60):
    path, s = [start], start
    while s != goal and len(path) < limit:
        a = model.predict([s])[0]
        i, j = map(int, s.split(","))
        di, dj = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}[a]
        s = f"{min(max(i + di, 0), 3)},{min(max(j + dj, 0), 11)}"
        path.append(s)
    return path


def test_cliff_walking_sarsa_takes_the_safe_path_q_learning_the_optimal_one():
    """Sutton & Barto, Example 6.6 (epsilon = 0.1, alpha = 0.5)."""
    tab, goal = cliff_walking()
    kw = {"gamma": 1.0, "terminal_states": goal, "epsilon": 0.1, "alpha": 0.5, "n_envs": 8,
          "simulate": {"episodes": 800, "max_steps": 500, "start_states": ["3,0"]}, "random_state": 2}
    for n_envs in (1, 8):  # strictly sequential, and eight episodes side by side
        q = QLearning(**{**kw, "n_envs": n_envs}).fit(tab)
        s = Sarsa(**{**kw, "n_envs": n_envs}).fit(tab)
        _check_cliff_paths(q, s, tab)


def _check_cliff_paths(q, s, tab):
    q_path, s_path = _greedy_path(q), _greedy_path(s)
    assert q_path[-1] == s_path[-1] == "3,11"
    assert len(q_path) - 1 == 13  # the optimal path: up, 11 x right along the cliff, down
    assert all(p.startswith("2,") for p in q_path[1:-1])
    rows = [int(p.split(",")[0]) for p in s_path[1:-1]]
    assert min(rows) <= 1 and len(s_path) - 1 > 13  # SARSA keeps away from the cliff edge
    assert q.evaluate(tab)["policy_agreement"] > s.evaluate(tab)["policy_agreement"]


@pytest.mark.parametrize("lam, n_envs", [(0.0, 1), (0.5, 1), (0.8, 1), (0.0, 16), (0.8, 16)])
def test_td_lambda_random_walk_by_simulation(lam, n_envs):
    tab, terms, true_v = random_walk()
    m = TDLearning(gamma=1.0, td_lambda=lam, terminal_states=terms, alpha_schedule="visits", alpha_power=0.6,
                   n_envs=n_envs, simulate={"episodes": 3000, "max_steps": 1000, "start_states": ["C"]},
                   random_state=0).fit(tab)
    v = m.predict_value(list("ABCDE"))
    assert np.sqrt(np.mean((v - true_v) ** 2)) < 0.05


@pytest.mark.parametrize("lam, batch", [(0.0, 1), (0.0, 16), (0.7, 16)])
def test_td_lambda_random_walk_from_logged_episodes(lam, batch):
    rng = np.random.default_rng(0)
    names = "LABCDER"
    rows = {"state": [], "reward": [], "next_state": [], "done": [], "episode": [], "action": []}
    for e in range(400):
        i = 3
        while i not in (0, 6):
            j = i + (1 if rng.random() < 0.5 else -1)
            for k, v in zip(rows, (names[i], float(j == 6), names[j], j in (0, 6), e, "step"), strict=True):
                rows[k].append(v)
            i = j
    log = {k: np.asarray(v) for k, v in rows.items()}
    m = TDLearning(gamma=1.0, td_lambda=lam, alpha=0.02, n_epochs=40, batch_size=batch).fit(log)
    v = m.predict_value(list("ABCDE"))
    assert np.sqrt(np.mean(v - np.arange(1, 6) / 6) ** 2) < 0.05
    assert m.evaluate(log)["bellman_residual"] < 0.6


def test_logged_data_errors_name_the_columns():
    log = {"state": np.array(["a"]), "action": np.array(["x"]), "reward": np.array([1.0]),
           "next_state": np.array(["b"])}
    with pytest.raises(DataError, match="'done'"):
        QLearning().fit(log)
    with pytest.raises(ParamError):
        QLearning(gamma=1.0).fit({**log, "done": np.array([False])})
    with pytest.raises(ParamError) as info:
        QLearning(simulate={"episodes": 0, "max_steps": 3}).fit(log)
    assert info.value.param == "simulate"


def test_cancellation_stops_a_simulation():
    tab = random_mdp(np.random.default_rng(3), S=6, A=2)
    m = QLearning(gamma=0.9, simulate={"episodes": 10**6, "max_steps": 100})
    with pytest.raises(FitCancelled):
        m.fit(tab, ctx=FitContext(is_cancelled=lambda: True, cancel_interval=0.0))
    assert not hasattr(m, "q_")


# -- LQR -------------------------------------------------------------------------------------------
def test_lqr_seed_erratum_scalar_case():
    """[da Silva Neto §4] §7: A = B = U = V = 1, Phi_{t+1} = -1 (P = 1): a* = -s/2 and Phi_t = -1.5."""
    m = LQR(A=[[1.0]], B=[[1.0]], Q=[[1.0]], R=[[1.0]], horizon=1).fit()
    assert m.predict(np.array([[2.0]]))[0, 0] == pytest.approx(-1.0)  # the notes' formula gives +1
    assert m.P_[0, 0] == pytest.approx(1.5)


@pytest.mark.parametrize("seed", [0, 1])
def test_lqr_infinite_horizon_matches_solve_discrete_are(seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(3, 3))
    B = rng.normal(size=(3, 2))
    Q = np.diag([1.0, 2.0, 0.5])
    R = np.array([[1.0, 0.2], [0.2, 2.0]])
    m = LQR(A=A.tolist(), B=B.tolist(), Q=Q.tolist(), R=R.tolist()).fit()
    P = solve_discrete_are(A, B, Q, R)
    K = np.linalg.solve(R + B.T @ P @ B, B.T @ P @ A)
    np.testing.assert_allclose(m.P_, P, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(m.K_, K, rtol=1e-7, atol=1e-9)
    assert m.evaluate()["closed_loop_spectral_radius"] < 1.0
    fin = LQR(A=A.tolist(), B=B.tolist(), Q=Q.tolist(), R=R.tolist(), horizon=300).fit()
    np.testing.assert_allclose(fin.K_, K, rtol=1e-6, atol=1e-8)
    x = rng.normal(size=(4, 3))
    np.testing.assert_allclose(m.predict(x), -x @ K.T)


def test_lqr_from_logged_data_by_least_squares():
    X, _ = example_data("lqr", np.random.default_rng(0))
    m = LQR().fit(X)
    np.testing.assert_allclose(m.A_, [[1.0, 0.1], [0.0, 1.0]], atol=0.02)
    np.testing.assert_allclose(m.B_, [[0.0], [0.1]], atol=0.02)
    assert m.predict(X).shape == (len(X), 1)
    assert "dynamics_mse" in m.evaluate(X)


@pytest.mark.parametrize("params, bad", [
    ({"A": [[1.0, 0.0]], "B": [[1.0]]}, "A"),
    ({"A": [[1.0]], "B": [[1.0], [2.0]]}, "B"),
    ({"A": [[1.0]], "B": [[1.0]], "Q": [[1.0, 0.0], [0.0, 1.0]]}, "Q"),
    ({"A": [[1.0]], "B": [[1.0]], "R": [[-1.0]]}, "R"),
    ({"A": [[1.0]]}, "B"),
])
def test_lqr_mis_sized_matrices(params, bad):
    with pytest.raises(ParamError) as info:
        LQR(**params).fit()
    assert info.value.param == bad


def test_lqr_data_without_columns():
    with pytest.raises(DataError, match="'u_0'"):
        LQR().fit({"x_0": np.ones(5), "x_next_0": np.ones(5)})


# -- fitted value iteration -------------------------------------------------------------------------
def test_fitted_value_iteration_corridor():
    X = example_continuous(np.random.default_rng(0), n=1000)
    m = FittedValueIteration(gamma=0.9, basis="sigmoid", n_centers=10).fit(X)
    assert m.converged_
    grid = np.linspace(-0.9, 0.9, 7).reshape(-1, 1)
    assert (m.predict(grid) == "right").all()
    v = m.predict_value(grid)
    assert (np.diff(v) > 0).all()
    assert m.evaluate(X)["bellman_residual"] < 0.3
    with pytest.raises(DataError, match="'x_next_0'"):
        FittedValueIteration().fit({k: X[k] for k in ("x_0", "action", "reward", "done")})


def test_visit_count_rate_gives_sample_means_and_epsilon_decays():
    """alpha = 1/n on terminal transitions makes Q(s, a) the running mean of the rewards (any batch size)."""
    rng = np.random.default_rng(0)
    r = rng.normal(size=50)
    log = {"state": np.array(["s"] * 50), "action": np.array(["a"] * 50), "reward": r,
           "next_state": np.array(["end"] * 50), "done": np.ones(50, dtype=bool)}
    for batch in (1, 7, 64):
        m = QLearning(alpha_schedule="visits", alpha_power=1.0, n_epochs=1, batch_size=batch).fit(log)
        assert m.predict_q(["s"])[0, 0] == pytest.approx(r.mean(), rel=1e-12)
        assert m.visits_[m.states_.tolist().index("s"), 0] == 50
    from core.rl._td import epsilon_at

    p = {"epsilon": 0.5, "epsilon_decay": 0.9, "epsilon_min": 0.1}
    assert epsilon_at(p, 0) == 0.5 and epsilon_at(p, 1) == pytest.approx(0.45) and epsilon_at(p, 100) == 0.1
    # a decaying epsilon reaches the optimal policy on the cliff as well
    tab, goal = cliff_walking()
    q = QLearning(gamma=1.0, terminal_states=goal, epsilon=1.0, epsilon_decay=0.99, epsilon_min=0.05, alpha=0.5,
                  simulate={"episodes": 600, "max_steps": 500, "start_states": ["3,0"]}, random_state=0).fit(tab)
    assert len(_greedy_path(q)) - 1 == 13
