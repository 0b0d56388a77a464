"""Policy iteration on a finite MDP ([Passerini §15], Algorithm 5; [da Silva Neto §4]).

Evaluation solves the linear system ``(I - gamma P_pi) V = r_pi`` exactly (a sparse LU,
``evaluation="linear"``), or runs ``eval_sweeps`` backups ``V <- r_pi + gamma P_pi V`` warm-started from the
previous V (``"iterative"``, modified policy iteration [Sutton & Barto §4.6], for large state spaces);
``"auto"`` solves exactly up to ``linear_max_states`` states.  A singular system (gamma = 1 and a policy
that never reaches a terminal state) falls back to backups.  Improvement is greedy; a state keeps its
action unless another is better by more than ``1e-12 (1 + |Q|)``, so "converged" (a gap of the notes) means
"the policy did not change".  The initial policy takes the first defined action of every state (the notes
start from a random one; a fixed start keeps fits deterministic); with gamma = 1 it is a proper policy
(one that reaches a terminal state, ``_mdp.proper_policy``), so that its linear system is not singular.
``horizon`` uses backward induction, as in value iteration.
"""

from __future__ import annotations

import numpy as np

from ..context import NULL_CONTEXT
from ..params import Choice, Int
from ..registry import register
from . import _mdp as M
from . import _specs
from ._base import MDPSolver


@register
class MDPPolicyIteration(MDPSolver):
    name = "mdp_policy_iteration"
    summary = "Policy iteration on a finite MDP: exact (linear solve) or iterative policy evaluation."
    params = {
        "gamma": _specs.GAMMA,
        "horizon": _specs.HORIZON,
        "evaluation": Choice("auto", choices=("auto", "linear", "iterative"),
                             doc="Policy evaluation: sparse linear solve, iterative backups, or by size."),
        "linear_max_states": Int(20_000, ge=1, le=10_000_000,
                                 doc="evaluation='auto' solves exactly up to this many states."),
        "eval_sweeps": Int(50, ge=1, le=1_000_000, doc="Backups per evaluation when iterative."),
        "tol": _specs.TOL,
        "max_iter": Int(1_000, ge=1, le=1_000_000, doc="Maximum number of improvement steps."),
        "terminal_states": _specs.TERMINAL_STATES,
        **M.COLUMN_PARAMS,
    }

    def fit(self, X, y=None, *, ctx=NULL_CONTEXT):
        p = self._validated_params()
        mdp = self._fit_mdp(X, p)
        gamma = p["gamma"]
        if p["horizon"] is not None:
            Q, values, policies = self._backward_induction(mdp, gamma, p["horizon"], ctx)
            self._set_fitted(mdp.states, mdp.actions, Q, mdp.avail, mdp.terminal, values_by_step_=values,
                             policy_by_step_=policies, n_iter_=p["horizon"], converged_=True)
            return self
        linear = p["evaluation"] == "linear" or (p["evaluation"] == "auto"
                                                 and mdp.n_states <= p["linear_max_states"])
        S = np.arange(mdp.n_states)
        has = mdp.avail.any(axis=0)
        policy = np.where(has, np.argmax(mdp.avail, axis=0), -1)
        if gamma >= 1.0:
            policy = M.proper_policy(mdp)
        V = np.zeros(mdp.n_states)
        converged = False
        it = 0
        for it in range(1, p["max_iter"] + 1):
            V_lin = M.evaluate_policy_linear(mdp, policy, gamma) if linear else None
            if V_lin is None:
                V = M.evaluate_policy_iterative(mdp, policy, gamma, tol=p["tol"], V0=V,
                                                max_iter=p["eval_sweeps"] if not linear else 100_000)
            else:
                V = V_lin
            Q = mdp.q_values(V, gamma)
            best = M.greedy(Q, mdp.avail)
            current = np.where(has, Q[np.maximum(policy, 0), S], 0.0)
            top = np.where(has, Q[np.maximum(best, 0), S], 0.0)
            better = has & (top > current + 1e-12 * (1.0 + np.abs(current)))
            changed = int(better.sum())
            ctx.step(it, p["max_iter"], changed=changed)
            if changed == 0:
                if linear or np.max(np.abs(M.state_values(Q, mdp.avail) - V)[has], initial=0.0) < p["tol"]:
                    converged = True
                    break
            policy = np.where(better, best, policy)
        Q = mdp.q_values(V, gamma)
        self._set_fitted(mdp.states, mdp.actions, Q, mdp.avail, mdp.terminal, V=np.where(has, V, 0.0),
                         policy=policy, n_iter_=it, converged_=converged)
        return self
