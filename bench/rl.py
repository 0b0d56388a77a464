"""Benchmark of the reinforcement-learning family (prints ratios and rates).

    OPENBLAS_NUM_THREADS=1 python bench/rl.py            # full run (about a minute)
    OPENBLAS_NUM_THREADS=1 python bench/rl.py --quick    # smaller problems

1. Value iteration on a 10,000-state, 4-action sparse MDP (8 successors per (state, action), gamma 0.99):
   ``mdp_value_iteration.fit`` on the transition table (building and validating the MDP included, and
   alone: the sweeps) against the practical floor, a plain SciPy loop ``V = max_a (R + gamma P V)`` over the
   same CSR matrix running the same number of sweeps.  Target: <= 2x.
2. Tabular Q-learning updates per second, transitions from a table, one core: from 1,000,000 logged
   transitions (``batch_size`` 1: strictly sequential; 1024 and 65536: vectorised batches) and by simulating episodes
   on the table (``n_envs`` 1 and 1024).  Target: >= 1e6 updates/s.

Rounds are interleaved (ours, baseline, ours, ...) and the medians reported; the machine is shared, so
expect noise.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from core.rl import _mdp as M  # noqa: E402
from core.rl.mdp_value_iteration import MDPValueIteration  # noqa: E402
from core.rl.q_learning import QLearning  # noqa: E402


def sparse_table(S: int, A: int, k: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    n = S * A * k
    s = np.repeat(np.arange(S), A * k)
    a = np.tile(np.repeat(np.arange(A), k), S)
    nxt = rng.integers(0, S, size=n)
    p = rng.random(n).reshape(-1, k)
    p = (p / p.sum(axis=1, keepdims=True)).ravel()
    p[k - 1::k] = 1.0 - p.reshape(-1, k)[:, :-1].sum(axis=1)  # exact sums
    r = rng.normal(size=n)
    return {"state": s.astype(float), "action": a.astype(float), "next_state": nxt.astype(float),
            "probability": p, "reward": r}


def scipy_loop(mdp: M.MDP, gamma: float, sweeps: int) -> np.ndarray:
    """The floor: textbook value iteration over the same CSR matrix, nothing else."""
    P, R, A, S = mdp.P, mdp.R, mdp.n_actions, mdp.n_states
    V = np.zeros(S)
    for _ in range(sweeps):
        V_new = (R + gamma * (P @ V).reshape(A, S)).max(axis=0)
        _ = np.max(np.abs(V_new - V))
        V = V_new
    return V


def bench_value_iteration(S: int, rounds: int) -> None:
    tab = sparse_table(S, 4, 8)
    gamma = 0.99
    ours_total, ours_sweeps, floor = [], [], []
    for _ in range(rounds):
        t = time.perf_counter()
        m = MDPValueIteration(gamma=gamma, tol=1e-6, max_iter=100_000).fit(tab)
        total = time.perf_counter() - t
        t = time.perf_counter()
        mdp = M.build_mdp(tab, m.get_params())
        build = time.perf_counter() - t
        t = time.perf_counter()
        V = scipy_loop(mdp, gamma, m.n_iter_)
        floor.append(time.perf_counter() - t)
        ours_total.append(total)
        ours_sweeps.append(total - build)
        assert np.allclose(V, m.v_, atol=1e-9)
    f, tt, ts = (statistics.median(x) for x in (floor, ours_total, ours_sweeps))
    print(f"value iteration S={S} A=4 nnz={S * 4 * 8} sweeps={m.n_iter_}: fit {tt:.3f}s (sweeps alone {ts:.3f}s), "
          f"SciPy loop {f:.3f}s -> ratio {tt / f:.2f}x (sweeps alone {ts / f:.2f}x)")


def logged_table(S: int, A: int, n: int, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    s = rng.integers(0, S, size=n)
    a = rng.integers(0, A, size=n)
    ns = (s + a + rng.integers(-2, 3, size=n)) % S
    r = rng.normal(size=n)
    return {"state": s.astype(float), "action": a.astype(float), "reward": r, "next_state": ns.astype(float),
            "done": np.zeros(n, dtype=bool)}


def bench_q_learning(n_logged: int, episodes: int, rounds: int) -> None:
    log = logged_table(10_000, 4, n_logged)
    tab = sparse_table(1_000, 4, 4, seed=2)
    cases = [
        ("logged, batch_size=1 (sequential)", lambda: QLearning(gamma=0.9, n_epochs=1, batch_size=1).fit(log)),
        ("logged, batch_size=1024", lambda: QLearning(gamma=0.9, n_epochs=1, batch_size=1024).fit(log)),
        ("logged, batch_size=65536", lambda: QLearning(gamma=0.9, n_epochs=1, batch_size=65536).fit(log)),
        ("simulated, n_envs=1 (sequential)", lambda: QLearning(
            gamma=0.9, n_envs=1, random_state=0, simulate={"episodes": max(episodes // 100, 2), "max_steps": 100}
        ).fit(tab)),
        ("simulated, n_envs=1024", lambda: QLearning(
            gamma=0.9, n_envs=1024, random_state=0, simulate={"episodes": episodes, "max_steps": 100}).fit(tab)),
    ]
    times: dict[str, list[float]] = {c[0]: [] for c in cases}
    prep: dict[str, list[float]] = {c[0]: [] for c in cases}
    updates: dict[str, int] = {}
    for _ in range(rounds):
        for name, fn in cases:
            t = time.perf_counter()
            m = fn()
            times[name].append(time.perf_counter() - t)
            updates[name] = m.n_updates_
            t = time.perf_counter()
            m.validate_input(log if name.startswith("logged") else tab)  # the table work of one fit
            prep[name].append(time.perf_counter() - t)
    for name, _fn in cases:
        med, pre = statistics.median(times[name]), statistics.median(prep[name])
        print(f"q_learning {name}: {updates[name]:,} updates in {med:.3f}s -> {updates[name] / med / 1e6:.2f}M "
              f"updates/s for the whole fit; {updates[name] / max(med - pre, 1e-9) / 1e6:.2f}M updates/s "
              f"without the table's encoding and validation ({pre:.3f}s)")


def calibrate() -> None:
    """How fast this machine runs plain NumPy and plain Python right now (it is shared)."""
    a, b = np.random.default_rng(0).random(1_000_000), np.random.default_rng(1).random(1_000_000)
    t = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(10):
            _ = a + b
        t.append((time.perf_counter() - t0) / 10)
    t0 = time.perf_counter()
    acc = 0
    for i in range(1_000_000):
        acc += i
    py = time.perf_counter() - t0
    print(f"calibration: NumPy a + b on 1e6 float64 {statistics.median(t) * 1e3:.2f} ms; "
          f"Python loop of 1e6 additions {py:.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rounds = 3
    calibrate()
    if args.quick:
        bench_value_iteration(2_000, rounds)
        bench_q_learning(200_000, 20_000, rounds)
    else:
        bench_value_iteration(10_000, rounds)
        bench_q_learning(1_000_000, 100_000, rounds)


if __name__ == "__main__":
    main()
