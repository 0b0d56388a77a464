"""The shared base of the tabular RL estimators: prediction (greedy action, V, Q) and evaluation.

Fitted attributes of every tabular estimator:

* ``states_``, ``actions_``: the labels (object arrays), in index order;
* ``q_``: (n_states, n_actions) action values, NaN where an action is not defined in a state;
* ``v_``: (n_states,) state values (0 for terminal states);
* ``policy_``: (n_states,) greedy action index, -1 for terminal states (no action);
* ``terminal_``: (n_states,) bool.
"""

from __future__ import annotations

import numpy as np

from ..base import Reinforcement
from ..validation import DataError, check_is_fitted
from . import _mdp as M


class TabularAgent(Reinforcement):
    """Base of the tabular estimators (MDP solvers, Q-learning, SARSA, TD)."""

    horizon_param = False

    # -- fitted state ------------------------------------------------------------------------------
    def _set_fitted(self, states: list, actions: list, Q_as: np.ndarray, avail_as: np.ndarray,
                    terminal: np.ndarray, V: np.ndarray | None = None, policy: np.ndarray | None = None,
                    **extra) -> None:
        """Set the fitted attributes from ``Q`` in (A, S) layout."""
        q = np.where(avail_as, Q_as, np.nan).T.copy()
        if policy is None:
            policy = M.greedy(Q_as, avail_as)
        if V is None:
            V = M.state_values(Q_as, avail_as)
        self.states_ = M.label_array(states)
        self.actions_ = M.label_array(actions)
        self.q_ = q
        self.v_ = np.asarray(V, dtype=np.float64)
        self.policy_ = np.asarray(policy, dtype=np.intp)
        self.terminal_ = np.asarray(terminal, dtype=bool)
        for k, v in extra.items():
            setattr(self, k, v)
        self._state_index = M.LabelIndex(states)

    def __setstate__(self, state):
        super().__setstate__(state)
        if "states_" in state:
            self._state_index = M.LabelIndex(list(self.states_))

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_state_index", None)
        return state

    # -- prediction --------------------------------------------------------------------------------
    def _state_rows(self, X) -> np.ndarray:
        check_is_fitted(self, ["q_"])
        column = self.get_params().get("state_column", "state")
        if isinstance(X, np.ndarray) and not X.dtype.names:
            if X.ndim == 2 and X.shape[1] == 1:
                X = X[:, 0]
            if X.ndim != 1:
                raise DataError("predict takes a table with a state column, or a 1-d array of states")
            values = M.label_list(X, column)
        elif isinstance(X, (list, tuple)):
            values = [M.norm_label(v) for v in X]
        else:
            cols = M.as_columns(X)
            M.require(cols, {"state": column}, "the input")
            values = M.label_list(cols[column], column)
        return self._state_index.encode(values, column, "state")

    def predict(self, X) -> np.ndarray:
        """The greedy action per state (None for a terminal state)."""
        idx = self._state_rows(X)
        labels = np.empty(len(self.actions_) + 1, dtype=object)
        labels[:-1] = self.actions_
        labels[-1] = None
        return labels[self.policy_[idx]]

    def predict_value(self, X) -> np.ndarray:
        """V(s) per state."""
        return self.v_[self._state_rows(X)]

    def predict_q(self, X) -> np.ndarray:
        """Q(s, a) per state (rows) and action (columns, ``actions_`` order); NaN where undefined."""
        return self.q_[self._state_rows(X)]

    def predict_all(self, X) -> dict:
        """What the service returns: predictions, values and q_values (``{action: Q}`` per state)."""
        idx = self._state_rows(X)
        labels = np.empty(len(self.actions_) + 1, dtype=object)
        labels[:-1] = self.actions_
        labels[-1] = None
        acts = self.actions_.tolist()
        qv = []
        for i in idx.tolist():
            row = self.q_[i]
            qv.append({str(a): float(q) for a, q in zip(acts, row.tolist(), strict=True) if q == q})
        return {"predictions": labels[self.policy_[idx]].tolist(), "values": self.v_[idx].tolist(),
                "q_values": qv}

    # -- evaluation --------------------------------------------------------------------------------
    def _gamma_horizon(self) -> tuple[float, int | None]:
        p = self._validated_params()
        return p["gamma"], p.get("horizon")

    def evaluate(self, X) -> dict:
        """Bellman residual; with a transition table also the expected return and the policy agreement.

        * transition table (``probability`` column): ``bellman_residual`` = max over states of
          ``|V(s) - max_a sum_s' P(s'|s,a) (r + gamma V(s'))|``; ``expected_return`` = mean over the
          non-terminal states of ``V^pi(s)`` for the learned greedy policy pi (exact evaluation);
          ``optimal_expected_return`` the same for an optimal policy; ``policy_agreement`` = share of
          non-terminal states where pi's action is optimal (ties count as agreement).
        * logged transitions: ``bellman_residual`` = root mean square of the sample TD errors
          ``r + gamma (1 - done) max_a' Q(s', a') - Q(s, a)``.
        """
        check_is_fitted(self, ["q_"])
        p = self._validated_params()
        cols = M.as_columns(X)
        if p["probability_column"] in cols:
            mdp = M.build_mdp(cols, p, terminal_states=p.get("terminal_states"))
            return self._table_metrics(mdp, p["gamma"], p.get("horizon"))
        return self._logged_metrics(cols, p)

    def _policy_on(self, mdp: M.MDP) -> np.ndarray:
        """The learned greedy policy as action indices of ``mdp`` (first available action where unknown)."""
        si, ai = M.align(mdp, self.states_.tolist(), self.actions_.tolist())
        first = np.argmax(mdp.avail, axis=0)
        pol = np.where(mdp.avail.any(axis=0), first, -1)
        known = si >= 0
        mine = self.policy_[known]
        mapped = np.where(mine >= 0, ai[np.maximum(mine, 0)], -1)
        tgt = si[known]
        ok = (mapped >= 0) & (tgt >= 0)
        ok[ok] = mdp.avail[mapped[ok], tgt[ok]]
        pol[tgt[ok]] = mapped[ok]
        return pol

    def _values_on(self, mdp: M.MDP) -> np.ndarray:
        si, _ = M.align(mdp, self.states_.tolist(), self.actions_.tolist())
        V = np.zeros(mdp.n_states)
        known = si >= 0
        V[si[known]] = self.v_[known]
        return V

    def _table_metrics(self, mdp: M.MDP, gamma: float, horizon) -> dict:
        nonterm = ~mdp.terminal
        V = self._values_on(mdp)
        if horizon is None:
            TV = M.state_values(mdp.q_values(V, gamma), mdp.avail)
            residual = float(np.max(np.abs(TV - V)[nonterm], initial=0.0))
        else:
            residual = self._horizon_residual(mdp, gamma)
        pol = self._policy_on(mdp)
        V_pi = M.evaluate_policy(mdp, pol, gamma, horizon)
        Q_star = M.solve_optimal(mdp, gamma, horizon)
        V_star = M.state_values(Q_star, mdp.avail)
        S = np.arange(mdp.n_states)
        chosen = Q_star[np.maximum(pol, 0), S]
        agree = chosen >= V_star - 1e-6 * (1.0 + np.abs(V_star))
        return {"bellman_residual": residual,
                "expected_return": float(V_pi[nonterm].mean()),
                "optimal_expected_return": float(V_star[nonterm].mean()),
                "policy_agreement": float(agree[nonterm].mean()),
                "n_states": int(mdp.n_states), "n_actions": int(mdp.n_actions)}

    def _horizon_residual(self, mdp: M.MDP, gamma: float) -> float:
        return float("nan")

    def _logged_metrics(self, cols, p) -> dict:
        names = {k: p[f"{k}_column"] for k in ("state", "action", "reward", "next_state", "done")}
        M.require(cols, names, "the logged data")
        s = np.array([self._state_index.get(v) for v in M.label_list(cols[names["state"]], names["state"])])
        ns = np.array([self._state_index.get(v)
                       for v in M.label_list(cols[names["next_state"]], names["next_state"])])
        aidx = M.LabelIndex(self.actions_.tolist())
        a = np.array([aidx.get(v) for v in M.label_list(cols[names["action"]], names["action"])])
        r = M.float_column(cols, names["reward"])
        done = M.bool_column(cols, names["done"])
        v_next = np.where(ns >= 0, self.v_[np.maximum(ns, 0)], 0.0)
        target = r + p["gamma"] * np.where(done, 0.0, v_next)
        q = self.q_[np.maximum(s, 0), np.maximum(a, 0)]
        q = np.where((s >= 0) & (a >= 0) & np.isfinite(q), q, 0.0)
        err = target - q
        return {"bellman_residual": float(np.sqrt(np.mean(err**2))) if len(err) else 0.0,
                "mean_reward": float(r.mean()) if len(r) else 0.0,
                "n_transitions": int(len(r))}


class MDPSolver(TabularAgent):
    """Base of the solvers of a known MDP (value and policy iteration): the MDP built from the table,
    finite-horizon backward induction and the Bellman residual of a finite-horizon fit."""

    reports_progress = True

    def _fit_mdp(self, X, p):
        cols = M.as_columns(X)
        mdp = M.build_mdp(cols, p, terminal_states=p["terminal_states"])
        M.check_gamma(p["gamma"], p["horizon"], bool(mdp.terminal.any()))
        return mdp

    def validate_input(self, X) -> None:
        """Every check of ``fit`` that needs no solving (DataError / ParamError naming the column or param)."""
        self._fit_mdp(X, self._validated_params())

    def _backward_induction(self, mdp: M.MDP, gamma: float, T: int, ctx):
        S = mdp.n_states
        V = np.zeros(S)
        values = np.zeros((T + 1, S))
        policies = np.zeros((T, S), dtype=np.intp)
        Q0 = None
        for k, t in enumerate(range(T - 1, -1, -1)):
            Q = mdp.q_values(V, gamma)
            policies[t] = M.greedy(Q, mdp.avail)
            V = M.state_values(Q, mdp.avail)
            values[t] = V
            Q0 = Q
            ctx.step(k + 1, T)
        return Q0, values, policies

    def _horizon_residual(self, mdp, gamma):
        steps = getattr(self, "values_by_step_", None)
        if steps is None:
            return float("nan")
        si, _ = M.align(mdp, self.states_.tolist(), self.actions_.tolist())
        known = si >= 0
        worst = 0.0
        for t in range(len(steps) - 1):
            Vn = np.zeros(mdp.n_states)
            Vn[si[known]] = steps[t + 1][known]
            Vt = np.zeros(mdp.n_states)
            Vt[si[known]] = steps[t][known]
            TV = M.state_values(mdp.q_values(Vn, gamma), mdp.avail)
            worst = max(worst, float(np.max(np.abs(TV - Vt)[~mdp.terminal], initial=0.0)))
        return worst
