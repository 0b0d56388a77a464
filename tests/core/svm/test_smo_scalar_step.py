"""The batched SMO solver's two-variable step has two forms: Python floats problem by problem (up to
``_SCALAR_STEP_MAX`` active problems: a few one-vs-one pairs) and NumPy arrays (more). They must give the same
iterates bit for bit, so that a fit does not depend on how many problems happen to be active. Each test forces
one path or the other by moving the threshold."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import datasets

from core.kernels import build_kernel
from core.svm import _smo
from core.svm.svm_classifier import SVMClassifier

KERNELS = [("rbf", {"gamma": 0.2}), ("linear", {}), ("poly", {"degree": 3, "gamma": 0.1, "coef0": 1.0})]
SCALAR, VECTOR = 1_000, 0  # thresholds forcing each path


def _data(name):
    X, y = (datasets.load_wine if name == "wine" else datasets.load_iris)(return_X_y=True)
    return (X - X.mean(0)) / X.std(0), y


def _ovo_problems(y, C=1.0):
    out = []
    k = int(y.max()) + 1
    for i in range(k):
        for j in range(i + 1, k):
            idx = np.flatnonzero((y == i) | (y == j))
            out.append((idx, np.where(y[idx] == i, 1.0, -1.0), np.full(idx.size, C)))
    return out


def _solve(monkeypatch, threshold, K, problems, **kw):
    monkeypatch.setattr(_smo, "_SCALAR_STEP_MAX", threshold)
    return _smo.solve_smo_batch(K, problems, **kw)


def _assert_same(a, b):
    for ra, rb in zip(a, b, strict=True):
        assert ra.n_iter == rb.n_iter
        np.testing.assert_array_equal(ra.alpha, rb.alpha)
        np.testing.assert_array_equal(ra.G, rb.G)
        assert ra.rho == rb.rho and ra.obj == rb.obj and ra.converged == rb.converged


@pytest.mark.parametrize("data", ["wine", "iris"])
@pytest.mark.parametrize(("kernel", "kw"), KERNELS, ids=[k for k, _ in KERNELS])
def test_both_step_forms_give_the_same_solution(monkeypatch, data, kernel, kw):
    X, y = _data(data)
    K = build_kernel(kernel, **kw)(X)
    problems = _ovo_problems(y, C=2.0)
    scalar = _solve(monkeypatch, SCALAR, K, problems, tol=1e-4)
    vector = _solve(monkeypatch, VECTOR, K, problems, tol=1e-4)
    _assert_same(scalar, vector)
    assert all(r.n_iter > 5 for r in scalar)


@pytest.mark.parametrize("data", ["wine", "iris"])
@pytest.mark.parametrize(("kernel", "kw"), KERNELS, ids=[k for k, _ in KERNELS])
def test_every_scalar_step_equals_the_array_step(monkeypatch, data, kernel, kw):
    """Iterate by iterate: each call of the scalar step is replayed by the array step on copies of the state,
    and both must leave the same coefficients, alphas and index sets."""
    X, y = _data(data)
    K = build_kernel(kernel, **kw)(X)
    scalar_step, vector_step = _smo._step_scalar, _smo._step_vector
    calls = []

    def both(il, jl, Gm, Y, A, Cm, QD, Ki, yG, up, low):
        A2, up2, low2 = A.copy(), up.copy(), low.copy()
        r = np.arange(len(il))
        vi, vj = vector_step(r, np.array(il), np.array(jl), np.array(Gm), Y, A2, Cm, QD, Ki, yG, up2, low2)
        si, sj = scalar_step(il, jl, Gm, Y, A, Cm, QD, Ki, yG, up, low)
        np.testing.assert_array_equal(si, vi)
        np.testing.assert_array_equal(sj, vj)
        np.testing.assert_array_equal(A, A2)
        np.testing.assert_array_equal(up, up2)
        np.testing.assert_array_equal(low, low2)
        calls.append(len(il))
        return si, sj

    monkeypatch.setattr(_smo, "_step_scalar", both)
    _solve(monkeypatch, SCALAR, K, _ovo_problems(y, C=2.0), tol=1e-4)
    assert len(calls) > 20 and max(calls) == 3  # three one-vs-one problems, stepped together


@pytest.mark.parametrize("data", ["wine", "iris"])
@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly"])
def test_a_fit_does_not_depend_on_the_step_form(monkeypatch, data, kernel):
    """SVMClassifier end to end: the one-vs-one fit (3 problems) and Platt's cross-validation fits (15
    problems, the array path by default) agree bit for bit under either form."""
    X, y = _data(data)
    fits = []
    for threshold in (SCALAR, VECTOR):
        monkeypatch.setattr(_smo, "_SCALAR_STEP_MAX", threshold)
        fits.append(SVMClassifier(kernel=kernel, C=2.0, probability=True, random_state=0).fit(X, y))
    a, b = fits
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    np.testing.assert_array_equal(a.n_iter_, b.n_iter_)
    np.testing.assert_array_equal(a.probA_, b.probA_)
    np.testing.assert_array_equal(a.probB_, b.probB_)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
