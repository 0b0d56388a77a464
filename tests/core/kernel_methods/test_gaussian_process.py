"""gaussian_process_regressor: evidence and gradient, fixed-kernel predictions vs sklearn, optimisation."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import datasets
from sklearn.datasets import make_friedman1
from sklearn.gaussian_process import GaussianProcessRegressor as SKGP
from sklearn.gaussian_process import kernels as skk

from core.context import FitCancelled, FitContext
from core.kernel_methods.gaussian_process_regressor import GaussianProcessRegressor, log_marginal_likelihood
from core.kernel_methods.gp_kernels import build_gp_kernel
from core.model_selection import KFold
from core.params import ParamError


def _diabetes():
    X, y = datasets.load_diabetes(return_X_y=True)
    return (X - X.mean(0)) / X.std(0), y


FIXED = {
    "sum": [
        {"product": [{"name": "constant", "constant_value": 2.0}, {"name": "rbf", "length_scale": 3.0}]},
        {"name": "white", "noise_level": 0.5},
    ]
}


def test_log_marginal_likelihood_closed_form():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(15, 2))
    y = rng.normal(size=15)
    k = build_gp_kernel("constant*rbf + white")
    C = k(X) + 1e-8 * np.eye(15)
    _, logdet = np.linalg.slogdet(C)
    expected = -0.5 * y @ np.linalg.solve(C, y) - 0.5 * logdet - 7.5 * np.log(2 * np.pi)
    assert log_marginal_likelihood(k, X, y, 1e-8) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize(
    "expr",
    [
        "constant*rbf + white",
        "rbf*linear + white",
        "poly + white",
        {"product": [{"name": "constant"}, {"name": "rbf", "length_scale": [1.0, 2.0]}]},
    ],
    ids=str,
)
def test_lml_gradient_matches_finite_differences(expr):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=20)
    k = build_gp_kernel(expr, 2)
    theta = k.theta + rng.normal(scale=0.3, size=k.n_dims)
    lml, grad = log_marginal_likelihood(k.with_theta(theta), X, y, 1e-2, eval_gradient=True)
    h = 1e-6
    for q in range(theta.size):
        tp, tm = theta.copy(), theta.copy()
        tp[q] += h
        tm[q] -= h
        fd = (
            log_marginal_likelihood(k.with_theta(tp), X, y, 1e-2)
            - log_marginal_likelihood(k.with_theta(tm), X, y, 1e-2)
        ) / (2 * h)
        assert grad[q] == pytest.approx(fd, rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("normalize_y", [False, True])
def test_fixed_kernel_predictions_equal_sklearn(normalize_y):
    X, y = _diabetes()
    Xtr, Xte, ytr = X[:300], X[300:], y[:300]
    ref_kernel = skk.ConstantKernel(2.0) * skk.RBF(3.0) + skk.WhiteKernel(0.5)
    ref = SKGP(kernel=ref_kernel, optimizer=None, normalize_y=normalize_y, alpha=1e-8).fit(Xtr, ytr)
    ours = GaussianProcessRegressor(kernel=FIXED, optimizer="none", normalize_y=normalize_y, alpha=1e-8).fit(
        Xtr, ytr
    )
    m_ref, s_ref = ref.predict(Xte, return_std=True)
    m, s = ours.predict(Xte, return_std=True)
    np.testing.assert_allclose(m, m_ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s, s_ref, rtol=1e-6, atol=1e-6)
    assert ours.log_marginal_likelihood_value_ == pytest.approx(ref.log_marginal_likelihood_value_, rel=1e-8)
    np.testing.assert_allclose(
        ours.log_marginal_likelihood(ours.kernel_.theta, eval_gradient=True)[1],
        ref.log_marginal_likelihood(ref.kernel_.theta, eval_gradient=True)[1],
        rtol=1e-6,
    )


def test_linear_and_poly_kernels_equal_sklearn():
    X, y = _diabetes()
    X, y = X[:200], y[:200]
    for ours_k, ref_k in [
        ("linear + white", skk.DotProduct(1.0) + skk.WhiteKernel(1.0)),
        (
            {"sum": [{"name": "poly", "degree": 2}, {"name": "white"}]},
            skk.DotProduct(1.0) ** 2 + skk.WhiteKernel(1.0),
        ),
    ]:
        ours = GaussianProcessRegressor(kernel=ours_k, optimizer=None, normalize_y=True).fit(X, y)
        ref = SKGP(kernel=ref_k, optimizer=None, normalize_y=True).fit(X, y)
        np.testing.assert_allclose(ours.predict(X[:20]), ref.predict(X[:20]), rtol=1e-6, atol=1e-6)


def test_optimised_hyperparameters_match_sklearn():
    X, y = _diabetes()
    Xtr, ytr = X[:250], y[:250]
    ref = SKGP(kernel=skk.ConstantKernel(1.0) * skk.RBF(1.0) + skk.WhiteKernel(1.0), normalize_y=True).fit(
        Xtr, ytr
    )
    ours = GaussianProcessRegressor(kernel="constant*rbf + white", normalize_y=True).fit(Xtr, ytr)
    assert ours.log_marginal_likelihood_value_ == pytest.approx(ref.log_marginal_likelihood_value_, abs=1e-3)
    np.testing.assert_allclose(ours.kernel_.theta, ref.kernel_.theta, atol=1e-2)
    # the optimum is a stationary point of the evidence
    _, grad = ours.log_marginal_likelihood(eval_gradient=True)
    assert np.abs(grad).max() < 1e-2


def test_r2_parity_on_diabetes():
    X, y = _diabetes()
    ours_r2, ref_r2 = [], []
    for tr, te in KFold(3, shuffle=True, random_state=0).split(X):
        ref = SKGP(kernel=skk.ConstantKernel() * skk.RBF() + skk.WhiteKernel(), normalize_y=True).fit(
            X[tr], y[tr]
        )
        ours = GaussianProcessRegressor(normalize_y=True).fit(X[tr], y[tr])
        ours_r2.append(ours.score(X[te], y[te]))
        ref_r2.append(ref.score(X[te], y[te]))
    assert abs(np.mean(ours_r2) - np.mean(ref_r2)) <= 0.02


def test_restarts_never_worse_and_optimizer_none_keeps_kernel():
    rng = np.random.default_rng(2)
    X = rng.uniform(-3, 3, size=(40, 1))
    y = np.sin(2 * X[:, 0]) + 0.05 * rng.normal(size=40)
    one = GaussianProcessRegressor(kernel="constant*rbf + white", random_state=0).fit(X, y)
    many = GaussianProcessRegressor(
        kernel="constant*rbf + white", n_restarts_optimizer=3, random_state=0
    ).fit(X, y)
    assert many.log_marginal_likelihood_value_ >= one.log_marginal_likelihood_value_ - 1e-6
    fixed = GaussianProcessRegressor(kernel=FIXED, optimizer=None).fit(X, y)
    np.testing.assert_allclose(fixed.kernel_.theta, np.log([2.0, 3.0, 0.5]))
    # with noise and fitted hyperparameters, predictions interpolate smoothly
    mean, std = many.predict(X, return_std=True)
    assert np.abs(mean - y).max() < 0.3 and (std > 0).all()


def test_fixed_bounds_exclude_parameters():
    X, y = _diabetes()
    k = {"sum": [{"name": "rbf", "length_scale": 2.0, "length_scale_bounds": "fixed"}, {"name": "white"}]}
    m = GaussianProcessRegressor(kernel=k, normalize_y=True).fit(X[:100], y[:100])
    assert m.kernel_.n_dims == 1
    assert m.kernel_.parts[0].value == 2.0


def test_std_shrinks_near_data_and_is_prior_far_away():
    X = np.array([[0.0], [1.0], [2.0]])
    y = np.array([0.0, 1.0, 0.0])
    m = GaussianProcessRegressor(kernel="rbf", optimizer=None, alpha=1e-10, normalize_y=False).fit(X, y)
    mean, std = m.predict(np.array([[1.0], [50.0]]), return_std=True)
    assert mean[0] == pytest.approx(1.0, abs=1e-6)
    assert std[0] < 1e-3
    assert std[1] == pytest.approx(1.0, abs=1e-9)


def test_bad_kernel_names_param():
    X, y = _diabetes()
    with pytest.raises(ParamError) as info:
        GaussianProcessRegressor(kernel={"name": "rbf", "length_scale": [1.0, 2.0]}).fit(X, y)
    assert info.value.param == "kernel"


def test_cancellation_during_optimisation():
    X, y = _diabetes()
    m = GaussianProcessRegressor(n_restarts_optimizer=2)
    calls = {"n": 0}

    def cancel():
        calls["n"] += 1
        return calls["n"] > 3

    with pytest.raises(FitCancelled):
        m.fit(X[:100], y[:100], ctx=FitContext(is_cancelled=cancel, cancel_interval=0.0))
    assert not hasattr(m, "alpha_")


def test_default_normalize_y_fits_targets_that_are_not_centred():
    # friedman1: y has mean ~14 and std ~5; the zero-mean prior on raw targets explains them as noise
    X, y = make_friedman1(n_samples=400, noise=0.0, random_state=0)
    X = (X - X.mean(0)) / X.std(0)
    Xtr, Xte, ytr, yte = X[:200], X[200:], y[:200], y[200:]
    assert GaussianProcessRegressor.params["normalize_y"].default is True
    ours = GaussianProcessRegressor().fit(Xtr, ytr).score(Xte, yte)
    ref = SKGP(kernel=skk.ConstantKernel() * skk.RBF() + skk.WhiteKernel(), normalize_y=True).fit(Xtr, ytr)
    assert ours > 0.85
    assert ours >= ref.score(Xte, yte) - 0.02
    raw = GaussianProcessRegressor(normalize_y=False).fit(Xtr, ytr).score(Xte, yte)
    assert raw < 0.2  # why the default is True
