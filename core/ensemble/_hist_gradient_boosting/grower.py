"""Leaf-wise growth of one histogram regression tree on gradients/hessians (``TreeGrower``).

For a node with gradient sum ``G`` and hessian sum ``H`` the leaf value is
``-learning_rate * G / (H + l2)`` (Chen & Guestrin 2016; scikit-learn's HistGradientBoosting).  The
grower keeps the leaves whose best split is known in a max-heap on gain and splits the best one until
``max_leaf_nodes`` leaves (or no split gains).  Only the smaller child of a split gets a histogram
(``histogram.HistogramBuilder.split``); nodes keep cumulative histograms, so the sibling's is
``parent - child``, and both are scored at once (``splitting.SplitFinder``).

Cumulative histograms live in (2, 3, F, n_bins) pair buffers: the children of a split are computed into
one, which the finder scores as is and whose halves the children then own (no copies).  Free buffers
persist across trees (``HistogramBuilder.hist_buffers``: no allocation nor page faults per tree).
"""

from __future__ import annotations

import heapq

import numpy as np

from .splitting import MIN_HESSIAN, SplitFinder, best_categorical_split, cumsum_bins

__all__ = ["TreeGrower", "grow_tree"]


class _Node:
    # idx: the rows as (part 0, part 1) index arrays (HistogramBuilder); hist: cumulative over bins
    __slots__ = ("id", "idx", "hist", "buf", "G", "H", "C", "depth", "split")

    def __init__(self, id_, idx, G, H, C, depth):
        self.id = id_
        self.idx = idx
        self.G = G
        self.H = H
        self.C = C
        self.depth = depth
        self.hist = None  # a half of the pair buffer ``buf``
        self.buf = None
        self.split = None


class TreeGrower:
    """Grow one tree leaf-wise (best-gain leaf first) on the histograms of ``hist_builder``.

    ``grow()`` returns ``(nodes, leaves)``: ``nodes`` is a dict of flat lists (feature, bin, missing_left,
    left, right, value, and ``cats``: node id -> bins going left of categorical splits), ``leaves`` a list of
    ``(node_id, parts, count)`` (``parts``: the leaf's rows, see ``HistogramBuilder``).  The caller ends the
    tree with ``hist_builder.add_leaf_values`` or ``hist_builder.leaf_rows``.
    """

    def __init__(self, hist_builder, g, h, *, constant_hessian, valid_bins, missing_bin, learning_rate, l2,
                 max_leaf_nodes, max_depth, min_samples_leaf, categorical=(), G=None, H=None):
        self.hb = hist_builder
        self.n = n = hist_builder.XbT.shape[1]
        self.constant_hessian = constant_hessian
        self.missing_bin = missing_bin
        self.learning_rate = learning_rate
        self.l2 = l2
        self.max_leaf_nodes = max_leaf_nodes
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.categorical = categorical
        self.G = float(g.sum()) if G is None else G
        self.H = (float(n) if constant_hessian else float(h.sum())) if H is None else H
        self.feature, self.bins, self.miss_left, self.left, self.right, self.value = [], [], [], [], [], []
        self.cats: dict[int, np.ndarray] = {}
        self.leaves: dict[int, _Node] = {}
        self.heap: list = []
        self.n_leaves = 1
        invalid_bins = ~valid_bins
        if not invalid_bins.any():
            invalid_bins = None
        else:  # one more column for the missing bin (never a split point)
            invalid_bins = np.concatenate([invalid_bins, np.ones((len(invalid_bins), 1), dtype=bool)], axis=1)
        # every child with >= min_samples_leaf rows has H >= min_samples_leaf * min(h): if that
        # exceeds min_hessian_to_split (with a margin for rounding), the hessian test is void
        h_floor = 1.0 if constant_hessian else (float(h.min()) if n else 0.0)
        check_hessian = not min_samples_leaf * h_floor >= 2 * MIN_HESSIAN
        n_features = hist_builder.XbT.shape[0]
        self.hist_shape = (3, n_features, missing_bin + 1)
        self.finder = SplitFinder(n_features, missing_bin + 1, invalid_bins, l2, min_samples_leaf, check_hessian,
                                  hist_builder.has_missing)
        self.free = hist_builder.hist_buffers
        # id -> [buffer, holder of half 0, holder of half 1] for pair buffers held by a node
        self.pairs: dict = {}

    # -- the steps of a tree ------------------------------------------------------------------------------------
    def grow(self):
        """Grow the tree; returns ``(nodes, leaves)`` (see the class docstring)."""
        root = self._new_node((None, None), self.G, self.H, self.n, 0)
        self.leaves[root.id] = root
        # bins with no rows on a side divide by zero in the finder, which masks them
        with np.errstate(divide="ignore", invalid="ignore"):
            if (self.max_leaf_nodes is None or self.max_leaf_nodes > 1) and self._splittable(root):
                buf = self._new_pair()
                cumsum_bins(self.hb.root_hist(buf[1]), out=buf[0])
                self._consider([root], buf, 0)
            while self.heap and not self._full():
                if not self.split_next():
                    break
        self.free.extend(entry[0] for entry in self.pairs.values())  # pending leaves' buffers, for the next tree
        return self._finalize()

    def split_next(self):
        """Split the leaf of highest gain; returns False when the tree has its ``max_leaf_nodes`` leaves."""
        _, _, node = heapq.heappop(self.heap)
        _, f, b, mleft, GL, HL, CL, cat_set = node.split
        # children's sizes are known from the histogram: decide before partitioning which one
        # (the smaller) gets a histogram, so that partition and histogram run in one pass
        mln, msl = self.max_leaf_nodes, self.min_samples_leaf
        last = mln is not None and self.n_leaves + 1 >= mln
        c_r = node.C - CL
        need_hist = not last and (self.max_depth is None or node.depth + 1 < self.max_depth) and (
            max(CL, c_r) >= 2 * msl)
        small_side = 0 if CL <= c_r else 1
        ids = (node.id, len(self.feature), len(self.feature) + 1)  # the children's ids (_new_node below)
        # the children's pair buffer (first: it may move the parent's histogram, by consolidation);
        # the smaller child's histogram goes into its second half
        buf = self._new_pair() if need_hist else None
        idx_l, idx_r, small_hist = self.hb.split(
            node.idx, ids, f, b, mleft, cat_set, CL, small_side if need_hist else None,
            None if buf is None else buf[1])
        if self.constant_hessian:
            HL = float(CL)
        lnode, rnode = self._apply_split(node, f, b, mleft, cat_set, idx_l, idx_r, GL, HL, CL)
        if self._full():
            return False
        if need_hist:
            self._score_children(node, lnode, rnode, small_side, small_hist, buf)
        else:
            self._release(node)
        return True

    def _apply_split(self, node, f, b, mleft, cat_set, idx_l, idx_r, GL, HL, CL):
        """Record ``node``'s split and replace it by its two children among the leaves."""
        lnode = self._new_node(idx_l, GL, HL, CL, node.depth + 1)
        rnode = self._new_node(idx_r, node.G - GL, node.H - HL, node.C - CL, node.depth + 1)
        self.feature[node.id] = f
        self.bins[node.id] = b
        if cat_set is not None:
            self.cats[node.id] = cat_set
        self.miss_left[node.id] = mleft
        self.left[node.id] = lnode.id
        self.right[node.id] = rnode.id
        del self.leaves[node.id]
        self.leaves[lnode.id] = lnode
        self.leaves[rnode.id] = rnode
        self.n_leaves += 1
        node.idx = node.split = None
        return lnode, rnode

    def _score_children(self, node, lnode, rnode, small_side, small_hist, buf):
        """Cumulative histograms of the children (the smaller one's computed, the other's subtracted from the
        parent's), their best splits, and the histograms of pending leaves that can no longer be split dropped."""
        parent_hist = node.hist
        if parent_hist is None:  # pragma: no cover - popped nodes always hold one (see the pruning below)
            raise RuntimeError(f"node {node.id} was split without its histogram")
        small, large = (lnode, rnode) if small_side == 0 else (rnode, lnode)
        cumsum_bins(small_hist, out=buf[0])
        todo = [i for i, nd in enumerate((small, large)) if self._splittable(nd)]
        if todo[-1] == 1:
            np.subtract(parent_hist, buf[0], out=buf[1])
        self._release(node)
        if len(todo) == 2:
            self._consider([small, large], buf, 0)
        else:
            self._consider([(small, large)[todo[0]]], buf, todo[0])
        mln = self.max_leaf_nodes
        if mln is not None and len(self.heap) > mln - self.n_leaves:
            # pops follow the heap order, so a pending leaf ranked below the number of splits
            # left is never split: drop its histogram (bounds the memory held by histograms)
            for _, _, nd in sorted(self.heap)[mln - self.n_leaves :]:
                if nd.hist is not None:  # (most were dropped at an earlier split)
                    self._release(nd)

    def _consider(self, nodes, buf, first):
        """Score ``nodes``, whose cumulative histograms are ``buf[first:first + len(nodes)]``; push the
        splittable ones on the heap (they keep their histogram half)."""
        cum = buf[first : first + len(nodes)]
        splits = self.finder(cum, [nd.G for nd in nodes], [nd.H for nd in nodes], [nd.C for nd in nodes])
        for i, (node, split) in enumerate(zip(nodes, splits, strict=True)):
            if len(self.categorical):
                hist = np.diff(cum[i], axis=-1, prepend=0.0)
                split = best_categorical_split(hist, node.G, node.H, node.C, self.categorical, self.missing_bin,
                                               self.l2, self.min_samples_leaf, split)
            node.split = split
            if split is not None:
                self._hold(node, buf, first + i)
                heapq.heappush(self.heap, (-split[0], node.id, node))
        if id(buf) not in self.pairs:
            self.free.append(buf)

    def _finalize_leaf(self, node):
        """A leaf's entry of the result: ``(id, parts, count)`` (its value was set when it was created)."""
        return (node.id, node.idx, node.C)

    def _finalize(self):
        nodes = {
            "feature": self.feature,
            "bin": self.bins,
            "missing_left": self.miss_left,
            "left": self.left,
            "right": self.right,
            "value": self.value,
            "cats": self.cats,
        }
        return nodes, [self._finalize_leaf(nd) for nd in self.leaves.values()]

    # -- nodes ----------------------------------------------------------------------------------------------------
    def _new_node(self, idx, G, H, C, depth):
        node = _Node(len(self.feature), idx, G, H, C, depth)
        self.feature.append(0)
        self.bins.append(0)
        self.miss_left.append(False)
        self.left.append(node.id)
        self.right.append(node.id)
        self.value.append(-self.learning_rate * G / max(H + self.l2, 1e-300))
        return node

    def _splittable(self, node):
        return (self.max_depth is None or node.depth < self.max_depth) and node.C >= 2 * self.min_samples_leaf

    def _full(self):
        return self.max_leaf_nodes is not None and self.n_leaves >= self.max_leaf_nodes

    # -- histogram pair buffers -----------------------------------------------------------------------------------
    def _new_pair(self):
        """A buffer with no holder.  Without a free one, two half-held buffers are consolidated (one
        holder's histogram moves to the other's free half) before a new buffer is allocated, so the
        buffers in use stay within one of the held halves (the memory of one buffer per histogram)."""
        if self.free:
            return self.free.pop()
        singles = [e for e in self.pairs.values() if (e[1] is None) != (e[2] is None)]
        if len(singles) < 2:
            return np.empty((2,) + self.hist_shape)
        (dst, *dst_h), (src, *src_h) = singles[0], singles[1]
        node = src_h[0] if src_h[0] is not None else src_h[1]
        d = 0 if dst_h[0] is None else 1
        np.copyto(dst[d], node.hist)
        del self.pairs[id(src)]
        self._hold(node, dst, d)
        return src

    def _hold(self, node, buf, i):
        entry = self.pairs.setdefault(id(buf), [buf, None, None])
        entry[1 + i] = node
        node.hist, node.buf = buf[i], buf

    def _release(self, node):
        if node.hist is not None:
            entry = self.pairs[id(node.buf)]
            entry[1 if entry[1] is node else 2] = None
            node.hist = node.buf = None
            if entry[1] is None and entry[2] is None:
                del self.pairs[id(entry[0])]
                self.free.append(entry[0])


def grow_tree(hist_builder, g, h, **kw):
    """``TreeGrower(hist_builder, g, h, **kw).grow()``."""
    return TreeGrower(hist_builder, g, h, **kw).grow()
