"""One adapter per tree engine to the array form the explainers consume (``TreeArrays``).

The form: all trees stacked with global node ids; per node ``feature``, ``kind`` (leaf / numeric /
categorical), numeric ``threshold`` (a row goes to child position 1 when ``x > threshold``, else 0), a
CSR list of children (``child_ptr``, ``children``) with ``miss_frac``: the share of a row whose value is
missing (NaN, or a category the node has no branch for) sent to each child (one-hot for engines that send
missing values one way), and for categorical nodes a row of ``cat_pos`` (category code -> child position,
-1: routed as missing).  Leaves carry ``value`` (n_nodes, n_outputs), already scaled so that the model's
additive output is ``offset + sum over trees of the leaf values``.

Engines: ``core.tree`` trees (decision trees, random forests: C4.5 fractional routing, multiway
categorical splits) and ``core.ensemble`` histogram gradient boosting (missing values sent left or right,
category-subset splits).  Nothing else in ``core/inspection`` reads an engine's internals.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ..tree._nodes import ranges

__all__ = ["TreeArrays", "tree_arrays", "supports_tree", "LEAF", "NUMERIC", "CATEGORICAL"]

LEAF, NUMERIC, CATEGORICAL = 0, 1, 2


@dataclass
class TreeArrays:
    feature: np.ndarray      # (N,) intp, 0 at leaves
    kind: np.ndarray         # (N,) int8
    threshold: np.ndarray    # (N,) float
    child_ptr: np.ndarray    # (N + 1,) intp
    children: np.ndarray     # (E,) intp global ids
    miss_frac: np.ndarray    # (E,) float, sums to 1 per internal node
    cat_row: np.ndarray      # (N,) intp row of cat_pos, -1 for non-categorical nodes
    cat_pos: np.ndarray      # (C, width) intp child position per code, -1 = missing
    value: np.ndarray        # (N, V) leaf values (0 at internal nodes)
    roots: np.ndarray        # (T,) intp
    offset: np.ndarray       # (V,) constant added to the sum of the trees
    output: str              # "probability" | "raw" | "prediction"
    n_features: int

    @property
    def n_nodes(self) -> int:
        return int(self.feature.shape[0])

    def route(self, node: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Child position of each (node, value) pair; -1 where the value is routed as missing."""
        pos = np.full(node.shape[0], -1, dtype=np.intp)
        k = self.kind[node]
        ok = ~np.isnan(x)
        num = ok & (k == NUMERIC)
        pos[num] = x[num] > self.threshold[node[num]]
        cat = ok & (k == CATEGORICAL)
        if cat.any():
            xc = x[cat]
            width = self.cat_pos.shape[1]
            code = np.where((xc >= 0) & (xc < width), xc, -1).astype(np.intp)
            good = (code >= 0) & (code == xc)
            pc = np.full(xc.shape[0], -1, dtype=np.intp)
            pc[good] = self.cat_pos[self.cat_row[node[cat][good]], code[good]]
            pos[cat] = pc
        return pos

    def predict(self, X: np.ndarray) -> np.ndarray:
        """The additive output (offset + sum of leaf values, fractional routing) of every row."""
        n = X.shape[0]
        T = self.roots.shape[0]
        row = np.repeat(np.arange(n, dtype=np.intp), T)
        node = np.tile(self.roots, n)
        w = np.ones(row.shape[0])
        out = np.tile(self.offset, (n, 1)).astype(float)
        while row.size:
            leaf = self.kind[node] == LEAF
            if leaf.any():
                for v in range(out.shape[1]):
                    out[:, v] += np.bincount(row[leaf], weights=w[leaf] * self.value[node[leaf], v], minlength=n)
                keep = ~leaf
                row, node, w = row[keep], node[keep], w[keep]
            if not row.size:
                break
            pos = self.route(node, X[row, self.feature[node]])
            det = pos >= 0
            nrow, nnode, nw = [row[det]], [self.children[self.child_ptr[node[det]] + pos[det]]], [w[det]]
            if not det.all():
                mr, mn, mw = row[~det], node[~det], w[~det]
                cnt = self.child_ptr[mn + 1] - self.child_ptr[mn]
                e = np.repeat(self.child_ptr[mn], cnt) + ranges(cnt)
                nrow.append(np.repeat(mr, cnt))
                nnode.append(self.children[e])
                nw.append(np.repeat(mw, cnt) * self.miss_frac[e])
            row, node, w = np.concatenate(nrow), np.concatenate(nnode), np.concatenate(nw)
            nz = w > 0
            if not nz.all():
                row, node, w = row[nz], node[nz], w[nz]
        return out


# ----------------------------------------------------------------------------- engines
_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # fitted estimator -> TreeArrays

def _engine(est) -> str | None:
    from ..ensemble.gradient_boosting_classifier import GradientBoostingClassifier
    from ..ensemble.gradient_boosting_regressor import GradientBoostingRegressor
    from ..ensemble.random_forest_classifier import RandomForestClassifier
    from ..ensemble.random_forest_regressor import RandomForestRegressor
    from ..tree.decision_tree_classifier import DecisionTreeClassifier
    from ..tree.decision_tree_regressor import DecisionTreeRegressor

    if isinstance(est, (DecisionTreeClassifier, DecisionTreeRegressor)):
        return "tree"
    if isinstance(est, RandomForestClassifier):
        return "forest" if est.voting == "soft" else None  # hard votes are not additive over trees
    if isinstance(est, RandomForestRegressor):
        return "forest"
    if isinstance(est, (GradientBoostingClassifier, GradientBoostingRegressor)):
        return "boosting"
    return None


def supports_tree(est) -> bool:
    """Whether ``est`` is a fitted tree model whose output is additive over its trees."""
    return _engine(est) is not None


def tree_arrays(est) -> TreeArrays:
    """The common array form of a fitted tree model (cached on the estimator, not pickled with it)."""
    try:
        cached = _CACHE.get(est)
    except TypeError:  # pragma: no cover
        cached = None
    if cached is not None:
        return cached
    kind = _engine(est)
    if kind is None:
        raise TypeError(f"{type(est).__name__} is not a tree model with an additive output")
    if kind in ("tree", "forest"):
        trees = [est.tree_] if kind == "tree" else list(est.trees_)
        arrays = _from_core_trees(trees, est)
    else:
        arrays = _from_hist_gbm(est)
    try:
        _CACHE[est] = arrays
    except TypeError:  # pragma: no cover - not weak-referenceable: no cache
        pass
    return arrays


def _from_core_trees(trees, est) -> TreeArrays:
    from ..tree._tree import CATEGORICAL as T_CAT
    from ..tree._tree import LEAF as T_LEAF
    from ..tree._tree import NUMERIC as T_NUM

    T = len(trees)
    offs = np.cumsum([0] + [t.node_count for t in trees])
    feats, kinds, thrs, ptrs, chs, fracs, vals, cat_rows, cat_tables = [], [], [], [], [], [], [], [], []
    base_ptr = 0
    n_cat = 0
    for t, o in zip(trees, offs[:-1], strict=True):
        k = np.where(t.kind == T_LEAF, LEAF, np.where(t.kind == T_NUM, NUMERIC, CATEGORICAL)).astype(np.int8)
        assert T_CAT != T_NUM
        kinds.append(k)
        feats.append(np.where(t.kind == T_LEAF, 0, t.feature).astype(np.intp))
        thrs.append(np.where(t.kind == T_NUM, t.threshold, np.nan))
        # children: drop absent categories (-1) and renormalise their known-weight fractions
        counts = np.where(t.kind != T_LEAF, np.diff(t.child_ptr), 0)
        idx = np.repeat(t.child_ptr[:-1], counts) + ranges(counts)
        owner = np.repeat(np.arange(t.node_count), counts)
        present = t.children[idx] >= 0
        keep_idx, keep_owner = idx[present], owner[present]
        fr = t.child_frac[keep_idx].astype(float)  # as core.tree routes missing values (not renormalised)
        pc = np.bincount(keep_owner, minlength=t.node_count)
        ptr = np.zeros(t.node_count + 1, dtype=np.intp)
        np.cumsum(pc, out=ptr[1:])
        ptrs.append(ptr[:-1] + base_ptr)
        chs.append(t.children[keep_idx].astype(np.intp) + o)
        fracs.append(fr)
        base_ptr += int(ptr[-1])
        # categorical nodes: code -> position among the present children
        cr = np.full(t.node_count, -1, dtype=np.intp)
        for nd in np.flatnonzero(t.kind == T_CAT):
            a, b = t.child_ptr[nd], t.child_ptr[nd + 1]
            slots = t.children[a:b]
            pos = np.full(b - a, -1, dtype=np.intp)
            pr = slots >= 0
            pos[pr] = np.arange(int(pr.sum()))
            cr[nd] = n_cat
            cat_tables.append(pos)
            n_cat += 1
        cat_rows.append(cr)
        v = np.where((t.kind == T_LEAF)[:, None], t.value, 0.0) / T
        vals.append(v)
    width = max([len(c) for c in cat_tables], default=1)
    cat_pos = np.full((max(n_cat, 1), max(width, 1)), -1, dtype=np.intp)
    for i, c in enumerate(cat_tables):
        cat_pos[i, : len(c)] = c
    value = np.concatenate(vals)
    classifier = hasattr(est, "classes_")
    return TreeArrays(
        feature=np.concatenate(feats), kind=np.concatenate(kinds), threshold=np.concatenate(thrs),
        child_ptr=np.r_[np.concatenate(ptrs), base_ptr].astype(np.intp), children=np.concatenate(chs),
        miss_frac=np.concatenate(fracs), cat_row=np.concatenate(cat_rows), cat_pos=cat_pos, value=value,
        roots=offs[:-1].astype(np.intp), offset=np.zeros(value.shape[1]),
        output="probability" if classifier else "prediction", n_features=int(est.n_features_in_),
    )


def _from_hist_gbm(est) -> TreeArrays:
    ens = est.ensemble_
    N = len(ens.feature)
    K = ens.n_outputs
    internal = ens.is_internal
    kind = np.where(internal, np.where(ens.cat_index >= 0, CATEGORICAL, NUMERIC), LEAF).astype(np.int8)
    feature = np.where(internal, ens.feature, 0).astype(np.intp)
    threshold = np.where(kind == NUMERIC, ens.threshold, np.nan)
    counts = np.where(internal, 2, 0)
    child_ptr = np.zeros(N + 1, dtype=np.intp)
    np.cumsum(counts, out=child_ptr[1:])
    children = np.stack([ens.left, ens.right], axis=1)[internal].ravel().astype(np.intp)
    ml = ens.missing_left[internal]
    cat = ens.cat_index[internal]
    if cat.size and (cat >= 0).any():  # categorical: missing follows the missing bin's side
        ml = np.where(cat >= 0, ens.cat_table[np.maximum(cat, 0), ens.missing_bin], ml)
    miss_frac = np.stack([ml, ~ml], axis=1).astype(float).ravel()
    cat_row = np.where(kind == CATEGORICAL, ens.cat_index, -1).astype(np.intp)
    if len(ens.cat_table):
        cat_pos = np.where(ens.cat_table[:, : ens.missing_bin], 0, 1).astype(np.intp)
    else:
        cat_pos = np.full((1, 1), -1, dtype=np.intp)
    value = np.zeros((N, K))
    leaf = ~internal
    tree_of = np.zeros(N, dtype=np.intp)
    for t, (a, b) in enumerate(ens.tree_slices):
        tree_of[a:b] = t
    out_col = ens.tree_output[tree_of]
    value[np.flatnonzero(leaf), out_col[leaf]] = ens.value[leaf]
    return TreeArrays(
        feature=feature, kind=kind, threshold=threshold, child_ptr=child_ptr, children=children,
        miss_frac=miss_frac, cat_row=cat_row, cat_pos=cat_pos, value=value, roots=ens.roots.astype(np.intp),
        offset=np.asarray(est.baseline_, dtype=float).ravel(), output="raw" if hasattr(est, "classes_") else
        "prediction", n_features=int(est.n_features_in_),
    )
