"""kNN behaviour: tie-breaking, exact matches, engines agree, metrics, chunking, errors."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from core import distances, registry
from core.neighbors import _search
from core.params import ParamError
from core.validation import DataError

KNNC = registry.get("knn_classifier")
KNNR = registry.get("knn_regressor")


def _reference(Xt, Xq, k, metric, p=2.0):
    """Full sort by (distance, index) of exactly computed distances."""
    name = {"manhattan": "cityblock"}.get(metric, metric)
    D = cdist(Xq, Xt, name, p=p) if metric == "minkowski" else cdist(Xq, Xt, name)
    order = np.lexsort((np.broadcast_to(np.arange(Xt.shape[0]), D.shape), D), axis=1)[:, :k]
    return np.take_along_axis(D, order, axis=1), order


@pytest.mark.parametrize("metric,p", [("euclidean", 2), ("manhattan", 1), ("chebyshev", 2),
                                      ("minkowski", 3), ("cosine", 2)])
def test_engines_match_full_sort_with_blocking(metric, p, monkeypatch):
    # tiny blocks and sample force the multi-block candidate path with its bound and slack
    monkeypatch.setattr(_search, "_T_CHUNK", 64)
    monkeypatch.setattr(_search, "_Q_CHUNK", 17)
    monkeypatch.setattr(_search, "_SAMPLE", 40)
    rng = np.random.default_rng(1)
    Xt = rng.normal(size=(700, 5))
    Xt[::7] = np.round(Xt[::7], 0)  # duplicates / ties
    Xq = np.vstack([rng.normal(size=(60, 5)), Xt[:10]])
    ref_d, ref_i = _reference(Xt, Xq, 9, metric, p)
    algs = ["brute"] if metric == "cosine" else ["brute", "kd_tree"]
    for alg in algs:
        est = KNNC(n_neighbors=9, metric=metric, p=float(p), algorithm=alg).fit(Xt, np.arange(700) % 3)
        d, i = est.kneighbors(Xq)
        np.testing.assert_allclose(d, ref_d, rtol=1e-9, atol=1e-7)
        # same neighbour sets (equal-distance order may differ only at rounding level)
        np.testing.assert_array_equal(np.sort(i, axis=1), np.sort(ref_i, axis=1))


def test_ties_break_to_lower_training_index_both_engines():
    # four training points at the same distance 1 from the query
    Xt = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [5.0, 5.0]])
    y = np.array([3, 2, 1, 0, 0])
    for alg in ("brute", "kd_tree"):
        est = KNNC(n_neighbors=2, algorithm=alg).fit(Xt, y)
        d, i = est.kneighbors(np.zeros((1, 2)))
        np.testing.assert_array_equal(i, [[0, 1]])
        np.testing.assert_allclose(d, [[1.0, 1.0]])
        # the vote ties (one for class 3, one for class 2): lowest class index wins -> 2
        assert est.predict(np.zeros((1, 2)))[0] == 2


def test_distance_weights_exact_match_takes_all_weight():
    Xt = np.array([[0.0], [1.0], [2.0], [0.0]])
    y = np.array(["a", "b", "b", "c"])
    est = KNNC(n_neighbors=3, weights="distance", algorithm="brute").fit(Xt, y)
    proba = est.predict_proba(np.array([[0.0], [0.5]]))
    # query 0: exact matches at indices 0 (a) and 3 (c) share the weight
    np.testing.assert_allclose(proba[0], [0.5, 0.0, 0.5])
    # query 0.5: neighbours 0 (a, d=.5), 3 (c, d=.5), 1 (b, d=.5) -> equal 1/d weights
    np.testing.assert_allclose(proba[1], [1 / 3, 1 / 3, 1 / 3])
    reg = KNNR(n_neighbors=2, weights="distance").fit(Xt, np.array([10.0, 20.0, 30.0, 14.0]))
    np.testing.assert_allclose(reg.predict(np.array([[0.0], [0.25]])), [12.0, (10 / 0.25 + 14 / 0.25) / 8])


def test_distance_weighted_vote_differs_from_majority():
    # [Passerini §3.5, Fig. 5]: two far '+' outvote one close '-' unless weighted by 1/d
    Xt = np.array([[0.1], [2.0], [2.1]])
    y = np.array(["-", "+", "+"])
    assert KNNC(n_neighbors=3).fit(Xt, y).predict([[0.0]])[0] == "+"
    assert KNNC(n_neighbors=3, weights="distance").fit(Xt, y).predict([[0.0]])[0] == "-"


def test_regressor_uniform_mean():
    Xt = np.arange(10.0)[:, None]
    est = KNNR(n_neighbors=3).fit(Xt, Xt[:, 0] ** 2)
    np.testing.assert_allclose(est.predict([[4.2]]), [(9 + 16 + 25) / 3])


def test_errors():
    X = np.zeros((3, 2))
    with pytest.raises(DataError, match="n_neighbors=5 is larger"):
        KNNC().fit(X, [0, 1, 1])
    with pytest.raises(ParamError, match="cosine"):
        KNNC(n_neighbors=1, algorithm="kd_tree", metric="cosine").fit(X, [0, 1, 1])
    est = KNNC(n_neighbors=1).fit(X, [0, 1, 1])
    with pytest.raises(DataError, match="features"):
        est.predict(np.zeros((1, 3)))


def test_auto_engine_choice():
    rng = np.random.default_rng(0)
    y = np.arange(100) % 2
    assert KNNC().fit(rng.normal(size=(100, 4)), y).index_.algorithm == "kd_tree"
    assert KNNC().fit(rng.normal(size=(100, 20)), y).index_.algorithm == "brute"
    assert KNNC(metric="cosine").fit(rng.normal(size=(100, 4)), y).index_.algorithm == "brute"


def test_pairwise_distances_module():
    rng = np.random.default_rng(3)
    A, B = rng.normal(size=(30, 4)), rng.normal(size=(20, 4))
    B[0] = 0.0
    for metric, ref in [("euclidean", "euclidean"), ("manhattan", "cityblock"),
                        ("chebyshev", "chebyshev")]:
        np.testing.assert_allclose(distances.pairwise_distances(A, B, metric=metric), cdist(A, B, ref),
                                   atol=1e-12)
    np.testing.assert_allclose(distances.pairwise_distances(A, B, metric="minkowski", p=3.5),
                               cdist(A, B, "minkowski", p=3.5))
    cos = distances.pairwise_distances(A, B, metric="cosine")
    np.testing.assert_allclose(cos[:, 1:], cdist(A, B[1:], "cosine"), atol=1e-12)
    np.testing.assert_allclose(cos[:, 0], 1.0)  # zero vector: similarity 0
    full = distances.pairwise_distances(A, metric="euclidean")
    assert np.all(np.diag(full) == 0)
    blocks = list(distances.pairwise_distances_chunked(A, B, metric="euclidean", working_memory=0.001))
    assert len(blocks) > 1
    np.testing.assert_allclose(np.vstack([b for _, b in blocks]), cdist(A, B), atol=1e-12)
    with pytest.raises(ValueError):
        distances.pairwise_distances(A, B, metric="hamming")


def test_pickle_after_use_drops_caches_and_predicts_the_same():
    import pickle

    rng = np.random.default_rng(4)
    X = rng.normal(size=(3000, 20))
    y = np.where(X[:, 0] > 0, "pos", "neg")
    est = KNNC(n_neighbors=3).fit(X, y)
    before = est.predict(X[:50])
    assert est.index_._prep is not None
    clone = pickle.loads(pickle.dumps(est))
    assert clone.index_._prep is None and clone.index_._tree is None
    np.testing.assert_array_equal(clone.predict(X[:50]), before)
    # training points are their own nearest neighbour (distance 0)
    d, i = clone.kneighbors(X[:5], n_neighbors=1)
    np.testing.assert_array_equal(i[:, 0], np.arange(5))
    np.testing.assert_allclose(d[:, 0], 0.0, atol=1e-6)


@pytest.mark.parametrize("k", [1, 5, 9])
def test_single_block_bound_keeps_every_tie_and_clipped_distance(k):
    # one block (n <= _T_CHUNK): the k-th distance is bounded by the minima of column groups and max(., 0) is
    # applied to the candidates only; the result must be the full sort by (value, index) of the clipped values
    rng = np.random.default_rng(3)
    Xt = rng.integers(0, 3, size=(700, 4)).astype(float)  # integer distances: many ties at the k-th
    near = Xt[:40] + rng.normal(scale=1e-9, size=(40, 4))  # near-duplicates: values below 0 before clipping
    Xq = np.vstack([rng.integers(0, 3, size=(60, 4)).astype(float), near, Xt[100:110]])
    sq = distances.row_norms_squared(Xt)
    R = (-2.0 * Xq) @ Xt.T
    R += distances.row_norms_squared(Xq)[:, None]
    R += sq[None, :]
    R = np.maximum(R, 0.0)
    order = np.argsort(R, axis=1, kind="stable")[:, :k]
    index = _search.NeighborIndex(Xt, "euclidean", 2.0, "brute", k)
    assert Xt.shape[0] // _search._GROUPS >= 2  # the group bound is used
    d, i = index.kneighbors(Xq, k)
    np.testing.assert_array_equal(i, order)
    np.testing.assert_array_equal(d, np.sqrt(np.take_along_axis(R, order, axis=1)))
