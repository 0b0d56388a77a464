"""Fitted trees as flat arrays (``Tree``), and structural pruning (``prune_to``).

A tree's arrays: feature, threshold, kind (leaf / numeric / categorical), a CSR list of children with
their known-weight fractions (two for numeric nodes, left then right = left + 1; one per category for
categorical ones, -1 marking a category absent at the node, routed like a missing value), value (class
distribution or mean), impurity, weighted counts and depth.  Nodes are numbered level by level.

The grower (core/tree/_grower.py), splitter (_splitter.py), criteria (_criterion.py), predictor
(_predictor.py) and pruning (_pruning.py) work on these arrays; ``NodeTable`` and ``impurity`` are
re-exported here for the modules that import them from this one.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Tree", "LEAF", "NUMERIC", "CATEGORICAL", "ranges", "NodeTable", "impurity"]

from ._nodes import CATEGORICAL, LEAF, NUMERIC, ranges  # noqa: F401  (re-exported)


def _pack_f64(a: np.ndarray):
    """float32 where exact (NaN included), the other entries as (index, float64) exceptions."""
    a = np.asarray(a)
    if a.dtype != np.float64 or a.size == 0:
        return a
    with np.errstate(over="ignore"):  # beyond float32's range: inf, then an exception below
        a32 = a.astype(np.float32)
    back = a32.astype(np.float64)
    bad = np.flatnonzero(~((back == a) | (np.isnan(a) & np.isnan(back))))
    if bad.size * 12 >= a.size * 4:  # mostly inexact: float64 is smaller
        return a
    return ("f32", a32, bad.astype(np.int32), a[bad])


def _unpack_f64(p):
    if isinstance(p, tuple) and len(p) == 4 and p[0] == "f32":
        out = p[1].astype(np.float64)
        out[p[2]] = p[3]
        return out
    return p


class Tree:
    """A fitted tree as flat arrays (see module docstring)."""

    def __init__(self, feature, threshold, kind, child_ptr, children, child_frac, value,
                 impurity, n_node_samples, weighted_n_node_samples, depth):
        self.feature = feature
        self.threshold = threshold
        self.kind = kind
        self.child_ptr = child_ptr
        self.children = children
        self.child_frac = child_frac
        self.value = value
        self.impurity = impurity
        self.n_node_samples = n_node_samples
        self.weighted_n_node_samples = weighted_n_node_samples
        self.depth = depth

    # Pickled compactly: thresholds and counts as float32 where that is exact (with the inexact values
    # kept as float64 exceptions), child offsets as int32; loaded back to the working dtypes, so a
    # loaded tree equals the fitted one bit for bit.
    _PACKED = ("threshold", "n_node_samples", "weighted_n_node_samples")

    def __getstate__(self):
        state = self.__dict__.copy()
        for k in self._PACKED:
            state[k] = _pack_f64(state[k])
        if state["child_ptr"].size and int(state["child_ptr"][-1]) < 2**31:
            state["child_ptr"] = state["child_ptr"].astype(np.int32)
        return state

    def __setstate__(self, state):
        for k in self._PACKED:
            state[k] = _unpack_f64(state[k])
        state["child_ptr"] = np.asarray(state["child_ptr"], dtype=np.intp)
        self.__dict__.update(state)

    @property
    def node_count(self) -> int:
        return int(self.feature.shape[0])

    @property
    def max_depth(self) -> int:
        return int(self.depth.max()) if self.depth.size else 0

    @property
    def n_leaves(self) -> int:
        return int((self.kind == LEAF).sum())

    def parent(self) -> np.ndarray:
        par = np.full(self.node_count, -1, dtype=np.intp)
        counts = np.diff(self.child_ptr)
        owner = np.repeat(np.arange(self.node_count), counts)
        ok = self.children >= 0
        par[self.children[ok]] = owner[ok]
        return par

    def prune_to(self, make_leaf: np.ndarray) -> Tree:
        """A copy where the nodes in ``make_leaf`` become leaves; unreachable nodes dropped."""
        n = self.node_count
        kind = self.kind.copy()
        kind[make_leaf] = LEAF
        # reachability in node order (parents come before children)
        reach = np.zeros(n, dtype=bool)
        reach[0] = True
        par = self.parent()
        for d in range(1, self.max_depth + 1):
            at = np.flatnonzero(self.depth == d)
            p = par[at]
            reach[at] = reach[p] & (kind[p] != LEAF)
        keep = np.flatnonzero(reach)
        new_id = np.full(n, -1, dtype=np.intp)
        new_id[keep] = np.arange(keep.size)
        counts = np.where(kind[keep] != LEAF, np.diff(self.child_ptr)[keep], 0)
        starts = self.child_ptr[keep]
        idx = np.repeat(starts, counts) + ranges(counts)
        ch = self.children[idx]
        ch = np.where(ch >= 0, new_id[np.maximum(ch, 0)], -1)
        ptr = np.zeros(keep.size + 1, dtype=np.intp)
        np.cumsum(counts, out=ptr[1:])
        feat = np.where(kind[keep] != LEAF, self.feature[keep], -1)
        thr = np.where(kind[keep] == NUMERIC, self.threshold[keep], np.nan)
        return Tree(feat, thr, kind[keep], ptr, ch, self.child_frac[idx], self.value[keep],
                    self.impurity[keep], self.n_node_samples[keep],
                    self.weighted_n_node_samples[keep], self.depth[keep])

    def feature_importances(self, n_features: int) -> np.ndarray:
        """Total weighted impurity decrease per feature (not normalised)."""
        imp = np.zeros(n_features)
        internal = np.flatnonzero(self.kind != LEAF)
        if internal.size == 0:
            return imp
        Wi = self.weighted_n_node_samples * self.impurity
        counts = np.diff(self.child_ptr)[internal]
        idx = np.repeat(self.child_ptr[internal], counts) + ranges(counts)
        ch = self.children[idx]
        contrib = np.where(ch >= 0, Wi[np.maximum(ch, 0)], 0.0)
        owner = np.repeat(np.arange(internal.size), counts)
        child_sum = np.bincount(owner, weights=contrib, minlength=internal.size)
        dec = Wi[internal] - child_sum
        # per feature, the decreases added in node order from 0.0 (the sums of ``np.add.at``, faster)
        imp = np.bincount(self.feature[internal], weights=dec, minlength=n_features)
        return np.maximum(imp, 0.0)


from ._criterion import impurity  # noqa: E402  (re-exported)
from ._predictor import NodeTable  # noqa: E402  (re-exported)
