"""Clustering metrics ([Passerini §14.4], [Arias §3.3]).

* ``inertia``: SSE = sum_i w_i ||x_i - mu_{c_i}||^2 ([Passerini §14.1], [da Silva Neto §3.1]).
* ``silhouette_samples`` / ``silhouette_score``: s(i) = (b(i) - a(i)) / max(a(i), b(i)),
  a(i) = mean distance to the OTHER members of i's cluster (|C| - 1 in the denominator,
  as scikit-learn; [Passerini §14.4] divides by |C|, which counts i itself: we depart from it),
  b(i) = smallest mean distance to another cluster; s(i) = 0 for singleton clusters.
  Computed in row chunks of bounded memory (``chunk_bytes``).
* ``calinski_harabasz_score``: CH = [(N-K)/(K-1)] * B / W ([Arias §3.3]).
* ``adjusted_rand_score``: pair-counting ARI (Hubert & Arabie) via the pair confusion matrix.
* ``normalized_mutual_info_score``: MI / mean(H(U), H(V)) (arithmetic mean, as scikit-learn).
* ``elbow_table``: k-means for each k with inertia, silhouette and CH ([Passerini §14.4] elbow/silhouette).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

__all__ = [
    "inertia",
    "sse",
    "silhouette_samples",
    "silhouette_score",
    "calinski_harabasz_score",
    "adjusted_rand_score",
    "normalized_mutual_info_score",
    "mutual_info_score",
    "contingency_matrix",
    "elbow_table",
]

_CHUNK_BYTES = 32 * 2**20


def _codes(labels):
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be 1-dimensional, got shape {labels.shape}")
    _, codes = np.unique(labels, return_inverse=True)
    return codes.reshape(-1)


def inertia(X, labels, centers=None, sample_weight=None) -> float:
    """Sum of (weighted) squared Euclidean distances to the cluster means (or given ``centers``)."""
    X = np.asarray(X, dtype=np.float64)
    codes = _codes(labels) if centers is None else np.asarray(labels, dtype=np.intp)
    w = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if centers is None:
        k = codes.max() + 1
        tot = np.bincount(codes, weights=w, minlength=k)
        centers = np.stack(
            [np.bincount(codes, weights=w * X[:, j], minlength=k) for j in range(X.shape[1])], 1
        )
        centers = centers / np.maximum(tot, np.finfo(float).tiny)[:, None]
    diff = X - np.asarray(centers)[codes]
    return float(np.einsum("ij,ij,i->", diff, diff, w))


sse = inertia


def _distance_chunk(X, Y, metric, x_sq=None, y_sq=None):
    if metric == "euclidean":
        # one GEMM gives ||x||^2 + ||y||^2 - 2 x.y: X and Y are augmented with [1, ||.||^2]
        D = X @ Y.T
        np.maximum(D, 0.0, out=D)
        return np.sqrt(D, out=D)
    return cdist(X, Y, metric)


def silhouette_samples(X, labels, *, metric="euclidean", chunk_bytes=_CHUNK_BYTES):
    """Silhouette coefficient of every sample, computed in chunks of at most ``chunk_bytes``.

    ``metric``: "euclidean" (dot-product expansion, as scikit-learn), "precomputed"
    (X is a square distance matrix) or any ``scipy.spatial.distance.cdist`` metric.
    """
    codes = _codes(labels)
    n = codes.shape[0]
    k = int(codes.max()) + 1 if n else 0
    if not 2 <= k <= n - 1:
        raise ValueError(f"number of labels is {k}; valid values are 2 to n_samples - 1 ({n - 1})")
    X = np.asarray(X, dtype=np.float64)
    if X.shape[0] != n:
        raise ValueError(f"X has {X.shape[0]} samples but labels has {n}")
    counts = np.bincount(codes, minlength=k).astype(np.float64)
    onehot = np.zeros((n, k))
    onehot[np.arange(n), codes] = 1.0
    x_sq = None
    if metric == "euclidean":
        x_sq = np.einsum("ij,ij->i", X, X)
        Xa = np.hstack([X, np.ones((n, 1)), x_sq[:, None]])  # rows [x, 1, ||x||^2]
        Ya = np.hstack([-2.0 * X, x_sq[:, None], np.ones((n, 1))])  # rows [-2y, ||y||^2, 1]
    rows = max(1, int(chunk_bytes // (8 * max(n, 1))))
    a = np.empty(n)
    b = np.empty(n)
    for s in range(0, n, rows):
        e = min(n, s + rows)
        if metric == "precomputed":
            D = X[s:e]
        else:
            D = _distance_chunk(Xa[s:e], Ya, metric) if metric == "euclidean" else cdist(X[s:e], X, metric)
            if metric == "euclidean":
                D[np.arange(e - s), np.arange(s, e)] = 0.0  # exact zero self-distance (as sklearn)
        sums = D @ onehot  # (rows, k) summed distances to each cluster
        own = codes[s:e]
        r = np.arange(e - s)
        a[s:e] = sums[r, own]
        sums /= counts
        sums[r, own] = np.inf
        b[s:e] = sums.min(axis=1)
    denom = counts[codes] - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        a = a / denom
        sil = (b - a) / np.maximum(a, b)
    sil[denom == 0] = 0.0  # singleton clusters score 0
    return np.nan_to_num(sil)


def silhouette_score(X, labels, *, metric="euclidean", sample_size=None, random_state=None,
                     chunk_bytes=_CHUNK_BYTES) -> float:
    """Mean silhouette coefficient (optionally on a random subsample of ``sample_size`` points)."""
    if sample_size is not None:
        rng = np.random.default_rng(random_state)
        idx = rng.permutation(np.asarray(X).shape[0])[:sample_size]
        X, labels = np.asarray(X)[idx], np.asarray(labels)[idx]
    return float(np.mean(silhouette_samples(X, labels, metric=metric, chunk_bytes=chunk_bytes)))


def calinski_harabasz_score(X, labels) -> float:
    """CH = [sum_k n_k ||mu_k - mean||^2 / (K-1)] / [sum_i ||x_i - mu_{c_i}||^2 / (N-K)]."""
    X = np.asarray(X, dtype=np.float64)
    codes = _codes(labels)
    n, k = X.shape[0], int(codes.max()) + 1
    if not 2 <= k <= n - 1:
        raise ValueError(f"number of labels is {k}; valid values are 2 to n_samples - 1 ({n - 1})")
    mean = X.mean(axis=0)
    extra = 0.0
    intra = 0.0
    for j in range(k):
        Xj = X[codes == j]
        mj = Xj.mean(axis=0)
        extra += Xj.shape[0] * float(np.sum((mj - mean) ** 2))
        intra += float(np.sum((Xj - mj) ** 2))
    return float(1.0 if intra == 0.0 else extra * (n - k) / (intra * (k - 1.0)))


def contingency_matrix(labels_true, labels_pred) -> np.ndarray:
    """Counts n_ij of samples in true class i and predicted cluster j."""
    t, p = _codes(labels_true), _codes(labels_pred)
    if t.shape != p.shape:
        raise ValueError(f"labels_true has {t.shape[0]} samples but labels_pred has {p.shape[0]}")
    nt, npred = (t.max() + 1 if t.size else 0), (p.max() + 1 if p.size else 0)
    return np.bincount(t * npred + p, minlength=nt * npred).reshape(nt, npred).astype(np.int64)


def adjusted_rand_score(labels_true, labels_pred) -> float:
    """ARI = 2 (tp tn - fn fp) / ((tp + fn)(fn + tn) + (tp + fp)(fp + tn)) over sample pairs."""
    C = contingency_matrix(labels_true, labels_pred)
    n = int(C.sum())
    n_c = C.sum(axis=1, dtype=np.int64)
    n_k = C.sum(axis=0, dtype=np.int64)
    sum_sq = int((C.astype(np.int64) ** 2).sum())
    tp = sum_sq - n
    fp = int((C * n_k[None, :]).sum()) - sum_sq
    fn = int((C * n_c[:, None]).sum()) - sum_sq
    tn = n * n - fp - fn - sum_sq
    # the pair confusion matrix above counts ordered pairs (as scikit-learn)
    if fn == 0 and fp == 0:
        return 1.0
    return float(2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn)))


def _entropy(codes) -> float:
    if codes.size == 0:
        return 1.0
    pi = np.bincount(codes).astype(np.float64)
    pi = pi[pi > 0]
    if pi.size == 1:
        return 0.0
    tot = pi.sum()
    return float(-np.sum((pi / tot) * (np.log(pi) - np.log(tot))))


def mutual_info_score(labels_true, labels_pred) -> float:
    """MI = sum_ij (n_ij/N) log(N n_ij / (a_i b_j)) in nats."""
    C = contingency_matrix(labels_true, labels_pred)
    nzx, nzy = np.nonzero(C)
    nz = C[nzx, nzy].astype(np.float64)
    if C.shape[0] == 1 or C.shape[1] == 1:
        return 0.0
    tot = nz.sum()
    pi = C.sum(axis=1).astype(np.float64)
    pj = C.sum(axis=0).astype(np.float64)
    log_c = np.log(nz)
    log_outer = -np.log(pi[nzx]) - np.log(pj[nzy]) + np.log(pi.sum()) + np.log(pj.sum())
    mi = (nz / tot) * (log_c - np.log(tot)) + (nz / tot) * log_outer
    return float(np.clip(mi.sum(), 0.0, None))


def normalized_mutual_info_score(labels_true, labels_pred) -> float:
    """NMI = MI / ((H(true) + H(pred)) / 2); 1.0 when both labelings are a single cluster."""
    t, p = _codes(labels_true), _codes(labels_pred)
    kt, kp = np.unique(t).size, np.unique(p).size
    if (kt == kp == 1) or (kt == kp == 0):
        return 1.0
    mi = mutual_info_score(t, p)
    if mi == 0:
        return 0.0
    h = 0.5 * (_entropy(t) + _entropy(p))
    return float(mi / max(h, np.finfo(np.float64).eps))


def elbow_table(X, k_values, random_state=None, *, n_init=4, metric="euclidean") -> list[dict]:
    """For each k: k-means (k-means++, ``n_init`` restarts) and its inertia, silhouette, CH.

    Rows are dicts ``{"k", "inertia", "silhouette", "calinski_harabasz"}``; silhouette and CH
    are ``None`` for k = 1 (undefined) ([Passerini §14.4] elbow and silhouette, [Arias §3.3] CH).
    """
    from ..cluster.kmeans import KMeans
    from ..random import check_random_state, spawn_seeds

    X = np.asarray(X, dtype=np.float64)
    ks = [int(k) for k in k_values]
    seeds = spawn_seeds(check_random_state(random_state), len(ks))
    rows = []
    for k, seed in zip(ks, seeds, strict=True):
        km = KMeans(n_clusters=k, n_init=n_init, metric=metric, random_state=seed).fit(X)
        ok = 2 <= np.unique(km.labels_).size <= X.shape[0] - 1
        rows.append({
            "k": k,
            "inertia": km.inertia_,
            "silhouette": silhouette_score(X, km.labels_) if ok else None,
            "calinski_harabasz": calinski_harabasz_score(X, km.labels_) if ok else None,
        })
    return rows
