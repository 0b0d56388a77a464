"""core/kernels and the GP kernels of core/kernel_methods/gp_kernels.py: kernel identities of
[Passerini §12.3.1], PSD closure, parsing, GP kernel gradients."""

from __future__ import annotations

import numpy as np
import pytest

from core.kernel_methods.gp_kernels import GPRBF, GPConstant, GPKernelSpec, GPLinear, GPPoly, GPWhite, build_gp_kernel
from core.kernels import (
    CosineKernel,
    KernelSpec,
    build_kernel,
    kernel_diag,
    kernel_matrix,
    parse_kernel,
    resolve_gamma,
    squared_euclidean,
)
from core.params import ParamError

x = np.array([[1.0, 2.0]])
xp = np.array([[3.0, 4.0]])


# ---- [Passerini §12.3.1] -----------------------------------------------------------------
def test_w7_linear_kernel_is_11():
    assert kernel_matrix(x, xp, kernel="linear")[0, 0] == pytest.approx(11.0)


def test_w7_homogeneous_quadratic_is_121_and_equals_explicit_feature_map():
    k = kernel_matrix(x, xp, kernel="poly", gamma=1.0, degree=2, coef0=0.0)[0, 0]
    assert k == pytest.approx(121.0)

    def phi(v):
        return np.array([v[0] ** 2, np.sqrt(2) * v[0] * v[1], v[1] ** 2])

    assert phi(x[0]) @ phi(xp[0]) == pytest.approx(k)


def test_w7_inhomogeneous_quadratic_is_144():
    assert kernel_matrix(x, xp, kernel="poly", gamma=1.0, degree=2, coef0=1.0)[0, 0] == pytest.approx(144.0)


def test_w7_gaussian_sigma_1_is_exp_minus_4():
    # sigma = 1 -> gamma = 1 / (2 sigma^2) = 0.5; ||x - x'||^2 = 8
    assert kernel_matrix(x, xp, kernel="rbf", gamma=0.5)[0, 0] == pytest.approx(np.exp(-4.0), rel=1e-12)
    assert np.exp(-4.0) == pytest.approx(0.0183156, abs=1e-7)
    gp = GPRBF(1.0)(x, xp)[0, 0]  # length scale sigma = 1
    assert gp == pytest.approx(np.exp(-4.0), rel=1e-12)


def test_w7_cosine_normalised_linear_is_0_983870():
    assert kernel_matrix(x, xp, kernel="linear", normalize=True)[0, 0] == pytest.approx(0.983870, abs=1e-6)
    k = build_kernel("cosine(linear)")
    assert k(x, xp)[0, 0] == pytest.approx(11.0 / np.sqrt(5.0 * 25.0), rel=1e-12)
    # normalised kernel has k(x, x) = 1
    X = np.random.default_rng(0).normal(size=(6, 3))
    np.testing.assert_allclose(np.diag(build_kernel("cosine(poly)", gamma=1.0, coef0=1.0)(X)), 1.0)


# ---- PSD closure ([Passerini §12.4.2]) ---------------------------------------------------------
PSD_EXPRESSIONS = [
    "linear",
    "poly",
    "rbf",
    "laplacian",
    "rbf+linear",
    "rbf*poly",
    "0.5*rbf + 2*linear",
    "cosine(poly)",
    "cosine(rbf+linear)",
    "(rbf + linear) * poly",
    "rbf*rbf*laplacian",
    {"sum": [{"name": "rbf", "gamma": 0.3}, {"scale": 3.0, "kernel": {"name": "poly", "degree": 2}}]},
]


@pytest.mark.parametrize("expr", PSD_EXPRESSIONS, ids=str)
def test_gram_matrices_symmetric_psd(expr):
    X = np.random.default_rng(1).normal(size=(40, 5))
    K = build_kernel(expr, gamma=0.2, degree=3, coef0=1.0)(X)
    np.testing.assert_allclose(K, K.T, atol=1e-12)
    assert np.linalg.eigvalsh(K).min() >= -1e-10 * max(1.0, np.abs(K).max())
    assert build_kernel(expr, gamma=0.2, coef0=1.0).psd


def test_sigmoid_is_not_marked_psd():
    assert not build_kernel("sigmoid").psd
    assert not build_kernel("rbf+sigmoid").psd


def test_diag_matches_matrix_diagonal():
    X = np.random.default_rng(2).normal(size=(7, 3))
    for expr in ["linear", "poly", "rbf", "sigmoid", "laplacian", "rbf*poly+linear", "cosine(poly)", "2*rbf"]:
        k = build_kernel(expr, gamma=0.3, coef0=0.5)
        np.testing.assert_allclose(k.diag(X), np.diag(k(X)), rtol=1e-12, atol=1e-12)


def test_sum_and_product_are_elementwise():
    X = np.random.default_rng(3).normal(size=(5, 2))
    Kr = kernel_matrix(X, kernel="rbf", gamma=0.7)
    Kp = kernel_matrix(X, kernel="poly", gamma=0.7, degree=2, coef0=1.0)
    np.testing.assert_allclose(build_kernel("rbf+poly", gamma=0.7, degree=2, coef0=1.0)(X), Kr + Kp)
    np.testing.assert_allclose(build_kernel("rbf*poly", gamma=0.7, degree=2, coef0=1.0)(X), Kr * Kp)
    np.testing.assert_allclose(build_kernel("3*rbf", gamma=0.7)(X), 3 * Kr)
    # '*' binds tighter than '+'
    np.testing.assert_allclose(
        build_kernel("linear + rbf*poly", gamma=0.7, degree=2, coef0=1.0)(X), X @ X.T + Kr * Kp
    )


def test_against_sklearn_pairwise_kernels():
    from sklearn.metrics.pairwise import pairwise_kernels

    rng = np.random.default_rng(4)
    X, Y = rng.normal(size=(8, 3)), rng.normal(size=(5, 3))
    for name, kw in [
        ("linear", {}),
        ("poly", {"gamma": 0.4, "degree": 3, "coef0": 1.0}),
        ("rbf", {"gamma": 0.4}),
        ("sigmoid", {"gamma": 0.1, "coef0": 0.3}),
        ("laplacian", {"gamma": 0.4}),
    ]:
        ours = build_kernel({"name": name, **kw})(X, Y)
        np.testing.assert_allclose(ours, pairwise_kernels(X, Y, metric=name, **kw), rtol=1e-10, atol=1e-12)


def test_gamma_scale_auto():
    X = np.random.default_rng(5).normal(size=(10, 4)) * 3
    assert resolve_gamma("scale", X) == pytest.approx(1.0 / (4 * X.var()))
    assert resolve_gamma("auto", X) == pytest.approx(0.25)
    k = build_kernel("rbf + poly", gamma="scale").resolved(X)
    assert k.parts[0].gamma == pytest.approx(1.0 / (4 * X.var()))


def test_existing_helpers_unchanged():
    X = np.random.default_rng(6).normal(size=(4, 3))
    np.testing.assert_allclose(squared_euclidean(X, X), ((X[:, None] - X[None]) ** 2).sum(-1), atol=1e-12)
    np.testing.assert_allclose(
        kernel_diag(X, kernel="poly", gamma=1, degree=2, coef0=1),
        np.diag(kernel_matrix(X, kernel="poly", gamma=1, degree=2, coef0=1)),
    )


# ---- parsing ---------------------------------------------------------------------------------
def test_parse_canonical_trees():
    assert parse_kernel("rbf") == {"name": "rbf"}
    assert parse_kernel("rbf+linear") == {"sum": [{"name": "rbf"}, {"name": "linear"}]}
    assert parse_kernel("2*rbf*poly") == {
        "scale": 2.0,
        "kernel": {"product": [{"name": "rbf"}, {"name": "poly"}]},
    }
    assert parse_kernel("cosine(poly)") == {"cosine": {"name": "poly"}}
    assert parse_kernel({"name": "RBF", "gamma": 0.5}) == {"name": "rbf", "gamma": 0.5}


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "rbf+",
        "foo",
        "rbf**2",
        "2",
        "-1*rbf",
        "cosine(rbf",
        "rbf)",
        {"sum": []},
        {"name": "linear", "gamma": 1.0},
        {"name": "rbf", "gamma": -1},
        {"scale": 0, "kernel": "rbf"},
        {"what": 1},
        3,
    ],
)
def test_spec_rejects_bad_kernels_naming_the_param(bad):
    with pytest.raises(ParamError) as info:
        KernelSpec().validate(bad, "kernel")
    assert info.value.param == "kernel"


def test_gp_spec():
    spec = GPKernelSpec()
    assert spec.validate("constant*rbf + white", "kernel") == "constant*rbf + white"
    for bad in ["sigmoid", "cosine(rbf)", {"name": "rbf", "gamma": 1.0}]:
        with pytest.raises(ParamError):
            spec.validate(bad, "kernel")


# ---- GP kernels: analytic gradients vs finite differences ------------------------------------------
GP_CASES = [
    "rbf",
    "constant",
    "white",
    "linear",
    "poly",
    "constant*rbf + white",
    "rbf*linear + poly",
    {
        "product": [
            {"name": "constant", "constant_value": 2.0},
            {"name": "rbf", "length_scale": [0.5, 2.0, 1.0]},
        ]
    },
    {"sum": [{"name": "rbf", "length_scale": 0.7, "length_scale_bounds": "fixed"}, {"name": "white"}]},
]


@pytest.mark.parametrize("expr", GP_CASES, ids=str)
def test_gp_kernel_gradient_matches_finite_differences(expr):
    X = np.random.default_rng(7).normal(size=(6, 3))
    k = build_gp_kernel(expr, 3)
    theta = k.theta + 0.1
    k = k.with_theta(theta)
    K, dK = k(X, eval_gradient=True)
    assert dK.shape == (6, 6, theta.size)
    np.testing.assert_allclose(K, k(X))
    h = 1e-6
    for q in range(theta.size):
        tp, tm = theta.copy(), theta.copy()
        tp[q] += h
        tm[q] -= h
        fd = (k.with_theta(tp)(X) - k.with_theta(tm)(X)) / (2 * h)
        np.testing.assert_allclose(dK[:, :, q], fd, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(k.diag(X), np.diag(K), rtol=1e-12)


def test_gp_kernels_match_sklearn():
    from sklearn.gaussian_process import kernels as skk

    X = np.random.default_rng(8).normal(size=(5, 2))
    Y = np.random.default_rng(9).normal(size=(4, 2))
    pairs = [
        (
            GPConstant(2.0) * GPRBF(1.5) + GPWhite(0.3),
            skk.ConstantKernel(2.0) * skk.RBF(1.5) + skk.WhiteKernel(0.3),
        ),
        (GPLinear(0.7), skk.DotProduct(0.7)),
        (GPPoly(0.7, degree=3), skk.DotProduct(0.7) ** 3),
    ]
    for ours, ref in pairs:
        np.testing.assert_allclose(ours(X), ref(X), rtol=1e-12)
        np.testing.assert_allclose(ours(X, Y), ref(X, Y), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(ours.diag(X), ref.diag(X), rtol=1e-12)
        np.testing.assert_allclose(ours.theta, ref.theta, rtol=1e-12)
        np.testing.assert_allclose(
            ours(X, eval_gradient=True)[1], ref(X, eval_gradient=True)[1], rtol=1e-10, atol=1e-12
        )


def test_cosine_kernel_object():
    X = np.random.default_rng(10).normal(size=(4, 3))
    k = CosineKernel(build_kernel("poly", gamma=1.0, coef0=1.0))
    np.testing.assert_allclose(k(X), kernel_matrix(X, kernel="poly", gamma=1.0, coef0=1.0, normalize=True))
