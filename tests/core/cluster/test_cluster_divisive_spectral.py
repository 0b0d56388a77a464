"""divisive_clustering (bisecting k-means) and spectral_clustering, with scikit-learn parity."""

import numpy as np
import pytest
from scipy.sparse.linalg import ArpackNoConvergence
from sklearn.cluster import SpectralClustering as SkSpectral
from sklearn.datasets import load_digits, load_iris, load_wine, make_blobs
from sklearn.preprocessing import StandardScaler

from core.cluster.divisive import DivisiveClustering
from core.cluster.spectral import SpectralClustering
from core.metrics.clustering import adjusted_rand_score


def _scaled(loader, n=None):
    d = loader()
    X, y = d.data[:n], d.target[:n]
    return StandardScaler().fit_transform(X), y


def test_bisecting_tree_structure_and_predict():
    X, y = _scaled(load_wine)
    est = DivisiveClustering(n_clusters=4, n_init=3, random_state=0).fit(X)
    assert np.unique(est.labels_).size == 4
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    sse = sum(((X[est.labels_ == j] - est.cluster_centers_[j]) ** 2).sum() for j in range(4))
    assert est.inertia_ == pytest.approx(sse)


def test_bisecting_strategies_pick_the_right_leaf():
    # one big tight blob (200 points) and one small spread-out blob (30 points, large SSE)
    rng = np.random.default_rng(0)
    X = np.vstack([0.1 * rng.normal(size=(200, 2)), 20 + 5.0 * rng.normal(size=(30, 2))])
    big = DivisiveClustering(n_clusters=3, bisecting_strategy="largest_cluster", random_state=0).fit(X)
    ine = DivisiveClustering(n_clusters=3, bisecting_strategy="biggest_inertia", random_state=0).fit(X)
    # largest_cluster splits the 200-point blob; biggest_inertia splits the spread one
    assert len(np.unique(big.labels_[:200])) == 2
    assert len(np.unique(ine.labels_[200:])) == 2


def test_bisecting_recovers_blobs():
    rng = np.random.default_rng(0)
    C = np.array([[0, 0], [10, 0], [0, 10], [10, 10]], float)
    X = np.vstack([c + rng.normal(size=(40, 2)) for c in C])
    y = np.repeat(np.arange(4), 40)
    est = DivisiveClustering(n_clusters=4, random_state=0).fit(X)
    assert adjusted_rand_score(y, est.labels_) == 1.0


@pytest.mark.parametrize(
    "loader,k,affinity,kw",
    [
        (load_iris, 3, "rbf", {"gamma": 0.1}),
        (load_iris, 3, "nearest_neighbors", {"n_neighbors": 10}),
        (load_wine, 3, "rbf", {"gamma": 0.1}),
        (load_wine, 3, "nearest_neighbors", {"n_neighbors": 10}),
        (load_digits, 10, "nearest_neighbors", {"n_neighbors": 10}),
    ],
)
def test_spectral_ari_within_005_of_sklearn(loader, k, affinity, kw):
    X, y = _scaled(loader, 900)
    sk = SkSpectral(n_clusters=k, affinity=affinity, random_state=0, **kw).fit(X)
    ref = adjusted_rand_score(y, sk.labels_)
    for norm in ["rows", "degree"]:
        est = SpectralClustering(n_clusters=k, affinity=affinity, embedding_norm=norm, random_state=0, **kw)
        assert abs(adjusted_rand_score(y, est.fit(X).labels_) - ref) <= 0.05, norm


def test_spectral_separates_rings_and_predicts_nearest_training_label():
    rng = np.random.default_rng(0)
    t = rng.uniform(0, 2 * np.pi, 300)
    r = np.r_[np.full(150, 1.0), np.full(150, 4.0)]
    X = np.c_[r * np.cos(t), r * np.sin(t)] + 0.05 * rng.normal(size=(300, 2))
    y = (r > 2).astype(int)
    est = SpectralClustering(n_clusters=2, affinity="nearest_neighbors", n_neighbors=8, random_state=0).fit(X)
    assert adjusted_rand_score(y, est.labels_) == 1.0
    new = np.array([[0.0, 1.02], [0.0, -3.98]])
    assert est.predict(new)[0] == est.labels_[y == 0][0]
    assert est.predict(new)[1] == est.labels_[y == 1][0]
    # the row-normalised embedding lies on the unit sphere
    np.testing.assert_allclose(np.linalg.norm(est.embedding_, axis=1), 1.0)


@pytest.mark.parametrize("solver", ["dense", "arpack"])
def test_spectral_default_gamma_on_many_standardised_features_matches_sklearn(solver):
    # gamma=1 on 13 standardised features: off-diagonal affinities are tiny (a near-disconnected graph);
    # with the self-loops k(x, x) = 1 counted in the degrees, D^-1/2 W D^-1/2 ~ I and the labels were noise
    X, y = _scaled(load_wine)
    ref = adjusted_rand_score(y, SkSpectral(n_clusters=3, random_state=0).fit(X).labels_)
    assert ref > 0.4
    for norm in ["rows", "degree"]:
        est = SpectralClustering(n_clusters=3, eigen_solver=solver, embedding_norm=norm, random_state=0).fit(X)
        assert est.eigen_solver_ == solver
        assert abs(adjusted_rand_score(y, est.labels_) - ref) <= 0.05, norm


def test_spectral_unscaled_blobs_recovered_exactly_as_sklearn():
    # 5 unscaled features, default gamma: within-blob affinities ~e^-10, between blobs ~e^-300
    X, y = make_blobs(n_samples=1100, n_features=5, centers=4, random_state=0)
    ref = SkSpectral(n_clusters=4, random_state=0).fit(X)
    assert adjusted_rand_score(y, ref.labels_) == 1.0
    for norm in ["rows", "degree"]:
        est = SpectralClustering(n_clusters=4, embedding_norm=norm, random_state=0).fit(X)
        assert est.eigen_solver_ == "arpack"  # 'auto' above 1000 points
        assert adjusted_rand_score(y, est.labels_) == 1.0, norm


def test_spectral_isolated_point_and_dense_fallback_when_arpack_fails(monkeypatch):
    import core.cluster.spectral as mod

    X, y = make_blobs(n_samples=300, n_features=3, centers=3, random_state=1)
    X = np.vstack([X, [[1e3, 1e3, 1e3]]])  # every affinity of this point underflows to 0: degree 0

    def failing_eigsh(*args, **kwargs):
        raise ArpackNoConvergence("no convergence", np.zeros(0), np.zeros((X.shape[0], 0)))

    monkeypatch.setattr(mod, "eigsh", failing_eigsh)
    est = SpectralClustering(n_clusters=3, eigen_solver="arpack", random_state=0).fit(X)
    assert est.eigen_solver_ == "dense"
    assert np.isfinite(est.embedding_).all()
    assert adjusted_rand_score(y, est.labels_[:-1]) == 1.0
