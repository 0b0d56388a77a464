"""Tabular SARSA ([Passerini §15], Algorithm 8; [Sutton & Barto §6.4]).

``Q(s,a) <- Q(s,a) + alpha (r + gamma Q(s',a') - Q(s,a))`` with ``a'`` the action actually taken next
(on-policy).  In logged data ``a'`` is the next row's action when that row continues the episode; where
the log does not show it (the last row of a truncated episode) the target uses the expectation of
``Q(s', .)`` under the epsilon-greedy policy (expected SARSA, [Sutton & Barto §6.6]).
"""

from __future__ import annotations

from ..registry import register
from ._control import CONTROL_PARAMS, TDControl


@register
class Sarsa(TDControl):
    name = "sarsa"
    summary = "Tabular SARSA (on-policy TD control) from logged transitions or simulated episodes."
    params = dict(CONTROL_PARAMS)
    on_policy = True
