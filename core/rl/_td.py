"""Temporal-difference machinery shared by Q-learning, SARSA and TD(lambda): logged data, simulation,
exploration and learning-rate schedules ([Passerini §15], §15.6-15.7; [Sutton & Barto §6.4-6.5, §12]).

Update order.  ``batch_size = 1`` (logged data) and ``n_envs = 1`` (simulation) apply the updates strictly
one transition after another.  Larger values process a batch of transitions (consecutive logged rows, or
one step of ``n_envs`` episodes that run side by side) with NumPy: every target of the batch is computed
from the values at the start of the batch, and a (state, action) that occurs ``c`` times in the batch
moves once, towards the mean of its ``c`` targets, by ``1 - (1 - alpha)^c`` (constant rate: what ``c``
sequential updates towards one common target would do) or ``min(1, c / n^p)`` (visit-count rate ``1/n^p``,
``n`` counting the ``c`` new visits; exact for ``p = 1``).  This keeps every step a contraction, so batching
changes the path, not the fixed point.
"""

from __future__ import annotations

import numpy as np

from ..params import ParamError
from ..validation import DataError
from . import _mdp as M

NEG = -np.inf


# ------------------------------------------------------------------------------------------------
# learning rates, exploration
# ------------------------------------------------------------------------------------------------
def batch_update(values: np.ndarray, counts: np.ndarray, key: np.ndarray, target: np.ndarray, p: dict) -> None:
    """Move ``values[key]`` towards ``target`` (merged per key, see the module docstring); in place."""
    n = len(key)
    if n == 1:
        k = key[0]
        counts[k] += 1
        rate = p["alpha"] if p["alpha_schedule"] == "constant" else counts[k] ** -p["alpha_power"]
        values[k] += rate * (target[0] - values[k])
        return
    delta = target - values[key]
    if len(values) <= 64 * n:  # small tables: dense bincounts beat sorting
        cnt_all = np.bincount(key, minlength=len(values))
        uk = np.flatnonzero(cnt_all)
        cnt = cnt_all[uk]
        mean_d = np.bincount(key, weights=delta, minlength=len(values))[uk] / cnt
    else:
        uk, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
        mean_d = np.bincount(inv, weights=delta, minlength=len(uk)) / cnt
    counts[uk] += cnt
    if p["alpha_schedule"] == "constant":
        frac = 1.0 - (1.0 - p["alpha"]) ** cnt
    else:
        frac = np.minimum(1.0, cnt * counts[uk] ** -p["alpha_power"])
    values[uk] += frac * mean_d


def epsilon_at(p: dict, episodes_done: int) -> float:
    return max(p["epsilon_min"], p["epsilon"] * p["epsilon_decay"] ** episodes_done)


def choose(QT: np.ndarray, availT: np.ndarray | None, s: np.ndarray, eps: float,
           rng: np.random.Generator) -> np.ndarray:
    """epsilon-greedy actions for the states ``s`` (ties between greedy actions broken at random).

    ``QT`` is (A, S): gathering ``QT[:, s]`` gives (A, n) rows, and reductions over the short action axis run
    across contiguous rows (much faster in NumPy than over a trailing axis of length A).
    """
    Qs = QT[:, s]
    noise = rng.random(Qs.shape)
    # unavailable actions hold -inf in Q, so they are never maximal unless a state has no action at all
    greedy = np.argmax(np.where(Qs >= Qs.max(axis=0), noise, -1.0), axis=0)
    if eps <= 0.0:
        return greedy
    if availT is None:  # every action everywhere: a uniform draw
        rand = rng.integers(0, Qs.shape[0], size=len(s))
    else:
        rand = np.argmax(np.where(availT[:, s], rng.random(Qs.shape), -1.0), axis=0)
    return np.where(rng.random(len(s)) < eps, rand, greedy)


def expected_under_egreedy(Qrows: np.ndarray, avail_rows: np.ndarray, eps: float) -> np.ndarray:
    has = avail_rows.any(axis=1)
    mx = np.where(has, Qrows.max(axis=1), 0.0)
    mean = np.where(avail_rows, Qrows, 0.0).sum(axis=1) / np.maximum(avail_rows.sum(axis=1), 1)
    return (1.0 - eps) * mx + eps * mean


# ------------------------------------------------------------------------------------------------
# logged transitions
# ------------------------------------------------------------------------------------------------
class Logged:
    """Logged transitions encoded: states/actions as indices, links to each row's successor row."""

    def __init__(self, cols, p: dict, *, need_actions: bool = True):
        names = {k: p[f"{k}_column"] for k in ("state", "action", "reward", "next_state", "done")}
        if not need_actions:
            names.pop("action")
        M.require(cols, names, "the logged data")
        n = M.n_rows(cols)
        if n == 0:
            raise DataError("the logged data has no rows")
        self.r = M.float_column(cols, names["reward"])
        self.done = M.bool_column(cols, names["done"])
        self.states, (self.s, self.ns) = M.encode_together([cols[names["state"]], cols[names["next_state"]]],
                                                           [names["state"], names["next_state"]])
        if need_actions:
            self.actions, (self.a,) = M.encode_together([cols[names["action"]]], [names["action"]])
        else:
            self.actions, self.a = [], np.zeros(n, dtype=np.intp)
        # row i continues in row i+1 when it is not final, same episode, and i+1 starts where i ended
        link = np.zeros(n, dtype=bool)
        link[:-1] = ~self.done[:-1] & (self.s[1:] == self.ns[:-1])
        ep_col = p["episode_column"]
        if ep_col in cols:
            _, (ep,) = M.encode_together([cols[ep_col]], [ep_col])
            link[:-1] &= ep[1:] == ep[:-1]
        self.link = link
        S, A = len(self.states), max(len(self.actions), 1)
        avail = np.zeros((S, A), dtype=bool)
        if need_actions:
            avail[self.s, self.a] = True
        self.avail = avail  # (S, A)

    def check_gamma(self, gamma: float) -> None:
        if gamma >= 1.0 and not self.done.any():
            raise ParamError("gamma", "gamma = 1 needs episodes that end (a true 'done' value); use gamma < 1")

    def empirical_model(self) -> tuple[np.ndarray, np.ndarray]:
        """Maximum-likelihood ``P(s'|s,a)`` (as counts) and ``R(s,a)`` ([Passerini §15], ADP; terminal rows
        go nowhere)."""
        S, A = self.avail.shape
        key = self.s * A + self.a
        n_sa = np.bincount(key, minlength=S * A).astype(float)
        R = np.bincount(key, weights=self.r, minlength=S * A) / np.maximum(n_sa, 1)
        return n_sa, R


def affine_scan(c: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``G_i = c_i + d_i G_{i+1}`` (``G_n = 0``) for all i, by doubling: O(n log n) vector operations."""
    C, D = c.copy(), d.copy()
    n, k = len(c), 1
    while k < n:
        Cs = np.zeros(n)
        Ds = np.zeros(n)
        Cs[:-k] = C[k:]
        Ds[:-k] = D[k:]
        C = C + D * Cs
        D = D * Ds
        if not D.any():
            break
        k *= 2
    return C


# ------------------------------------------------------------------------------------------------
# simulation on a known MDP
# ------------------------------------------------------------------------------------------------
def start_states(mdp: M.MDP, sim: dict) -> np.ndarray:
    if sim.get("start_states"):
        idx = M.LabelIndex(mdp.states)
        out = np.array([idx.get(v) for v in sim["start_states"]], dtype=np.intp)
        if (out < 0).any():
            bad = sim["start_states"][int(np.flatnonzero(out < 0)[0])]
            raise ParamError("simulate", f"start state {bad!r} is not a state of the transition table")
        if mdp.terminal[out].any():
            raise ParamError("simulate", "a start state is terminal")
        return out
    return np.flatnonzero(~mdp.terminal)


def simulate_control(mdp: M.MDP, p: dict, rng: np.random.Generator, ctx, *, on_policy: bool):
    """Q-learning (``on_policy=False``) or SARSA on episodes simulated from ``mdp``.  Returns Q (S, A), visits."""
    sim = p["simulate"]
    S, A = mdp.n_states, mdp.n_actions
    availT = mdp.avail  # (A, S)
    Qf = np.full(A * S, float(p["initial_q"]))
    Qf[~availT.ravel()] = NEG
    choice_mask = None if availT.all() else availT
    QT = Qf.reshape(A, S)
    N = np.zeros(A * S)
    sampler = mdp.sampler()
    starts = start_states(mdp, sim)
    episodes, max_steps, gamma = sim["episodes"], sim["max_steps"], p["gamma"]
    if p["n_envs"] == 1:
        _simulate_sequential(mdp, p, rng, ctx, on_policy, QT, N, starts)
        return QT.T, N.reshape(A, S).T, int(N.sum())
    B = min(p["n_envs"], episodes)
    s = rng.choice(starts, B)
    steps = np.zeros(B, dtype=np.int64)
    started, finished = B, 0
    eps = epsilon_at(p, 0)
    a = choose(QT, choice_mask, s, eps, rng) if on_policy else None
    terminal = mdp.terminal
    n_updates = 0
    while len(s):
        if not on_policy:
            a = choose(QT, choice_mask, s, eps, rng)
        s2, r = sampler.draw(s, a, rng)
        term = terminal[s2]
        steps += 1
        if on_policy:
            a2 = choose(QT, choice_mask, s2, eps, rng)
            boot = np.where(term, 0.0, QT[a2, s2])
        else:
            boot = np.where(term, 0.0, QT[:, s2].max(axis=0))
        batch_update(Qf, N, a * S + s, r + gamma * boot, p)
        n_updates += len(s)
        end = term | (steps >= max_steps)
        if end.any():
            ended = np.flatnonzero(end)
            finished += len(ended)
            eps = epsilon_at(p, finished)
            k = min(len(ended), episodes - started)
            again = ended[:k]
            started += k
            s2[again] = rng.choice(starts, k)
            steps[again] = 0
            keep = ~end
            keep[again] = True
            if on_policy and k:
                a2[again] = choose(QT, choice_mask, s2[again], eps, rng)
            s2, steps = s2[keep], steps[keep]
            if on_policy:
                a2 = a2[keep]
            ctx.step(finished, episodes, epsilon=eps)
        s = s2
        if on_policy:
            a = a2
    return QT.T, N.reshape(A, S).T, n_updates


def _simulate_sequential(mdp: M.MDP, p: dict, rng: np.random.Generator, ctx, on_policy: bool,
                         QT: np.ndarray, N: np.ndarray, starts: np.ndarray) -> None:
    """``n_envs = 1``: one episode after another, one update after another (a Python loop over lists)."""
    import random
    from bisect import bisect_right

    S, A = mdp.n_states, mdp.n_actions
    sim = p["simulate"]
    py = random.Random(int(rng.integers(2**63)))
    rnd, randrange = py.random, py.randrange
    P = mdp.P
    indptr, indices = P.indptr.tolist(), P.indices.tolist()
    cum = np.cumsum(P.data).tolist()
    cum0 = np.concatenate([[0.0], np.cumsum(P.data)])
    base = cum0[P.indptr[:-1]].tolist()
    total = (cum0[P.indptr[1:]] - cum0[P.indptr[:-1]]).tolist()
    rdata = mdp.Rw.data.tolist()
    terminal = mdp.terminal.tolist()
    Q = QT.T.tolist()  # Q[s][a], -inf where undefined
    C = [[0.0] * A for _ in range(S)]
    acts = [np.flatnonzero(mdp.avail[:, s]).tolist() for s in range(S)]
    start_l = starts.tolist()
    gamma, const = p["gamma"], p["alpha_schedule"] == "constant"
    alpha, power = p["alpha"], -p["alpha_power"]
    eps = epsilon_at(p, 0)

    def choose_one(s):
        av = acts[s]
        if rnd() < eps:
            return av[randrange(len(av))]
        row = Q[s]
        m = max(row)
        ties = [i for i in av if row[i] == m]
        return ties[0] if len(ties) == 1 else ties[randrange(len(ties))]

    for episode in range(sim["episodes"]):
        s = start_l[randrange(len(start_l))]
        a = choose_one(s)
        for _ in range(sim["max_steps"]):
            row = a * S + s
            j = bisect_right(cum, base[row] + rnd() * total[row], indptr[row], indptr[row + 1] - 1)
            s2, r = indices[j], rdata[j]
            if terminal[s2]:
                target, a2 = r, -1
            elif on_policy:
                a2 = choose_one(s2)
                target = r + gamma * Q[s2][a2]
            else:
                target, a2 = r + gamma * max(Q[s2]), -1
            qs = Q[s]
            if const:
                qs[a] += alpha * (target - qs[a])
                C[s][a] += 1.0
            else:
                c = C[s][a] + 1.0
                C[s][a] = c
                qs[a] += (target - qs[a]) * c**power
            if terminal[s2]:
                break
            s = s2
            a = a2 if on_policy else choose_one(s)
        eps = epsilon_at(p, episode + 1)
        ctx.step(episode + 1, sim["episodes"], epsilon=eps)
    QT[:] = np.asarray(Q).T
    N[:] = np.asarray(C).T.ravel()


def logged_control(log: Logged, p: dict, ctx, *, on_policy: bool):
    """Q-learning or SARSA sweeps over logged transitions.  Returns Q (S, A) and visit counts."""
    S, A = log.avail.shape
    availT = np.ascontiguousarray(log.avail.T)  # (A, S): see ``choose``
    has = availT.any(axis=0)
    Qf = np.full(A * S, float(p["initial_q"]))
    Qf[~availT.ravel()] = NEG
    QT = Qf.reshape(A, S)
    N = np.zeros(A * S)
    s, a, r, ns, done = log.s, log.a, log.r, log.ns, log.done
    gamma, eps = p["gamma"], p["epsilon"]
    n = len(s)
    next_a = np.full(n, -1, dtype=np.intp)
    next_a[:-1] = np.where(log.link[:-1], a[1:], -1)
    key = a * S + s
    B = p["batch_size"]
    for epoch in range(p["n_epochs"]):
        if B == 1:
            _sequential_sweep(QT.T, N.reshape(A, S).T, s, a, r, ns, done, next_a, log.avail, has, p, on_policy)
        else:
            for lo in range(0, n, B):
                sl = slice(lo, lo + B)
                nsb = ns[sl]
                Qn = QT[:, nsb]
                if on_policy:
                    na = next_a[sl]
                    exp = expected_under_egreedy(Qn.T, availT[:, nsb].T, eps)
                    boot = np.where(na >= 0, QT[np.maximum(na, 0), nsb], exp)
                else:
                    boot = np.where(has[nsb], Qn.max(axis=0), 0.0)
                boot = np.where(done[sl], 0.0, boot)
                batch_update(Qf, N, key[sl], r[sl] + gamma * boot, p)
        ctx.step(epoch + 1, p["n_epochs"])
    return QT.T, N.reshape(A, S).T, n * p["n_epochs"]


def _sequential_sweep(Q2, N, s, a, r, ns, done, next_a, avail, has, p, on_policy):
    """One strictly sequential pass (Python loop over preallocated lists)."""
    Q = Q2.tolist()
    C = N.tolist()
    gamma, eps = p["gamma"], p["epsilon"]
    const = p["alpha_schedule"] == "constant"
    alpha, power = p["alpha"], -p["alpha_power"]
    has_l = has.tolist()
    avail_l = avail.tolist()
    for si, ai, ri, nsi, di, nai in zip(s.tolist(), a.tolist(), r.tolist(), ns.tolist(), done.tolist(),
                                         next_a.tolist(), strict=True):
        if di or not has_l[nsi]:
            t = ri
        elif not on_policy:
            t = ri + gamma * max(Q[nsi])
        elif nai >= 0:
            t = ri + gamma * Q[nsi][nai]
        else:
            row = [q for q, ok in zip(Q[nsi], avail_l[nsi], strict=True) if ok]
            t = ri + gamma * ((1.0 - eps) * max(row) + eps * sum(row) / len(row))
        qs = Q[si]
        if const:
            qs[ai] += alpha * (t - qs[ai])
        else:
            c = C[si][ai] + 1.0
            C[si][ai] = c
            qs[ai] += (t - qs[ai]) * c**power
    Q2[:] = np.asarray(Q)
    N[:] = np.asarray(C)
