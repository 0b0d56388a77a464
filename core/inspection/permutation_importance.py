"""Permutation importance [Breiman] (as scikit-learn's ``permutation_importance``).

The importance of a player (a column, or a group of columns permuted together with one permutation,
e.g. one original column's one-hot columns) is the drop of the score when its values are shuffled
across rows, ``baseline - permuted`` for a score and ``permuted - baseline`` for a loss, so that larger
always means more important; ``n_repeats`` shuffles per player, seeded by ``random_state``.
"""

from __future__ import annotations

import numpy as np

from ..context import NULL_CONTEXT
from ..random import check_random_state

__all__ = ["permutation_importance"]


def permutation_importance(score, X, y, groups=None, *, n_repeats: int = 5, random_state=0,
                           greater_is_better: bool = True, ctx=NULL_CONTEXT):
    """``score(X, y) -> float``.  Returns ``{"baseline", "importances" (G, n_repeats), "mean", "std"}``."""
    X = np.asarray(X, dtype=float)
    F = X.shape[1]
    groups = np.arange(F, dtype=np.intp) if groups is None else np.asarray(groups, dtype=np.intp)
    G = int(groups.max()) + 1
    rng = check_random_state(random_state)
    baseline = float(score(X, y))
    sign = 1.0 if greater_is_better else -1.0
    imp = np.zeros((G, n_repeats))
    Xp = X.copy()
    n = X.shape[0]
    for g in range(G):
        cols = np.flatnonzero(groups == g)
        for r in range(n_repeats):
            perm = rng.permutation(n)
            Xp[:, cols] = X[perm][:, cols]
            imp[g, r] = sign * (baseline - float(score(Xp, y)))
            ctx.step(g * n_repeats + r + 1, G * n_repeats)
        Xp[:, cols] = X[:, cols]
    return {"baseline": baseline, "importances": imp, "mean": imp.mean(axis=1), "std": imp.std(axis=1)}
