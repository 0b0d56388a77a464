"""Exact interventional TreeSHAP with a background sample [Lundberg et al.] (2020, "Independent" TreeSHAP).

The game of an instance ``x`` against one background row ``z`` is ``v(S) = f(x_S, z_~S)``: the hybrid
row takes the players in ``S`` from ``x`` and the others from ``z``; the explained value is its average
over the background, so ``base_value = mean_z f(z)`` and ``base_value + sum(phi) = f(x)`` exactly.

For one tree and one pair (x, z) the hybrid rows reach a leaf only along paths where every node sends
the hybrid the way ``x`` goes (its player is then "from x") or the way ``z`` goes ("from z"); a player
met again deeper on the path keeps its side.  With ``a`` players forced from ``x`` and ``b`` from ``z``
on a path to a leaf of value ``v``, the leaf's term is ``v`` exactly for the coalitions holding the ``a``
players and none of the ``b``, so each of the ``a`` players receives ``v (a-1)! b! / (a+b)!`` and each
of the ``b`` players ``-v a! (b-1)! / (a+b)!`` (players on which x and z agree are dummies).

Vectorisation: the state is a set of entries (instance, background row, node, players from x as a
bitmask over the path's "slots", players from z, weight), moved one tree level per step for all trees
and pairs at once; an entry splits in two where x and z part.  Missing values routed fractionally
(``core.tree``: C4.5 shares) are exact too: such a routing is an average over deterministic routings,
each node independently, and the game is linear in it, so a fractional step is an expansion over the
children with those shares as weights.

Players: ``groups`` maps each model column to a player (e.g. the one-hot columns of one original
column).  A group is ONE player of the game (not a sum of per-column values, which for trees is not the
Shapley value of the grouped game): the slot of a node is the slot of its column's group.
"""

from __future__ import annotations

import math

import numpy as np

from ..tree._nodes import ranges
from ._trees import LEAF, TreeArrays

__all__ = ["tree_shap", "tree_paths"]

_MAX_SLOTS = 63


def tree_paths(arrays: TreeArrays, groups: np.ndarray):
    """(slot of each internal node, player of each slot on the path to each node, number of slots)."""
    N = arrays.n_nodes
    kind, ptr = arrays.kind, arrays.child_ptr
    levels = [arrays.roots]
    while True:
        cur = levels[-1]
        inner = cur[kind[cur] != LEAF]
        if not inner.size:
            break
        cnt = ptr[inner + 1] - ptr[inner]
        e = np.repeat(ptr[inner], cnt) + ranges(cnt)
        levels.append(arrays.children[e])
    width = max(1, min(len(levels) - 1, int(groups.max()) + 1 if groups.size else 1))
    if width > _MAX_SLOTS:
        raise ValueError(f"a tree path uses more than {_MAX_SLOTS} distinct players; TreeSHAP does not apply")
    path = np.full((N, width), -1, dtype=np.intp)
    npath = np.zeros(N, dtype=np.intp)
    slot = np.zeros(N, dtype=np.intp)
    for cur in levels[:-1]:
        inner = cur[kind[cur] != LEAF]
        if not inner.size:
            continue
        g = groups[arrays.feature[inner]]
        match = path[inner] == g[:, None]
        has = match.any(axis=1)
        s = np.where(has, np.argmax(match, axis=1), npath[inner])
        slot[inner] = s
        cnt = ptr[inner + 1] - ptr[inner]
        e = np.repeat(ptr[inner], cnt) + ranges(cnt)
        ch = arrays.children[e]
        par = np.repeat(np.arange(inner.size), cnt)
        p = path[inner].copy()
        p[np.arange(inner.size), s] = g
        path[ch] = p[par]
        npath[ch] = (npath[inner] + ~has)[par]
    return slot, path, width


def _weights(max_players: int):
    """W1[a, b] = (a-1)! b! / (a+b)!, W2[a, b] = a! (b-1)! / (a+b)! (0 where undefined)."""
    n = max_players + 1
    W1 = np.zeros((n, n))
    W2 = np.zeros((n, n))
    for a in range(n):
        for b in range(n):
            if a + b == 0 or a + b > max_players:
                continue
            if a >= 1:
                W1[a, b] = 1.0 / (a * math.comb(a + b, a))
            if b >= 1:
                W2[a, b] = 1.0 / (b * math.comb(a + b, b))
    return W1, W2


def tree_shap(arrays: TreeArrays, X: np.ndarray, background: np.ndarray, groups=None, *,
              max_entries: int = 1 << 14, tables_min_rows: int = 32, per_reference: bool = False, ctx=None):
    """Interventional SHAP values of the tree model ``arrays``.

    Returns ``(phi, base)``: ``phi`` (n, n_players, n_outputs), ``base`` (n_outputs,) with
    ``base + phi.sum(1) == arrays.predict(X)`` up to rounding.  With ``per_reference`` ``phi`` is
    (n, n_background, n_players, n_outputs): the values of each pair's game, ``phi[i, r].sum(0) ==
    predict(X[i]) - predict(Z[r])`` (for a link function applied per reference, ``core.inspection.link``).
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    Z = np.ascontiguousarray(background, dtype=np.float64)
    F = arrays.n_features
    if X.ndim != 2 or X.shape[1] != F or Z.ndim != 2 or Z.shape[1] != F:
        raise ValueError(f"X and background must have {F} columns")
    if Z.shape[0] == 0:
        raise ValueError("the background sample is empty")
    groups = np.arange(F, dtype=np.intp) if groups is None else np.asarray(groups, dtype=np.intp)
    G = int(groups.max()) + 1 if groups.size else 0
    key = (id(arrays), groups.tobytes())
    paths = _PATHS.get(key)
    if paths is None or paths[0] is not arrays:
        paths = (arrays, *tree_paths(arrays, groups))
        _PATHS.clear()
        _PATHS[key] = paths
    _, slot, path, S = paths
    W1, W2 = _weights(S)
    n, m = X.shape[0], Z.shape[0]
    V = arrays.value.shape[1]
    T = arrays.roots.shape[0]
    phi = np.zeros((n, m, G, V) if per_reference else (n, G, V))
    zkey = (id(arrays), Z.shape, hash(Z.tobytes()))
    hit = _BASE.get(zkey)
    if hit is None or hit[0] is not arrays:
        if len(_BASE) > 8:
            _BASE.clear()
        hit = _BASE[zkey] = [arrays, arrays.predict(Z).mean(axis=0), None]
    base = hit[1].copy()
    rows_per_chunk = max(1, max_entries // max(1, m * T))
    fast = _fast_tables(arrays, slot, S) if S <= 32 and not (arrays.kind == 2).any() else None
    z_nan = bool(np.isnan(Z).any())
    if (not per_reference and fast is not None and not z_nan and S <= _LEAF_MAX_SLOTS and n >= tables_min_rows
            and not np.isnan(X).any()):
        phi = tree_shap_tables(arrays, X, Z, slot, path, S, G)
        phi /= m
        return phi, base
    DZ = None
    for a in range(0, n, rows_per_chunk):
        b = min(n, a + rows_per_chunk)
        if fast is not None and not z_nan and not np.isnan(X[a:b]).any():
            if DZ is None:
                if hit[2] is None:  # the background's direction at every node, kept with the base value
                    hit[2] = (Z[:, fast[5]] > fast[1][None, :]).ravel()
                DZ = hit[2]
            phi[a:b] = _chunk_fast(arrays, fast, X[a:b], Z, path, S, G, W1, W2, DZ, pairs=per_reference)
        else:
            phi[a:b] = _chunk(arrays, X[a:b], Z, slot, path, S, G, W1, W2, pairs=per_reference)
        if ctx is not None:
            ctx.step(b, n)
    if not per_reference:
        phi /= m
    return phi, base


_PATHS: dict = {}
_BASE: dict = {}  # (arrays, background) -> mean output over the background
_ONE = np.uint64(1)


def _fast_tables(A: TreeArrays, slot, S):
    """Per-node tables of the deterministic numeric fast path (binary nodes, no missing values)."""
    cached = _FAST.get(id(A))
    if cached is not None and cached[0] is A and cached[1] is slot:
        return cached[2]
    N = A.n_nodes
    ids = np.arange(N, dtype=np.int32)
    inner = A.kind != LEAF
    ch2 = np.empty((N, 2), dtype=np.int32)
    ch2[:, 0] = ids
    ch2[:, 1] = ids
    ch2[inner, 0] = A.children[A.child_ptr[:-1][inner]]
    ch2[inner, 1] = A.children[A.child_ptr[:-1][inner] + 1]
    thr = np.where(inner, A.threshold, np.inf)
    half = 16 if S <= 16 else 32
    dt = np.uint32 if half == 16 else np.uint64
    bx = np.where(inner, np.left_shift(1, slot.astype(np.uint64)), 0).astype(dt)
    bz = (bx.astype(np.uint64) << np.uint64(half)).astype(dt)
    tables = (ch2.ravel(), thr, bx, bz, bx | bz, A.feature.astype(np.int32), half, dt)
    _FAST.clear()
    _FAST[id(A)] = (A, slot, tables)
    return tables


_FAST: dict = {}


def _chunk_fast(A: TreeArrays, tables, X, Z, path, S, G, W1, W2, DZ=None, pairs=False):
    """``_chunk`` for numeric splits and rows without missing values: one bitmask per entry (players from
    x in the low half, from z in the high half), two children per node, 32-bit indices."""
    ch2, thr, bxt, bzt, bxzt, feat, half, dt = tables
    n, m = X.shape[0], Z.shape[0]
    T = A.roots.shape[0]
    V = A.value.shape[1]
    N = A.n_nodes
    # each row's direction at every node, computed once (a row of N booleans per instance / background row)
    DX = (X[:, feat] > thr[None, :]).ravel()
    if DZ is None:
        DZ = (Z[:, feat] > thr[None, :]).ravel()
    it = np.int32 if max(n, m) * N < 2**31 else np.int64
    xo = np.repeat(np.arange(n, dtype=it) * N, m * T)  # offsets of the rows in DX / DZ
    zo = np.tile(np.repeat(np.arange(m, dtype=it) * N, T), n)
    is_leaf = A.kind == LEAF
    node = np.tile(A.roots.astype(np.int32), n * m)
    mask = np.zeros(node.size, dtype=dt)
    zero = dt(0)
    sh = dt(half)
    done_x, done_z, done_n, done_m = [], [], [], []
    while node.size:
        leaf = is_leaf[node]
        if leaf.any():
            done_x.append(xo[leaf])
            done_z.append(zo[leaf])
            done_n.append(node[leaf])
            done_m.append(mask[leaf])
            keep = ~leaf
            xo, zo, node, mask = xo[keep], zo[keep], node[keep], mask[keep]
            if not node.size:
                break
        px = DX[xo + node]
        pz = DZ[zo + node]
        bxn = bxt[node]
        bzn = bxn << sh
        inz = (mask & bzn) != zero
        split = (px != pz) & ((mask & (bxn | bzn)) == zero)
        prim = np.where(inz, pz, px)
        node2 = node + node
        if split.any():
            si = np.flatnonzero(split)
            ch_z = ch2[node2[si] + pz[si]]
            mz = mask[si] | bzn[si]
            mask = mask | (bxn * split.astype(dt))
            node = ch2[node2 + prim]
            xo = np.concatenate([xo, xo[si]])
            zo = np.concatenate([zo, zo[si]])
            node = np.concatenate([node, ch_z])
            mask = np.concatenate([mask, mz])
        else:
            node = ch2[node2 + prim]
    P = n * m if pairs else n  # explained units: instances, or (instance, reference) pairs
    acc = np.zeros((P * G, V))
    if done_x:
        hx = np.concatenate(done_x) // N
        if pairs:
            hx = hx * m + np.concatenate(done_z) // N
        hn = np.concatenate(done_n)
        hm = np.concatenate(done_m).astype(np.uint64)
        hit = hm != 0
        hx, hn, hm = hx[hit].astype(np.intp), hn[hit], hm[hit]
        low = np.uint64((1 << half) - 1)
        a_ = np.bitwise_count(hm & low)
        b_ = np.bitwise_count(hm >> np.uint64(half))
        cx, cz = W1[a_, b_], -W2[a_, b_]
        base_key = hx * G
        vals = A.value[hn]  # (hits, V)
        hsh = np.uint64(half)
        for s_ in range(S):
            bit = np.uint64(1 << s_)
            c = np.where((hm & bit) != 0, cx, np.where((hm & (bit << hsh)) != 0, cz, 0.0))
            on = np.flatnonzero(c)
            if not on.size:
                continue
            k = base_key[on] + path[hn[on], s_]
            for v in range(V):
                acc[:, v] += np.bincount(k, weights=c[on] * vals[on, v], minlength=P * G)
    return acc.reshape((n, m, G, V) if pairs else (n, G, V))


def _chunk(A: TreeArrays, X, Z, slot, path, S, G, W1, W2, pairs=False):
    n, m = X.shape[0], Z.shape[0]
    T = A.roots.shape[0]
    V = A.value.shape[1]
    kind, feat, ptr, children, mfrac = A.kind, A.feature, A.child_ptr, A.children, A.miss_frac
    Xf, Zf = X.ravel(), Z.ravel()
    F = X.shape[1]
    E = n * m * T
    ex = np.repeat(np.arange(n, dtype=np.intp), m * T)
    ez = np.tile(np.repeat(np.arange(m, dtype=np.intp), T), n)
    node = np.tile(A.roots, n * m)
    mx = np.zeros(E, dtype=np.uint64)
    mz = np.zeros(E, dtype=np.uint64)
    na = np.zeros(E, dtype=np.int8)
    nb = np.zeros(E, dtype=np.int8)
    w = None  # weights appear with the first fractional step
    keys, coefs, lnodes = [], [], []
    while ex.size:
        leaf = kind[node] == LEAF
        if leaf.any():
            hit = leaf & ((na > 0) | (nb > 0))
            if hit.any():
                a_, b_ = na[hit], nb[hit]
                cx, cz = W1[a_, b_], -W2[a_, b_]
                if w is not None:
                    cx = cx * w[hit]
                    cz = cz * w[hit]
                hx, hz, he, hn = mx[hit], mz[hit], ex[hit], node[hit]
                if pairs:
                    he = he * m + ez[hit]
                for s in range(S):
                    sh = np.uint64(s)
                    bx = ((hx >> sh) & _ONE).astype(bool)
                    bz = ((hz >> sh) & _ONE).astype(bool)
                    if bx.any():
                        keys.append(he[bx] * G + path[hn[bx], s])
                        coefs.append(cx[bx])
                        lnodes.append(hn[bx])
                    if bz.any():
                        keys.append(he[bz] * G + path[hn[bz], s])
                        coefs.append(cz[bz])
                        lnodes.append(hn[bz])
            keep = ~leaf
            ex, ez, node, mx, mz, na, nb = ex[keep], ez[keep], node[keep], mx[keep], mz[keep], na[keep], nb[keep]
            if w is not None:
                w = w[keep]
            if not ex.size:
                break
        f = feat[node]
        px = A.route(node, Xf[ex * F + f])
        pz = A.route(node, Zf[ez * F + f])
        bit = _ONE << slot[node].astype(np.uint64)
        inx = (mx & bit) != 0
        inz = (mz & bit) != 0
        free = ~(inx | inz)
        det = np.where(inx, px >= 0, np.where(inz, pz >= 0, (px >= 0) & (pz >= 0)))
        split = free & det & (px != pz)
        prim = np.where(inz, pz, px)
        if det.all():
            d = slice(None)
            first = ptr[node]
        else:
            d = det
            first = ptr[node[d]]
        sp = split[d]
        parts = [(ex[d], ez[d], children[first + prim[d]], mx[d] | np.where(sp, bit[d], np.uint64(0)), mz[d],
                  na[d] + sp, nb[d], None if w is None else w[d])]
        if sp.any():
            s_idx = np.flatnonzero(split)
            parts.append((ex[s_idx], ez[s_idx], children[ptr[node[s_idx]] + pz[s_idx]], mx[s_idx],
                          mz[s_idx] | bit[s_idx], na[s_idx], nb[s_idx] + 1, None if w is None else w[s_idx]))
        if not det.all():
            if w is None:
                w = np.ones(ex.size)
                parts = [p[:-1] + (np.ones(p[0].size),) for p in parts]
            parts.append(_expand(np.flatnonzero(~det), ex, ez, node, mx, mz, na, nb, w, px, pz, inx, inz, bit,
                                 ptr, children, mfrac))
        if len(parts) == 1:
            ex, ez, node, mx, mz, na, nb, w = parts[0]
        else:
            cols = list(zip(*parts, strict=True))
            ex, ez, node, mx, mz, na, nb = (np.concatenate(c) for c in cols[:7])
            w = None if w is None else np.concatenate(cols[7])
            na = na.astype(np.int8, copy=False)
            nb = nb.astype(np.int8, copy=False)
    P = n * m if pairs else n
    acc = np.zeros((P * G, V))
    if keys:
        k = np.concatenate(keys)
        c = np.concatenate(coefs)
        ln = np.concatenate(lnodes)
        for v in range(V):
            acc[:, v] = np.bincount(k, weights=c * A.value[ln, v], minlength=P * G)
    return acc.reshape((n, m, G, V) if pairs else (n, G, V))


def _expand(idx, ex, ez, node, mx, mz, na, nb, w, px, pz, inx, inz, bit, ptr, children, mfrac):
    """Entries whose step needs fractional routing: one entry per (child, side) with its weight."""
    nd = node[idx]
    cnt = ptr[nd + 1] - ptr[nd]
    e = np.repeat(ptr[nd], cnt) + ranges(cnt)
    pos = ranges(cnt)
    rep = np.repeat(idx, cnt)
    pxr, pzr = px[rep], pz[rep]
    wx = np.where(pxr >= 0, (pxr == pos).astype(float), mfrac[e])
    wz = np.where(pzr >= 0, (pzr == pos).astype(float), mfrac[e])
    ch = children[e]
    ix, iz = inx[rep], inz[rep]
    fr = ~(ix | iz)
    zero = np.uint64(0)
    b = bit[rep]
    # variants: follow (x-side or z-side or free agreement), x-assigned, z-assigned
    w_follow = np.where(ix, wx, np.where(iz, wz, wx * wz))
    w_xa = np.where(fr, wx * (1.0 - wz), 0.0)
    w_za = np.where(fr, wz * (1.0 - wx), 0.0)
    out = []
    for ww, addx, addz in ((w_follow, False, False), (w_xa, True, False), (w_za, False, True)):
        keep = ww > 0
        r = rep[keep]
        out.append((ex[r], ez[r], ch[keep], mx[r] | (b[keep] if addx else zero), mz[r] | (b[keep] if addz else zero),
                    na[r] + (1 if addx else 0), nb[r] + (1 if addz else 0), w[r] * ww[keep]))
    cols = list(zip(*out, strict=True))
    return tuple(np.concatenate(c) for c in cols)


# ----------------------------------------------------------------------------- leaf tables (large batches)
# The same values, computed leaf by leaf.  For a leaf with path players P, let F_x (F_z) be the players on
# whose path nodes x (z) fails.  The pair reaches the leaf iff F_x and F_z are disjoint; then the b = |F_x|
# players of F_x come from z and the a = |F_z| players of F_z from x.  Summed over the background, x gets
#   -v H(F_x) for j in F_x,   H(u) = sum_{z: F_z & u = 0} W2(|F_z|, |u|),
#   +v K(F_x, i) for i not in F_x,   K(u, i) = sum_{z: F_z & u = 0, i in F_z} W1(|F_z|, |u|).
# H and K are tabulated over all u (2^m per leaf) from the distinct background masks, once per call; then
# each instance costs one table look-up per (leaf, path slot): fast for many rows, costly for one.
_LEAF_MAX_SLOTS = 10


def _leaf_paths(A: TreeArrays, slot):
    """Per leaf: the path nodes' feature, threshold, required direction and slot (padded to the depth)."""
    cached = _LEAVES.get(id(A))
    if cached is not None and cached[0] is A and cached[1] is slot:
        return cached[2]
    N = A.n_nodes
    inner = np.flatnonzero(A.kind != LEAF)
    parent = np.full(N, -1, dtype=np.intp)
    side = np.zeros(N, dtype=np.int8)
    first = A.child_ptr[inner]
    parent[A.children[first]] = inner
    parent[A.children[first + 1]] = inner
    side[A.children[first + 1]] = 1
    leaves = np.flatnonzero(A.kind == LEAF)
    cols_f, cols_t, cols_d, cols_s = [], [], [], []
    cur = leaves.copy()
    while True:
        par = parent[cur]
        if (par < 0).all():
            break
        ok = par >= 0
        p = np.where(ok, par, 0)
        cols_f.append(np.where(ok, A.feature[p], 0))
        cols_t.append(np.where(ok, A.threshold[p], np.inf))
        cols_d.append(np.where(ok, side[cur], 0))  # padding: x <= inf never fails direction 0
        cols_s.append(np.where(ok, slot[p], 0))
        cur = np.where(ok, par, cur)
    D = len(cols_f)
    if D == 0:
        e = (leaves.size, 0)
        out = (leaves, np.zeros(e, np.intp), np.zeros(e), np.zeros(e, bool), np.zeros(e, np.uint16))
    else:
        out = (leaves, np.stack(cols_f, 1), np.stack(cols_t, 1), np.stack(cols_d, 1).astype(bool),
               (np.uint16(1) << np.stack(cols_s, 1).astype(np.uint16)))
    _LEAVES.clear()
    _LEAVES[id(A)] = (A, slot, out)
    return out


_LEAVES: dict = {}


def _fail_masks(X, feat, thr, dirn, bits):
    """(n, L) uint16: bit s set where the row fails a path node of slot s."""
    fails = (X[:, feat] > thr) != dirn  # (n, L, D)
    return np.bitwise_or.reduce(np.where(fails, bits, np.uint16(0)), axis=2)


def tree_shap_tables(arrays: TreeArrays, X: np.ndarray, Z: np.ndarray, slot, path, S: int, G: int,
                     table_budget: int = 1 << 22, row_budget: int = 1 << 23) -> np.ndarray:
    """Sum over the background of the pair values (divide by len(Z)); numeric splits, no missing values."""
    leaves, feat, thr, dirn, bits = _leaf_paths(arrays, slot)
    W1, W2 = _weights(S)
    n = X.shape[0]
    V = arrays.value.shape[1]
    U = 1 << S
    L = leaves.size
    full = np.zeros(L, dtype=np.int64)
    for c in range(bits.shape[1]):
        full |= bits[:, c].astype(np.int64)
    pc = np.bitwise_count(np.arange(U, dtype=np.uint16)).astype(np.intp)
    # subsets of each u (as bit positions) via a table of the set bits of every mask
    setbits = np.unpackbits(np.arange(U, dtype=np.uint16).view(np.uint8).reshape(-1, 2), axis=1,
                            bitorder="little").view(bool)[:, :S]
    lv_path = np.where(path[leaves, :S] >= 0, path[leaves, :S], 0)
    vals = arrays.value[leaves]
    acc = np.zeros((n * G, V))
    per_leaf = U * (S + 1)
    step = max(1, table_budget // per_leaf)
    for a in range(0, L, step):
        b = min(L, a + step)
        Lg = b - a
        FZ = _fail_masks(Z, feat[a:b], thr[a:b], dirn[a:b], bits[a:b]).astype(np.int64)  # (M, Lg)
        key, cnt = np.unique((np.arange(Lg)[None, :] * U + FZ).ravel(), return_counts=True)
        lw, w = key // U, key % U
        comp = full[a:b][lw] & ~w
        aw = pc[w]
        hk, hw, kk, kw = [], [], [], []
        # enumerate the subsets u of comp, grouped by |comp|
        kc = pc[comp]
        for k in np.unique(kc):
            sel = np.flatnonzero(kc == k)
            pos = np.nonzero(setbits[comp[sel]])[1].reshape(sel.size, k)  # bit positions of comp
            js = np.arange(1 << k)
            jb = (js[:, None] >> np.arange(k)[None, :]) & 1  # (2^k, k)
            u = (jb[None, :, :] << pos[:, None, :]).sum(axis=2)  # (rows, 2^k)
            rows = np.repeat(sel, 1 << k)
            u = u.ravel()
            base_key = lw[rows] * U + u
            bu = pc[u]
            hk.append(base_key)
            hw.append(cnt[rows] * W2[aw[rows], bu])
            kw_ = cnt[rows] * W1[aw[rows], bu]
            r_, i_ = np.nonzero(setbits[w[rows]])  # the players of F_z: one K entry each
            kk.append(base_key[r_] * S + i_)
            kw.append(kw_[r_])
        H = np.bincount(np.concatenate(hk), weights=np.concatenate(hw), minlength=Lg * U)
        K = np.bincount(np.concatenate(kk), weights=np.concatenate(kw), minlength=Lg * U * S)
        K = K.reshape(Lg * U, S)
        rstep = max(1, row_budget // max(1, Lg * max(1, feat.shape[1])))
        leaf_ix = np.arange(Lg)
        for r0 in range(0, n, rstep):
            r1 = min(n, r0 + rstep)
            FX = _fail_masks(X[r0:r1], feat[a:b], thr[a:b], dirn[a:b], bits[a:b]).astype(np.intp)  # (nr, Lg)
            idx = leaf_ix[None, :] * U + FX
            inu = setbits[FX]  # (nr, Lg, S)
            coef = np.where(inu, -H[idx][:, :, None], K[idx])  # (nr, Lg, S)
            keys = (np.arange(r0, r1)[:, None, None] * G + lv_path[a:b][None, :, :]).ravel()
            for v in range(V):
                acc[:, v] += np.bincount(keys, weights=(coef * vals[a:b, v][None, :, None]).ravel(),
                                         minlength=n * G)
    return acc.reshape(n, G, V)
