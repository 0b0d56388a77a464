"""kmeans: Lloyd / k-medians / spherical variants, k-means++, restarts, parity with scikit-learn."""

import numpy as np
import pytest
from sklearn.cluster import KMeans as SkKMeans
from sklearn.datasets import load_digits, load_iris, load_wine

from core.cluster import _kmeans_engine as eng
from core.cluster.kmeans import KMeans
from core.context import FitContext
from core.metrics.clustering import inertia
from core.params import ParamError
from core.validation import DataError


def _blobs(seed=0, n=60):
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    return np.vstack([c + 0.5 * rng.normal(size=(n, 2)) for c in centres]), np.repeat([0, 1, 2], n)


@pytest.mark.parametrize(
    "loader,k", [(load_iris, 3), (load_wine, 3), (load_digits, 10)], ids=["iris", "wine", "digits"]
)
def test_inertia_within_one_percent_of_sklearn(loader, k):
    X = loader().data[:700]
    ours = KMeans(n_clusters=k, n_init=5, random_state=0).fit(X)
    ref = SkKMeans(n_clusters=k, n_init=5, random_state=0).fit(X)
    assert ours.inertia_ <= ref.inertia_ * 1.01
    # inertia_ is the SSE of the returned partition and centres
    assert np.isclose(ours.inertia_, inertia(X, ours.labels_), rtol=1e-9)


def test_recovers_blobs_and_predict_transform():
    X, y = _blobs()
    km = KMeans(n_clusters=3, random_state=1).fit(X)
    # a perfect partition: each true blob gets one label
    assert len({tuple(np.unique(km.labels_[y == c])) for c in range(3)}) == 3
    assert all(np.unique(km.labels_[y == c]).size == 1 for c in range(3))
    np.testing.assert_array_equal(km.predict(X), km.labels_)
    D = km.transform(X)
    assert D.shape == (X.shape[0], 3)
    np.testing.assert_array_equal(np.argmin(D, axis=1), km.labels_)
    np.testing.assert_allclose(np.sum(D.min(axis=1) ** 2), km.inertia_, rtol=1e-9)
    assert km.score(X) == pytest.approx(-km.inertia_)


def test_distortion_never_increases_per_iteration():
    X = load_digits().data[:500]
    rng = np.random.default_rng(3)
    C = eng.init_centres(X, 8, np.ones(len(X)), rng, "random")
    w = np.ones(len(X))
    prev = np.inf
    for _ in range(15):
        lab, cost = eng.assign(X, C, "euclidean")
        J = cost.sum()
        assert J <= prev + 1e-9 * abs(prev if np.isfinite(prev) else 1)
        prev = J
        C, _ = eng.update_centres(X, lab, w, 8, "euclidean", C)


def test_manhattan_uses_medians_and_cosine_unit_centres():
    X, _ = _blobs(2)
    km = KMeans(n_clusters=3, metric="manhattan", n_init=3, random_state=0).fit(X)
    for j in range(3):
        np.testing.assert_allclose(km.cluster_centers_[j], np.median(X[km.labels_ == j], axis=0))
    l1 = np.abs(X - km.cluster_centers_[km.labels_]).sum()
    assert km.inertia_ == pytest.approx(l1)
    # cosine: directions matter, not norms -- scaling rows does not change labels
    Xc = X + np.array([1.0, 1.0])
    a = KMeans(n_clusters=3, metric="cosine", random_state=0).fit(Xc)
    b = KMeans(n_clusters=3, metric="cosine", random_state=0).fit(Xc * np.linspace(1, 5, len(Xc))[:, None])
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_allclose(np.linalg.norm(a.cluster_centers_, axis=1), 1.0)
    cos = (Xc / np.linalg.norm(Xc, axis=1, keepdims=True)) @ a.cluster_centers_.T
    assert a.inertia_ == pytest.approx(np.sum(1 - cos.max(axis=1)))


def test_kmeanspp_spreads_centres_and_restarts_keep_best():
    X, y = _blobs(4)
    rng = np.random.default_rng(0)
    # k-means++ picks one centre per well-separated blob almost surely
    hits = 0
    for _ in range(20):
        C = eng.kmeans_plusplus(X, 3, np.ones(len(X)), rng)
        hits += len({int(np.argmin(((X - c) ** 2).sum(1))) // 60 for c in C}) == 3
    assert hits >= 19
    single = [KMeans(n_clusters=3, init="random", n_init=1, random_state=s).fit(X).inertia_ for s in range(8)]
    best = KMeans(n_clusters=3, init="random", n_init=8, random_state=0).fit(X).inertia_
    assert best <= min(single) * 1.0001 or best <= np.median(single)


def test_sample_weight_equals_duplication():
    X, _ = _blobs(5, n=20)
    w = np.random.default_rng(0).integers(1, 4, size=len(X))
    a = KMeans(n_clusters=3, random_state=0, n_init=5).fit(X, sample_weight=w)
    b = KMeans(n_clusters=3, random_state=0, n_init=5).fit(np.repeat(X, w, axis=0))
    assert a.inertia_ == pytest.approx(b.inertia_, rel=1e-9)


def test_empty_cluster_repair_moves_centre_to_farthest_point():
    X = np.array([[0.0], [0.1], [0.2], [10.0]])
    C = np.array([[0.1], [100.0]])  # the second centre attracts nobody
    Cn, lab, _, _ = eng.kmeans_single(X, C, np.ones(4), metric="euclidean", max_iter=10, tol=0.0)
    assert sorted(np.bincount(lab, minlength=2)) == [1, 3]
    assert 10.0 in Cn[:, 0]


def test_progress_once_per_iteration_and_errors():
    X, _ = _blobs()
    seen = []
    ctx = FitContext(on_progress=lambda f, m: seen.append(m), min_interval=0.0)
    km = KMeans(n_clusters=3, n_init=2, random_state=0).fit(X, ctx=ctx)
    assert sum("inertia" in m for m in seen) >= km.n_iter_
    with pytest.raises(DataError, match="n_clusters"):
        KMeans(n_clusters=500).fit(X)
    with pytest.raises(ParamError, match="metric"):
        KMeans(metric="chebyshev").fit(X)
