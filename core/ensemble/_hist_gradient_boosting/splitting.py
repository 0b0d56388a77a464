"""Split finding on cumulative histograms: numerical splits of one node or of a pair of siblings at once
(``SplitFinder``), category-subset splits (``best_categorical_split``) and the blocked cumulative sum.

For a node with gradient sum ``G`` and hessian sum ``H`` (second-order Taylor expansion of the loss), the
loss reduction of a split into ``L``/``R`` is (Chen & Guestrin 2016; scikit-learn's HistGradientBoosting)::

    gain  = G_L^2 / (H_L + l2) + G_R^2 / (H_R + l2) - G^2 / (H + l2)

(the factor 1/2 is dropped, as in scikit-learn; it does not change the argmax).  Candidates of all features
and bins of both children are scored at once, once with the missing-value bin sent right and once sent left;
the better direction is kept.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SplitFinder", "best_categorical_split", "cumsum_bins", "MIN_HESSIAN"]

MIN_HESSIAN = 1e-3  # scikit-learn's min_hessian_to_split

_BLOCK = 16
_TRIU = np.triu(np.ones((_BLOCK, _BLOCK)))
_STRICT_UPPER: dict = {}


def cumsum_bins(hist, out=None):
    """Inclusive cumulative sums over the last (bin) axis of a histogram array.

    ``np.cumsum`` is one sequential add chain; for bin counts that are multiples of
    16 a blocked version is ~2x faster: one (rows * n_blocks, 16) @ (16, 16)
    upper-triangular product gives the sums within blocks, one (rows, n_blocks)
    @ strictly-upper-triangular product the block offsets.  Callers pass contiguous
    histograms (``HistogramBuilder`` writes them so); a strided view is copied first.
    """
    n_bins = hist.shape[-1]
    if n_bins % _BLOCK or n_bins < 4 * _BLOCK:
        return np.cumsum(hist, axis=-1, out=out)
    rows = hist.size // n_bins
    n_blocks = n_bins // _BLOCK
    if out is None:
        out = np.empty(hist.shape)
    hist = np.ascontiguousarray(hist)
    np.matmul(hist.reshape(-1, _BLOCK), _TRIU, out=out.reshape(-1, _BLOCK))
    su = _STRICT_UPPER.get(n_blocks)
    if su is None:
        su = _STRICT_UPPER[n_blocks] = np.triu(np.ones((n_blocks, n_blocks)), 1)
    cs = out.reshape(rows, n_blocks, _BLOCK)
    offsets = cs[:, :, -1] @ su  # (rows, n_blocks): sums of the blocks before each block
    cs += offsets[:, :, None]
    return out


class SplitFinder:
    """Best split of one node or of a pair of sibling nodes from their cumulative histograms.

    ``cum[..., b]`` (shape (k, 3, F, n_bins), k <= 2) holds the sums of g, h and
    counts over bins ``<= b`` (the last bin is the missing-value bin).  Cumulative
    sums are linear, so a sibling's ``cum`` is ``parent - child`` like its
    histogram, and only the histogrammed (smaller) child needs a cumulative sum.
    All nodes, features and bins are scored at once per missing-value direction,
    with preallocated scratch arrays (one ufunc call per step, no temporaries):
    ``gain = G_L^2 / (H_L + l2) + G_R^2 / (H_R + l2)`` where the counts allow
    ``min_samples_leaf`` rows on both sides (and, if ``check_hessian``, both
    hessian sums reach ``min_hessian_to_split``) and the bin is a split point
    (``invalid_bins`` (F, n_bins) masks those that are not; or None).

    Candidates are scored over all n_bins columns (contiguous arrays): the last
    column (left = every row) always fails the count test ``C_L <= C - min_samples_leaf``.
    Left child = non-missing bins <= b (plus the missing bin if missing_left).
    """

    def __init__(self, n_features, n_bins, invalid_bins, l2, min_samples_leaf, check_hessian,
                 may_have_missing=True):
        shape = (2, n_features, n_bins)
        gain, t1 = np.empty(shape), np.empty(shape)
        bad, bad2 = np.empty(shape, dtype=bool), np.empty(shape, dtype=bool)
        # scratch views for k = 1 and k = 2 nodes, sliced once (per-call Python overhead is ~half of a call)
        self._scratch = [None] + [(gain[:k], t1[:k], bad[:k], bad2[:k], gain[:k].reshape(k, -1))
                                  for k in (1, 2)]
        # per-node G, H and C - min_samples_leaf of a pair, broadcast against (2, F, n_bins)
        self._pair = np.empty((3, 2, 1, 1))
        self._pair_flat = self._pair.reshape(-1)
        self.n_bins = n_bins
        self.invalid_bins = invalid_bins
        self.l2 = l2
        self.min_samples_leaf = min_samples_leaf
        self.check_hessian = check_hessian
        # False when no training row has a missing value: no node has any, so the missing-left
        # direction and the per-feature missing counts are skipped
        self.may_have_missing = may_have_missing

    def __call__(self, cum, G, H, C):
        """A list (one per node) of ``(gain, feature, bin, missing_left, GL, HL, CL, None)`` or None.

        Call under ``np.errstate(divide="ignore", invalid="ignore")`` (the grower holds it for a whole
        tree: entering it costs about as much as a ufunc call): bins with no rows on a side divide by
        zero, and are masked."""
        k = len(G)
        l2, msl = self.l2, self.min_samples_leaf
        if k == 1:
            Gk, Hk, Cmax = G[0], H[0], C[0] - msl
        else:
            v = self._pair_flat
            v[0], v[1], v[2], v[3], v[4], v[5] = G[0], G[1], H[0], H[1], C[0] - msl, C[1] - msl
            Gk, Hk, Cmax = self._pair
        cm = None  # (k, F) missing counts
        if self.may_have_missing:
            cm = cum[:, 2, :, -1] - cum[:, 2, :, -2]
            if not cm.any():
                cm = None
        best = [None] * k
        arg = self._score(cum, Gk, Hk, Cmax, k)
        flat = self._scratch[k][4]
        for i in range(k):
            j = arg[i]
            gk = flat.item(i, j) - _parent_gain(G[i], H[i], l2)
            if gk > 0:
                f, b = divmod(j, self.n_bins)
                cl = cum.item(i, 2, f, b)
                if cm is None or cm.item(i, f) == 0:
                    # no missing values here: missing go to the child with more samples
                    miss_left = cl >= C[i] - cl
                else:
                    miss_left = False
                best[i] = (gk, f, b, miss_left, cum.item(i, 0, f, b), cum.item(i, 1, f, b), int(cl), None)
        if cm is not None:  # the missing values' bin sent left: every cumulative sum plus that bin's sums
            has_missing = cm.any(axis=1)
            missing = cum[..., -1] - cum[..., -2]  # (k, 3, F): sums over the missing bin
            c = cum + missing[..., None]
            arg = self._score(c, Gk, Hk, Cmax, k)
            for i in range(k):
                if not has_missing[i]:
                    continue
                j = arg[i]
                gk = flat.item(i, j) - _parent_gain(G[i], H[i], l2)
                if gk > 0 and (best[i] is None or gk > best[i][0]):
                    f, b = divmod(j, self.n_bins)
                    best[i] = (gk, f, b, True, c.item(i, 0, f, b), c.item(i, 1, f, b), int(c.item(i, 2, f, b)),
                               None)
        return best

    def _score(self, c, Gk, Hk, Cmax, k):
        """Gains of all candidates of cumulative sums ``c`` (k, 3, F, n_bins) into the scratch ``gain``
        (-inf where not allowed); returns each node's best flat (feature * n_bins + bin) index."""
        gain, t1, bad, bad2, flat = self._scratch[k]
        msl, l2 = self.min_samples_leaf, self.l2
        GL, HL, CL = c[:, 0], c[:, 1], c[:, 2]
        np.less(CL, msl, out=bad)
        np.greater(CL, Cmax, out=bad2)
        bad |= bad2
        np.subtract(Hk, HL, out=t1)  # H_R
        if self.check_hessian:  # min(H_L, H_R) < min_hessian_to_split
            np.minimum(HL, t1, out=gain)
            np.less(gain, MIN_HESSIAN, out=bad2)
            bad |= bad2
        if self.invalid_bins is not None:
            bad |= self.invalid_bins
        np.subtract(Gk, GL, out=gain)  # G_R
        np.square(gain, out=gain)
        if l2:
            t1 += l2
        gain /= t1  # G_R^2 / (H_R + l2)
        np.square(GL, out=t1)
        if l2:
            t1 /= HL + l2
        else:
            t1 /= HL
        gain += t1
        np.copyto(gain, -np.inf, where=bad)
        return flat.argmax(axis=1).tolist()


def _parent_gain(G, H, l2):
    return G * G / (H + l2) if H + l2 > 0 else 0.0


_CAT_SMOOTH = 10.0  # scikit-learn's smoothing of G/H when ordering categories


def best_categorical_split(hist, G, H, C, features, missing_bin, l2, min_samples_leaf, best):
    """Improve ``best`` with category-subset splits of the categorical ``features``.

    Categories present in the node (the missing bin counts as one more category)
    are ordered by ``G_c / (H_c + 10)``; the left child is a prefix of that order
    (Fisher 1958; LightGBM / scikit-learn), scored with the same gain formula.
    Returns the split with a boolean ``cat_set`` over bins 0..missing_bin.
    """
    parent = G * G / (H + l2) if H + l2 > 0 else 0.0
    for f in features:
        present = np.flatnonzero(hist[2, f] > 0)
        if len(present) < 2:
            continue
        Gc, Hc, Cc = hist[0, f, present], hist[1, f, present], hist[2, f, present]
        order = np.argsort(Gc / (Hc + _CAT_SMOOTH), kind="stable")
        GL = np.cumsum(Gc[order])[:-1]
        HL = np.cumsum(Hc[order])[:-1]
        CL = np.cumsum(Cc[order])[:-1]
        HR = H - HL
        ok = (CL >= min_samples_leaf) & (C - CL >= min_samples_leaf)
        ok &= (HL >= MIN_HESSIAN) & (HR >= MIN_HESSIAN)
        if not ok.any():
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = GL * GL / (HL + l2) + (G - GL) ** 2 / (HR + l2) - parent
        gain = np.where(ok, gain, -np.inf)
        j = int(np.argmax(gain))
        if gain[j] > 0 and (best is None or gain[j] > best[0]):
            cat_set = np.zeros(missing_bin + 1, dtype=bool)
            cat_set[present[order[: j + 1]]] = True
            if hist[2, f, missing_bin] == 0:
                # no missing value here: NaN / unseen categories follow the larger child
                cat_set[missing_bin] = bool(CL[j] >= C - CL[j])
            best = (float(gain[j]), int(f), 0, bool(cat_set[missing_bin]), float(GL[j]), float(HL[j]),
                    int(CL[j]), cat_set)
    return best
