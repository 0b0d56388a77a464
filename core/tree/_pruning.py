"""Post-pruning of fitted trees.

* reduced-error pruning ([Passerini §2.3.1]): grown on ``1 - validation_fraction`` of the data;
  repeatedly replace by a leaf the internal node whose removal gives the best validation improvement,
  while that improvement is >= 0 (a tie prunes: the smaller tree wins; see docs/decisions/trees.md);
* minimal cost-complexity pruning (``ccp_alpha``, as scikit-learn): with R(t) = W_t / W_root *
  impurity(t), repeatedly prune the weakest link argmin_t (R(t) - R(T_t)) / (|leaves(T_t)| - 1) while it
  is <= ccp_alpha.

Both mark nodes as leaves and finish with ``Tree.prune_to`` (core/tree/_tree.py).
"""

from __future__ import annotations

import numpy as np

from ._predictor import NodeTable
from ._tree import LEAF, Tree

__all__ = ["reduced_error_prune", "cost_complexity_prune"]


def _subtree_sum(tree: Tree, leafv: np.ndarray, is_leaf: np.ndarray, par: np.ndarray, by_depth) -> np.ndarray:
    """Sum of ``leafv`` over the current leaves of every node's subtree."""
    n = tree.node_count
    res = np.where(is_leaf, leafv, 0.0)
    acc = np.zeros(n)
    for d in range(len(by_depth) - 1, 0, -1):
        at = by_depth[d]
        inner = at[~is_leaf[at]]
        res[inner] = acc[inner]
        acc += np.bincount(par[at], weights=res[at], minlength=n)
    if not is_leaf[0]:
        res[0] = acc[0]
    return res


def _depth_groups(tree: Tree):
    return [np.flatnonzero(tree.depth == d) for d in range(tree.max_depth + 1)]


def reduced_error_prune(tree: Tree, Xv, yv, wv, *, regression: bool) -> Tree:
    if tree.n_leaves <= 1:
        return tree
    table = NodeTable([tree])
    s, _, node, wgt = table.weighted_leaves(Xv, record_all=True)
    n = tree.node_count
    wgt = wgt * wv[s]
    if regression:
        pred = tree.value[node, 0]
        err_leaf = np.bincount(node, weights=wgt * (yv[s].astype(float) - pred) ** 2, minlength=n)
    else:
        pred = np.argmax(tree.value, axis=1)[node]
        err_leaf = np.bincount(node, weights=wgt * (pred != yv[s]), minlength=n)
    par = tree.parent()
    groups = _depth_groups(tree)
    is_leaf = tree.kind == LEAF
    reach = np.ones(n, dtype=bool)
    while True:
        sub = _subtree_sum(tree, err_leaf, is_leaf, par, groups)
        gain = sub - err_leaf
        cand = ~is_leaf & reach
        if not cand.any():
            break
        gain = np.where(cand, gain, -np.inf)
        best = int(np.argmax(gain))
        if gain[best] < -1e-12:
            break
        is_leaf[best] = True
        reach = _reachable(tree, is_leaf, par, groups)
    return tree.prune_to(np.flatnonzero(is_leaf & (tree.kind != LEAF)))


def _reachable(tree, is_leaf, par, groups):
    reach = np.zeros(tree.node_count, dtype=bool)
    reach[0] = True
    for d in range(1, len(groups)):
        at = groups[d]
        reach[at] = reach[par[at]] & ~is_leaf[par[at]]
    return reach


def cost_complexity_prune(tree: Tree, ccp_alpha: float) -> Tree:
    if tree.n_leaves <= 1:
        return tree
    W_root = tree.weighted_n_node_samples[0]
    R = tree.weighted_n_node_samples / W_root * tree.impurity
    par = tree.parent()
    groups = _depth_groups(tree)
    is_leaf = tree.kind == LEAF
    reach = np.ones(tree.node_count, dtype=bool)
    ones = np.ones(tree.node_count)
    while True:
        RT = _subtree_sum(tree, R, is_leaf, par, groups)
        nl = _subtree_sum(tree, ones, is_leaf, par, groups)
        cand = ~is_leaf & reach
        if not cand.any():
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            alpha = np.where(cand & (nl > 1), (R - RT) / (nl - 1), np.inf)
        best = int(np.argmin(alpha))
        if not alpha[best] <= ccp_alpha:
            break
        is_leaf[best] = True
        reach = _reachable(tree, is_leaf, par, groups)
    return tree.prune_to(np.flatnonzero(is_leaf & (tree.kind != LEAF)))
