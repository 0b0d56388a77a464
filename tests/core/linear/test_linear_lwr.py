"""locally_weighted_regression: equals a direct weighted least-squares solve ([da Silva Neto §1.2.1])."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_diabetes

from core import registry
from core.model_selection.split import KFold

LWR = registry.get("locally_weighted_regression")


def _direct(X, y, xq, tau, sw=None, intercept=True):
    w = np.exp(-np.sum((X - xq) ** 2, axis=1) / (2 * tau**2))
    if sw is not None:
        w = w * sw
    Z = np.column_stack([np.ones(len(X)), X]) if intercept else X
    theta = np.linalg.lstsq(Z * np.sqrt(w)[:, None], y * np.sqrt(w), rcond=None)[0]
    zq = np.r_[1.0, xq] if intercept else xq
    return zq @ theta


def test_matches_direct_weighted_least_squares():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(80, 2))
    y = np.sin(X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.normal(size=80)
    Q = rng.uniform(-2, 2, size=(25, 2))
    sw = rng.uniform(0.5, 2.0, size=80)
    for tau in (0.3, 1.0, 5.0):
        m = LWR(tau=tau, alpha=0.0).fit(X, y)
        np.testing.assert_allclose(m.predict(Q), [_direct(X, y, q, tau) for q in Q], rtol=1e-8, atol=1e-10)
        m = LWR(tau=tau, alpha=0.0).fit(X, y, sample_weight=sw)
        np.testing.assert_allclose(m.predict(Q), [_direct(X, y, q, tau, sw) for q in Q], rtol=1e-8)
        m = LWR(tau=tau, alpha=0.0, fit_intercept=False).fit(X, y)
        np.testing.assert_allclose(m.predict(Q), [_direct(X, y, q, tau, intercept=False) for q in Q],
                                   rtol=1e-8, atol=1e-10)


def test_limits_in_tau():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 3))
    y = X @ [1.0, -1.0, 2.0] + 0.3 + 0.1 * rng.normal(size=50)
    Q = rng.normal(size=(10, 3))
    # tau -> infinity: all weights equal -> ordinary least squares
    ols = registry.get("linear_regression")().fit(X, y)
    np.testing.assert_allclose(LWR(tau=1e6, alpha=0.0).fit(X, y).predict(Q), ols.predict(Q), rtol=1e-6)
    # exact linear data is reproduced for any bandwidth
    y_lin = X @ [1.0, -1.0, 2.0] + 0.3
    np.testing.assert_allclose(LWR(tau=0.5, alpha=0.0).fit(X, y_lin).predict(Q), Q @ [1.0, -1.0, 2.0] + 0.3,
                               rtol=1e-7)


def test_far_query_and_batching_are_stable():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 2))
    y = X[:, 0] + rng.normal(size=40) * 0.1
    m = LWR(tau=0.1).fit(X, y)
    far = m.predict(np.array([[50.0, 50.0]]))  # all raw weights underflow to 0
    assert np.isfinite(far).all()
    Q = rng.normal(size=(300, 2))
    full = m.predict(Q)
    single = np.array([m.predict(q[None, :])[0] for q in Q[:5]])
    np.testing.assert_allclose(full[:5], single, rtol=1e-10)


def test_diabetes_beats_global_linear_model_at_moderate_bandwidth():
    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    a, b = [], []
    for tr, te in KFold(5, shuffle=True, random_state=0).split(X):
        a.append(LWR(tau=4.0).fit(X[tr], y[tr]).score(X[te], y[te]))
        b.append(registry.get("linear_regression")().fit(X[tr], y[tr]).score(X[te], y[te]))
    assert np.mean(a) > np.mean(b) - 0.02  # a smooth local model is at least as good as OLS


def test_singular_local_system_gives_minimum_norm_solution():
    # fewer training rows than features and no ridge: Z^T W Z is singular; the answer is
    # the minimum-norm weighted least-squares solution (pseudo-inverse)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 40)) * 3 + 5
    y = rng.normal(size=30)
    Q = rng.normal(size=(6, 40)) * 3 + 5
    tau = 3.0
    pred = LWR(tau=tau, alpha=0.0).fit(X, y).predict(Q)
    ref = []
    for q in Q:
        s = np.sum((X - q) ** 2, axis=1)
        w = np.exp(-(s - s.min()) / (2 * tau**2))
        Z = np.column_stack([np.ones(len(X)), X - q])
        ref.append(np.linalg.lstsq(Z * np.sqrt(w)[:, None], y * np.sqrt(w), rcond=None)[0][0])
    np.testing.assert_allclose(pred, ref, atol=0.05)
