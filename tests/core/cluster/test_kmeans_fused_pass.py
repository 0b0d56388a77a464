"""k-means' fused pass (nearest centres and cluster sums chunk by chunk) gives the two-pass results bit for bit."""

import numpy as np
import pytest

from core import registry
from core.cluster import _kmeans_engine as eng


@pytest.mark.parametrize("weighted", [False, True])
def test_fused_assignment_and_sums_match_the_two_passes(monkeypatch, weighted):
    monkeypatch.setattr(eng, "_FUSED_BYTES", 4096)  # many chunks
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5_000, 7))
    C = X[rng.choice(len(X), 6, replace=False)] + 0.1
    w = rng.uniform(0.5, 2.0, len(X)) if weighted else np.ones(len(X))
    x_sq = eng.row_norms_sq(X)
    labels, dist, sums, counts = eng.assign_and_sum(X, C, w, x_sq)
    ref_labels, ref_dist = eng.assign_euclidean(X, C, x_sq)
    ref_sums, ref_counts = eng.weighted_sums(X, ref_labels, w, len(C))
    np.testing.assert_array_equal(labels, ref_labels)
    np.testing.assert_array_equal(dist, ref_dist)
    np.testing.assert_array_equal(sums, ref_sums)
    np.testing.assert_array_equal(counts, ref_counts)


def test_a_fit_with_and_without_the_fused_pass_is_the_same(monkeypatch):
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(loc=c, size=(700, 5)) for c in (-4, 0, 4)])
    w = rng.uniform(0.5, 2.0, len(X))
    monkeypatch.setattr(eng, "_FUSED_BYTES", 8192)
    fused = registry.get("kmeans")(n_clusters=5, random_state=0).fit(X, sample_weight=w)
    monkeypatch.setattr(eng, "_csr_matvecs", None)
    plain = registry.get("kmeans")(n_clusters=5, random_state=0).fit(X, sample_weight=w)
    np.testing.assert_array_equal(fused.cluster_centers_, plain.cluster_centers_)
    np.testing.assert_array_equal(fused.labels_, plain.labels_)
    assert fused.inertia_ == plain.inertia_ and fused.n_iter_ == plain.n_iter_
