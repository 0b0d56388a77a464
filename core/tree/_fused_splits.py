"""The splitter's fused paths (``Splitter`` inherits them): ``_entry_scores`` and ``_best_splits`` in fewer NumPy
calls for numeric features without missing values, squared error (``_simple_splits``) and gini / entropy
(``_simple_class_splits``). The same operations on the same numbers in the same order as the general path in
``_splitter.py``, so the same splits bit for bit (tests/core/tree/test_fused_split_paths.py)."""

from __future__ import annotations

import numpy as np

from ._criterion import impurity, squared_error_impurity
from ._splits import Splits, run_mask

__all__ = ["FusedSplits"]


class FusedSplits:
    """Mixin of ``Splitter``: reads its ``mf``, ``msl``, ``criterion``, ``binned`` ... set by ``Splitter.__init__``."""

    def _simple_splits(self, nodes, feats, seg, code, cnt, st, rows, block_nodes) -> Splits | None:
        """``_entry_scores`` and ``_best_splits`` for squared error on numeric features without missing
        values, with fewer NumPy calls on contiguous channels: the same operations on the same numbers
        in the same order (every entry is known and numeric; the totals are channel-major (w, wy, wy^2
        [, count]) rows, left, right and segment totals share one impurity call, the count channel
        shares the cumulative sum), so the same splits bit for bit.  ``st``: (3, cells)."""
        mf, msl = self.mf, self.msl
        nU = seg.size
        # cumulative sums of (w, wy, wy^2[, count]) in one buffer with a leading zero column
        unit = rows.r_w is None and rows.r_f is None  # w and the count are the same numbers
        C = 3 if unit else 4
        cs = np.empty((C, nU + 1))
        cs[:, 0] = 0.0
        seg_start, seg_id, seg_end = _segments(seg)
        bent, bidx = _block_bases(seg, mf, block_nodes, seg_start)  # bidx: column of cs before the segment
        if bent is None:  # one block: the cumulative sums written straight into the buffer (no copy first)
            np.cumsum(st, axis=1, out=cs[:3, 1:])
            if not unit:
                np.cumsum(cnt, out=cs[3, 1:])
        else:
            cs[:3, 1:] = st
            if not unit:
                cs[3, 1:] = cnt
            for a, b in _blocks(bent, nU):  # each block its own cumulative sums (the same numbers as the block alone)
                np.cumsum(cs[:, a + 1 : b + 1], axis=1, out=cs[:, a + 1 : b + 1])
        nS = seg_start.size
        # columns [0, nU): left totals; [nU, 2 nU): right totals; [2 nU, 2 nU + nS): segment totals
        LR = np.empty((C, 2 * nU + nS))
        left = LR[:, :nU]
        np.subtract(cs[:, 1:], cs.take(bidx.take(seg_id), axis=1), out=left)
        del cs
        tot_seg = LR[:, 2 * nU :]
        left.take(seg_end, axis=1, out=tot_seg)
        np.subtract(tot_seg.take(seg_id, axis=1), left, out=LR[:, nU : 2 * nU])
        imp = squared_error_impurity(LR[0], LR[1], LR[2])
        impL, impR = imp[:nU], imp[nU : 2 * nU]
        impK = imp[2 * nU :].take(seg_id)
        WL = LR[0, :nU]
        Wk_seg = LR[0, 2 * nU :]
        Wk = Wk_seg.take(seg_id)
        if unit and msl <= 1:
            # every entry holds a row, so the left count is >= 1, and so is the right one but at a segment's
            # last entry (which _fused_gain rules out)
            count_ok = None
        else:
            kc = 0 if unit else 3  # the count channel
            count_ok = LR[kc, :nU] >= msl
            count_ok &= LR[kc, nU : 2 * nU] >= msl  # the segment's count minus the left count
        enode_seg = seg.take(seg_start)
        enode_seg //= mf
        with np.errstate(divide="ignore", invalid="ignore"):
            if unit:
                # unit weights, no missing value: W_known and W_node are the same integer count, F = 1.0, and a
                # product by 1.0 changes nothing; every entry holds a row, so both sides of an allowed split
                # have positive weights
                F = None
            else:
                Wnode = rows.Wn.take(nodes.take(enode_seg))
                F = np.where(Wnode > 0, Wk_seg / Wnode, 0.0).take(seg_id)
            gain = _fused_gain(count_ok, seg_end, WL, Wk, impK, impL, impR, F, positive=unit)
        del F, impK, impL, impR, imp
        return self._simple_best(nodes, feats, seg, code, gain, seg_start, seg_id, enode_seg, WL, Wk)

    def _simple_class_splits(self, nodes, feats, seg, code, cnt, st, rows, block_nodes) -> Splits | None:
        """``_entry_scores`` and ``_best_splits`` for gini and entropy on numeric features without missing
        values, with fewer NumPy calls: the same operations on (cells, classes) arrays of the same shapes
        (the class sums go through the same matrix products), so the same splits bit for bit."""
        mf, msl, criterion = self.mf, self.msl, self.criterion
        S = st.shape[1]
        nU = seg.size
        # unit weights, no missing value: the class counts' sums are the row counts (exact integers), so the
        # counts need no channel of their own, and W_known = W_node (F = 1.0: no product)
        unit = rows.r_w is None and rows.r_f is None
        cs = np.empty((nU + 1, S))  # cumulative sums with a leading zero row
        cs[0] = 0.0
        cs[1:] = st
        if not unit:
            cc = np.empty(nU + 1)
            cc[0] = 0.0
            cc[1:] = cnt
        seg_start, seg_id, seg_end = _segments(seg)
        bent, bidx = _block_bases(seg, mf, block_nodes, seg_start)  # bidx: row of cs before the segment
        for a, b in _blocks(bent, nU):  # each block its own cumulative sums (the same numbers as the block alone)
            np.cumsum(cs[a + 1 : b + 1], axis=0, out=cs[a + 1 : b + 1])
            if not unit:
                np.cumsum(cc[a + 1 : b + 1], out=cc[a + 1 : b + 1])
        bidx = bidx.take(seg_id)
        left = cs[1:] - cs.take(bidx, axis=0)
        if not unit:
            cleft = cc[1:] - cc.take(bidx)
            del cc
            cright = cleft.take(seg_end).take(seg_id)  # the segment's count, minus cleft below
            cright -= cleft
            count_ok = cleft >= msl
            count_ok &= cright >= msl
            del cleft, cright
        del cs, bidx
        tot = left.take(seg_end, axis=0).take(seg_id, axis=0)
        onesS = np.ones(S)
        WL = left @ onesS
        Wk = tot @ onesS
        if unit:  # the left and right counts are WL and Wk - WL
            if msl <= 1:  # every entry holds a row; a segment's last entry is ruled out by _fused_gain
                count_ok = None
            else:
                count_ok = WL >= msl
                count_ok &= (Wk - WL) >= msl
        impL = impurity(left, criterion)
        right = np.subtract(tot, left, out=left)
        del left
        impR = impurity(right, criterion)
        del right
        impK = impurity(tot, criterion)
        del tot
        enode_seg = seg.take(seg_start) // mf
        with np.errstate(divide="ignore", invalid="ignore"):
            if unit:
                F = None
            else:
                Wnode = rows.Wn[nodes.take(enode_seg)].take(seg_id)
                F = np.where(Wnode > 0, Wk / Wnode, 0.0)
                del Wnode
            gain = _fused_gain(count_ok, seg_end, WL, Wk, impK, impL, impR, F, positive=unit)
            del F, impK, impL, impR
        return self._simple_best(nodes, feats, seg, code, gain, seg_start, seg_id, enode_seg, WL, Wk)

    def _simple_best(self, nodes, feats, seg, code, gain, seg_start, seg_id, enode_seg, WL, Wk):
        """The fused paths' best split per node (``_best_splits`` without gain ratio or categories).  ``gain``
        holds no NaN: an allowed entry's gain is finite, any other -inf (``_fused_gain``), so an entry at least
        as large as a finite node maximum is valid (the general path's ``& valid`` changes nothing), and a node
        whose maximum is -inf has no split."""
        mf = self.mf
        nU = seg.size
        # best entry per node: the first entry with the node's largest gain
        seg_node = enode_seg
        node_new = run_mask(seg_node)
        nseg_start = node_new.nonzero()[0]
        node_start = seg_start.take(nseg_start)
        gbest = np.maximum.reduceat(gain, node_start)
        node_id_of = np.add.accumulate(node_new, dtype=np.intp).take(seg_id)
        node_id_of -= 1
        is_top = gain >= gbest.take(node_id_of)
        best_entry = np.minimum.reduceat(np.where(is_top, np.arange(nU), nU), node_start)
        has = best_entry < nU
        has &= gbest >= -1e-12
        sel = has.nonzero()[0]
        if sel.size == 0:
            return None
        be = best_entry.take(sel)
        bn = seg_node.take(nseg_start.take(sel))
        bseg = seg.take(be)
        bfeat = bseg % mf if (mf == self.n_features and feats.strides[0] == 0) else \
            (np.ascontiguousarray(feats).reshape(-1)).take(bseg)
        bcode = code.take(be)
        ncode = code.take(be + 1)  # a valid entry has a next bin in its segment
        fb = bfeat * self.bin_width  # flat (feature, bin) indices of the bin values (one take each)
        hi = self.bin_hi_flat.take(fb + bcode)
        lo = self.bin_lo_flat.take(fb + ncode)
        thr = hi + lo
        thr *= 0.5
        guard = thr >= lo
        guard |= ~np.isfinite(thr)
        np.copyto(thr, hi, where=guard)  # rounding guard (as scikit-learn)
        n = sel.size
        pairs = _numeric_children(n)
        fracs = np.empty(2 * n)
        wl, wk = WL.take(be), Wk.take(be)
        np.divide(wl, wk, out=fracs[0::2])
        np.divide(wk - wl, wk, out=fracs[1::2])
        return Splits(nodes.take(bn), bfeat, pairs.cat[:n], bcode, thr, gbest.take(sel), pairs.nch[:n],
                      pairs.slots[: 2 * n], fracs)


class _NumericChildren:
    """Read-only children arrays of ``n`` numeric splits (not categorical, two children, slots 0 and 1), sliced
    from arrays built once for the largest ``n`` seen."""

    def __init__(self, n: int):
        self.cat = np.zeros(n, dtype=bool)
        self.nch = np.full(n, 2, dtype=np.intp)
        self.slots = np.tile(np.array([0, 1], dtype=np.intp), n)
        for a in (self.cat, self.nch, self.slots):
            a.flags.writeable = False


_NUMERIC_CHILDREN = [_NumericChildren(256)]


def _numeric_children(n: int) -> _NumericChildren:
    children = _NUMERIC_CHILDREN[0]
    if children.cat.size < n:  # (trees grown in threads: each keeps the arrays it read or built)
        children = _NumericChildren(2 * n)
        _NUMERIC_CHILDREN[0] = children
    return children


def _segments(seg: np.ndarray):
    """``(seg_start, seg_id, seg_end)`` of the entries' segments (runs of one (node, feature)): the first and
    last entry of each segment, and each entry's segment number."""
    new_seg = run_mask(seg)
    seg_start = new_seg.nonzero()[0]
    seg_id = np.add.accumulate(new_seg, dtype=np.intp)
    seg_id -= 1
    seg_end = np.empty_like(seg_start)
    np.subtract(seg_start[1:], 1, out=seg_end[:-1])
    seg_end[-1] = seg.size - 1
    return seg_start, seg_id, seg_end


def _block_bases(seg, mf: int, block_nodes: np.ndarray, seg_start: np.ndarray):
    """``(bent, bidx)``: the first entry of each block of trees (None for one block), and per segment the index,
    in cumulative sums with a leading zero, of the sum before the segment (0 where a block starts)."""
    if block_nodes.size == 1:
        bidx = seg_start.copy()
        bidx[0] = 0
        return None, bidx
    bent = np.searchsorted(seg // mf, block_nodes)
    first = np.zeros(seg.size, dtype=bool)
    first[bent] = True
    return bent, np.where(first[seg_start], 0, seg_start)


def _blocks(bent, n: int) -> list[tuple[int, int]]:
    """The entry ranges ``[a, b)`` whose cumulative sums restart: the whole level, or each block's."""
    if bent is None:
        return [(0, n)]
    return list(zip(bent.tolist(), [*bent[1:].tolist(), n], strict=True))


def _fused_gain(count_ok, seg_end, WL, Wk, impK, impL, impR, F, *, positive: bool = False):
    """The fused paths' weighted impurity decrease per entry, ``F (imp_K - (W_L imp_L + W_R imp_R) / W_K)``, and
    -inf where the split is not allowed (too few rows a side, an empty side, a segment's last entry); in place on
    ``count_ok`` (None: every entry allowed but a segment's last). The same operations in the same order as
    ``_entry_scores``; ``F`` None: 1.0 (no product); ``positive``: ``count_ok`` implies weights > 0 on both sides
    (unit weights)."""
    WR = Wk - WL
    num_ok = count_ok
    if num_ok is not None:
        num_ok[seg_end] = False  # the last entry of a segment has no next bin
        if not positive:
            num_ok &= WL > 0
            num_ok &= WR > 0
    gain = WL * impL
    impR *= WR  # impR is not read again
    gain += impR
    gain /= Wk
    np.subtract(impK, gain, out=gain)
    if F is not None:
        gain *= F
    if num_ok is None:  # every entry allowed but a segment's last
        gain[seg_end] = -np.inf
        return gain
    np.invert(num_ok, out=num_ok)
    np.copyto(gain, -np.inf, where=num_ok)
    return gain
