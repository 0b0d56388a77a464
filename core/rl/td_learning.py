"""TD(0) and TD(lambda) policy evaluation ([Passerini §15], Algorithm 7; [Sutton & Barto §6.1, §12.1-12.2]).

Learns ``V`` of the behaviour policy: the logged one, or in ``simulate`` mode a fixed policy on the
transition table (``policy``: state -> action; states it does not list act uniformly at random).

* Simulation: the backward view, with eligibility traces ``e <- gamma lambda e``, ``e(s) += 1``
  (``trace="accumulating"``) or ``e(s) = 1`` (``"replacing"``), and ``V <- V + alpha delta e`` after every
  step [Sutton & Barto §12.2].  With ``n_envs > 1`` episodes run side by side, each with its own trace, and
  the updates of one step are summed (lambda = 0: merged as in ``core/rl/_td.py``).
* Logged data: each sweep computes the lambda-returns ``G_t = r_t + gamma ((1 - lambda) V(s_{t+1}) +
  lambda G_{t+1})`` of every row with the values at the start of the sweep (the offline lambda-return
  algorithm, equal to offline TD(lambda) with accumulating traces [Sutton & Barto §12.1]) and moves V
  towards them in batches; lambda = 0 is plain TD(0) with ``batch_size = 1`` strictly sequential.

Predict: ``V(s)``; ``Q(s, a) = R(s, a) + gamma E[V(s')]`` by one-step look-ahead with the table's model, or
with the maximum-likelihood model of the logged transitions (ADP, [Passerini §15]); the greedy action is
its argmax.
"""

from __future__ import annotations

import numpy as np

from ..context import NULL_CONTEXT
from ..params import Any_, Choice, DictOf, Float, ParamError, Seed
from ..random import check_random_state
from ..registry import register
from . import _mdp as M
from . import _specs
from . import _td as T
from ._base import TabularAgent


@register
class TDLearning(TabularAgent):
    name = "td_learning"
    summary = "TD(0) / TD(lambda) policy evaluation with eligibility traces, from logged or simulated episodes."
    reports_progress = True
    value_based = True
    params = {
        "gamma": _specs.GAMMA,
        "td_lambda": Float(0.0, ge=0.0, le=1.0, doc="Trace decay lambda (0: TD(0); 1: Monte Carlo)."),
        "trace": Choice("accumulating", choices=("accumulating", "replacing"), doc="Eligibility trace kind."),
        "simulate": _specs.SimulateSpec(),
        "policy": DictOf(Any_(), None, nullable=True,
                         doc="Simulation: the evaluated policy, state -> action (unlisted states: uniform)."),
        "alpha": _specs.ALPHA,
        "alpha_schedule": _specs.ALPHA_SCHEDULE,
        "alpha_power": _specs.ALPHA_POWER,
        "n_epochs": _specs.N_EPOCHS,
        "batch_size": _specs.BATCH_SIZE,
        "n_envs": _specs.N_ENVS,
        "terminal_states": _specs.TERMINAL_STATES,
        "random_state": Seed(),
        **M.COLUMN_PARAMS,
    }

    def validate_input(self, X) -> None:
        """Every check of ``fit`` that needs no learning (DataError / ParamError naming the column or param)."""
        p = self._validated_params()
        self._prepare(M.as_columns(X), p)

    def _prepare(self, cols, p):
        if p["simulate"] is not None:
            mdp = M.build_mdp(cols, p, terminal_states=p["terminal_states"])
            M.check_gamma(p["gamma"], None, bool(mdp.terminal.any()))
            T.start_states(mdp, p["simulate"])
            self._policy_table(mdp, p)
            return mdp
        log = T.Logged(cols, p)
        log.check_gamma(p["gamma"])
        return log

    def fit(self, X, y=None, *, ctx=NULL_CONTEXT):
        p = self._validated_params()
        cols = M.as_columns(X)
        rng = check_random_state(p["random_state"])
        data = self._prepare(cols, p)
        if p["simulate"] is not None:
            mdp = data
            V, N, n_updates = self._simulate(mdp, p, rng, ctx)
            Q = mdp.q_values(V, p["gamma"], out_of_range=0.0)
            avail, terminal = mdp.avail, mdp.terminal
            states, actions = mdp.states, mdp.actions
        else:
            log = data
            V, N, n_updates = self._logged(log, p, ctx)
            n_sa, R = log.empirical_model()
            S, A = log.avail.shape
            # expected next value under the maximum-likelihood model (terminal transitions contribute 0)
            nxt = np.bincount(log.s * A + log.a, weights=np.where(log.done, 0.0, V[log.ns]), minlength=S * A)
            Q = (R + p["gamma"] * nxt / np.maximum(n_sa, 1)).reshape(S, A).T
            avail, terminal = log.avail.T, ~log.avail.any(axis=1)
            states, actions = log.states, log.actions
        self._set_fitted(states, actions, Q, avail, terminal, V=np.where(terminal, 0.0, V),
                         visits_=N.astype(np.int64), n_updates_=int(n_updates))
        return self

    # -- simulation: backward view with eligibility traces ----------------------------------------
    def _policy_table(self, mdp: M.MDP, p) -> np.ndarray:
        """(S,) action index per state, -1 for 'uniform'."""
        pol = np.full(mdp.n_states, -1, dtype=np.intp)
        if p["policy"]:
            si, ai = M.LabelIndex(mdp.states), M.LabelIndex(mdp.actions)
            for s, a in p["policy"].items():
                i, j = si.get(s), ai.get(a)
                if i < 0 or j < 0 or not mdp.avail[j, i]:
                    raise ParamError("policy", f"policy[{s!r}] = {a!r} is not an action of state {s!r} in the "
                                               "transition table")
                pol[i] = j
        return pol

    def _simulate(self, mdp: M.MDP, p, rng, ctx):
        sim = p["simulate"]
        S = mdp.n_states
        avail = mdp.avail.T.copy()
        fixed = self._policy_table(mdp, p)
        sampler = mdp.sampler()
        starts = T.start_states(mdp, sim)
        episodes, max_steps, gamma, lam = sim["episodes"], sim["max_steps"], p["gamma"], p["td_lambda"]
        const = p["alpha_schedule"] == "constant"
        V = np.zeros(S)
        N = np.zeros(S)
        if p["n_envs"] == 1:
            return self._simulate_sequential(mdp, p, rng, ctx, fixed, starts, V, N)
        B = min(p["n_envs"], episodes)
        s = rng.choice(starts, B)
        steps = np.zeros(B, dtype=np.int64)
        E = np.zeros((B, S)) if lam > 0 else None
        started, finished, n_updates = B, 0, 0
        while len(s):
            rand = np.argmax(np.where(avail[s], rng.random((len(s), avail.shape[1])), -1.0), axis=1)
            a = np.where(fixed[s] >= 0, fixed[s], rand)
            s2, r = sampler.draw(s, a, rng)
            term = mdp.terminal[s2]
            steps += 1
            target = r + gamma * np.where(term, 0.0, V[s2])
            n_updates += len(s)
            if E is None:
                T.batch_update(V, N, s, target, p)
            else:
                delta = target - V[s]
                E *= gamma * lam
                rows = np.arange(len(s))
                if p["trace"] == "accumulating":
                    E[rows, s] += 1.0
                else:
                    E[rows, s] = 1.0
                np.add.at(N, s, 1.0)
                rate = p["alpha"] if const else np.where(N > 0, np.maximum(N, 1.0) ** -p["alpha_power"], 0.0)
                V += rate * (delta @ E)
            end = term | (steps >= max_steps)
            if end.any():
                ended = np.flatnonzero(end)
                finished += len(ended)
                k = min(len(ended), episodes - started)
                again = ended[:k]
                started += k
                s2[again] = rng.choice(starts, k)
                steps[again] = 0
                keep = ~end
                keep[again] = True
                if E is not None:
                    E[ended] = 0.0
                    E = E[keep]
                s2, steps = s2[keep], steps[keep]
                ctx.step(finished, episodes)
            s = s2
        return V, N, n_updates

    @staticmethod
    def _simulate_sequential(mdp, p, rng, ctx, fixed, starts, V, N):
        """``n_envs = 1``: one episode after another, traces kept sparse (a dict), a Python loop."""
        import random
        from bisect import bisect_right

        sim = p["simulate"]
        S = mdp.n_states
        py = random.Random(int(rng.integers(2**63)))
        rnd, randrange = py.random, py.randrange
        P = mdp.P
        indptr, indices = P.indptr.tolist(), P.indices.tolist()
        cum0 = np.concatenate([[0.0], np.cumsum(P.data)])
        cum = cum0[1:].tolist()
        base = cum0[P.indptr[:-1]].tolist()
        total = (cum0[P.indptr[1:]] - cum0[P.indptr[:-1]]).tolist()
        rdata = mdp.Rw.data.tolist()
        terminal = mdp.terminal.tolist()
        acts = [np.flatnonzero(mdp.avail[:, s]).tolist() for s in range(S)]
        fixed_l = fixed.tolist()
        Vl, Nl = V.tolist(), N.tolist()
        gamma, lam = p["gamma"], p["td_lambda"]
        const, alpha, power = p["alpha_schedule"] == "constant", p["alpha"], -p["alpha_power"]
        replacing = p["trace"] == "replacing"
        start_l, n_updates = starts.tolist(), 0
        for episode in range(sim["episodes"]):
            s = start_l[randrange(len(start_l))]
            E: dict[int, float] = {}
            for _ in range(sim["max_steps"]):
                a = fixed_l[s] if fixed_l[s] >= 0 else acts[s][randrange(len(acts[s]))]
                row = a * S + s
                j = bisect_right(cum, base[row] + rnd() * total[row], indptr[row], indptr[row + 1] - 1)
                s2, r = indices[j], rdata[j]
                delta = r + (0.0 if terminal[s2] else gamma * Vl[s2]) - Vl[s]
                Nl[s] += 1.0
                n_updates += 1
                if lam == 0.0:
                    Vl[s] += (alpha if const else Nl[s] ** power) * delta
                else:
                    decay = gamma * lam
                    E = {k: e * decay for k, e in E.items() if e * decay > 1e-12}
                    E[s] = 1.0 if replacing else E.get(s, 0.0) + 1.0
                    for k, e in E.items():
                        Vl[k] += (alpha if const else Nl[k] ** power) * delta * e
                if terminal[s2]:
                    break
                s = s2
            ctx.step(episode + 1, sim["episodes"])
        V[:], N[:] = Vl, Nl
        return V, N, n_updates

    # -- logged data: offline lambda-returns ----------------------------------------------------------
    def _logged(self, log: T.Logged, p, ctx):
        S = len(log.states)
        V = np.zeros(S)
        N = np.zeros(S)
        s, r, ns, done, link = log.s, log.r, log.ns, log.done, log.link
        gamma, lam, B = p["gamma"], p["td_lambda"], p["batch_size"]
        n = len(s)
        const = p["alpha_schedule"] == "constant"
        for epoch in range(p["n_epochs"]):
            if lam == 0.0 and B == 1:
                Vl, Nl = V.tolist(), N.tolist()
                alpha, power = p["alpha"], -p["alpha_power"]
                for si, ri, nsi, di in zip(s.tolist(), r.tolist(), ns.tolist(), done.tolist(), strict=True):
                    t = ri if di else ri + gamma * Vl[nsi]
                    if const:
                        Vl[si] += alpha * (t - Vl[si])
                    else:
                        c = Nl[si] + 1.0
                        Nl[si] = c
                        Vl[si] += (t - Vl[si]) * c**power
                V[:], N[:] = Vl, Nl
            elif lam == 0.0:
                for lo in range(0, n, B):
                    sl = slice(lo, lo + B)
                    T.batch_update(V, N, s[sl], r[sl] + gamma * np.where(done[sl], 0.0, V[ns[sl]]), p)
            else:
                boot = np.where(done, 0.0, V[ns])
                c = r + gamma * np.where(link, (1.0 - lam) * boot, boot)
                d = np.where(link, gamma * lam, 0.0)
                G = T.affine_scan(c, d)
                for lo in range(0, n, B):
                    sl = slice(lo, lo + B)
                    T.batch_update(V, N, s[sl], G[sl], p)
            ctx.step(epoch + 1, p["n_epochs"])
        return V, N, n * p["n_epochs"]

    def _logged_metrics(self, cols, p) -> dict:
        """RMS of the TD errors ``r + gamma (1 - done) V(s') - V(s)`` on logged transitions."""
        log_names = {k: p[f"{k}_column"] for k in ("state", "reward", "next_state", "done")}
        M.require(cols, log_names, "the logged data")
        get = self._state_index.get
        s = np.array([get(v) for v in M.label_list(cols[log_names["state"]], log_names["state"])])
        ns = np.array([get(v) for v in M.label_list(cols[log_names["next_state"]], log_names["next_state"])])
        r = M.float_column(cols, log_names["reward"])
        done = M.bool_column(cols, log_names["done"])
        v = np.where(s >= 0, self.v_[np.maximum(s, 0)], 0.0)
        vn = np.where(ns >= 0, self.v_[np.maximum(ns, 0)], 0.0)
        err = r + p["gamma"] * np.where(done, 0.0, vn) - v
        return {"bellman_residual": float(np.sqrt(np.mean(err**2))) if len(err) else 0.0,
                "mean_reward": float(r.mean()) if len(r) else 0.0, "n_transitions": int(len(r))}
