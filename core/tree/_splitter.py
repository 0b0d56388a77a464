"""Split finding for all the nodes of one level at once (the splitter).

For the candidate nodes of a level, the weighted class (or w, wy, wy^2) totals of every
(node, candidate feature, bin) are gathered with ``np.bincount`` over combined integer keys (rows are
sorted by node); cumulative sums along the bins give the left/right totals of every candidate threshold
at once.  The best entry per node is found with segment-wise reductions (``np.maximum.reduceat``), and
the children of every split node are laid out as one CSR block.  No Python loop runs over samples,
thresholds or nodes: only over chunks of nodes whose (row, feature) pairs fit a memory budget.
"""

from __future__ import annotations

import numpy as np

from ._binning import Binned
from ._criterion import REGRESSION_CRITERIA, impurity, mae_entry_impurities, xlog2x
from ._fused_splits import FusedSplits
from ._splits import Splits, run_mask
from ._tree import ranges

__all__ = ["Splitter", "Splits"]

# budget of histogram cells (node x feature x bin) evaluated densely at once
_DENSE_CELLS = 1 << 22
# (row, candidate feature) pairs evaluated per chunk of nodes: bounds the peak memory
_PAIR_BUDGET = 1 << 16
# non-empty cells are found with a mask over the cells up to this many cells per (row, feature) pair,
# by sorting the pairs beyond (a mask costs ~1 ns per cell, a sort ~30 ns per pair)
_MASK_CELLS_PER_PAIR = 16


def _unique_inverse(flat: np.ndarray, minor=None, major=None, bound: int | None = None):
    """``np.unique(flat, return_inverse=True)`` by a stable sort of 32-bit keys when they fit (the same
    sorted keys and inverse, ~1.5x faster than the 64-bit sort).  ``flat`` may also come as two 16-bit
    digits, ordered as (``major``, ``minor``): two stable radix sorts then give the same order (~1.5x
    faster again).  ``bound``: an upper bound of the keys (None: read from ``flat``)."""
    if minor is not None:
        o = np.argsort(minor, kind="stable")
        o = np.take(o, np.argsort(np.take(major, o), kind="stable"))
    elif flat.size == 0 or (int(flat.max()) if bound is None else bound) > 2**31:
        U, inv = np.unique(flat, return_inverse=True)
        return U, inv.ravel()
    else:
        o = np.argsort(flat.astype(np.int32), kind="stable")
    ks = flat[o]
    bd = np.empty(ks.size, dtype=bool)
    bd[0] = True
    np.not_equal(ks[1:], ks[:-1], out=bd[1:])
    inv = np.empty(ks.size, dtype=np.intp)
    rank = np.add.accumulate(bd, dtype=np.intp)
    rank -= 1
    inv[o] = rank
    return ks[bd], inv


_ONE_BLOCK = np.zeros(1, dtype=np.intp)  # block_nodes of a chunk that is one block
_ONE_BLOCK.flags.writeable = False


def _node_rows(nodes: np.ndarray, rows, n_level: int, one_chunk: bool):
    """``(s, local, fr, wt, yv)``: the level's rows of ``nodes`` (ascending local ids) in row order: their samples,
    chunk-local node (the rank of their node in ``nodes``), fractions, weights and centred targets (None: not
    kept).  ``one_chunk``: the level's rows fit one chunk (``nodes`` are then all its candidates)."""
    r_s, r_f, r_w, r_y = rows.r_s, rows.r_f, rows.r_w, rows.r_y
    if nodes.size == n_level:  # every node of the level (nodes is then 0 .. n_level - 1)
        return r_s, rows.r_node, r_f, r_w, r_y
    if one_chunk:  # a mask over the level's rows (fewer calls; the chunks of a large level take the offsets)
        rank = np.full(n_level, -1, dtype=np.intp)
        rank[nodes] = np.arange(nodes.size)
        local = rank.take(rows.r_node)
        sel = (local >= 0).nonzero()[0]
        local = local.take(sel)
    else:  # the rows of the nodes only, from the node row offsets (a chunk of a large level)
        lens = rows.starts[nodes + 1] - rows.starts[nodes]
        sel = np.repeat(rows.starts[nodes], lens) + ranges(lens)
        local = np.repeat(np.arange(nodes.size), lens)

    def pick(a):
        return None if a is None else a.take(sel)

    return r_s.take(sel), local, pick(r_f), pick(r_w), pick(r_y)


def _run_starts(a: np.ndarray) -> np.ndarray:
    return np.flatnonzero(run_mask(a))


class Splitter(FusedSplits):
    """Best split of every candidate node of a level (one or several trees grown together; ``rng``:
    one generator per tree, or None)."""

    def __init__(self, binned: Binned, yc: np.ndarray, y_raw, *, criterion: str, n_stats: int,
                 min_samples_leaf: float, max_features: int, rng):
        self.binned = binned
        self.codes = binned.codes
        self.codes_flat = np.ascontiguousarray(binned.codes).reshape(-1)  # a view: codes are C-ordered
        self.Bp1 = binned.missing_code + 1
        self.yc = yc
        self.y_raw = y_raw
        self.criterion = criterion
        self.regression = criterion in REGRESSION_CRITERIA
        self.mae = criterion == "absolute_error"
        self.ratio = criterion == "gain_ratio"
        self.S = n_stats
        self.msl = min_samples_leaf
        self.n_features = self.codes.shape[1]
        self.mf = min(max_features, self.n_features)
        self.rng = rng
        # width of each feature's key range in the compact (node, feature, bin) key space: its bins, and
        # one more for the missing code when values are missing
        self.width = binned.n_bins.astype(np.intp) + (1 if binned.has_missing else 0)
        # numeric features without missing values, gain ratio and absolute error aside: the fused paths
        # (``_simple_splits``; squared error on channel-major totals)
        self.simple = (criterion in ("squared_error", "gini", "entropy") and not binned.has_missing
                       and not bool(binned.is_cat.any()))
        self.chan_major = self.simple and criterion == "squared_error"
        self._every = np.broadcast_to(np.arange(self.n_features), (0, self.n_features))
        # every feature in order, no missing value: the compact key of (node, feature, bin) is
        # node * key_span + key_base[feature] + bin, and key_feat / key_bin read a key's feature and bin back
        # (precomputed per fit instead of divided out per level)
        self.key_base = np.zeros(self.n_features, dtype=np.intp)
        np.add.accumulate(self.width[:-1], out=self.key_base[1:])
        self.key_span = int(self.width.sum())
        self.key_feat = np.repeat(np.arange(self.n_features, dtype=np.intp), self.width)
        self.key_bin = np.arange(self.key_span, dtype=np.intp) - np.repeat(self.key_base, self.width)
        # the bin values as flat arrays: (feature, bin) read as feature * bin_width + bin (fused paths)
        self.bin_width = binned.bin_hi.shape[1]
        self.bin_hi_flat = np.ascontiguousarray(binned.bin_hi).reshape(-1)
        self.bin_lo_flat = np.ascontiguousarray(binned.bin_lo).reshape(-1)

    # ------------------------------------------------------------------ level
    def choose_features(self, cand: np.ndarray, node_tree: np.ndarray) -> np.ndarray:
        """Each candidate node's features: all of them, or ``max_features`` drawn by its tree's generator
        (one draw per tree and level, for the tree's candidates in order)."""
        n_nodes = cand.size
        if self.mf >= self.n_features or self.rng is None:
            if self._every.shape[0] < n_nodes:
                self._every = np.broadcast_to(np.arange(self.n_features), (2 * n_nodes, self.n_features))
            return self._every[:n_nodes]
        if len(self.rng) == 1:
            return np.argsort(self.rng[0].random((n_nodes, self.n_features)), axis=1)[:, : self.mf]
        t_of = node_tree[cand]  # ascending (nodes are ordered tree by tree)
        bounds = np.flatnonzero(np.diff(t_of)) + 1
        parts = [self.rng[int(t_of[a])].random((b - a, self.n_features))
                 for a, b in zip([0, *bounds.tolist()], [*bounds.tolist(), n_nodes], strict=True)]
        return np.argsort(np.concatenate(parts), axis=1)[:, : self.mf]

    def find(self, cand: np.ndarray, rows) -> Splits | None:
        """Best splits of the candidate nodes ``cand`` (ascending local ids); ``rows`` is the level's
        row state (``starts``, ``r_s``, ``r_f``, ``r_w``, ``r_y``, node totals ``Wn``, ``node_tree``)."""
        if cand.size == 0:
            return None
        feats_all = self.choose_features(cand, rows.node_tree)
        # blocks: per tree, consecutive candidate nodes with a bounded number of (row, feature) pairs
        # (greedy: a block takes nodes while its rows fit the budget, and at least one node).  The
        # cumulative sums along the bins run within a block, so a tree's splits do not depend on the
        # other trees grown with it.  Chunks: consecutive blocks processed together, greedy likewise
        # (one tree alone: every chunk is one block).
        row_budget = max(1, _PAIR_BUDGET // self.mf)
        if len(rows.r_s) <= row_budget and (rows.node_tree.size == 1 or rows.node_tree[-1] == rows.node_tree[0]):
            return self._chunk(cand, feats_all, rows, _ONE_BLOCK)  # one tree, all its rows in one block
        lens = rows.starts.take(cand + 1)
        lens -= rows.starts.take(cand)
        cum = np.add.accumulate(lens)
        if rows.node_tree.size == 1 or rows.node_tree[-1] == rows.node_tree[0]:  # one tree
            if int(cum[-1]) <= row_budget:  # one block, one chunk (what the loops below give)
                return self._chunk(cand, feats_all, rows, _ONE_BLOCK)
            tcut = [0, cand.size]
        else:
            tcut = [0, *(_run_starts(rows.node_tree[cand])[1:].tolist()), cand.size]
        blocks = []
        for a, b in zip(tcut[:-1], tcut[1:], strict=True):
            i = a
            while i < b:
                before = int(cum[i - 1]) if i else 0
                j = min(b, max(i + 1, int(np.searchsorted(cum, before + row_budget, side="right"))))
                blocks.append(i)
                i = j
        blocks.append(cand.size)
        bstart = np.array(blocks[:-1], dtype=np.intp)
        bend_cum = cum[np.array(blocks[1:], dtype=np.intp) - 1]  # rows up to the end of each block
        results = []
        k = 0
        while k < bstart.size:
            i = int(bstart[k])
            before = int(cum[i - 1]) if i else 0
            m = max(k + 1, int(np.searchsorted(bend_cum, before + row_budget, side="right")))
            j = blocks[m]
            res = self._chunk(cand[i:j], feats_all[i:j], rows, bstart[k:m] - i)
            if res is not None:
                results.append(res)
            k = m
        return Splits.concat(results) if results else None

    def _chunk(self, nodes, feats, rows, block_nodes) -> Splits | None:
        """Splits of the chunk's nodes; ``block_nodes``: the first (chunk-local) node of each block."""
        seg, code, cnt, st, K = self._histograms(nodes, feats, rows)
        if self.chan_major:
            return self._simple_splits(nodes, feats, seg, code, cnt, st, rows, block_nodes)
        if self.simple:
            return self._simple_class_splits(nodes, feats, seg, code, cnt, st, rows, block_nodes)
        e = self._entry_scores(nodes, feats, seg, code, cnt, st, K, rows, block_nodes)
        if e is None:
            return None
        return self._best_splits(nodes, e)

    # ------------------------------------------------------------------ histograms
    def _histograms(self, nodes, feats, rows):
        """Non-empty (node, feature, bin) cells of the chunk, in ascending (node, slot, bin) order: their
        (node * mf + slot) and bin, known counts and weighted totals ((cells, S); (S, cells) for the fused
        path)."""
        starts = rows.starts
        codes, yc, mf, Bp1, S, regression = self.codes, self.yc, self.mf, self.Bp1, self.S, self.regression
        # Memory: the arrays below have one entry per (row, candidate feature) pair or per non-empty
        # (node, feature, bin) entry; they are the peak of a fit, so they are freed (or reused in place)
        # as soon as they are consumed, and integer indices over entries are 32-bit.  In-place and
        # reordered operations compute exactly the same values as the expressions they replace.
        N = nodes.size
        # rows of these nodes (rows are sorted by node; nodes ascending, maybe non-contiguous), in order
        s, local, fr, wt, yv = _node_rows(nodes, rows, starts.size - 1, rows.r_s.size <= max(1, _PAIR_BUDGET // mf))
        # fr None: every fraction is 1 (counts = row counts); wt None: unit weights (sums of 1.0 = integer
        # counts); yv: centred targets (each tree its own offset), None for classification
        every = mf == codes.shape[1] and feats.strides[0] == 0  # choose_features' broadcast of every feature
        if every:
            cg = codes.take(s, axis=0)  # (R, mf) small-int codes, every feature in order
        else:
            # (R, mf) codes of each node's candidate features, gathered from the flat codes (np.take: the
            # same values as codes[s[:, None], feats[local]], ~2.5x faster)
            fi = feats.take(local, axis=0)
            fi += (s * codes.shape[1])[:, None]
            cg = self.codes_flat.take(fi)
            del fi
        K = N * mf * Bp1  # cells of the (node, slot, bin) key space of the entries
        M = s.size * mf
        # Cells are counted in a compact key space: each (node, slot) takes the width of its feature
        # (bins, + 1 for the missing code) instead of Bp1 (the largest feature's), so the mask and the
        # dense histograms are as large as the features' bins actually are.  Compact keys keep the
        # order of the (node, slot, bin) keys, so U, the entry order and every sum are those of the
        # wide keys (mapped back below).
        keyed = every and not self.binned.has_missing  # keys read back through key_feat / key_bin
        if keyed:
            Kc = N * self.key_span
        else:
            wid = self.width[feats].ravel()  # (N * mf,)
            slot_off = np.cumsum(wid)
            Kc = int(slot_off[-1])
            slot_off -= wid  # first compact key of every (node, slot), ascending
        if self.binned.has_missing:  # the missing code B becomes the last key of its slot
            cg = np.minimum(cg, (wid - 1).reshape(N, mf)[local])
        if regression:
            # (w, w y, w y^2); with unit weights 1.0 * y = y exactly
            chan_vals = (wt, yv, yv * yv) if wt is None else (wt, wt * yv, wt * yv * yv)
            del yv
        # unit weights and no fractions: the weight channel sums the same 1s as the count (same numbers)
        w_is_cnt = regression and wt is None and fr is None

        def rep(v):  # per-(row, feature) weights of a per-row weight array (None: unit)
            return None if v is None else np.repeat(v, mf)

        if M > _PAIR_BUDGET and Kc * S <= _DENSE_CELLS:
            if keyed:
                wid = np.tile(self.width, N)
                slot_off = np.cumsum(wid)
                slot_off -= wid
            # a big node (the root levels): dense histograms one candidate feature at a time, so the
            # temporaries are O(rows) instead of O(rows x features)
            cnt_full = np.zeros(Kc)
            st_full = np.zeros((Kc, S)) if regression else np.zeros(Kc * S)
            lbase = local * mf
            ys = None if regression else yc[s]
            for j in range(mf):
                kj = slot_off[lbase + j]
                kj += cg[:, j]
                cnt_full += np.bincount(kj, weights=fr, minlength=Kc)
                if regression:
                    for c, v in enumerate(chan_vals):
                        if c or not w_is_cnt:
                            st_full[:, c] += np.bincount(kj, weights=v, minlength=Kc)
                else:
                    kj *= S
                    kj += ys
                    st_full += np.bincount(kj, weights=wt, minlength=Kc * S)
            del lbase, ys, kj
            if w_is_cnt:
                st_full[:, 0] = cnt_full
            U = np.flatnonzero(cnt_full)
            cnt = cnt_full[U]
            del cnt_full
            st = (st_full if regression else st_full.reshape(Kc, S)).take(U, axis=0)
            del st_full
            if self.chan_major:
                st = st.T
            # compact keys back to (node * mf + slot, bin)
            ns = np.searchsorted(slot_off, U, side="right") - 1
            code = U - slot_off[ns]
        else:
            if keyed:  # (R, mf) int64 key: node * key_span + key_base[slot] + bin
                comb = (local * self.key_span)[:, None] + self.key_base
            else:
                comb = slot_off.reshape(N, mf).take(local, axis=0)  # (R, mf) int64 key
            comb += cg
            flat = comb.ravel()  # a view of comb
            # the path is a matter of speed only (every path gives the same cells and sums): a mask over
            # the cells up to _MASK_CELLS_PER_PAIR cells per pair, a sort of the pairs beyond
            if Kc <= _MASK_CELLS_PER_PAIR * M and Kc * S <= _DENSE_CELLS:
                # non-empty cells found with a mask over the Kc cells and numbered by their rank, then
                # histograms over the entries only: no dense (Kc, S) histogram; each entry receives the
                # same additions in the same order as in a dense bincount
                seen = np.zeros(Kc, dtype=bool)
                seen[flat] = True
                U = np.flatnonzero(seen)
                del seen
                nU = U.size
                # rank of every non-empty cell (only those are read back)
                rank = np.empty(Kc, dtype=np.int32 if Kc < 2**31 else np.intp)
                rank[U] = np.arange(nU, dtype=rank.dtype)
                flat[:] = rank.take(flat)  # in place: flat (a view of comb) becomes the entry index
                del rank
                pair = None
                if not keyed:
                    pair = np.empty(nU, dtype=np.intp)  # one (row, slot) pair of every entry
                    pair[flat] = np.arange(M)
                cnt = np.bincount(flat, weights=rep(fr), minlength=nU)
                if regression:
                    st = self._channel_sums(flat, cnt, chan_vals, w_is_cnt, nU, rep)
                else:
                    comb *= S  # in place: flat becomes the (entry, class) key
                    comb += yc[s][:, None]
                    st = np.bincount(flat, weights=rep(wt), minlength=nU * S).reshape(nU, S)
                nz = cnt != 0  # cells whose weights sum to 0 are empty (as in a dense histogram)
                if not nz.all():
                    U, cnt, st = U[nz], cnt[nz], (st[:, nz] if self.chan_major else st[nz])
                    pair = None if pair is None else pair[nz]
                del nz
            else:
                if M >= 1 << 14 and N * mf <= 1 << 16 and Bp1 <= 1 << 16:
                    # digits: the (node, slot) and the bin (compact keys order as those pairs)
                    slot = np.arange(N * mf, dtype=np.uint16).reshape(N, mf)
                    minor = cg if cg.dtype in (np.uint8, np.uint16) else cg.astype(np.uint16)
                    U, inv = _unique_inverse(flat, minor.ravel(), slot.take(local, axis=0).ravel())
                    del minor
                    del slot
                else:
                    U, inv = _unique_inverse(flat, bound=Kc)
                del comb, flat
                nU = U.size
                if not keyed:
                    pair = np.empty(nU, dtype=np.intp)  # one (row, slot) pair of every entry
                    pair[inv] = np.arange(M)
                cnt = np.bincount(inv, weights=rep(fr), minlength=nU)
                if regression:
                    st = self._channel_sums(inv, cnt, chan_vals, w_is_cnt, nU, rep)
                else:
                    inv *= S
                    inv += np.repeat(yc[s], mf)
                    st = np.bincount(inv, weights=rep(wt), minlength=nU * S).reshape(nU, S)
                del inv
            comb = flat = None
            if keyed:  # (node * mf + slot, bin) of every entry, read from its key
                ns = U // self.key_span  # (a scalar floor division: faster than np.divmod, the same numbers)
                rem = ns * self.key_span
                np.subtract(U, rem, out=rem)
                ns *= mf
                ns += self.key_feat.take(rem)
                return ns, self.key_bin.take(rem), cnt, st, K
            # (node * mf + slot, bin) of every entry, read from one of its pairs
            prow, ns = np.divmod(pair, mf)
            ns += local.take(prow) * mf
            code = cg.reshape(-1).take(pair).astype(np.intp)
            del pair, prow
        if self.binned.has_missing:
            code[code == wid[ns] - 1] = Bp1 - 1
        return ns, code, cnt, st, K

    def _channel_sums(self, keys, cnt, chan_vals, w_is_cnt: bool, nU: int, rep):
        """Regression totals (w, w y, w y^2) of the entries ``keys``: (3, nU) channel-major for the fused path,
        (nU, 3) otherwise; the weight channel is the count when every weight is 1 (the same numbers)."""
        st = np.empty((3, nU)) if self.chan_major else np.empty((nU, 3))
        out = st if self.chan_major else st.T
        for c, v in enumerate(chan_vals):
            out[c] = cnt if c == 0 and w_is_cnt else np.bincount(keys, weights=rep(v), minlength=nU)
        return st

    # ------------------------------------------------------------------ scores
    def _entry_scores(self, nodes, feats, seg, code, cnt, st, K, rows, block_nodes):
        """Gain (and gain ratio) of every entry (candidate threshold, or categorical segment) of the
        cells; None when no entry is a valid split."""
        starts, r_s, r_w, Wn = rows.starts, rows.r_s, rows.r_w, rows.Wn
        codes, y_raw, mf, Bp1, S = self.codes, self.y_raw, self.mf, self.Bp1, self.S
        regression, mae, ratio, criterion, msl = self.regression, self.mae, self.ratio, self.criterion, self.msl
        binned = self.binned
        N = nodes.size
        # the per-row and per-(row, feature) temporaries are not needed any more
        cnt = cnt.astype(np.float64, copy=False)
        st = st.astype(np.float64, copy=False)
        nU = seg.size
        it = np.int32 if K < 2**31 else np.intp  # entry-index dtype
        seg = seg.astype(it)
        code = code.astype(it)
        enode = seg // mf  # local node of entry
        eslot = seg % mf
        every_feature = mf == self.n_features and feats.strides[0] == 0  # choose_features' broadcast
        # feats[enode, eslot], read through the flat (node, slot) index seg
        efeat = eslot if every_feature else np.take(np.ascontiguousarray(feats).reshape(-1), seg).astype(it)
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
        seg_end = np.empty_like(seg_start)
        seg_end[:-1] = seg_start[1:]
        seg_end[-1] = nU
        seg_end -= 1
        # row gathers below use np.take (the same copies as fancy indexing, several times faster on
        # (n, S) arrays)
        # cumulative sums of the known entries (in place: the same values as out of place)
        if any_miss:
            cs = np.where(known[:, None], st, 0.0)
            cc = np.where(known, cnt, 0.0)
        else:  # every entry known: the cumulative sums can overwrite st and cnt unless still needed
            cs = st.copy() if any_cat else st
            cc = cnt.copy() if any_cat else cnt
        if not any_cat:
            st = cnt = None
        if block_nodes.size == 1:
            np.cumsum(cs, axis=0, out=cs)
            np.cumsum(cc, out=cc)
            after_first = seg_start > 0
        else:  # each block its own cumulative sums (the same numbers as the block alone)
            bent = np.searchsorted(enode, block_nodes)
            for a, b in zip(bent.tolist(), [*bent[1:].tolist(), nU], strict=True):
                np.cumsum(cs[a:b], axis=0, out=cs[a:b])
                np.cumsum(cc[a:b], out=cc[a:b])
            first = np.zeros(nU, dtype=bool)
            first[bent] = True
            after_first = ~first[seg_start]
            del bent, first
        prev = np.maximum(seg_start - 1, 0)
        base = np.where(after_first[:, None], np.take(cs, prev, axis=0), 0.0)
        cbase = np.where(after_first, np.take(cc, prev), 0.0)
        del after_first
        del prev
        left = cs
        left -= np.take(base, seg_id, axis=0)
        cleft = cc
        cleft -= np.take(cbase, seg_id)
        del cs, cc, base, cbase
        # segment totals: the cumulative sums at the segment's last entry.  Regression impurities are
        # elementwise, so those of the totals are computed once per segment and gathered (the same
        # numbers); classification keeps them per entry (they go through a matrix product).
        tot_seg = np.take(left, seg_end, axis=0)
        cright = np.take(np.take(cleft, seg_end), seg_id)  # the known count of the segment, minus cleft below
        cright -= cleft
        count_ok = cleft >= msl
        count_ok &= cright >= msl
        del cleft, cright
        tot = np.take(tot_seg, seg_id, axis=0)
        WL = left[:, 0].copy() if regression else left @ onesS
        if regression:
            Wk_seg = tot_seg[:, 0].copy()
            Wk = np.take(Wk_seg, seg_id)
        else:
            Wk = tot @ onesS
        if mae:
            del left, tot
            impL, impR, impK, cat_child_sum = mae_entry_impurities(
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
            impK = np.take(impurity(tot_seg, criterion), seg_id) if regression else impurity(tot, criterion)
            del tot
        del tot_seg
        with np.errstate(divide="ignore", invalid="ignore"):
            if regression:
                Wnode = Wn[nodes][enode[seg_start]]
                F = np.take(np.where(Wnode > 0, Wk_seg / Wnode, 0.0), seg_id)
            else:
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
                si = -(xlog2x(WL / Wk) + xlog2x(WR / Wk))
                if any_cat:
                    p_cat = np.where(known, W_e / Wk, 0.0)
                    si_cat = -np.add.reduceat(xlog2x(p_cat), seg_start)
                    si[seg_start] = np.where(ecat[seg_start], si_cat, si[seg_start])
                    del p_cat, si_cat
                score = np.where(valid & (si > 0), gain / si, -np.inf)
                del si
        del known, miss

        if not valid.any():
            return None
        return _Entries(
            nU=nU, gain=gain, valid=valid, score=score if ratio else None, enode=enode, efeat=efeat, ecat=ecat,
            code=code, seg_start=seg_start, seg_end=seg_end, seg_id=seg_id, WL=WL, Wk=Wk, W_e=W_e, N=N,
        )

    # ------------------------------------------------------------------ best split per node
    def _best_splits(self, nodes, e) -> Splits | None:
        nU, gain, valid, enode, efeat, ecat, code = e.nU, e.gain, e.valid, e.enode, e.efeat, e.ecat, e.code
        seg_start, seg_end, seg_id, WL, Wk, W_e, N = e.seg_start, e.seg_end, e.seg_id, e.WL, e.Wk, e.W_e, e.N
        score = e.score
        ratio, binned, Bp1 = self.ratio, self.binned, self.Bp1
        # --- best entry per node
        node_new = run_mask(enode)
        node_start = np.flatnonzero(node_new)
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
            seg_new = run_mask(seg_node)
            nseg_start = np.flatnonzero(seg_new)
            best_score = np.maximum.reduceat(seg_score, nseg_start)
            seg_nid = np.cumsum(seg_new) - 1
            is_top = (seg_score == best_score[seg_nid]) & np.isfinite(seg_score)
            top_seg = np.minimum.reduceat(np.where(is_top, np.arange(seg_start.size), seg_start.size), nseg_start)
            has = top_seg < seg_start.size
            best_entry = np.where(has, fb[np.minimum(top_seg, seg_start.size - 1)], -1)
            best_node_local = seg_node[nseg_start]
            best_gain = np.where(has, gain[np.maximum(best_entry, 0)], -np.inf)
        else:
            gbest = np.maximum.reduceat(gain, node_start)
            node_id_of = np.cumsum(node_new) - 1
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
        # children as CSR: two per numeric split (fractions WL/Wk, WR/Wk), one slot per category of a
        # categorical split (-1: absent at the node; fraction W_category / Wk)
        nch = np.where(bcat, binned.n_bins[bfeat], 2).astype(np.intp)
        first = np.zeros(sel.size, dtype=np.intp)
        np.cumsum(nch[:-1], out=first[1:])
        slots = np.full(int(nch.sum()), -1, dtype=np.intp)
        fracs = np.zeros(slots.size)
        num = ~bcat
        pos, en = first[num], be[num]
        slots[pos] = 0
        slots[pos + 1] = 1
        fracs[pos] = WL[en] / Wk[en]
        fracs[pos + 1] = (Wk[en] - WL[en]) / Wk[en]
        if bcat.any():
            kc = np.flatnonzero(bcat)
            ec = be[kc]
            ss, se = seg_start[seg_id[ec]], seg_end[seg_id[ec]]
            lens = se - ss + 1
            ent = np.repeat(ss, lens) + ranges(lens)
            owner = np.repeat(kc, lens)
            cats = code[ent]
            kn = (cats < Bp1 - 1) & (W_e[ent] > 0)
            ent, owner, cats = ent[kn], owner[kn], cats[kn]
            slots[first[owner] + cats] = 1
            fracs[first[owner] + cats] = W_e[ent] / Wk[be[owner]]
        return Splits(nodes[bn], bfeat, bcat, bcode, thr, best_gain[sel], nch, slots, fracs)


class _Entries:
    """Per-entry scores of a chunk (the splitter's intermediate)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)
