"""Split criteria: node impurities of weighted totals (gini, entropy / gain ratio, squared error) and the
absolute-error impurities (weighted medians), per node and per candidate split.

Classification totals are weighted class counts; regression totals are (W, Wy, Wy^2).  Split quality,
with the known-weight fraction F = W_known / W_node (C4.5, [Passerini §2.3.4]):
    gain = F * (I(S_known) - sum_v W_v / W_known * I(S_v)).
"""

from __future__ import annotations

import numpy as np
from scipy.special import xlogy

__all__ = ["impurity", "squared_error_impurity", "xlog2x", "weighted_median_dev", "mae_entry_impurities",
           "REGRESSION_CRITERIA"]

_LN2 = float(np.log(2.0))
REGRESSION_CRITERIA = ("squared_error", "absolute_error")


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
            return squared_error_impurity(stats[..., 0], stats[..., 1], stats[..., 2])
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


def squared_error_impurity(W, Wy, Wy2) -> np.ndarray:
    """Weighted variance (Wy2 - Wy^2 / W) / W of totals given as three arrays (0 where W <= 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = Wy**2
        out /= W
        np.subtract(Wy2, out, out=out)
        out /= W
        np.maximum(out, 0.0, out=out)
        np.copyto(out, 0.0, where=~(W > 0))  # (faster than a boolean-mask assignment)
    return out


def xlog2x(p):
    return xlogy(p, p) / _LN2


def weighted_median_dev(yv: np.ndarray, w: np.ndarray):
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


def mae_entry_impurities(nodes, starts, r_s, r_w, codes, y_raw, feats, enode, eslot, code, ecat, known,
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
        _, devK = weighted_median_dev(ys, ws)
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
