"""Prediction with the fitted trees: all trees of a boosted model as flat arrays (``TreeEnsemble``), batch
prediction with leaf bitmasks (QuickScorer), level-wise descent for few rows, and per-tree routing of row
index sets (``route_tree``; on binned data during the fit: ``predict_nodes_binned``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["TreeEnsemble", "route_tree", "predict_nodes_binned"]


class TreeEnsemble:
    """All trees of a boosted model as flat arrays (one node table, global ids).

    Leaves point to themselves (``left == right == id``), so a fixed number of
    descent steps is harmless.  ``roots[t]`` and ``tree_output[t]`` (the output
    column a tree adds to) describe tree ``t``.  Thresholds are real values:
    go left when ``x <= threshold`` (NaN: when ``missing_left``).
    """

    def __init__(self, n_outputs: int, missing_bin: int = 255):
        self.n_outputs = n_outputs
        self.missing_bin = missing_bin
        self._parts: list = []
        self._n = 0
        self._cat_sets: list = []

    def add(self, nodes: dict, edges: list, output: int) -> None:
        k = len(nodes["feature"])
        feat = np.asarray(nodes["feature"], dtype=np.intp)
        b = np.asarray(nodes["bin"], dtype=np.intp)
        thr = np.full(k, np.inf)
        internal = np.asarray(nodes["left"]) != np.arange(k)
        cat_index = np.full(k, -1, dtype=np.intp)
        for i in np.flatnonzero(internal):
            e = edges[feat[i]]
            thr[i] = e[b[i]] if b[i] < len(e) else np.inf
        for i, cat_set in nodes.get("cats", {}).items():
            cat_set = cat_set.copy()
            # categories never seen in training (codes >= k) follow the missing values
            cat_set[len(edges[feat[i]]) + 1 : self.missing_bin] = cat_set[self.missing_bin]
            cat_index[i] = len(self._cat_sets)
            self._cat_sets.append(cat_set)
            thr[i] = np.nan
        self._parts.append(
            (
                feat,
                b,
                thr,
                np.asarray(nodes["missing_left"], dtype=bool),
                np.asarray(nodes["left"], dtype=np.intp) + self._n,
                np.asarray(nodes["right"], dtype=np.intp) + self._n,
                np.asarray(nodes["value"], dtype=np.float64),
                output,
                self._n,
                internal,
                cat_index,
            )
        )
        self._n += k

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_bm", None)  # prediction tables: rebuilt on demand, not persisted
        return state

    def set_leaf_value(self, tree: int, node: int, value: float) -> None:
        self._parts[tree][6][node] = value

    def finalize(self) -> TreeEnsemble:
        parts = self._parts
        cat = (lambda i, dt: np.concatenate([p[i] for p in parts]).astype(dt)) if parts else None
        if parts:
            self.feature = cat(0, np.intp)
            self.bin = cat(1, np.intp)
            self.threshold = cat(2, np.float64)
            self.missing_left = cat(3, bool)
            self.left = cat(4, np.intp)
            self.right = cat(5, np.intp)
            self.value = cat(6, np.float64)
            self.is_internal = cat(9, bool)
            self.cat_index = cat(10, np.intp)
        else:
            self.feature = self.bin = self.left = self.right = np.zeros(0, np.intp)
            self.threshold = self.value = np.zeros(0)
            self.missing_left = self.is_internal = np.zeros(0, bool)
            self.cat_index = np.zeros(0, np.intp)
        self.cat_table = (
            np.array(self._cat_sets, dtype=bool) if self._cat_sets
            else np.zeros((0, self.missing_bin + 1), dtype=bool)
        )
        self._cat_sets = []
        self.roots = np.array([p[8] for p in parts], dtype=np.intp)
        self.tree_output = np.array([p[7] for p in parts], dtype=np.intp)
        self.n_trees = len(parts)
        self.max_depth = self._depth()
        # per-tree slices, for partition-based batch prediction
        self.tree_slices = [(p[8], p[8] + len(p[0])) for p in parts]
        self._parts = []
        return self

    def _depth(self) -> int:
        if self.n_trees == 0:
            return 0
        depth = np.zeros(len(self.feature), dtype=np.intp)
        # children always have larger ids than their parent within a tree
        for i in range(len(self.feature)):
            if self.is_internal[i]:
                depth[self.left[i]] = depth[self.right[i]] = depth[i] + 1
        return int(depth.max())

    # -- prediction ----------------------------------------------------------------
    def predict_raw(self, X: np.ndarray, out: np.ndarray, *, binned: bool = False) -> np.ndarray:
        """Add every tree's output to ``out`` (shape (n, n_outputs)).

        ``X`` is (n, F) real data, or (F, n) uint8 bins when ``binned``.
        """
        n = X.shape[1] if binned else X.shape[0]
        if self.n_trees == 0 or n == 0:
            return out
        if n * self.n_trees <= 20_000 and not binned:
            return self._predict_levels(X, out)
        if not binned and self._bitmask_tables() is not None:
            return self._predict_bitmask(X, out)
        return self._predict_partition(X, out, binned)

    # -- batch prediction with leaf bitmasks (QuickScorer) -------------------------
    def _bitmask_tables(self):
        """Lazily built tables for ``_predict_bitmask`` (None when a tree has > 64 leaves).

        Leaves of tree ``t`` are numbered left to right.  An internal node's mask
        has the bits of its left subtree's leaves cleared: if a row goes right
        there, none of those leaves can be its exit leaf.  The exit leaf is the
        lowest bit left after AND-ing the masks of all nodes where the row goes
        right (Lucchese et al. 2015, "QuickScorer").  Whether a row goes right
        depends only on its code for the node's feature (the rank of ``x`` among
        the feature's distinct thresholds; NaN has its own code; categorical
        features use the category bin), so per feature one table
        ``mask[code, tree]`` holds the AND over all of the tree's nodes on that
        feature, and a row's masks for all trees are one row gather per feature.
        """
        if getattr(self, "_bm", False) is not False:
            return self._bm
        self._bm = None
        internal = self.is_internal
        n_leaves = [int((~internal[a:b]).sum()) for a, b in self.tree_slices]
        if not n_leaves or max(n_leaves) > 64:
            return None
        dt = np.uint32 if max(n_leaves) <= 32 else np.uint64
        ones = np.iinfo(dt).max
        T = self.n_trees
        n_features = int(self.feature[internal].max()) + 1 if internal.any() else 0
        is_cat = np.zeros(n_features, dtype=bool)
        is_cat[self.feature[internal & (self.cat_index >= 0)]] = True
        uth = []
        for f in range(n_features):
            if is_cat[f]:
                uth.append(None)
            else:
                uth.append(np.unique(self.threshold[internal & (self.feature == f)]))
        sizes = [self.missing_bin + 1 if c else len(u) + 2 for c, u in zip(is_cat, uth, strict=True)]
        tables = [np.full((k, T), ones, dtype=dt) for k in sizes]
        leaf_value = np.zeros((T, max(n_leaves)))
        for t, (a, _) in enumerate(self.tree_slices):
            # iterative in-order walk: leaves numbered left to right, [lo, hi) leaf range of each left subtree
            pos = 0
            stack = [(a, False)]
            spans = []
            start = {}
            while stack:
                node, done = stack.pop()
                if not internal[node]:
                    leaf_value[t, pos] = self.value[node]
                    pos += 1
                elif not done:
                    start[node] = pos
                    stack.append((int(self.right[node]), False))
                    stack.append((node, True))
                    stack.append((int(self.left[node]), False))
                else:
                    spans.append((node, start[node], pos))
            for node, lo, hi in spans:
                bv = dt(ones ^ (((1 << hi) - 1) ^ ((1 << lo) - 1)))
                f = self.feature[node]
                table = tables[f]
                if self.cat_index[node] >= 0:
                    table[~self.cat_table[self.cat_index[node]], t] &= bv
                    continue
                u = uth[f]
                j = int(np.searchsorted(u, self.threshold[node]))
                table[j + 1 : len(u) + 1, t] &= bv  # codes above the threshold's rank go right
                if not self.missing_left[node]:
                    table[len(u) + 1, t] &= bv  # NaN
        onehot = np.zeros((T, self.n_outputs))
        onehot[np.arange(T), self.tree_output] = 1.0
        used = [f for f in range(n_features) if (tables[f] != ones).any()]
        self._bm = (dt, uth, is_cat, tables, used, leaf_value, onehot)
        return self._bm

    def _predict_bitmask(self, X, out):
        """Add every tree's output to ``out`` using the leaf-bitmask tables (rows in chunks)."""
        dt, uth, is_cat, tables, used, leaf_value, onehot = self._bm
        n = X.shape[0]
        T = self.n_trees
        width = leaf_value.shape[1]
        flat_value = leaf_value.ravel()
        base = np.arange(T, dtype=np.intp) * width
        codes = {}
        for f in used:
            col = np.ascontiguousarray(X[:, f])
            if is_cat[f]:
                codes[f] = _category_codes(col, self.missing_bin)
            else:
                c = np.searchsorted(uth[f], col, side="left")
                c[np.isnan(col)] = len(uth[f]) + 1
                codes[f] = c
        chunk = max(64, (1 << 18) // max(T, 1))
        one = dt(1)
        for s in range(0, n, chunk):
            e = min(n, s + chunk)
            if used:
                mask = tables[used[0]][codes[used[0]][s:e]]
                for f in used[1:]:
                    mask &= tables[f][codes[f][s:e]]
            else:
                mask = np.full((e - s, T), 1, dtype=dt)
            mask &= ~mask + one  # lowest set bit = the exit leaf
            leaf = np.frexp(mask)[1]
            leaf -= 1
            leaf = leaf.astype(np.intp)
            leaf += base
            vals = flat_value.take(leaf)
            if self.n_outputs == 1:
                out[s:e, 0] += vals.sum(axis=1)
            else:
                out[s:e] += vals @ onehot
        return out

    def _predict_levels(self, X, out):
        """Descend all trees at once, one level per step (cheap for few rows)."""
        n, n_features = X.shape
        flat = X.ravel()
        row = (np.arange(n, dtype=np.intp) * n_features)[:, None]
        node = np.broadcast_to(self.roots, (n, self.n_trees)).copy()
        has_missing_left = bool(self.missing_left.any())
        has_cat = len(self.cat_table) > 0
        for _ in range(self.max_depth):
            x = flat[row + self.feature[node]]
            go = x <= self.threshold[node]
            if has_missing_left:
                go |= np.isnan(x) & self.missing_left[node]
            if has_cat:
                ci = self.cat_index[node]
                m = ci >= 0
                if m.any():
                    go[m] = self.cat_table[ci[m], _category_codes(x[m], self.missing_bin)]
            node = np.where(go, self.left[node], self.right[node])
        vals = self.value[node]
        if self.n_outputs == 1:
            out[:, 0] += vals.sum(axis=1)
        else:
            for k in range(self.n_outputs):
                out[:, k] += vals[:, self.tree_output == k].sum(axis=1)
        return out

    def _predict_partition(self, X, out, binned):
        """Per tree, route index sets down the tree (work ~ n * depth per tree)."""
        cols = X if binned else np.ascontiguousarray(X.T)
        thr = self.bin if binned else self.threshold
        miss = self.missing_bin if binned else None
        for t in range(self.n_trees):
            o = out[:, self.tree_output[t]] if self.n_outputs > 1 else out[:, 0]
            route_tree(cols, int(self.roots[t]), self.feature, thr, self.missing_left, self.left,
                       self.right, self.value, self.is_internal, o, miss, self.cat_index, self.cat_table,
                       self.missing_bin)
        return out


def _category_codes(x, missing_bin):
    """Real category codes -> bin index (NaN, negative and too large -> the missing bin)."""
    ok = (x >= 0) & (x < missing_bin)
    return np.where(ok, x, missing_bin).astype(np.intp)


def route_tree(cols, root, feat, thr, mleft, left, right, value, internal, out, missing_bin=None,
               cat_index=None, cat_table=None, n_missing_bin=None):
    """Add one tree's leaf values to ``out`` by partitioning row indices node by node.

    ``cols`` is feature-major (F, n): real values (NaN = missing) or bins
    (``missing_bin`` = missing).
    """
    stack = [(root, None)]
    while stack:
        node, idx = stack.pop()
        if not internal[node]:
            if idx is None:
                out += value[node]
            else:
                out[idx] += value[node]
            continue
        col = cols[feat[node]]
        x = col if idx is None else col.take(idx)
        if cat_index is not None and cat_index[node] >= 0:
            cat_set = cat_table[cat_index[node]]
            go = cat_set[x] if missing_bin is not None else cat_set[_category_codes(x, n_missing_bin)]
        else:
            go = x <= thr[node]
            if mleft[node]:
                go |= np.isnan(x) if missing_bin is None else (x == missing_bin)
        if idx is None:
            li = np.flatnonzero(go)
            ri = np.flatnonzero(~go)
        else:
            li = np.compress(go, idx)
            ri = np.compress(~go, idx)
        if len(li):
            stack.append((int(left[node]), li))
        if len(ri):
            stack.append((int(right[node]), ri))


def predict_nodes_binned(nodes: dict, XbT: np.ndarray, missing_bin: int, out: np.ndarray) -> None:
    """Add the output of one freshly grown tree (``TreeGrower.grow`` lists) on binned data to ``out``."""
    left = np.asarray(nodes["left"], dtype=np.intp)
    internal = left != np.arange(len(left))
    cats = nodes.get("cats") or {}
    cat_index = np.full(len(left), -1, dtype=np.intp)
    for j, i in enumerate(cats):
        cat_index[i] = j
    cat_table = np.array(list(cats.values()), dtype=bool) if cats else None
    route_tree(XbT, 0, np.asarray(nodes["feature"], dtype=np.intp), np.asarray(nodes["bin"], dtype=np.intp),
               np.asarray(nodes["missing_left"], dtype=bool), left,
               np.asarray(nodes["right"], dtype=np.intp), np.asarray(nodes["value"], dtype=np.float64),
               internal, out, missing_bin, cat_index if cats else None, cat_table, missing_bin)
