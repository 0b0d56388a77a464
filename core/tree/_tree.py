"""Flat-array decision trees: level-wise vectorised growth, vectorised prediction, pruning.

Growth ([Passerini §2.3]; CART for gini / squared error) is
breadth first: all nodes of one depth are split together.  Each training row
is a triple (sample, fraction, weight); a row whose value of the split feature
is missing goes down EVERY branch with its fraction multiplied by the branch's
share of the known weight (C4.5 fractional propagation, [Passerini §2.3.4]).
For the nodes of a level, the weighted class (or y, y^2) totals of every
(node, candidate feature, bin) are gathered with one ``np.bincount`` over
combined integer keys; cumulative sums along the bins give the left/right
totals of every candidate threshold at once, so there is no Python loop over
samples or thresholds (only over levels and, for bookkeeping, split nodes).

Split quality, with known-weight fraction F = W_known / W_node (C4.5):
    gain = F * (I(S_known) - sum_v W_v / W_known * I(S_v))
with I = entropy (log2), Gini 1 - sum p^2, or the weighted variance; for
``gain_ratio`` the gain is divided by the split information
H_A = -sum_v W_v/W_known log2(W_v/W_known) among features whose gain is at
least the average (C4.5's rule, [Passerini eq. 2.4]).  ``absolute_error`` uses
the weighted median and the mean absolute deviation (as scikit-learn).

The fitted tree is a set of flat arrays (``Tree``): feature, threshold,
kind (leaf / numeric / categorical), a CSR list of children with their known
weight fractions (two for numeric nodes, one per category for categorical
ones; -1 marks a category absent at the node, routed like a missing value),
value (class distribution or mean), impurity and weighted counts.
"""

from __future__ import annotations

import numpy as np
from scipy.special import xlogy

from ._binning import Binned

__all__ = ["Tree", "grow_tree", "impurity", "NodeTable"]

LEAF, NUMERIC, CATEGORICAL = 0, 1, 2
_EPS = 1e-12
_LN2 = float(np.log(2.0))


# ----------------------------------------------------------------------------- impurities
def impurity(stats: np.ndarray, criterion: str) -> np.ndarray:
    """Per-unit-weight impurity of totals ``stats[..., S]``.

    Classification: stats are weighted class counts; Gini 1 - sum_k c_k^2 / W^2,
    entropy H = log2 W - sum_k c_k log2 c_k / W.  Regression: (W, Wy, Wy^2) and the
    weighted variance.  Reductions over the short class axis use a matrix product
    (much faster than ``sum(axis=-1)`` on a (n, S) array).  Computed in place (few temporaries:
    this runs on every candidate threshold of a level), with the same values as the formulas.
    """
    if np.ndim(stats) == 1:
        return impurity(np.asarray(stats)[None], criterion)[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        if criterion in ("squared_error", "absolute_error"):
            W = stats[..., 0]
            out = stats[..., 1] ** 2  # (Wy2 - Wy^2 / W) / W
            out /= W
            np.subtract(stats[..., 2], out, out=out)
            out /= W
            np.maximum(out, 0.0, out=out)
            out[~(W > 0)] = 0.0
            return out
        ones = np.ones(stats.shape[-1])
        Ws = stats @ ones
        empty = ~(Ws > 0)
        Ws[empty] = 1.0
        if criterion == "gini":
            sq = stats * stats
            out = sq @ ones  # 1 - sum c^2 / W^2
            del sq
            Ws *= Ws
            out /= Ws
            np.subtract(1.0, out, out=out)
        else:
            xl = xlogy(stats, stats)
            t = xl @ ones  # log2 W - sum c ln c / (W ln 2)
            del xl
            out = np.log2(Ws)
            Ws *= _LN2
            t /= Ws
            out -= t
        np.maximum(out, 0.0, out=out)
        out[empty] = 0.0
        return out


def _xlog2x(p):
    return xlogy(p, p) / _LN2


# ----------------------------------------------------------------------------- fitted tree
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
        idx = np.repeat(starts, counts) + _ranges(counts)
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
        idx = np.repeat(self.child_ptr[internal], counts) + _ranges(counts)
        ch = self.children[idx]
        contrib = np.where(ch >= 0, Wi[np.maximum(ch, 0)], 0.0)
        owner = np.repeat(np.arange(internal.size), counts)
        child_sum = np.bincount(owner, weights=contrib, minlength=internal.size)
        dec = Wi[internal] - child_sum
        np.add.at(imp, self.feature[internal], dec)
        return np.maximum(imp, 0.0)


def _ranges(counts: np.ndarray) -> np.ndarray:
    """concatenate(arange(c) for c in counts), vectorised."""
    counts = np.asarray(counts, dtype=np.intp)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.intp)
    ends = np.cumsum(counts)
    return np.arange(total, dtype=np.intp) - np.repeat(ends - counts, counts)


# ----------------------------------------------------------------------------- growth
def grow_tree(
    binned: Binned,
    rows: np.ndarray | None,
    w: np.ndarray,
    y: np.ndarray,
    *,
    criterion: str,
    n_classes: int,
    max_depth: int | None,
    min_samples_split: float,
    min_samples_leaf: float,
    min_impurity_decrease: float,
    max_features: int,
    rng: np.random.Generator | None,
    y_raw: np.ndarray | None = None,
) -> Tree:
    """Grow one tree on the training rows ``rows`` (indices into ``binned``; None: every row) with
    weights ``w``.

    ``y`` holds class codes (classification) or float targets (regression).
    """
    codes = binned.codes
    n_features = codes.shape[1]
    mcode = binned.missing_code
    Bp1 = mcode + 1
    is_cat = binned.is_cat
    n_bins = binned.n_bins
    regression = criterion in ("squared_error", "absolute_error")
    mae = criterion == "absolute_error"
    ratio = criterion == "gain_ratio"
    max_depth = np.iinfo(np.int32).max if max_depth is None else max_depth
    S = 3 if regression else n_classes

    rows = np.arange(codes.shape[0]) if rows is None else np.asarray(rows, dtype=np.intp)
    w = np.asarray(w, dtype=np.float64)
    keep = w > 0
    if not keep.all() and keep.any():
        rows, w = rows[keep], w[keep]
    if regression:
        yv = np.asarray(y, dtype=np.float64)
        offset = float(np.average(yv[rows], weights=w)) if w.sum() > 0 else 0.0
        yc = yv - offset
    else:
        yc = np.asarray(y, dtype=np.intp)
        offset = 0.0
    # row state: sample index, fraction of the sample (C4.5; None while no value is missing: all 1),
    # weight = sample weight * fraction (never modified in place, so ``w`` itself is the first one;
    # None when every weight is 1 and no value is missing: weighted sums are then integer counts,
    # the same numbers as sums of 1.0)
    r_s = rows
    r_f = np.ones(rows.size) if binned.has_missing else None
    r_w = None if r_f is None and bool((w == 1.0).all()) else w
    r_node = np.zeros(rows.size, dtype=np.intp)  # local node index within the level
    del rows, w, keep

    # node arrays, accumulated per level
    out_feat, out_thr, out_kind, out_val, out_imp, out_n, out_wn, out_depth = ([] for _ in range(8))
    out_children, out_fracs, out_nch = [], [], []
    W_root = None
    next_id = 1  # global id of the first node of the next level
    level_first = 0
    depth = 0
    n_level = 1
    while n_level > 0:
        # --- node totals
        if regression:
            rw = np.ones(r_s.size) if r_w is None else r_w
            vals = np.stack([rw, rw * yc[r_s], rw * yc[r_s] ** 2], axis=1)
            del rw
            st = np.stack(
                [np.bincount(r_node, weights=vals[:, k], minlength=n_level) for k in range(3)], axis=1
            )
        else:
            st = np.bincount(r_node * S + yc[r_s], weights=r_w, minlength=n_level * S).reshape(n_level, S)
            st = st.astype(np.float64, copy=False)
        cnt = np.bincount(r_node, weights=r_f, minlength=n_level).astype(np.float64, copy=False)
        Wn = st[:, 0] if regression else st @ np.ones(S)
        if W_root is None:
            W_root = float(Wn[0])
        imp = impurity(st, criterion)
        if regression:
            with np.errstate(divide="ignore", invalid="ignore"):
                val = np.where(Wn > 0, st[:, 1] / Wn, 0.0)[:, None] + offset
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                val = np.where(Wn[:, None] > 0, st / Wn[:, None], 1.0 / S)
        starts = np.searchsorted(r_node, np.arange(n_level + 1))  # rows sorted by node
        if mae:
            imp = np.empty(n_level)
            for i in range(n_level):
                sl = slice(starts[i], starts[i + 1])
                med, dev = _weighted_median_dev(
                    y_raw[r_s[sl]], np.ones(sl.stop - sl.start) if r_w is None else r_w[sl]
                )
                val[i, 0] = med
                imp[i] = dev / Wn[i] if Wn[i] > 0 else 0.0
        splittable = (
            (depth < max_depth)
            & (cnt >= min_samples_split)
            & (cnt >= 2 * min_samples_leaf)
            & (imp > _EPS)
            & (Wn > 0)
        )
        cand = np.flatnonzero(splittable)
        split = _find_splits(
            cand, n_level, starts, r_s, r_f, r_w, r_node, yc, y_raw, codes, binned, n_features,
            max_features, rng, S, criterion, regression, ratio, mae, min_samples_leaf, Wn, imp, st,
        )
        # split: dict of arrays over split nodes (local ids): node, feat, cat, code, thr, gain, children lists
        if split is not None:
            ok = split["gain"] * Wn[split["node"]] / W_root >= min_impurity_decrease - _EPS
            for key in list(split):
                if key != "child_lists":
                    split[key] = split[key][ok]
            split["child_lists"] = [c for c, o in zip(split["child_lists"], ok, strict=True) if o]
        n_split = 0 if split is None else split["node"].size

        feat = np.full(n_level, -1, dtype=np.intp)
        thr = np.full(n_level, np.nan)
        kind = np.zeros(n_level, dtype=np.int8)
        nch = np.zeros(n_level, dtype=np.intp)
        level_children = [None] * n_level
        level_fracs = [None] * n_level
        if n_split:
            sn = split["node"]
            feat[sn] = split["feat"]
            thr[sn] = split["thr"]
            kind[sn] = np.where(split["cat"], CATEGORICAL, NUMERIC)
            # assign global ids to children in node order
            gid = next_id
            child_base = np.full(n_level, -1, dtype=np.intp)
            for i, node in enumerate(sn):
                slots, fracs = split["child_lists"][i]  # slots: -1 for absent category
                present = slots >= 0
                ids = np.full(slots.size, -1, dtype=np.intp)
                ids[present] = gid + np.arange(int(present.sum()))
                child_base[node] = gid
                gid += int(present.sum())
                level_children[node] = ids
                level_fracs[node] = fracs
                nch[node] = slots.size
            n_next = gid - next_id
            # --- route rows to children
            r_s, r_f, r_w, r_node = _route_rows(
                r_s, r_f, r_w, r_node, codes, mcode, feat, kind, split, level_children,
                level_fracs, n_level, next_id,
            )
        else:
            n_next = 0
            r_s = r_node = np.zeros(0, dtype=np.intp)
            r_f = None if r_f is None else np.zeros(0)
            r_w = None if r_w is None else np.zeros(0)

        out_feat.append(feat)
        out_thr.append(thr)
        out_kind.append(kind)
        out_val.append(val)
        out_imp.append(imp)
        out_n.append(cnt)
        out_wn.append(Wn)
        out_depth.append(np.full(n_level, depth, dtype=np.intp))
        out_nch.append(nch)
        for i in range(n_level):
            if level_children[i] is not None:
                out_children.append(level_children[i])
                out_fracs.append(level_fracs[i])
        level_first = next_id
        next_id += n_next
        n_level = n_next
        depth += 1
    del level_first, Bp1, n_bins, is_cat
    nch = np.concatenate(out_nch)
    ptr = np.zeros(nch.size + 1, dtype=np.intp)
    np.cumsum(nch, out=ptr[1:])
    children = np.concatenate(out_children).astype(np.intp) if out_children else np.zeros(0, np.intp)
    fracs = np.concatenate(out_fracs) if out_fracs else np.zeros(0)
    return Tree(
        np.concatenate(out_feat).astype(np.int32), np.concatenate(out_thr), np.concatenate(out_kind), ptr,
        children.astype(np.int32), fracs, np.concatenate(out_val), np.concatenate(out_imp),
        np.concatenate(out_n), np.concatenate(out_wn), np.concatenate(out_depth).astype(np.int32),
    )


def _weighted_median_dev(yv: np.ndarray, w: np.ndarray):
    """Weighted median and sum of w |y - median|."""
    if yv.size == 0:
        return 0.0, 0.0
    o = np.argsort(yv, kind="stable")
    ys, ws = yv[o], w[o]
    cw = np.cumsum(ws)
    half = cw[-1] / 2.0
    k = int(np.searchsorted(cw, half - 1e-12 * cw[-1], side="left"))
    k = min(k, ys.size - 1)
    med = ys[k]
    if abs(cw[k] - half) <= 1e-12 * cw[-1] and k + 1 < ys.size:
        med = 0.5 * (ys[k] + ys[k + 1])
    return float(med), float(np.sum(ws * np.abs(ys - med)))


def _choose_features(n_nodes, n_features, max_features, rng):
    if max_features >= n_features or rng is None:
        return np.broadcast_to(np.arange(n_features), (n_nodes, n_features))
    return np.argsort(rng.random((n_nodes, n_features)), axis=1)[:, :max_features]


# budget of histogram cells (node x feature x bin) evaluated densely at once
_DENSE_CELLS = 1 << 22
# (row, candidate feature) pairs evaluated per chunk of nodes: bounds the peak memory
_PAIR_BUDGET = 1 << 16


def _find_splits(cand, n_level, starts, r_s, r_f, r_w, r_node, yc, y_raw, codes, binned, n_features,
                 max_features, rng, S, criterion, regression, ratio, mae, msl, Wn, imp_node, st_node):
    if cand.size == 0:
        return None
    mf = min(max_features, n_features)
    feats_all = _choose_features(cand.size, n_features, mf, rng)
    Bp1 = binned.missing_code + 1
    results = []
    # chunks of consecutive candidate nodes with a bounded number of (row, feature) pairs
    row_budget = max(1, _PAIR_BUDGET // mf)
    i = 0
    while i < cand.size:
        j = i + 1
        rows_in = starts[cand[i] + 1] - starts[cand[i]]
        while j < cand.size and rows_in + (starts[cand[j] + 1] - starts[cand[j]]) <= row_budget:
            rows_in += starts[cand[j] + 1] - starts[cand[j]]
            j += 1
        res = _split_chunk(
            cand[i:j], feats_all[i:j], starts, r_s, r_f, r_w, r_node, yc, y_raw, codes, binned, mf, Bp1,
            S, criterion, regression, ratio, mae, msl, Wn, imp_node, st_node,
        )
        if res is not None:
            results.append(res)
        i = j
    if not results:
        return None
    out = {k: np.concatenate([r[k] for r in results]) for k in results[0] if k != "child_lists"}
    out["child_lists"] = [c for r in results for c in r["child_lists"]]
    return out


def _split_chunk(nodes, feats, starts, r_s, r_f, r_w, r_node, yc, y_raw, codes, binned, mf, Bp1, S,
                 criterion, regression, ratio, mae, msl, Wn, imp_node, st_node):
    # Memory: the arrays below have one entry per (row, candidate feature) pair or per non-empty
    # (node, feature, bin) entry; they are the peak of a fit, so they are freed (or reused in place)
    # as soon as they are consumed, and integer indices over entries are 32-bit.  In-place and
    # reordered operations compute exactly the same values as the expressions they replace.
    N = nodes.size
    # rows of these nodes (rows are sorted by node; nodes may be non-contiguous)
    lens = starts[nodes + 1] - starts[nodes]
    ridx = np.repeat(starts[nodes], lens) + _ranges(lens)
    local = np.repeat(np.arange(N), lens)
    s = r_s[ridx]
    fr = None if r_f is None else r_f[ridx]  # None: every fraction is 1 (counts = row counts)
    wt = None if r_w is None else r_w[ridx]  # None: unit weights (sums of 1.0 = integer counts)
    del ridx
    if mf == codes.shape[1] and (feats == np.arange(mf)).all():
        cg = codes[s]  # (R, mf) small-int codes, every feature in order
    else:
        cg = codes[s[:, None], feats[local]]  # (R, mf) codes of each node's candidate features
    K = N * mf * Bp1
    M = s.size * mf
    if regression:
        yv = yc[s]
        # (w, w y, w y^2); with unit weights 1.0 * y = y exactly
        chan_vals = (wt, yv, yv * yv) if wt is None else (wt, wt * yv, wt * yv * yv)
        del yv

    def rep(v):  # per-(row, feature) weights of a per-row weight array (None: unit)
        return None if v is None else np.repeat(v, mf)

    if M > _PAIR_BUDGET and K * S <= _DENSE_CELLS:
        # a big node (the root levels): dense histograms one candidate feature at a time, so the
        # temporaries are O(rows) instead of O(rows x features)
        cnt_full = np.zeros(K)
        st_full = np.zeros((K, S)) if regression else np.zeros(K * S)
        lbase = local * (mf * Bp1)
        ys = None if regression else yc[s]
        for j in range(mf):
            kj = lbase + j * Bp1
            kj += cg[:, j]
            cnt_full += np.bincount(kj, weights=fr, minlength=K)
            if regression:
                for c, v in enumerate(chan_vals):
                    st_full[:, c] += np.bincount(kj, weights=v, minlength=K)
            else:
                kj *= S
                kj += ys
                st_full += np.bincount(kj, weights=wt, minlength=K * S)
        del lbase, ys, kj
        U = np.flatnonzero(cnt_full)
        cnt = cnt_full[U]
        del cnt_full
        st = st_full[U] if regression else st_full.reshape(K, S)[U]
        del st_full
    else:
        comb = (local * (mf * Bp1))[:, None] + (np.arange(mf) * Bp1)  # (R, mf) int64 key
        comb += cg
        flat = comb.ravel()  # a view of comb
        if K <= max(4 * M, 1 << 16) and K * S <= _DENSE_CELLS:
            # non-empty cells found with a mask over the K cells and numbered by their rank, then
            # histograms over the entries only: no dense (K, S) histogram; each entry receives the
            # same additions in the same order as in a dense bincount
            seen = np.zeros(K, dtype=bool)
            seen[flat] = True
            U = np.flatnonzero(seen)
            rank = np.cumsum(seen, dtype=np.int32 if K < 2**31 else np.intp)
            del seen
            flat[:] = rank[flat]  # in place: flat (a view of comb) becomes entry index + 1
            del rank
            flat -= 1
            nU = U.size
            cnt = np.bincount(flat, weights=rep(fr), minlength=nU)
            if regression:
                st = np.stack([np.bincount(flat, weights=rep(v), minlength=nU) for v in chan_vals], axis=1)
            else:
                comb *= S  # in place: flat becomes the (entry, class) key
                comb += yc[s][:, None]
                st = np.bincount(flat, weights=rep(wt), minlength=nU * S).reshape(nU, S)
            nz = cnt != 0  # cells whose weights sum to 0 are empty (as in a dense histogram)
            if not nz.all():
                U, cnt, st = U[nz], cnt[nz], st[nz]
            del nz
        else:
            U, inv = np.unique(flat, return_inverse=True)
            del comb, flat
            inv = inv.ravel()
            nU = U.size
            cnt = np.bincount(inv, weights=rep(fr), minlength=nU)
            if regression:
                st = np.stack([np.bincount(inv, weights=rep(v), minlength=nU) for v in chan_vals], axis=1)
            else:
                inv *= S
                inv += np.repeat(yc[s], mf)
                st = np.bincount(inv, weights=rep(wt), minlength=nU * S).reshape(nU, S)
            del inv
        comb = flat = None
    # the per-row and per-(row, feature) temporaries are not needed any more
    del s, fr, wt, local, cg
    chan_vals = None
    cnt = cnt.astype(np.float64, copy=False)
    st = st.astype(np.float64, copy=False)
    nU = U.size
    it = np.int32 if K < 2**31 else np.intp  # entry-index dtype
    seg = (U // Bp1).astype(it)
    code = (U % Bp1).astype(it)
    del U
    enode = seg // mf  # local node of entry
    eslot = seg % mf
    efeat = feats[enode, eslot].astype(it)
    if not mae:
        del eslot
    miss = code == Bp1 - 1
    known = ~miss
    any_miss = bool(miss.any())
    ecat = binned.is_cat[efeat]
    any_cat = bool(ecat.any())  # without categorical entries the categorical-split terms are skipped
    onesS = np.ones(S)
    W_e = (st[:, 0].copy() if regression else st @ onesS) if any_cat else None

    # segment bookkeeping
    new_seg = np.ones(nU, dtype=bool)
    new_seg[1:] = seg[1:] != seg[:-1]
    # next entry in the same segment (the next non-empty bin)
    has_next = np.zeros(nU, dtype=bool)
    has_next[:-1] = ~new_seg[1:] & known[1:]
    del seg
    seg_start = np.flatnonzero(new_seg)
    seg_id = np.cumsum(new_seg, dtype=it)
    seg_id -= 1
    del new_seg
    seg_end = np.r_[seg_start[1:], nU] - 1
    # cumulative sums of the known entries (in place: the same values as out of place)
    if any_miss:
        cs = np.where(known[:, None], st, 0.0)
        cc = np.where(known, cnt, 0.0)
    else:  # every entry known: the cumulative sums can overwrite st and cnt unless still needed
        cs = st.copy() if any_cat else st
        cc = cnt.copy() if any_cat else cnt
    if not any_cat:
        st = cnt = None
    np.cumsum(cs, axis=0, out=cs)
    np.cumsum(cc, out=cc)
    prev = np.maximum(seg_start - 1, 0)
    base = np.where((seg_start > 0)[:, None], cs[prev], 0.0)
    cbase = np.where(seg_start > 0, cc[prev], 0.0)
    del prev
    left = cs
    left -= base[seg_id]
    cleft = cc
    cleft -= cbase[seg_id]
    del cs, cc, base, cbase
    last = seg_end[seg_id]
    tot = left[last]
    cright = cleft[last]  # the known count of the segment, minus cleft below
    del last
    cright -= cleft
    count_ok = cleft >= msl
    count_ok &= cright >= msl
    del cleft, cright
    WL = left[:, 0].copy() if regression else left @ onesS
    Wk = tot[:, 0].copy() if regression else tot @ onesS
    if mae:
        del left, tot
        impL, impR, impK, cat_child_sum = _mae_entry_impurities(
            nodes, starts, r_s, r_w, codes, y_raw, feats, enode, eslot, code, ecat, known, seg_start,
            seg_end, Bp1,
        )
        del eslot
    else:
        impL = impurity(left, criterion)
        right = np.subtract(tot, left, out=left)  # tot - left, in left's buffer
        del left
        impR = impurity(right, criterion)
        del right
        impK = impurity(tot, criterion)
        del tot
    with np.errstate(divide="ignore", invalid="ignore"):
        Wnode = Wn[nodes][enode]
        F = np.where(Wnode > 0, Wk / Wnode, 0.0)
        del Wnode
        WR = Wk - WL
        # numeric candidates
        num_ok = known & ~ecat & has_next & count_ok & (WL > 0) & (WR > 0)
        del has_next, count_ok
        # gain_num = F * (impK - (WL * impL + WR * impR) / Wk), in place
        gain = WL * impL
        del impL
        t = WR * impR
        del impR
        gain += t
        del t
        gain /= Wk
        np.subtract(impK, gain, out=gain)
        gain *= F
        # gain = where(num_ok, gain_num, -inf)
        np.copyto(gain, -np.inf, where=~num_ok)
        del num_ok
        if any_cat:
            # categorical segments: children are the known categories of the segment
            if mae:
                child_sum = cat_child_sum
            else:
                child_sum = np.add.reduceat(np.where(known, W_e * impurity(st, criterion), 0.0), seg_start)
            n_present = np.add.reduceat(known & (W_e > 0), seg_start)
            min_cnt = np.minimum.reduceat(np.where(known, cnt, np.inf), seg_start)
            Wk_seg = Wk[seg_start]
            gain_cat_seg = F[seg_start] * (impK[seg_start] - child_sum / Wk_seg)
            cat_ok_seg = ecat[seg_start] & (n_present >= 2) & (min_cnt >= msl) & (Wk_seg > 0)
            cat_first = seg_start[cat_ok_seg]
            gain[cat_first] = gain_cat_seg[cat_ok_seg]
            del st, cnt, child_sum, n_present, min_cnt, Wk_seg, gain_cat_seg, cat_ok_seg, cat_first
        del F, impK
        valid = np.isfinite(gain)
        if ratio:
            si = -(_xlog2x(WL / Wk) + _xlog2x(WR / Wk))
            if any_cat:
                p_cat = np.where(known, W_e / Wk, 0.0)
                si_cat = -np.add.reduceat(_xlog2x(p_cat), seg_start)
                si[seg_start] = np.where(ecat[seg_start], si_cat, si[seg_start])
                del p_cat, si_cat
            score = np.where(valid & (si > 0), gain / si, -np.inf)
            del si
    del known, miss
    if not valid.any():
        return None

    # --- best entry per node
    node_start = np.flatnonzero(np.r_[True, enode[1:] != enode[:-1]])
    node_of = enode[node_start]
    idx = np.arange(nU)
    if ratio:
        # best threshold per (node, feature) by gain, then C4.5: max ratio among features with gain >= mean
        g_seg = np.maximum.reduceat(gain, seg_start)
        is_best = (gain == g_seg[seg_id]) & valid
        first_best = np.minimum.reduceat(np.where(is_best, idx, nU), seg_start)
        seg_valid = first_best < nU
        seg_node = enode[seg_start]
        g_valid = np.where(seg_valid, g_seg, 0.0)
        n_valid = np.bincount(seg_node, weights=seg_valid, minlength=N)
        mean_g = np.bincount(seg_node, weights=g_valid, minlength=N) / np.maximum(n_valid, 1)
        eligible = seg_valid & (g_seg >= mean_g[seg_node] - 1e-12)
        fb = np.minimum(first_best, nU - 1)
        seg_score = np.where(eligible, score[fb], -np.inf)
        # per node max score over segments
        nseg_start = np.flatnonzero(np.r_[True, seg_node[1:] != seg_node[:-1]])
        best_score = np.maximum.reduceat(seg_score, nseg_start)
        seg_nid = np.cumsum(np.r_[True, seg_node[1:] != seg_node[:-1]]) - 1
        is_top = (seg_score == best_score[seg_nid]) & np.isfinite(seg_score)
        top_seg = np.minimum.reduceat(np.where(is_top, np.arange(seg_start.size), seg_start.size), nseg_start)
        has = top_seg < seg_start.size
        best_entry = np.where(has, fb[np.minimum(top_seg, seg_start.size - 1)], -1)
        best_node_local = seg_node[nseg_start]
        best_gain = np.where(has, gain[np.maximum(best_entry, 0)], -np.inf)
    else:
        gbest = np.maximum.reduceat(gain, node_start)
        node_id_of = np.cumsum(np.r_[True, enode[1:] != enode[:-1]]) - 1
        is_top = (gain >= gbest[node_id_of]) & valid
        best_entry = np.minimum.reduceat(np.where(is_top, idx, nU), node_start)
        has = best_entry < nU
        best_entry = np.where(has, best_entry, -1)
        best_node_local = node_of
        best_gain = np.where(has, gbest, -np.inf)
    sel = np.flatnonzero(has & (best_gain >= -1e-12))
    if sel.size == 0:
        return None
    be = best_entry[sel]
    bn = best_node_local[sel]
    bfeat = efeat[be]
    bcat = ecat[be]
    bcode = code[be]
    nxt = np.minimum(be + 1, nU - 1)
    ncode = code[nxt]
    hi = binned.bin_hi[bfeat, np.minimum(bcode, binned.bin_hi.shape[1] - 1)]
    lo = binned.bin_lo[bfeat, np.minimum(ncode, binned.bin_lo.shape[1] - 1)]
    thr = 0.5 * (hi + lo)
    thr = np.where((thr >= lo) | ~np.isfinite(thr), hi, thr)  # rounding guard (as scikit-learn)
    thr = np.where(bcat, np.nan, thr)
    child_lists = []
    for k in range(sel.size):
        e = be[k]
        if bcat[k]:
            ss, se = seg_start[seg_id[e]], seg_end[seg_id[e]]
            kc = int(binned.n_bins[bfeat[k]])
            slots = np.full(kc, -1, dtype=np.intp)
            fr_ = np.zeros(kc)
            cats = code[ss : se + 1]
            kn = (cats < Bp1 - 1) & (W_e[ss : se + 1] > 0)
            cats_k = cats[kn]
            slots[cats_k] = 1
            fr_[cats_k] = W_e[ss : se + 1][kn] / Wk[e]
            child_lists.append((slots, fr_))
        else:
            child_lists.append((np.array([0, 1]), np.array([WL[e] / Wk[e], WR[e] / Wk[e]])))
    return {
        "node": nodes[bn],
        "feat": bfeat,
        "cat": bcat,
        "code": bcode,
        "thr": thr,
        "gain": best_gain[sel],
        "child_lists": child_lists,
    }


def _mae_entry_impurities(nodes, starts, r_s, r_w, codes, y_raw, feats, enode, eslot, code, ecat, known,
                          seg_start, seg_end, Bp1):
    """Absolute-error impurities (per unit weight) of left/right/known sets of every entry.

    O(n_node * n_positions) per node and feature, vectorised with cumulative sums
    along the y-sorted order (exact weighted medians).
    """
    nU = code.size
    impL = np.zeros(nU)
    impR = np.zeros(nU)
    impK = np.zeros(nU)
    cat_sum = np.zeros(seg_start.size)
    for si in range(seg_start.size):
        a, b = seg_start[si], seg_end[si] + 1
        ln = enode[a]
        node = nodes[ln]
        sl = slice(starts[node], starts[node + 1])
        ss = r_s[sl]
        ww = np.ones(sl.stop - sl.start) if r_w is None else r_w[sl]
        f = feats[ln, eslot[a]]
        c = codes[ss, f].astype(np.int64)
        kn = c != Bp1 - 1
        yv = y_raw[ss][kn]
        wv = ww[kn]
        cv = c[kn]
        o = np.argsort(yv, kind="stable")
        ys, ws, cs_ = yv[o], wv[o], cv[o]
        pos = code[a:b][known[a:b]]
        if pos.size == 0:
            continue
        if ecat[a]:
            M = cs_[None, :] == pos[:, None]
        else:
            M = cs_[None, :] <= pos[:, None]
        devL, WLm = _wad(M, ys, ws)
        devR, WRm = _wad(~M, ys, ws)
        _, devK = _weighted_median_dev(ys, ws)
        Wk = ws.sum()
        ent = np.arange(a, b)[known[a:b]]
        with np.errstate(divide="ignore", invalid="ignore"):
            impL[ent] = np.where(WLm > 0, devL / WLm, 0.0)
            impR[ent] = np.where(WRm > 0, devR / WRm, 0.0)
        impK[a:b] = devK / Wk if Wk > 0 else 0.0
        cat_sum[si] = devL.sum()
    return impL, impR, impK, cat_sum


def _wad(M: np.ndarray, ys: np.ndarray, ws: np.ndarray):
    """For each row of membership M (P, n) over y-sorted samples: sum w|y - weighted median|, total w."""
    Wm = M * ws
    cw = np.cumsum(Wm, axis=1)
    tot = cw[:, -1]
    half = tot / 2.0
    k = np.argmax(cw >= (half - 1e-12 * tot)[:, None], axis=1)
    med = ys[k]
    cwy = np.cumsum(Wm * ys, axis=1)
    Stot = cwy[:, -1]
    Wb = cw[np.arange(M.shape[0]), k]
    Sb = cwy[np.arange(M.shape[0]), k]
    dev = med * Wb - Sb + (Stot - Sb) - med * (tot - Wb)
    return np.maximum(dev, 0.0), tot


def _route_rows(r_s, r_f, r_w, r_node, codes, mcode, feat, kind, split, level_children, level_fracs,
                n_level, next_id):
    """Send each row of a split node to its child; rows missing the split feature go to every child.

    Returns the row state of the next level, sorted by child (stable).  ``r_f`` is None while no
    value is missing (every fraction is 1).
    """
    is_split = kind[r_node] != LEAF
    if not is_split.all():
        sel = np.flatnonzero(is_split)
        r_s, r_node = r_s[sel], r_node[sel]
        r_f = None if r_f is None else r_f[sel]
        r_w = None if r_w is None else r_w[sel]
        del sel
    del is_split
    # per-node routing tables (local node ids)
    code_thr = np.full(n_level, -1, dtype=np.int64)
    code_thr[split["node"]] = np.where(split["cat"], -1, split["code"])
    c = codes[r_s, feat[r_node]]  # small-int codes
    miss = c == mcode
    # CSR of children (global ids, -1 absent) per node
    nch = np.array([0 if lc is None else lc.size for lc in level_children], dtype=np.intp)
    ptr = np.zeros(n_level + 1, dtype=np.intp)
    np.cumsum(nch, out=ptr[1:])
    ch = np.concatenate([lc for lc in level_children if lc is not None])
    fr = np.concatenate([lf for lf in level_fracs if lf is not None])
    numeric = kind[r_node] == NUMERIC
    if numeric.all():
        pos = ptr[r_node]
        pos += c > code_thr[r_node]
        child = ch[pos]
        del pos
    else:
        child = np.empty(r_s.size, dtype=np.intp)
        go_right = (c > code_thr[r_node]).astype(np.intp)
        child[numeric] = ch[ptr[r_node[numeric]] + go_right[numeric]]
        del go_right
        cat = ~numeric & ~miss
        child[cat] = ch[ptr[r_node[cat]] + c[cat]]
        del cat
    del numeric
    if not miss.any():
        order = np.argsort(child, kind="stable")
        child = child[order]
        child -= next_id
        return r_s[order], (None if r_f is None else r_f[order]), (None if r_w is None else r_w[order]), child
    known = ~miss
    k_s, k_f, k_w, k_c = r_s[known], r_f[known], r_w[known], child[known]
    m_s, m_f, m_w, m_n = r_s[miss], r_f[miss], r_w[miss], r_node[miss]
    counts = nch[m_n]
    pos = np.repeat(ptr[m_n], counts) + _ranges(counts)
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
    return k_s[order], k_f[order], k_w[order], k_c[order] - next_id


# ----------------------------------------------------------------------------- prediction
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
        # children: the right child of a numeric node is left + 1 (grow_tree numbers siblings
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
        state = self.__dict__.copy()
        state.pop("_coded_cache", None)  # rebuilt on the first large batch after loading
        return state

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
                pos = np.repeat(self.pptr[en], counts) + _ranges(counts)
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
