"""Model-agnostic SHAP values of any function: exact subset enumeration for few players, antithetic
permutation sampling otherwise [Lundberg et al.] (the interventional game over a background sample).

The game of instance ``x``: ``v(S) = mean_z f(x_S, z_~S)`` over the background rows ``z``.

* ``n_players <= exact_max_players``: all ``2^G`` coalitions are evaluated and the Shapley formula is
  applied; the values are exact (``standard_error`` 0).
* otherwise: for each sampled permutation (a fixed ``random_state``; each permutation is used with its
  reverse, which cancels the first-order sampling error [Mitchell et al.]) the players are switched
  from ``z`` to ``x`` one by one and each receives its marginal change.  Every chain telescopes to
  ``f(x) - f(z)``, so ``base_value + sum(phi) == f(x)`` holds exactly for any number of permutations;
  the values themselves carry a Monte-Carlo error, reported per value as the standard error of the mean
  over the antithetic pairs.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np

__all__ = ["permutation_shap"]


def _hybrids(x, Z, groups, masks):
    """Rows (len(masks) * m, F): for each coalition mask (over players) and background row, the hybrid."""
    take = masks[:, groups]  # (C, F) bool: column from x
    H = np.where(take[:, None, :], x[None, None, :], Z[None, :, :])
    return H.reshape(-1, Z.shape[1])


def _evaluate(f, H, batch):
    outs = [np.asarray(f(H[a : a + batch]), dtype=float) for a in range(0, H.shape[0], batch)]
    out = np.concatenate(outs)
    return out[:, None] if out.ndim == 1 else out


def permutation_shap(f, X, background, groups=None, *, n_permutations: int = 10, random_state=0,
                     exact_max_players: int = 8, batch_rows: int = 20_000, ctx=None):
    """``(phi (n, G, V), base (V,), standard_error (n, G, V))`` for the function ``f`` (rows -> outputs)."""
    X = np.asarray(X, dtype=float)
    Z = np.asarray(background, dtype=float)
    if Z.shape[0] == 0:
        raise ValueError("the background sample is empty")
    F = X.shape[1]
    groups = np.arange(F, dtype=np.intp) if groups is None else np.asarray(groups, dtype=np.intp)
    G = int(groups.max()) + 1
    m = Z.shape[0]
    fz = _evaluate(f, Z, batch_rows)
    base = fz.mean(axis=0)
    V = fz.shape[1]
    n = X.shape[0]
    phi = np.zeros((n, G, V))
    se = np.zeros((n, G, V))
    if G <= exact_max_players:
        coalitions = [c for r in range(G + 1) for c in combinations(range(G), r)]
        index = {c: i for i, c in enumerate(coalitions)}
        masks = np.zeros((len(coalitions), G), dtype=bool)
        for i, c in enumerate(coalitions):
            masks[i, list(c)] = True
        weights = [math.factorial(r) * math.factorial(G - r - 1) / math.factorial(G) for r in range(G)]
        for i in range(n):
            vals = _evaluate(f, _hybrids(X[i], Z, groups, masks), batch_rows).reshape(len(coalitions), m, V).mean(1)
            for g in range(G):
                for c in coalitions:
                    if g in c:
                        continue
                    cg = tuple(sorted((*c, g)))
                    phi[i, g] += weights[len(c)] * (vals[index[cg]] - vals[index[c]])
            if ctx is not None:
                ctx.step(i + 1, n)
        return phi, base, se
    rng = np.random.default_rng(random_state)
    n_pairs = max(1, (n_permutations + 1) // 2)
    for i in range(n):
        per_pair = np.zeros((n_pairs, G, V))
        for p in range(n_pairs):
            perm = rng.permutation(G)
            for order in (perm, perm[::-1]):
                masks = np.zeros((G + 1, G), dtype=bool)
                for k in range(1, G + 1):
                    masks[k] = masks[k - 1]
                    masks[k, order[k - 1]] = True
                vals = _evaluate(f, _hybrids(X[i], Z, groups, masks), batch_rows).reshape(G + 1, m, V).mean(1)
                per_pair[p, order] += 0.5 * np.diff(vals, axis=0)
        phi[i] = per_pair.mean(axis=0)
        if n_pairs > 1:
            se[i] = per_pair.std(axis=0, ddof=1) / math.sqrt(n_pairs)
        if ctx is not None:
            ctx.step(i + 1, n)
    return phi, base, se
