"""Clustering metrics against scikit-learn and hand-computed values."""

import numpy as np
import pytest
from sklearn import metrics as skm
from sklearn.datasets import load_digits, load_iris, load_wine

from core.metrics.clustering import (
    adjusted_rand_score,
    calinski_harabasz_score,
    contingency_matrix,
    elbow_table,
    inertia,
    mutual_info_score,
    normalized_mutual_info_score,
    silhouette_samples,
    silhouette_score,
)

LOADERS = [load_iris, load_wine, load_digits]


def _labels(n, k, seed):
    return np.random.default_rng(seed).integers(0, k, size=n)


@pytest.mark.parametrize("loader", LOADERS)
def test_silhouette_identical_to_sklearn(loader):
    d = loader()
    X, y = d.data[:800], d.target[:800]
    np.testing.assert_allclose(silhouette_samples(X, y), skm.silhouette_samples(X, y), rtol=0, atol=1e-9)
    assert silhouette_score(X, y) == pytest.approx(skm.silhouette_score(X, y), abs=1e-9)
    # tiny chunks (a few rows at a time) give the same numbers: the chunking is exact
    np.testing.assert_allclose(silhouette_samples(X, y, chunk_bytes=8 * 800 * 3), silhouette_samples(X, y),
                               atol=1e-12)


@pytest.mark.parametrize("metric,skmetric", [("cityblock", "manhattan"), ("cosine", "cosine")])
def test_silhouette_other_metrics_and_precomputed(metric, skmetric):
    X = load_wine().data
    lab = _labels(len(X), 4, 0)
    assert silhouette_score(X, lab, metric=metric) == pytest.approx(
        skm.silhouette_score(X, lab, metric=skmetric), abs=1e-9)
    D = skm.pairwise_distances(X, metric=skmetric)
    assert silhouette_score(D, lab, metric="precomputed") == pytest.approx(
        skm.silhouette_score(D, lab, metric="precomputed"), abs=1e-9)


def test_silhouette_hand_example_and_singletons():
    # two clusters on a line: {0, 1}, {5}; a(0)=1, b(0)=5 -> s=0.8; a(1)=1, b(1)=4 -> 0.75; s(2)=0
    X = np.array([[0.0], [1.0], [5.0]])
    np.testing.assert_allclose(silhouette_samples(X, [0, 0, 1]), [0.8, 0.75, 0.0])
    with pytest.raises(ValueError, match="number of labels"):
        silhouette_score(X, [0, 0, 0])


@pytest.mark.parametrize("loader", LOADERS)
def test_calinski_harabasz_identical_to_sklearn(loader):
    d = loader()
    for lab in (d.target, _labels(len(d.target), 5, 1)):
        assert calinski_harabasz_score(d.data, lab) == pytest.approx(
            skm.calinski_harabasz_score(d.data, lab), rel=1e-9, abs=1e-9)


def test_calinski_harabasz_formula():
    X = np.array([[0.0, 0], [0, 2], [4, 0], [4, 2]])
    lab = [0, 0, 1, 1]
    # B = 2*(2^2) + 2*(2^2) = 16, W = 4*1 = 4, CH = (4-2)/(2-1) * 16/4 = 8
    assert calinski_harabasz_score(X, lab) == pytest.approx(8.0)


@pytest.mark.parametrize("seed", range(6))
def test_ari_nmi_identical_to_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 300))
    a = rng.integers(0, int(rng.integers(1, 8)), size=n)
    b = rng.integers(0, int(rng.integers(1, 8)), size=n)
    assert adjusted_rand_score(a, b) == pytest.approx(skm.adjusted_rand_score(a, b), abs=1e-12)
    nmi = skm.normalized_mutual_info_score(a, b)
    assert normalized_mutual_info_score(a, b) == pytest.approx(nmi, abs=1e-12)
    assert mutual_info_score(a, b) == pytest.approx(skm.mutual_info_score(a, b), abs=1e-12)


def test_ari_nmi_special_cases_and_label_values():
    y = ["a", "a", "b", "b", "c"]
    assert adjusted_rand_score(y, [7, 7, 3, 3, 1]) == 1.0  # permutation/renaming invariant
    assert normalized_mutual_info_score(y, [7, 7, 3, 3, 1]) == pytest.approx(1.0)
    assert adjusted_rand_score([0, 0, 0], [1, 1, 1]) == 1.0
    assert normalized_mutual_info_score([0, 0, 0], [1, 1, 1]) == 1.0
    assert normalized_mutual_info_score([0, 0, 0], [0, 1, 2]) == skm.normalized_mutual_info_score([0, 0, 0],
                                                                                                  [0, 1, 2])
    assert adjusted_rand_score([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(
        skm.adjusted_rand_score([0, 0, 1, 1], [0, 1, 0, 1]), abs=1e-12)
    np.testing.assert_array_equal(contingency_matrix([0, 0, 1], [1, 0, 0]), [[1, 1], [1, 0]])


def test_inertia_and_elbow_table():
    X = load_iris().data
    lab = load_iris().target
    cent = np.stack([X[lab == j].mean(0) for j in range(3)])
    assert inertia(X, lab) == pytest.approx(np.sum((X - cent[lab]) ** 2))
    assert inertia(X, lab, centers=cent) == pytest.approx(inertia(X, lab))
    rows = elbow_table(X, [1, 2, 3, 4, 5], random_state=0)
    assert [r["k"] for r in rows] == [1, 2, 3, 4, 5]
    assert rows[0]["silhouette"] is None
    assert rows[0]["inertia"] == pytest.approx(np.sum((X - X.mean(0)) ** 2))
    inert = [r["inertia"] for r in rows]
    assert all(a >= b for a, b in zip(inert, inert[1:], strict=False))  # SSE falls with k
    # iris: the silhouette peaks at k = 2 (the two well-separated groups)
    assert max(rows[1:], key=lambda r: r["silhouette"])["k"] == 2
    assert rows == elbow_table(X, [1, 2, 3, 4, 5], random_state=0)
