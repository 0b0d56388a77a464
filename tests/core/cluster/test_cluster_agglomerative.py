"""agglomerative_clustering: merge tree from scratch checked against scipy.cluster.hierarchy."""

import numpy as np
import pytest
from scipy.cluster.hierarchy import fcluster, linkage
from sklearn.cluster import AgglomerativeClustering as SkAgglo
from sklearn.datasets import load_iris, load_wine

from core.cluster._hierarchy import cut_tree, linkage_matrix
from core.cluster.agglomerative import AgglomerativeClustering
from core.metrics.clustering import adjusted_rand_score
from core.params import ParamError

LINKS = ["single", "complete", "average", "ward", "centroid"]


@pytest.mark.parametrize("method", LINKS)
def test_merge_tree_equals_scipy(method):
    X = np.random.default_rng(0).normal(size=(250, 4))
    Z = linkage_matrix(X, method)
    Zs = linkage(X, method)
    np.testing.assert_allclose(Z[:, 2], Zs[:, 2], rtol=0, atol=1e-8)
    np.testing.assert_array_equal(Z[:, [0, 1, 3]], Zs[:, [0, 1, 3]])


@pytest.mark.parametrize("metric,scipy_metric", [("manhattan", "cityblock"), ("cosine", "cosine")])
@pytest.mark.parametrize("method", ["single", "complete", "average"])
def test_merge_tree_other_metrics_equals_scipy(method, metric, scipy_metric):
    X = np.random.default_rng(1).normal(size=(120, 3))
    Z = linkage_matrix(X, method, metric)
    Zs = linkage(X, method, metric=scipy_metric)
    np.testing.assert_allclose(Z[:, 2], Zs[:, 2], rtol=0, atol=1e-8)
    np.testing.assert_array_equal(Z[:, [0, 1, 3]], Zs[:, [0, 1, 3]])


def test_centroid_merge_distances_can_decrease_like_scipy():
    # centroid linkage is not monotone: scipy keeps merge order; so do we
    X = np.random.default_rng(0).normal(size=(300, 4))
    Z = linkage_matrix(X, "centroid")
    assert (np.diff(Z[:, 2]) < 0).any()
    np.testing.assert_allclose(Z[:, 2], linkage(X, "centroid")[:, 2], atol=1e-8)


@pytest.mark.parametrize("method", ["single", "complete", "average", "ward"])
def test_flat_clusters_match_scipy_and_sklearn(method):
    X = load_wine().data
    est = AgglomerativeClustering(n_clusters=4, linkage=method).fit(X)
    ref = fcluster(linkage(X, method), 4, "maxclust")
    assert adjusted_rand_score(est.labels_, ref) == 1.0
    sk = SkAgglo(n_clusters=4, linkage=method).fit(X)
    assert adjusted_rand_score(est.labels_, sk.labels_) == 1.0
    # sklearn-style tree outputs
    assert est.children_.shape == (X.shape[0] - 1, 2)
    np.testing.assert_array_equal(est.linkage_matrix_[:, 2], est.distances_)


def test_distance_threshold_like_sklearn():
    X = load_iris().data
    for method in ["ward", "average"]:
        est = AgglomerativeClustering(n_clusters=None, distance_threshold=2.0, linkage=method).fit(X)
        sk = SkAgglo(n_clusters=None, distance_threshold=2.0, linkage=method).fit(X)
        assert est.n_clusters_ == sk.n_clusters_
        assert adjusted_rand_score(est.labels_, sk.labels_) == 1.0


def test_predict_nearest_centroid_and_cut():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(30, 2)), rng.normal(size=(30, 2)) + 8])
    est = AgglomerativeClustering(n_clusters=2, linkage="single").fit(X)
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    for j in range(2):
        np.testing.assert_allclose(est.cluster_centers_[j], X[est.labels_ == j].mean(axis=0))
    assert est.predict(np.array([[8.0, 8.0]]))[0] == est.labels_[-1]
    # cutting the whole tree at n leaves each point alone
    Z = est.linkage_matrix_
    assert np.unique(cut_tree(Z, 60, 60)).size == 60
    assert np.unique(cut_tree(Z, 60, 1)).size == 1


def test_param_errors():
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ParamError, match="metric"):
        AgglomerativeClustering(linkage="ward", metric="manhattan").fit(X)
    with pytest.raises(ParamError, match="distance_threshold"):
        AgglomerativeClustering(n_clusters=3, distance_threshold=1.0).fit(X)
    with pytest.raises(ParamError, match="n_clusters"):
        AgglomerativeClustering(n_clusters=None).fit(X)
