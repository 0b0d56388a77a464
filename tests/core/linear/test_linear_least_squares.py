"""linear_regression / ridge_regression / basis expansions: mathematics and sklearn parity."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LinearRegression as SkLinear
from sklearn.linear_model import Ridge as SkRidge
from sklearn.preprocessing import PolynomialFeatures

from core import registry
from core.linear.basis import BasisExpansion
from core.model_selection.split import KFold
from core.params import ParamError

LinReg = registry.get("linear_regression")
RidgeReg = registry.get("ridge_regression")


def _data(n=200, d=5, seed=0, noise=0.1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w = rng.normal(size=d)
    y = X @ w + 0.7 + noise * rng.normal(size=n)
    return X, y, w


def test_normal_equation_svd_and_lstsq_agree():
    X, y, _ = _data()
    ref = np.linalg.lstsq(np.column_stack([X, np.ones(len(X))]), y, rcond=None)[0]
    for solver in ("normal_equation", "svd"):
        m = LinReg(solver=solver).fit(X, y)
        np.testing.assert_allclose(m.coef_, ref[:-1], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(m.intercept_, ref[-1], rtol=1e-10)


def test_no_intercept_matches_lstsq():
    X, y, _ = _data()
    ref = np.linalg.lstsq(X, y, rcond=None)[0]
    m = LinReg(fit_intercept=False).fit(X, y)
    np.testing.assert_allclose(m.coef_, ref, rtol=1e-10)
    assert m.intercept_ == 0.0


@pytest.mark.parametrize("solver", ["svd", "normal_equation"])
def test_rank_deficient_design(solver):
    X, y, _ = _data(n=50, d=3)
    Xd = np.column_stack([X, X[:, 0] + X[:, 1], 2 * X[:, 2]])  # two exactly dependent columns
    m = LinReg(solver=solver).fit(Xd, y)
    assert np.all(np.isfinite(m.coef_))
    # same fitted values as the full-rank model, and the minimum-norm coefficients
    full = LinReg().fit(X, y)
    np.testing.assert_allclose(m.predict(Xd), full.predict(X), rtol=1e-8, atol=1e-8)
    Xc = Xd - Xd.mean(0)
    np.testing.assert_allclose(m.coef_, np.linalg.pinv(Xc) @ (y - y.mean()), rtol=1e-6, atol=1e-8)


def test_more_features_than_samples():
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(10, 30)), rng.normal(size=10)
    m = LinReg().fit(X, y)
    np.testing.assert_allclose(m.predict(X), y, atol=1e-8)  # interpolates
    r = RidgeReg(alpha=0.5).fit(X, y)
    ref = SkRidge(alpha=0.5).fit(X, y)
    np.testing.assert_allclose(r.coef_, ref.coef_, rtol=1e-8)


@pytest.mark.parametrize("solver", ["gd", "sgd"])
def test_iterative_solvers_converge_to_closed_form(solver):
    X, y, _ = _data(n=400, d=4, seed=1)
    X[:, 1] *= 10.0  # the diagonal preconditioner must cope with scale differences
    exact = LinReg().fit(X, y)
    kw = {"max_iter": 3000, "tol": 1e-10} if solver == "gd" else {"max_iter": 400, "tol": 1e-9}
    m = LinReg(solver=solver, random_state=0, **kw).fit(X, y)
    rtol = 1e-7 if solver == "gd" else 2e-3
    np.testing.assert_allclose(m.coef_, exact.coef_, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(m.intercept_, exact.intercept_, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("solver", ["gd", "sgd", "svd", "cholesky"])
def test_ridge_solvers_agree_with_closed_form(solver):
    X, y, _ = _data(n=300, d=6, seed=2)
    alpha = 5.0
    Xc, yc = X - X.mean(0), y - y.mean()
    ref = np.linalg.solve(Xc.T @ Xc + alpha * np.eye(6), Xc.T @ yc)  # [Colombo eq. 21], unpenalised b
    kw = {"max_iter": 5000, "tol": 1e-11} if solver == "gd" else {"max_iter": 400, "tol": 1e-9}
    m = RidgeReg(alpha=alpha, solver=solver, random_state=0, **kw).fit(X, y)
    rtol = 2e-3 if solver == "sgd" else 1e-7
    np.testing.assert_allclose(m.coef_, ref, rtol=rtol, atol=rtol)


def test_sample_weight_equals_repetition():
    X, y, _ = _data(n=40, d=3, seed=4)
    w = np.arange(40) % 3 + 0.0
    rep = np.repeat(np.arange(40), w.astype(int))
    for cls, kw in ((LinReg, {}), (RidgeReg, {"alpha": 2.0})):
        a = cls(**kw).fit(X, y, sample_weight=w)
        b = cls(**kw).fit(X[rep], y[rep])
        np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-9)
        np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-9)


def test_polynomial_basis_matches_sklearn_features():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    for degree in (1, 2, 3):
        ours = BasisExpansion("polynomial", degree=degree).fit(X).transform(X)
        ref = PolynomialFeatures(degree, include_bias=False).fit_transform(X)
        # same monomials, possibly in another order: compare sorted column sets via Gram of columns
        assert ours.shape == ref.shape
        key = lambda M: np.sort(np.round(M.sum(0) + (M**2).sum(0) * 1e-3, 8))  # noqa: E731
        np.testing.assert_allclose(key(ours), key(ref), rtol=1e-10)


def test_polynomial_regression_recovers_cubic():
    x = np.linspace(-2, 2, 60)[:, None]
    y = 1.0 - 2.0 * x[:, 0] + 0.5 * x[:, 0] ** 3
    m = LinReg(basis="polynomial", degree=3).fit(x, y)
    np.testing.assert_allclose(m.coef_, [-2.0, 0.0, 0.5], atol=1e-9)
    np.testing.assert_allclose(m.intercept_, 1.0, atol=1e-9)
    np.testing.assert_allclose(m.predict(np.array([[3.0]])), [1 - 6 + 13.5], rtol=1e-9)


def test_gaussian_rbf_basis():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(80, 1))
    y = np.sin(X[:, 0])
    b = BasisExpansion("gaussian_rbf", n_centers=8, width=0.7).fit(X, random_state=0)
    Phi = b.transform(X)
    direct = np.exp(-((X - b.centers_.T) ** 2) / (2 * 0.7**2))
    np.testing.assert_allclose(Phi, direct, rtol=1e-10, atol=1e-12)
    # deterministic under random_state, centres are training rows
    b2 = BasisExpansion("gaussian_rbf", n_centers=8, width=0.7).fit(X, random_state=0)
    np.testing.assert_array_equal(b.centers_, b2.centers_)
    assert all(any(np.all(c == r) for r in X) for c in b.centers_)
    m = LinReg(basis="gaussian_rbf", n_centers=12, random_state=0).fit(X, y)
    lin = LinReg().fit(X, y)
    assert m.score(X, y) > 0.99 > lin.score(X, y)


def test_sigmoid_basis():
    X = np.linspace(-3, 3, 50)[:, None]
    b = BasisExpansion("sigmoid", n_centers=5).fit(X)
    Phi = b.transform(X)
    assert Phi.shape == (50, 5)
    assert np.all((Phi > 0) & (Phi < 1))
    mu, s = b.centers_[0], b.width_[0]
    np.testing.assert_allclose(Phi[:, 2], 1 / (1 + np.exp(-(X[:, 0] - mu[2]) / s)))
    y = np.tanh(2 * X[:, 0])
    assert LinReg(basis="sigmoid", n_centers=8).fit(X, y).score(X, y) > 0.99


def test_invalid_basis_param_named():
    X, y, _ = _data(n=20, d=2)
    with pytest.raises(ParamError) as info:
        LinReg(basis="fourier").fit(X, y)
    assert info.value.param == "basis"


def _cv_r2(make_ours, make_sk, X, y):
    ours, ref = [], []
    for tr, te in KFold(5, shuffle=True, random_state=0).split(X):
        ours.append(make_ours().fit(X[tr], y[tr]).score(X[te], y[te]))
        ref.append(make_sk().fit(X[tr], y[tr]).score(X[te], y[te]))
    return np.mean(ours), np.mean(ref)


def test_parity_diabetes_r2_and_coefficients():
    X, y = load_diabetes(return_X_y=True)
    a, b = _cv_r2(LinReg, SkLinear, X, y)
    assert abs(a - b) < 0.01
    for alpha in (0.01, 1.0):
        a, b = _cv_r2(lambda: RidgeReg(alpha=alpha), lambda: SkRidge(alpha=alpha), X, y)  # noqa: B023
        assert abs(a - b) < 0.01
        ours = RidgeReg(alpha=alpha).fit(X, y)
        ref = SkRidge(alpha=alpha).fit(X, y)
        np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-4)
        np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-4)
    # sample-weighted ridge against sklearn
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(y))
    ours = RidgeReg(alpha=0.1).fit(X, y, sample_weight=w)
    ref = SkRidge(alpha=0.1).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-4)
