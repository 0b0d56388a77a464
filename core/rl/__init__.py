"""Reinforcement learning: MDP solvers, temporal-difference learning, LQR and fitted value iteration."""

from . import (  # noqa: F401 - importing registers the estimators
    fitted_value_iteration,
    lqr,
    mdp_policy_iteration,
    mdp_value_iteration,
    q_learning,
    sarsa,
    td_learning,
)
