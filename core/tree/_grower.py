"""Level-wise tree growth (the grower): all the nodes of one depth are split together.

Growth ([Passerini §2.3]; CART for gini / squared error) is breadth first.  Each training row is a
triple (sample, fraction, weight), sorted by its node of the current level; a row whose value of the
split feature is missing goes down EVERY branch with its fraction multiplied by the branch's share of
the known weight (C4.5 fractional propagation, [Passerini §2.3.4]).  One level is:

1. ``_node_totals``: weighted totals, impurity and value of every node (one ``bincount``);
2. ``_splittable``: the nodes the stopping rules allow to split;
3. ``Splitter.find``: the best split of every candidate node (core/tree/_splitter.py);
4. ``_keep_decreasing``: ``min_impurity_decrease``;
5. ``_number_children``: global ids of the children, consecutive per split node (the right child of a
   numeric split is left + 1, which the predictor relies on);
6. ``_route_rows``: the rows of the next level, sorted by child;
7. ``_record_level``: the level's node arrays appended to the output.

Every step is vectorised over the nodes of the level: Python runs once per level, never per node.
"""

from __future__ import annotations

import numpy as np

from ._binning import Binned
from ._criterion import REGRESSION_CRITERIA, impurity, squared_error_impurity, weighted_median_dev
from ._splitter import Splits, Splitter
from ._tree import CATEGORICAL, LEAF, NUMERIC, Tree, ranges

__all__ = ["TreeGrower", "grow_tree"]

_EPS = 1e-12
assert LEAF == 0  # _route_rows reads node kinds as booleans (a leaf is False)


class _LevelRows:
    """Row state of a level: sample index, fraction (None while no value is missing: all 1), weight
    (None when every weight is 1 and no value is missing), centred target (regression; None for
    classification), local node (sorted), node row offsets and node weights."""

    __slots__ = ("r_s", "r_f", "r_w", "r_y", "r_node", "starts", "Wn", "node_tree")

    def __init__(self, r_s, r_f, r_w, r_y, r_node, node_tree):
        self.r_s, self.r_f, self.r_w, self.r_y, self.r_node = r_s, r_f, r_w, r_y, r_node
        self.node_tree = node_tree  # tree of each node of the level (nodes are ordered tree by tree)
        self.starts = self.Wn = None


class TreeGrower:
    """Grows one tree, or several trees together (a forest's trees on small data: one pass per level
    for all of them, so the fixed cost of a level is paid once), on binned training rows.

    ``y`` holds class codes (classification) or float targets (regression).  ``roots`` is a list of
    (rows, w, rng) per tree: the training rows of ``binned`` (None: every row), their weights and the
    tree's generator for ``max_features`` (None: no feature sampling).  The trees are grown exactly as
    each would be alone.
    """

    def __init__(self, binned: Binned, roots: list, y, *, criterion: str, n_classes: int, max_depth,
                 min_samples_split: float, min_samples_leaf: float, min_impurity_decrease: float,
                 max_features: int, y_raw=None):
        self.binned = binned
        self.criterion = criterion
        self.regression = criterion in REGRESSION_CRITERIA
        self.mae = criterion == "absolute_error"
        self.S = 3 if self.regression else n_classes
        self.max_depth = np.iinfo(np.int32).max if max_depth is None else max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_impurity_decrease = min_impurity_decrease
        self.y_raw = y_raw
        self.n_trees = len(roots)
        n = binned.codes.shape[0]
        yv = np.asarray(y, dtype=np.float64) if self.regression else None
        self.yc = None if self.regression else np.asarray(y, dtype=np.intp)
        self.offset = np.zeros(self.n_trees)
        r_s, r_w, r_y = [], [], []
        for t, (rows, w, _) in enumerate(roots):
            rows = np.arange(n) if rows is None else np.asarray(rows, dtype=np.intp)
            w = np.asarray(w, dtype=np.float64)
            keep = w > 0
            if not keep.all() and keep.any():
                rows, w = rows[keep], w[keep]
            if self.regression:
                y_t, W_t = yv.take(rows), w.sum()
                # np.average(y_t, weights=w), as it computes it: the sum of the products over the sum of weights
                self.offset[t] = float(np.multiply(y_t, w).sum() / W_t) if W_t > 0 else 0.0
                r_y.append(y_t - self.offset[t])
            r_s.append(rows)
            r_w.append(w)
        sizes = np.array([r.size for r in r_s], dtype=np.intp)
        cat = np.concatenate if self.n_trees > 1 else (lambda parts: parts[0])
        r_s, r_w = cat(r_s), cat(r_w)
        # the weight array is never modified in place, so ``w`` itself is the first one; None when every
        # weight is 1 and no value is missing: weighted sums are then integer counts (the same numbers)
        r_f = np.ones(r_s.size) if binned.has_missing else None
        r_w = None if r_f is None and bool((r_w == 1.0).all()) else r_w
        r_y = cat(r_y) if self.regression else None
        r_node = np.repeat(np.arange(self.n_trees, dtype=np.intp), sizes)
        self.rows = _LevelRows(r_s, r_f, r_w, r_y, r_node, np.arange(self.n_trees, dtype=np.intp))
        rngs = [r[2] for r in roots]
        self.splitter = Splitter(binned, self.yc, y_raw, criterion=criterion, n_stats=self.S,
                                 min_samples_leaf=min_samples_leaf, max_features=max_features,
                                 rng=None if all(r is None for r in rngs) else rngs)
        self.has_cat = bool(binned.is_cat.any())
        self.W_root = None
        self._out = {k: [] for k in ("feat", "thr", "kind", "val", "imp", "n", "wn", "depth", "nch",
                                     "children", "fracs", "tree")}

    # ------------------------------------------------------------------ growth
    def grow(self) -> list[Tree]:
        """Grow every tree; returns them in the order of ``roots``."""
        # global ids number the nodes of all the trees level by level (tree by tree within a level);
        # next_id: global id of the first node of the next level
        depth, n_level = 0, self.n_trees
        next_id = n_level
        while n_level > 0:
            n_next = self.split_level(depth, n_level, next_id)
            next_id += n_next
            n_level = n_next
            depth += 1
        return self._finish()

    def split_level(self, depth: int, n_level: int, next_id: int) -> int:
        """Split every node of the level; returns the number of nodes of the next level."""
        rows = self.rows
        cnt, Wn, imp, val = self._node_totals(n_level)
        rows.Wn = Wn
        if self.mae:
            imp = self._mae_node_values(n_level, Wn, val)
        cand = self._splittable(depth, cnt, imp, Wn).nonzero()[0]
        splits = self.splitter.find(cand, rows)
        if splits is not None:
            splits = self._keep_decreasing(splits, Wn)
        feat = np.full(n_level, -1, dtype=np.intp)
        thr = np.full(n_level, np.nan)
        kind = np.zeros(n_level, dtype=np.int8)
        nch = np.zeros(n_level, dtype=np.intp)
        if splits is not None and splits.size:
            sn = splits.node
            feat[sn] = splits.feat
            thr[sn] = splits.thr
            kind[sn] = np.where(splits.cat, CATEGORICAL, NUMERIC) if self.has_cat else NUMERIC
            nch[sn] = splits.nch
            ids, n_next = self._number_children(splits, next_id)
            self._route_rows(splits, ids, feat, kind, nch, n_level, next_id)
            self._out["children"].append(ids)
            self._out["fracs"].append(splits.fracs)
        else:
            n_next = 0
            self._finalize_leaves()
        self._record_level(depth, feat, thr, kind, val, imp, cnt, Wn, nch, rows.node_tree)
        if n_next:
            rows.node_tree = (np.zeros(n_next, dtype=np.intp) if self.n_trees == 1 else
                              np.repeat(rows.node_tree[splits.node], splits.nch)[splits.slots >= 0])
        return n_next

    # ------------------------------------------------------------------ steps
    def _node_totals(self, n_level: int):
        """Row counts (known fractions' sums), weights, impurity and value of every node of the level, from
        its weighted totals (class counts, or w, wy, wy^2)."""
        r = self.rows
        S, yc = self.S, self.yc
        rows_per_node = np.bincount(r.r_node, minlength=n_level)
        r.starts = np.zeros(n_level + 1, dtype=np.intp)  # rows are sorted by node
        np.add.accumulate(rows_per_node, out=r.starts[1:])
        # counts: the row counts, or the sums of the fractions (the same numbers as a bincount with weights 1)
        cnt = (rows_per_node if r.r_f is None else np.bincount(r.r_node, weights=r.r_f, minlength=n_level)
               ).astype(np.float64)
        if self.regression:  # totals (w, w y, w y^2), one array each
            rw = r.r_w
            # unit weights: the counts and 1.0 * y = y (the same sums as with weights of 1.0)
            Wn = cnt if rw is None and r.r_f is None else np.bincount(r.r_node, weights=rw, minlength=n_level)
            st = np.bincount(r.r_node, weights=r.r_y if rw is None else rw * r.r_y, minlength=n_level)
            Wy2 = np.bincount(r.r_node, weights=r.r_y**2 if rw is None else rw * r.r_y**2, minlength=n_level)
            del rw
            imp = squared_error_impurity(Wn, st, Wy2)
        else:
            st = np.bincount(r.r_node * S + yc.take(r.r_s), weights=r.r_w, minlength=n_level * S)
            st = st.reshape(n_level, S).astype(np.float64, copy=False)
            Wn = st @ np.ones(S)
            imp = impurity(st, self.criterion)
        if self.W_root is None:  # the root level: node t is the root of tree t
            self.W_root = Wn.copy()
        return cnt, Wn, imp, self._node_values(st, Wn)

    def _node_values(self, st, Wn) -> np.ndarray:
        """(nodes, 1) mean targets (regression, from the w y totals ``st``: the centred mean plus the tree's
        offset; 0 plus the offset for a node of no weight) or (nodes, classes) class distributions (from the
        class totals ``st``; uniform for no weight)."""
        r = self.rows
        if not self.regression:
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.where(Wn[:, None] > 0, st / Wn[:, None], 1.0 / self.S)
        if r.r_w is None and r.r_f is None:  # unit weights: every node holds a row, Wn >= 1
            mean = st / Wn
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                mean = np.where(Wn > 0, st / Wn, 0.0)
        # one tree: its offset added to every node (the same sums as with the per-node offsets)
        mean += self.offset[0] if self.n_trees == 1 else self.offset.take(r.node_tree)
        return mean[:, None]

    def _mae_node_values(self, n_level: int, Wn, val) -> np.ndarray:
        """absolute_error: weighted medians (values, in place) and mean absolute deviations."""
        r, starts = self.rows, self.rows.starts
        imp = np.empty(n_level)
        for i in range(n_level):
            sl = slice(starts[i], starts[i + 1])
            med, dev = weighted_median_dev(
                self.y_raw[r.r_s[sl]], np.ones(sl.stop - sl.start) if r.r_w is None else r.r_w[sl]
            )
            val[i, 0] = med
            imp[i] = dev / Wn[i] if Wn[i] > 0 else 0.0
        return imp

    def _splittable(self, depth: int, cnt, imp, Wn) -> np.ndarray:
        if depth >= self.max_depth:
            return np.zeros(cnt.size, dtype=bool)
        ok = cnt >= max(self.min_samples_split, 2 * self.min_samples_leaf)
        ok &= imp > _EPS
        ok &= Wn > 0
        return ok

    def _keep_decreasing(self, splits: Splits, Wn) -> Splits:
        if self.min_impurity_decrease <= 0 and (splits.size == 0 or splits.gain.min() >= 0.0):
            return splits  # W_t / W_root * gain >= 0 >= min_impurity_decrease - eps
        W_root = self.W_root.take(self.rows.node_tree.take(splits.node))
        ok = splits.gain * Wn.take(splits.node) / W_root >= self.min_impurity_decrease - _EPS
        return splits if ok.all() else splits.take(ok)

    def _number_children(self, splits: Splits, next_id: int):
        """Global ids of the present children, consecutive in node order (-1: absent category)."""
        if not self.has_cat:  # numeric splits: every child is present
            return np.arange(next_id, next_id + splits.slots.size, dtype=np.intp), int(splits.slots.size)
        present = splits.slots >= 0
        ids = np.full(splits.slots.size, -1, dtype=np.intp)
        n_next = int(present.sum())
        ids[present] = next_id + np.arange(n_next)
        return ids, n_next

    def _route_rows(self, splits: Splits, ids, feat, kind, nch, n_level: int, next_id: int) -> None:
        """Send each row of a split node to its child; rows missing the split feature go to every child
        (fractions multiplied).  The next level's rows are sorted by child (stable)."""
        r = self.rows
        r_s, r_f, r_w, r_y, r_node = r.r_s, r.r_f, r.r_w, r.r_y, r.r_node
        mcode = self.binned.missing_code
        row_kind = kind.take(r_node)
        if not row_kind.all():  # rows of leaves (kind LEAF, 0: False) stay behind
            sel = row_kind.nonzero()[0]
            r_s, r_node = r_s.take(sel), r_node.take(sel)
            r_f = None if r_f is None else r_f.take(sel)
            r_w = None if r_w is None else r_w.take(sel)
            r_y = None if r_y is None else r_y.take(sel)
            row_kind = row_kind.take(sel)
            del sel
        code_thr = np.full(n_level, -1, dtype=np.int64)
        code_thr[splits.node] = np.where(splits.cat, -1, splits.code) if self.has_cat else splits.code
        fi = feat.take(r_node)
        fi += r_s * self.binned.codes.shape[1]
        c = self.splitter.codes_flat.take(fi)  # small-int codes: codes[r_s, feat[r_node]], ~2.5x faster
        del fi
        miss = c == mcode if self.binned.has_missing else None
        ptr = np.zeros(n_level + 1, dtype=np.intp)
        np.add.accumulate(nch, out=ptr[1:])
        ch, fr = ids, splits.fracs
        if not self.has_cat:  # the children are numbered next_id + their slot in ch (consecutive)
            child = ptr.take(r_node)
            child += c > code_thr.take(r_node)
            child += next_id
        elif (row_kind == NUMERIC).all():
            pos = ptr.take(r_node)
            pos += c > code_thr.take(r_node)
            child = ch.take(pos)
            del pos
        else:
            numeric = row_kind == NUMERIC
            child = np.empty(r_s.size, dtype=np.intp)
            go_right = (c > code_thr[r_node]).astype(np.intp)
            child[numeric] = ch[ptr[r_node[numeric]] + go_right[numeric]]
            del go_right
            cat = ~numeric if miss is None else ~numeric & ~miss
            child[cat] = ch[ptr[r_node[cat]] + c[cat]]
            del cat, numeric
        del row_kind
        if miss is None or not miss.any():
            order = child.argsort(kind="stable")
            child = child.take(order)
            child -= next_id
            r.r_s = r_s.take(order)
            r.r_f = None if r_f is None else r_f.take(order)
            r.r_w = None if r_w is None else r_w.take(order)
            r.r_y = None if r_y is None else r_y.take(order)
            r.r_node = child
            return
        known = ~miss
        k_s, k_f, k_w, k_c = r_s[known], r_f[known], r_w[known], child[known]
        m_s, m_f, m_w, m_n = r_s[miss], r_f[miss], r_w[miss], r_node[miss]
        if r_y is not None:
            k_y, m_y = r_y[known], r_y[miss]
        counts = nch[m_n]
        pos = np.repeat(ptr[m_n], counts) + ranges(counts)
        cc = ch[pos]
        ff = fr[pos]
        ok = cc >= 0
        e_s = np.repeat(m_s, counts)[ok]
        e_f = (np.repeat(m_f, counts) * ff)[ok]
        e_w = (np.repeat(m_w, counts) * ff)[ok]
        e_c = cc[ok]
        pos_ok = e_w > 0
        k_s = np.concatenate([k_s, e_s[pos_ok]])
        k_f = np.concatenate([k_f, e_f[pos_ok]])
        k_w = np.concatenate([k_w, e_w[pos_ok]])
        k_c = np.concatenate([k_c, e_c[pos_ok]])
        order = np.argsort(k_c, kind="stable")
        if r_y is not None:
            r.r_y = np.concatenate([k_y, np.repeat(m_y, counts)[ok][pos_ok]])[order]
        r.r_s, r.r_f, r.r_w, r.r_node = k_s[order], k_f[order], k_w[order], k_c[order] - next_id

    def _finalize_leaves(self) -> None:
        """The last level: every node is a leaf; the row state is released."""
        r = self.rows
        r.r_s = r.r_node = np.zeros(0, dtype=np.intp)
        r.r_f = None if r.r_f is None else np.zeros(0)
        r.r_w = None if r.r_w is None else np.zeros(0)
        r.r_y = None if r.r_y is None else np.zeros(0)

    def _record_level(self, depth, feat, thr, kind, val, imp, cnt, Wn, nch, node_tree) -> None:
        o = self._out
        for k, v in (("feat", feat), ("thr", thr), ("kind", kind), ("val", val), ("imp", imp), ("n", cnt),
                     ("wn", Wn), ("nch", nch), ("tree", node_tree)):
            o[k].append(v)
        o["depth"].append(np.full(feat.size, depth, dtype=np.intp))

    def _finish(self) -> list[Tree]:
        """The node arrays of every tree, numbered per tree level by level (the numbering a tree grown
        alone gets)."""
        o = self._out
        cat = np.concatenate
        nch = cat(o["nch"])
        children = cat(o["children"]).astype(np.intp) if o["children"] else np.zeros(0, np.intp)
        fracs = cat(o["fracs"]) if o["fracs"] else np.zeros(0)
        arrays = [cat(o["feat"]).astype(np.int32), cat(o["thr"]), cat(o["kind"]), cat(o["val"]),
                  cat(o["imp"]), cat(o["n"]), cat(o["wn"]), cat(o["depth"]).astype(np.int32)]
        if self.n_trees == 1:
            return [self._tree(arrays, nch, children, fracs)]
        tree_of = cat(o["tree"])
        order = np.argsort(tree_of, kind="stable")  # each tree's nodes, in global (level) order
        bounds = np.searchsorted(tree_of[order], np.arange(self.n_trees + 1))
        pid = np.empty(tree_of.size, dtype=np.intp)  # id of each node within its tree
        pid[order] = np.arange(tree_of.size) - np.repeat(bounds[:-1], np.diff(bounds))
        owner_tree = np.repeat(tree_of, nch)
        c_order = np.argsort(owner_tree, kind="stable")
        c_bounds = np.searchsorted(owner_tree[c_order], np.arange(self.n_trees + 1))
        children = np.where(children >= 0, pid[np.maximum(children, 0)], -1)
        trees = []
        for t in range(self.n_trees):
            sel = order[bounds[t] : bounds[t + 1]]
            csel = c_order[c_bounds[t] : c_bounds[t + 1]]
            trees.append(self._tree([a[sel] for a in arrays], nch[sel], children[csel], fracs[csel]))
        return trees

    @staticmethod
    def _tree(arrays, nch, children, fracs) -> Tree:
        feat, thr, kind, val, imp, n, wn, depth = arrays
        ptr = np.zeros(nch.size + 1, dtype=np.intp)
        np.cumsum(nch, out=ptr[1:])
        return Tree(feat, thr, kind, ptr, children.astype(np.int32), fracs, val, imp, n, wn, depth)


def grow_tree(binned: Binned, rows, w, y, *, criterion: str, n_classes: int, max_depth,
              min_samples_split: float, min_samples_leaf: float, min_impurity_decrease: float,
              max_features: int, rng, y_raw=None) -> Tree:
    """Grow one tree (see ``TreeGrower``)."""
    return TreeGrower(binned, [(rows, w, rng)], y, criterion=criterion, n_classes=n_classes,
                      max_depth=max_depth, min_samples_split=min_samples_split,
                      min_samples_leaf=min_samples_leaf, min_impurity_decrease=min_impurity_decrease,
                      max_features=max_features, y_raw=y_raw).grow()[0]
