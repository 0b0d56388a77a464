"""Fit memory estimates (core/memory.py): every estimator has one, it grows with the drivers the service guards
against, and for the families with a specific model it is close to the measured peak of a real fit."""

import tracemalloc

import numpy as np
import pytest

from core import registry
from core.memory import FitMemory
from core.params import validate_params

NAMES = registry.names()


@pytest.mark.parametrize("name", NAMES)
def test_every_estimator_has_a_sane_estimate(name):
    cls = registry.get(name)
    p = validate_params(cls.params, {})
    small, big = cls.fit_memory(100, 5, p, 2), cls.fit_memory(10_000, 5, p, 2)
    assert isinstance(small, FitMemory) and small.bytes > 0 and small.cause
    assert small.param is None or small.param in cls.params
    assert big.bytes >= small.bytes
    assert cls.estimate_fit_bytes(100, 5, p, 2) == small.bytes


def test_the_drivers_grow_the_estimate():
    krr = registry.get("kernel_ridge_regression")
    p = validate_params(krr.params, {})
    assert krr.estimate_fit_bytes(50_000, 4, p) > 40e9 > 100 * krr.estimate_fit_bytes(2_000, 4, p)
    rf = registry.get("random_forest_classifier")
    deep = validate_params(rf.params, {"n_estimators": 10_000})
    assert rf.estimate_fit_bytes(1_000_000, 10, deep, 2) > 1e12
    assert rf.fit_memory(1_000_000, 10, deep, 2).param == "n_estimators"
    shallow = validate_params(rf.params, {"n_estimators": 10_000, "max_depth": 3})
    assert rf.estimate_fit_bytes(1_000_000, 10, shallow, 2) < 1e9
    mlp = registry.get("mlp_classifier")
    wide = validate_params(mlp.params, {"hidden_layer_sizes": [10_000, 10_000]})
    assert mlp.estimate_fit_bytes(150, 4, wide, 3) > 3.2e9  # 1e8 weights, four times over
    assert mlp.fit_memory(150, 4, wide, 3).param == "hidden_layer_sizes"


CALIBRATION = [
    ("kernel_ridge_regression", 1000, {}),
    ("gaussian_process_regressor", 200, {}),
    ("kernel_pca", 600, {}),
    ("spectral_clustering", 700, {}),
    ("agglomerative_clustering", 1000, {}),
    ("svm_classifier", 1000, {}),
    ("random_forest_classifier", 1500, {"n_estimators": 10}),
    ("gradient_boosting_classifier", 2000, {"max_iter": 10}),
    ("mlp_classifier", 1500, {"hidden_layer_sizes": [200, 200], "max_iter": 2}),
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name,n,params", CALIBRATION, ids=[c[0] for c in CALIBRATION])
def test_estimate_is_close_to_the_measured_peak(name, n, params):
    """fit + predict on the training rows (what a training job does), traced by tracemalloc (NumPy reports
    its buffers to it): the estimate is at least 80% of the peak and not absurdly above it."""
    cls = registry.get(name)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 5))
    y = {"classification": (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5),
         "regression": 2 * X[:, 0] + rng.normal(size=n)}.get(cls.task)
    p = validate_params(cls.params, params)
    tracemalloc.start()
    try:
        est = cls(**p).fit(X, y)
        (est.predict if hasattr(est, "predict") else est.transform)(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    estimate = cls.estimate_fit_bytes(n, 5, p, 3)
    assert 0.8 * peak <= estimate <= 6 * peak, (peak, estimate)
