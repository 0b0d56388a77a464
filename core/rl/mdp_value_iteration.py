"""Value iteration on a finite MDP given as a transition table ([Passerini §15], Algorithm 4; [da Silva Neto §4]).

``V_{k+1}(s) = max_a sum_s' P(s'|s,a) (r(s,a,s') + gamma V_k(s'))``, synchronous sweeps from ``V_0 = 0``,
until ``max_s |V_{k+1}(s) - V_k(s)| < tol`` (the notes give no threshold; the greedy policy's value is then
within ``2 tol gamma / (1 - gamma)`` of optimal [Sutton & Barto §4.4]).  Every sweep is one sparse
mat-vec over the stacked (action, state) rows.

With ``horizon = T`` it is backward induction ``V_T = 0``, ``V_t = max_a (R + gamma P V_{t+1})`` with a
non-stationary policy ``policy_by_step_[t]``; ``predict`` answers for ``t = 0``.  Erratum
([da Silva Neto §4]): the recursion has one max over the sum, not two separate maxima.
"""

from __future__ import annotations

import numpy as np

from ..context import NULL_CONTEXT
from ..registry import register
from . import _mdp as M
from . import _specs
from ._base import MDPSolver


@register
class MDPValueIteration(MDPSolver):
    name = "mdp_value_iteration"
    summary = "Value iteration on a finite MDP from a transition table; optimal values and greedy policy."
    params = {
        "gamma": _specs.GAMMA,
        "horizon": _specs.HORIZON,
        "tol": _specs.TOL,
        "max_iter": _specs.MAX_ITER,
        "terminal_states": _specs.TERMINAL_STATES,
        **M.COLUMN_PARAMS,
    }

    def fit(self, X, y=None, *, ctx=NULL_CONTEXT):
        p = self._validated_params()
        mdp = self._fit_mdp(X, p)
        gamma = p["gamma"]
        extra = {}
        if p["horizon"] is not None:
            Q, values, policies = self._backward_induction(mdp, gamma, p["horizon"], ctx)
            extra = {"values_by_step_": values, "policy_by_step_": policies, "n_iter_": p["horizon"],
                     "converged_": True}
        else:
            V = np.zeros(mdp.n_states)
            converged = False
            it = 0
            # the sweep: one sparse mat-vec, the expected rewards added, a max over the action rows
            R, P, A, S = mdp.R, mdp.P, mdp.n_actions, mdp.n_states
            masked = not mdp.avail.all()
            neg = np.where(mdp.avail, 0.0, -np.inf) if masked else None
            has_action = mdp.avail.any(axis=0)
            for it in range(1, p["max_iter"] + 1):
                Q = (P @ V).reshape(A, S)
                Q *= gamma
                Q += R
                if masked:
                    Q += neg
                V_new = Q.max(axis=0)
                if masked:
                    V_new[~has_action] = 0.0
                delta = float(np.max(np.abs(V_new - V)))
                V = V_new
                ctx.step(it, p["max_iter"], residual=delta)
                if delta < p["tol"]:
                    converged = True
                    break
            Q = mdp.q_values(V, gamma)
            extra = {"n_iter_": it, "converged_": converged}
        self._set_fitted(mdp.states, mdp.actions, Q, mdp.avail, mdp.terminal, **extra)
        return self
