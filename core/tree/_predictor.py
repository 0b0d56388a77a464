"""Prediction from fitted trees (the predictor): one or several trees stacked into one node table.

Prediction loops over depth levels, never over samples.  Paths: the level-wise walk of every (sample,
tree) pair (small batches, single rows), the coded walk (large batches: X ranked once against the
forest's thresholds, each tree descended on small-int codes), and the general walk with C4.5
fractional routing (missing values, categorical nodes).  The stacked arrays are derived from the trees
and rebuilt after unpickling (a bundle stores the trees only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._nodes import CATEGORICAL, LEAF, NUMERIC, ranges

if TYPE_CHECKING:
    from ._tree import Tree

__all__ = ["NodeTable"]

_EPS = 1e-12


class NodeTable:
    """One or several trees stacked into a single node table for vectorised prediction.

    Prediction loops over depth levels, never over samples: the state is a
    (sample, tree) -> node array moved one level per iteration.  Rows with a
    missing (NaN) or unseen category value at a node follow every branch with
    the stored known-weight fractions (C4.5), and their leaf values are mixed.
    """

    def __init__(self, trees: list[Tree]):
        offs = np.cumsum([0] + [t.node_count for t in trees])
        self.roots = offs[:-1].astype(np.intp)
        self.n_trees = len(trees)
        self._trees = trees  # the general (missing / categorical) arrays are built from them on demand
        self._has_general = False
        kind = np.concatenate([t.kind for t in trees])
        self.value = np.concatenate([t.value for t in trees])
        if len(trees) > 1:  # the trees keep views into the stacked table, not copies
            for t, o in zip(trees, offs[:-1], strict=True):
                t.value = self.value[o : o + t.node_count]
        self.kind = kind
        self.is_leaf = kind == LEAF
        self.max_depth = max(t.max_depth for t in trees)
        self.has_cat = bool((kind == CATEGORICAL).any())
        # fast path arrays, built tree by tree (small temporaries): leaves loop to themselves
        self.feat0 = np.concatenate(
            [np.where(t.kind == LEAF, 0, t.feature).astype(np.intp) for t in trees])
        self.thr0 = np.concatenate([np.where(t.kind == NUMERIC, t.threshold, np.inf) for t in trees])
        # children: the right child of a numeric node is left + 1 (the grower numbers siblings
        # consecutively; prune_to keeps that), so one array ``left`` (non-numeric nodes point to
        # themselves) gives child = left[node] + (x > thr); interleaved pairs otherwise
        lefts = [self._tree_left(t, o) for t, o in zip(trees, offs[:-1], strict=True)]
        if all(lf is not None for lf in lefts):
            self.left, self.ch2 = np.concatenate(lefts), None
        else:
            self.left = None
            self.ch2 = np.concatenate([self._tree_ch2(t, o) for t, o in zip(trees, offs[:-1], strict=True)])
        del lefts

    def __getstate__(self):
        # the trees only: every stacked array (and the coded path's tables) is derived from them and
        # rebuilt on loading, so a bundle holds each node once
        return {"_trees": self._trees}

    def __setstate__(self, state):
        if set(state) == {"_trees"}:
            self.__init__(state["_trees"])
        else:  # a table pickled whole (older bundles)
            state.pop("_coded_cache", None)
            self.__dict__.update(state)

    @staticmethod
    def _tree_left(t: Tree, o: int) -> np.ndarray | None:
        """Global left-child ids of one tree (non-numeric nodes: themselves); None if a numeric
        node's right child is not left + 1."""
        ids = np.arange(t.node_count, dtype=np.intp) + o
        num = t.kind == NUMERIC
        if not num.any():
            return ids
        first = t.child_ptr[:-1][num]
        lc = t.children[first].astype(np.intp)
        if not np.array_equal(t.children[first + 1], lc + 1):
            return None
        ids[num] = lc + o
        return ids

    def _child(self, node: np.ndarray, go: np.ndarray) -> np.ndarray:
        """Child ids of numeric nodes (go: right); non-numeric nodes with go False stay."""
        left = getattr(self, "left", None)
        if left is not None:
            out = left[node]
            out += go
            return out
        return self.ch2[2 * node + go]

    @staticmethod
    def _tree_ch2(t: Tree, o: int) -> np.ndarray:
        """Interleaved (left, right) global child ids of one tree; non-numeric nodes point to self."""
        n = t.node_count
        ids = np.arange(n, dtype=np.intp) + o
        ch2 = np.empty((n, 2), dtype=np.intp)
        if t.children.size == 0:
            ch2[:, 0] = ids
            ch2[:, 1] = ids
            return ch2.ravel()
        num = t.kind == NUMERIC
        first = np.minimum(t.child_ptr[:-1], t.children.size - 1)
        second = np.minimum(first + 1, t.children.size - 1)
        ch2[:, 0] = np.where(num, t.children[first].astype(np.intp) + o, ids)
        ch2[:, 1] = np.where(num, t.children[second].astype(np.intp) + o, ids)
        return ch2.ravel()

    @staticmethod
    def _stack_children(trees, offs):
        ptrs, chs, frs = [], [], []
        base_ptr = 0
        for t, o in zip(trees, offs[:-1], strict=True):
            ptrs.append(t.child_ptr[:-1] + base_ptr)
            chs.append(np.where(t.children >= 0, t.children + o, -1))
            frs.append(t.child_frac)
            base_ptr += t.child_ptr[-1]
        child_ptr = np.r_[np.concatenate(ptrs), base_ptr].astype(np.intp)
        return child_ptr, np.concatenate(chs).astype(np.intp), np.concatenate(frs)

    def _ensure_general(self):
        """Stacked CSR children (and present-children CSR) for fractional routing, built on first use."""
        if self._has_general:
            return
        trees = self._trees
        offs = np.r_[self.roots, self.feat0.size]
        self.child_ptr, self.children, self.child_frac = self._stack_children(trees, offs)
        n = self.feat0.size
        pres = self.children >= 0
        if pres.all():
            self.pptr, self.pchildren, self.pfrac = self.child_ptr, self.children, self.child_frac
        else:
            counts = np.diff(self.child_ptr)
            owner = np.repeat(np.arange(n), counts)
            pc = np.bincount(owner[pres], minlength=n)
            self.pptr = np.zeros(n + 1, dtype=np.intp)
            np.cumsum(pc, out=self.pptr[1:])
            self.pchildren = self.children[pres]
            self.pfrac = self.child_frac[pres]
        self._has_general = True

    # (sample, tree) pairs processed at once: keeps the working set in cache
    _CHUNK_PAIRS = 1 << 16

    # trees whose node arrays are walked together in large batches (cache-sized groups)
    _GROUP_NODES = 1 << 15
    # levels between drops of the pairs that reached a leaf
    _COMPACT_EVERY = 4

    def _tree_groups(self):
        sizes = np.diff(np.r_[self.roots, self.feat0.size])
        groups, start, acc = [], 0, 0
        for i, s in enumerate(sizes):
            if acc and acc + s > self._GROUP_NODES:
                groups.append((start, i))
                start, acc = i, 0
            acc += s
        groups.append((start, len(sizes)))
        return groups

    def _batches(self, n):
        """(tree slice, sample slice) blocks covering all (sample, tree) pairs."""
        T = self.n_trees
        if n * T <= self._CHUNK_PAIRS:
            yield slice(0, T), slice(0, n)
            return
        for a, b in self._tree_groups():
            step = max(1, self._CHUNK_PAIRS // (b - a))
            for s in range(0, n, step):
                yield slice(a, b), slice(s, s + step)

    def leaves(self, X: np.ndarray) -> np.ndarray:
        """(n_samples, n_trees) leaf ids; only for X without NaN and trees without categorical nodes."""
        n = X.shape[0]
        out = np.empty((n, self.n_trees), dtype=np.intp)
        if self._use_coded(n):
            for a, b in self._coded_blocks(n):
                C = self._codes(X[a:b])
                for t in range(self.n_trees):
                    out[a:b, t] = self._coded_leaves(C, t)
            return out
        for ts, ss in self._batches(n):
            out[ss, ts] = self._leaves_chunk(X[ss], self.roots[ts])
        return out

    # ------------------------------------------------------------------ coded batch path
    # Large batches: X is coded once per batch (per feature, the rank of x among all the forest's
    # distinct thresholds of that feature, so ``x > thr`` <=> ``code > rank(thr)``, exactly), and
    # each tree is descended on its own, one level per step: node = left[node] + (code > tcode[node]).
    # The per-tree node arrays stay in cache, the small-int code matrix is read in row order, and a
    # level costs 3 gathers + 3 element-wise passes.  Pairs that reached a leaf are dropped at a few
    # levels chosen from the training leaf depths.

    # minimum rows (and (sample, tree) pairs) of a batch and trees for the coded path (ranking X
    # costs about as much as descending 4-5 trees); rows per block
    _CODED_MIN_ROWS = 2048
    _CODED_MIN_TREES = 5
    _CODED_ROWS = 1 << 17

    def prepare_batch(self) -> None:
        """Build the coded path's tables now (estimators call it at fit time) rather than lazily."""
        self._coded()

    def _use_coded(self, n: int) -> bool:
        return (n >= self._CODED_MIN_ROWS and self.n_trees >= self._CODED_MIN_TREES
                and n * self.n_trees > self._CHUNK_PAIRS and self._coded() is not None)

    def _coded(self):
        """Tables of the coded path, built on first use (None when it does not apply)."""
        c = getattr(self, "_coded_cache", False)
        if c is False:
            c = self._coded_cache = self._build_coded()
        return c

    def _build_coded(self):
        if self.has_cat:
            return None
        n_nodes = self.feat0.size
        left = getattr(self, "left", None)  # None: some right child is not left + 1
        if left is None:
            return None
        num = self.kind == NUMERIC
        if np.isnan(self.thr0[num]).any():
            return None
        # per feature: the sorted distinct thresholds, and each node's rank among them (small
        # per-feature temporaries: this runs at fit time for forests)
        n_feat = int(self.feat0[num].max()) + 1 if num.any() else 0
        uths, ranks = [], []
        for j in range(n_feat):
            nid = np.flatnonzero(num & (self.feat0 == j))
            u, r = np.unique(self.thr0[nid], return_inverse=True)
            uths.append(u)
            ranks.append((nid, r))
        ustart = np.zeros(n_feat + 1, dtype=np.intp)  # thresholds of f: uthr[ustart[f]:ustart[f+1]]
        np.cumsum([u.size for u in uths], out=ustart[1:])
        uthr = np.concatenate(uths) if uths else np.zeros(0)
        most = int(np.diff(ustart).max()) if n_feat else 0
        dt = np.uint16 if most < np.iinfo(np.uint16).max else np.int32
        tcode = np.full(n_nodes, np.iinfo(dt).max, dtype=dt)  # leaves: no code is larger
        for nid, r in ranks:
            tcode[nid] = r
        del uths, ranks
        plans = [(t.max_depth, self._drop_plan(t)) for t in self._trees]
        return left, tcode, uthr, ustart, dt, plans

    # cost of dropping the finished pairs, per live pair, relative to the cost of one level
    _DROP_COST = 0.8

    @classmethod
    def _drop_plan(cls, t: Tree) -> frozenset:
        """Levels after which finished pairs are dropped: minimises the expected work (one level per
        live pair and level, ``_DROP_COST`` per live pair and drop) with the training rows' leaf depths
        as the expected distribution (a pair is seen finished one level after reaching its leaf)."""
        D = t.max_depth
        if D < 3:
            return frozenset()
        leaf = t.kind == LEAF
        wd = np.bincount(t.depth[leaf], weights=t.weighted_n_node_samples[leaf], minlength=D + 1)
        alive = 1.0 - np.cumsum(wd) / max(wd.sum(), _EPS)  # after a drop at level d: alive[d] live
        alive[0] = 1.0
        # best[j]: least cost of levels 1..j with a drop after level j; a drop at 0 = the start
        best = np.zeros(D)
        prev = np.zeros(D, dtype=np.intp)
        lv = np.arange(D)
        for j in range(1, D):
            i = lv[:j]
            c = best[:j] + (j - i + cls._DROP_COST) * alive[i]
            k = int(np.argmin(c))
            best[j], prev[j] = c[k], k
        i = lv[: D]
        j = int(np.argmin(best + (D - 1 - i) * alive[:D]))
        drops = []
        while j > 0:
            drops.append(j)
            j = int(prev[j])
        return frozenset(drops)

    def _codes(self, X: np.ndarray) -> np.ndarray:
        """(n, f) codes: per feature, the number of the forest's thresholds below x (X without NaN)."""
        _, _, uthr, ustart, dt, _ = self._coded()
        n, f = X.shape
        XT = np.ascontiguousarray(X.T)  # feature-major while ranking, row-major for the descent
        CT = np.zeros((f, n), dtype=dt)
        for j in range(min(f, ustart.size - 1)):
            u = uthr[ustart[j] : ustart[j + 1]]
            if u.size == 0:
                continue
            col = XT[j]
            if u.size <= 32:
                CT[j] = np.searchsorted(u, col, side="left")
            else:  # sorting the column first is ~3x faster than n random binary searches
                o = np.argsort(col)
                pos = np.searchsorted(col[o], u, side="right")  # x_sorted[i] > u_k  <=>  i >= pos_k
                CT[j][o] = np.cumsum(np.bincount(pos, minlength=n + 1)[:n])
        del XT
        return np.ascontiguousarray(CT.T)

    def _coded_leaves(self, C: np.ndarray, t: int) -> np.ndarray:
        """Leaf ids (global) of tree ``t`` for the coded rows C (``_codes``)."""
        left, tcode, _, _, _, plans = self._coded()
        n, f = C.shape
        root = int(self.roots[t])
        depth, drops = plans[t]
        if depth == 0:
            return np.full(n, root, dtype=np.intp)
        Cf = C.ravel()
        feat0 = self.feat0
        take = np.take
        # the first level: every row is at the root
        node = np.add(C[:, feat0[root]] > tcode[root], left[root], dtype=np.intp)
        out = None  # allocated at the first drop
        rowf = np.arange(0, n * f, f, dtype=np.intp)
        for d in range(1, depth):
            idx = take(feat0, node)
            idx += rowf
            go = take(Cf, idx) > take(tcode, node)
            prev = node
            node = take(left, node)
            node += go
            if d in drops:
                moved = node != prev  # leaves point to themselves
                live = np.flatnonzero(moved)
                if live.size < node.size:
                    fin = np.flatnonzero(~moved)
                    if out is None:
                        out = np.empty(n, dtype=np.intp)
                    out[take(rowf, fin) // f] = take(node, fin)
                    node = take(node, live)
                    rowf = take(rowf, live)
                    if not node.size:
                        break
        if out is None:
            return node
        out[rowf // f] = node
        return out

    def _coded_blocks(self, n: int):
        k = -(-n // self._CODED_ROWS)
        step = -(-n // k)
        return [(a, min(n, a + step)) for a in range(0, n, step)]

    def _leaves_chunk(self, X: np.ndarray, roots=None) -> np.ndarray:
        # one level per iteration for every (sample, tree) pair; pairs that reached a leaf
        # are dropped every third level (leaves loop to themselves, so late checks are safe)
        n, f = X.shape
        roots = self.roots if roots is None else roots
        T = roots.size
        node = np.tile(roots, n)
        rowbase = np.repeat(np.arange(n, dtype=np.intp) * f, T)
        out = np.empty(n * T, dtype=np.intp)
        act = None
        Xf = X.ravel()
        feat0, thr0, ch2, leaf = self.feat0, self.thr0, self.ch2, self.is_leaf
        left = getattr(self, "left", None)
        take = np.take

        def descend(node, rowbase):  # one level for every pair (a leaf's children are itself)
            idx = take(feat0, node)
            idx += rowbase
            go = take(Xf, idx) > take(thr0, node)
            if left is not None:
                node = take(left, node)
                node += go
                return node
            node *= 2
            node += go
            return take(ch2, node)

        if n * T <= 4096:  # small batches (single rows): no compaction bookkeeping
            for _ in range(self.max_depth):
                node = descend(node, rowbase)
            return node.reshape(n, T)
        for d in range(self.max_depth):
            node = descend(node, rowbase)
            if d % self._COMPACT_EVERY == self._COMPACT_EVERY - 1 and d + 1 < self.max_depth:
                lf = take(leaf, node)
                if lf.any():
                    keep = ~lf
                    if act is None:
                        out[lf] = node[lf]
                        act = np.flatnonzero(keep)
                    else:
                        out[act[lf]] = node[lf]
                        act = act[keep]
                    node = node[keep]
                    rowbase = rowbase[keep]
                    if not node.size:
                        break
        if act is None:
            out[:] = node
        else:
            out[act] = node
        return out.reshape(n, T)

    def weighted_leaves(self, X: np.ndarray, record_all: bool = False):
        """General path: (sample, tree, leaf, weight) rows, with fractional routing.

        With ``record_all`` every visited node is returned, not only leaves.
        """
        self._ensure_general()
        n, f = X.shape
        T = self.n_trees
        s = np.repeat(np.arange(n, dtype=np.intp), T)
        t = np.tile(np.arange(T, dtype=np.intp), n)
        node = self.roots[t].copy()
        w = np.ones(s.size)
        done_s, done_t, done_n, done_w = [], [], [], []
        while s.size:
            leaf = self.is_leaf[node]
            if record_all:
                done_s.append(s)
                done_t.append(t)
                done_n.append(node)
                done_w.append(w)
            if leaf.any():
                if not record_all:
                    done_s.append(s[leaf])
                    done_t.append(t[leaf])
                    done_n.append(node[leaf])
                    done_w.append(w[leaf])
                keep = ~leaf
                s, t, node, w = s[keep], t[keep], node[keep], w[keep]
                if not s.size:
                    break
            x = X[s, self.feat0[node]]
            miss = np.isnan(x)
            k = self.kind[node]
            child = np.full(s.size, -1, dtype=np.intp)
            num = (k == NUMERIC) & ~miss
            child[num] = self._child(node[num], x[num] > self.thr0[node[num]])
            cat = (k == CATEGORICAL) & ~miss
            if cat.any():
                xc = x[cat]
                nc = node[cat]
                kc = (self.child_ptr[nc + 1] - self.child_ptr[nc])
                code = np.where(np.isfinite(xc), xc, -1).astype(np.intp)
                okc = (code >= 0) & (code < kc) & (code == xc)
                cc = np.full(nc.size, -1, dtype=np.intp)
                cc[okc] = self.children[self.child_ptr[nc[okc]] + code[okc]]
                child[cat] = cc
            go = child >= 0
            exp = ~go
            ns, nt, nn, nw = s[go], t[go], child[go], w[go]
            if exp.any():
                es, et, en, ew = s[exp], t[exp], node[exp], w[exp]
                counts = self.pptr[en + 1] - self.pptr[en]
                pos = np.repeat(self.pptr[en], counts) + ranges(counts)
                ns = np.concatenate([ns, np.repeat(es, counts)])
                nt = np.concatenate([nt, np.repeat(et, counts)])
                nn = np.concatenate([nn, self.pchildren[pos]])
                nw = np.concatenate([nw, np.repeat(ew, counts) * self.pfrac[pos]])
            s, t, node, w = ns, nt, nn, nw
        if not done_s:
            e = np.zeros(0, dtype=np.intp)
            return e, e, e, np.zeros(0)
        cat_ = np.concatenate
        return cat_(done_s), cat_(done_t), cat_(done_n), cat_(done_w)

    def needs_general(self, X: np.ndarray) -> bool:
        return self.has_cat or bool(np.isnan(X).any())

    def per_tree_values(self, X: np.ndarray) -> np.ndarray:
        """(n_samples, n_trees, V): each tree's (mixture) leaf value for each sample."""
        n = X.shape[0]
        V = self.value.shape[1]
        if not self.needs_general(X):
            return self.value[self.leaves(X)]
        s, t, node, w = self.weighted_leaves(X)
        out = np.zeros((n * self.n_trees, V))
        key = s * self.n_trees + t
        for v in range(V):
            out[:, v] = np.bincount(key, weights=w * self.value[node, v], minlength=n * self.n_trees)
        return out.reshape(n, self.n_trees, V)

    def mean_value(self, X: np.ndarray) -> np.ndarray:
        """(n_samples, V): average over trees of each tree's value (soft vote / mean)."""
        n = X.shape[0]
        if not self.needs_general(X):
            if self.n_trees == 1:
                return self.value[self.leaves(X)[:, 0]]
            out = np.zeros((n, self.value.shape[1]))
            if self._use_coded(n):
                # same summation order as below: per tree group, then groups in order
                # (value[leaves].sum(axis=1) adds the trees of a group in order when V > 1, and
                # pairwise along the contiguous tree axis when V == 1)
                V = self.value.shape[1]
                v1 = self.value[:, 0] if V == 1 else None
                for a, b in self._coded_blocks(n):
                    C = self._codes(X[a:b])
                    lv = self._coded_leaves
                    for t0, t1 in self._tree_groups():
                        if V == 1:
                            M = np.empty((b - a, t1 - t0))
                            for j, t in enumerate(range(t0, t1)):
                                M[:, j] = v1.take(lv(C, t))
                            out[a:b, 0] += M.sum(axis=1)
                        else:
                            g = self.value.take(lv(C, t0), axis=0)
                            for t in range(t0 + 1, t1):
                                g += self.value.take(lv(C, t), axis=0)
                            out[a:b] += g
                out /= self.n_trees
                return out
            for ts, ss in self._batches(n):
                out[ss] += self.value[self._leaves_chunk(X[ss], self.roots[ts])].sum(axis=1)
            out /= self.n_trees
            return out
        return self.per_tree_values(X).mean(axis=1) if n else np.zeros((0, self.value.shape[1]))
