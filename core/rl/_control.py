"""The shared base of Q-learning and SARSA (they differ by one hook: the bootstrap action)."""

from __future__ import annotations

import numpy as np

from ..context import NULL_CONTEXT
from ..params import Seed
from ..random import check_random_state
from . import _mdp as M
from . import _specs
from . import _td as T
from ._base import TabularAgent

CONTROL_PARAMS = {
    "gamma": _specs.GAMMA,
    "simulate": _specs.SimulateSpec(),
    "epsilon": _specs.EPSILON,
    "epsilon_decay": _specs.EPSILON_DECAY,
    "epsilon_min": _specs.EPSILON_MIN,
    "alpha": _specs.ALPHA,
    "alpha_schedule": _specs.ALPHA_SCHEDULE,
    "alpha_power": _specs.ALPHA_POWER,
    "n_epochs": _specs.N_EPOCHS,
    "batch_size": _specs.BATCH_SIZE,
    "n_envs": _specs.N_ENVS,
    "initial_q": _specs.INITIAL_Q,
    "terminal_states": _specs.TERMINAL_STATES,
    "random_state": Seed(),
    **M.COLUMN_PARAMS,
}


class TDControl(TabularAgent):
    reports_progress = True
    on_policy = False  # the hook: SARSA bootstraps from the action it takes next, Q-learning from the max

    def validate_input(self, X) -> None:
        """Every check of ``fit`` that needs no learning (DataError / ParamError naming the column or param)."""
        p = self._validated_params()
        self._prepare(M.as_columns(X), p)

    @staticmethod
    def _prepare(cols, p):
        if p["simulate"] is not None:
            mdp = M.build_mdp(cols, p, terminal_states=p["terminal_states"])
            M.check_gamma(p["gamma"], None, bool(mdp.terminal.any()))
            T.start_states(mdp, p["simulate"])
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
            Q2, N, n_updates = T.simulate_control(mdp, p, rng, ctx, on_policy=self.on_policy)
            states, actions, avail, terminal = mdp.states, mdp.actions, mdp.avail.T, mdp.terminal
        else:
            log = data
            Q2, N, n_updates = T.logged_control(log, p, ctx, on_policy=self.on_policy)
            states, actions, avail = log.states, log.actions, log.avail
            terminal = ~avail.any(axis=1)
        Q_as = np.where(avail, Q2, 0.0).T
        self._set_fitted(states, actions, Q_as, avail.T, terminal, visits_=N.astype(np.int64),
                         n_updates_=int(n_updates))
        return self
