"""svm_regressor: epsilon-SVR by SMO on the 2n-variable dual; KKT; parity with sklearn SVR."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import datasets
from sklearn.svm import SVR

from core.context import FitCancelled, FitContext
from core.model_selection import KFold
from core.svm.svm_regressor import SVMRegressor


def _diabetes():
    X, y = datasets.load_diabetes(return_X_y=True)
    return (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()


def _r2(y, p):
    return 1 - ((y - p) ** 2).sum() / ((y - y.mean()) ** 2).sum()


@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly"])
def test_parity_with_sklearn_svr_on_diabetes(kernel):
    X, y = _diabetes()
    ours_r2, ref_r2 = [], []
    for tr, te in KFold(3, shuffle=True, random_state=0).split(X):
        ours = SVMRegressor(kernel=kernel, C=1.0, epsilon=0.1).fit(X[tr], y[tr])
        ref = SVR(kernel=kernel, C=1.0, epsilon=0.1).fit(X[tr], y[tr])
        ours_r2.append(_r2(y[te], ours.predict(X[te])))
        ref_r2.append(_r2(y[te], ref.predict(X[te])))
        np.testing.assert_allclose(ours.predict(X[te]), ref.predict(X[te]), atol=0.02)
    assert abs(np.mean(ours_r2) - np.mean(ref_r2)) <= 0.02


def test_dual_coefficients_match_sklearn():
    X, y = _diabetes()
    X, y = X[:150], y[:150]
    ours = SVMRegressor(kernel="rbf", C=3.0, epsilon=0.2, tol=1e-6).fit(X, y)
    ref = SVR(kernel="rbf", C=3.0, epsilon=0.2, tol=1e-6).fit(X, y)
    np.testing.assert_array_equal(ours.support_, ref.support_)
    np.testing.assert_allclose(ours.dual_coef_, ref.dual_coef_, atol=1e-4)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, atol=1e-4)


def test_kkt_epsilon_tube():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(100, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=100)
    C, eps = 2.0, 0.1
    m = SVMRegressor(kernel="rbf", gamma=0.5, C=C, epsilon=eps, tol=1e-5).fit(X, y)
    r = y - m.predict(X)
    coef = np.zeros(100)
    coef[m.support_] = m.dual_coef_[0]
    assert abs(coef.sum()) < 1e-8  # sum (a+ - a-) = 0
    assert (np.abs(coef) <= C + 1e-12).all()
    tol = 2e-5
    inside = coef == 0
    assert (np.abs(r[inside]) <= eps + tol).all()  # non-SVs lie inside the tube
    free = (np.abs(coef) > 0) & (np.abs(coef) < C - 1e-9)
    np.testing.assert_allclose(np.abs(r[free]), eps, atol=tol)  # free SVs on the tube boundary
    np.testing.assert_array_equal(np.sign(coef[free]), np.sign(r[free]))
    bound = np.abs(coef) >= C - 1e-9
    assert (np.abs(r[bound]) >= eps - tol).all()


def test_linear_svr_fits_a_line_and_exposes_coef():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.3
    m = SVMRegressor(kernel="linear", C=100.0, epsilon=0.01, tol=1e-6).fit(X, y)
    np.testing.assert_allclose(m.coef_[0], [1.0, -2.0, 0.5], atol=0.02)
    assert m.intercept_[0] == pytest.approx(0.3, abs=0.02)


def test_sample_weight_matches_sklearn():
    X, y = _diabetes()
    X, y = X[:120], y[:120]
    w = np.random.default_rng(2).uniform(0.1, 2.0, size=120)
    ours = SVMRegressor(gamma=0.1, tol=1e-6).fit(X, y, sample_weight=w)
    ref = SVR(gamma=0.1, tol=1e-6).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), atol=1e-3)


def test_cancellation_leaves_unfitted():
    X, y = _diabetes()
    m = SVMRegressor(C=100.0)
    with pytest.raises(FitCancelled):
        m.fit(X, y, ctx=FitContext(is_cancelled=lambda: True, cancel_interval=0.0))
    assert not hasattr(m, "support_")
