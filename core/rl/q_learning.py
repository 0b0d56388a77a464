"""Tabular Q-learning ([Passerini §15], Algorithm 9; [Sutton & Barto §6.5]).

``Q(s,a) <- Q(s,a) + alpha (r + gamma max_a' Q(s',a') - Q(s,a))`` (off-policy), from logged transitions
(``n_epochs`` sweeps) or from ``simulate``d episodes on a transition table with epsilon-greedy behaviour.
The seed's tabular variant ([Santini §15]: ``Q = r + gamma max Q``, no learning rate) is ``alpha = 1`` on a
deterministic MDP.  Batching and the update order: see ``core/rl/_td.py``.
"""

from __future__ import annotations

from ..registry import register
from ._control import CONTROL_PARAMS, TDControl


@register
class QLearning(TDControl):
    name = "q_learning"
    summary = "Tabular Q-learning (off-policy TD control) from logged transitions or simulated episodes."
    params = dict(CONTROL_PARAMS)
    on_policy = False
