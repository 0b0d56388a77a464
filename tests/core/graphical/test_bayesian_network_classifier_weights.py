"""Weighted quantile bin edges of the Bayesian-network classifier: weight w counts as w rows."""

from __future__ import annotations

import numpy as np
import pytest

from core.graphical.bayesian_network_classifier import BayesianNetworkClassifier, weighted_quantile


@pytest.mark.parametrize("seed", range(20))
def test_integer_weights_give_the_quantiles_of_the_repeated_rows(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    x = rng.normal(size=n).round(1)  # ties included
    w = rng.integers(1, 4, n).astype(float)
    q = np.linspace(0, 1, 6)[1:-1]
    np.testing.assert_allclose(weighted_quantile(x, q, w), np.quantile(np.repeat(x, w.astype(int)), q),
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(weighted_quantile(x, q, np.ones(n)), np.quantile(x, q), rtol=0, atol=1e-12)


def test_zero_weight_rows_do_not_move_the_edges():
    x = np.array([0.0, 1.0, 2.0, 3.0, 100.0])
    w = np.array([1.0, 1.0, 1.0, 1.0, 0.0])
    np.testing.assert_allclose(weighted_quantile(x, [0.5], w), np.quantile(x[:4], [0.5]))


def test_bin_edges_follow_the_weights():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    y = np.where(X[:, 0] > 0, "a", "b")
    w = np.where(X[:, 1] > 0, 3.0, 1.0)
    weighted = BayesianNetworkClassifier().fit(X, y, sample_weight=w)
    repeated = BayesianNetworkClassifier().fit(np.repeat(X, w.astype(int), axis=0), np.repeat(y, w.astype(int)))
    for a, b in zip(weighted.bin_edges_, repeated.bin_edges_, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    np.testing.assert_allclose(weighted.predict_proba(X), repeated.predict_proba(X), rtol=1e-9, atol=1e-12)
