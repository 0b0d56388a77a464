"""pca and kernel_pca: closed-form properties and scikit-learn parity."""

import numpy as np
import pytest
from sklearn.datasets import load_digits, load_iris, load_wine
from sklearn.decomposition import PCA as SkPCA
from sklearn.decomposition import KernelPCA as SkKernelPCA
from sklearn.preprocessing import StandardScaler

from core.decomposition.kernel_pca import KernelPCA
from core.decomposition.pca import PCA
from core.validation import DataError

LOADERS = [load_iris, load_wine, load_digits]


def _proj(V):
    """Orthogonal projector onto the row space of V (invariant to sign, order and rotation)."""
    Q, _ = np.linalg.qr(np.asarray(V).T)
    return Q @ Q.T


def _data(loader):
    X = loader().data
    return X[:600] if loader is load_digits else X


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("solver", ["full", "eigen", "randomized"])
def test_subspace_and_variances_match_sklearn(loader, solver):
    X = _data(loader)
    k = 3
    ours = PCA(n_components=k, svd_solver=solver, random_state=0).fit(X)
    ref = SkPCA(n_components=k, svd_solver="full").fit(X)
    np.testing.assert_allclose(_proj(ours.components_), _proj(ref.components_), atol=1e-6)
    np.testing.assert_allclose(ours.explained_variance_, ref.explained_variance_, rtol=1e-6)
    np.testing.assert_allclose(ours.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=1e-6)
    np.testing.assert_allclose(ours.noise_variance_, ref.noise_variance_, rtol=1e-5)
    if solver != "randomized":
        # same sign convention as scikit-learn (largest |entry| of each component positive)
        np.testing.assert_allclose(ours.components_, ref.components_, atol=1e-7)


def test_eig_and_svd_routes_agree_and_sign_convention():
    X = load_wine().data
    a = PCA(svd_solver="full").fit(X)
    b = PCA(svd_solver="eigen").fit(X)
    np.testing.assert_allclose(a.explained_variance_, b.explained_variance_, rtol=1e-8)
    np.testing.assert_allclose(a.components_, b.components_, atol=1e-8)
    for V in (a.components_, b.components_):
        assert np.all(V[np.arange(len(V)), np.argmax(np.abs(V), axis=1)] > 0)


@pytest.mark.parametrize("k", [1, 2, 5])
def test_reconstruction_error_equals_sum_of_dropped_eigenvalues(k):
    X = StandardScaler().fit_transform(load_wine().data)
    n = X.shape[0]
    full = PCA().fit(X)
    p = PCA(n_components=k).fit(X)
    err = np.sum((X - p.inverse_transform(p.transform(X))) ** 2) / (n - 1)
    assert err == pytest.approx(full.explained_variance_[k:].sum(), rel=1e-9)


def test_variance_fraction_whiten_and_inverse():
    X = load_digits().data[:500]
    p = PCA(n_components=0.9).fit(X)
    cum = np.cumsum(p.explained_variance_ratio_)
    assert cum[-1] >= 0.9 and (p.n_components_ == 1 or cum[-2] < 0.9)
    assert p.n_components_ == SkPCA(n_components=0.9, svd_solver="full").fit(X).n_components_
    w = PCA(n_components=5, whiten=True).fit(X)
    Z = w.transform(X)
    np.testing.assert_allclose(np.cov(Z.T), np.eye(5), atol=1e-8)
    full = PCA(whiten=True).fit(load_iris().data)
    Xi = load_iris().data
    np.testing.assert_allclose(full.inverse_transform(full.transform(Xi)), Xi, atol=1e-10)
    with pytest.raises(DataError, match="n_components"):
        PCA(n_components=10).fit(Xi)


def test_deterministic_components_under_permutation_of_rows():
    X = load_wine().data
    perm = np.random.default_rng(0).permutation(len(X))
    a = PCA(n_components=4).fit(X).components_
    b = PCA(n_components=4).fit(X[perm]).components_
    np.testing.assert_allclose(a, b, atol=1e-9)  # sign-stable: no arbitrary flips


# -- kernel PCA -------------------------------------------------------------------------
def test_kernel_pca_with_linear_kernel_equals_pca_up_to_sign():
    X = StandardScaler().fit_transform(load_wine().data)
    Zk = KernelPCA(n_components=4, kernel="linear").fit(X).transform(X)
    Zp = PCA(n_components=4).fit(X).transform(X)
    signs = np.sign(np.sum(Zk * Zp, axis=0))
    np.testing.assert_allclose(Zk * signs, Zp, atol=1e-8)
    # the eigenvalues of the centred Gram matrix are (n - 1) times the PCA variances
    kp = KernelPCA(n_components=4, kernel="linear").fit(X)
    np.testing.assert_allclose(kp.eigenvalues_, PCA(n_components=4).fit(X).explained_variance_ * (len(X) - 1))


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("kernel", ["rbf", "poly", "cosine", "sigmoid"])
def test_kernel_pca_subspace_matches_sklearn(loader, kernel):
    X = StandardScaler().fit_transform(_data(loader))[:400]
    kw = dict(n_components=3, kernel=kernel, gamma=0.05)
    if kernel == "cosine":
        kw.pop("gamma")
    ours = KernelPCA(**kw).fit(X)
    ref = SkKernelPCA(**kw).fit(X)
    np.testing.assert_allclose(ours.eigenvalues_, ref.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(_proj(ours.eigenvectors_.T), _proj(ref.eigenvectors_.T), atol=1e-6)
    Xt = X[:25] + 0.1
    np.testing.assert_allclose(np.abs(ours.transform(Xt)), np.abs(ref.transform(Xt)), atol=1e-6)


def test_kernel_pca_centring_inverse_and_zero_eigenvalues():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    kp = KernelPCA(kernel="rbf", gamma=0.5, fit_inverse_transform=True, alpha=1e-3).fit(X)
    Z = kp.transform(X)
    np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-9)  # centred in feature space
    assert np.all(kp.eigenvalues_ > 0)
    assert np.sum((kp.inverse_transform(Z) - X) ** 2) < 0.05 * np.sum((X - X.mean(0)) ** 2)
    # linear kernel on 3 features: rank 3, the zero eigenvalues are removed
    assert KernelPCA(kernel="linear").fit(X).n_components_ == 3
    with pytest.raises(DataError, match="fit_inverse_transform"):
        KernelPCA(n_components=2).fit(X).inverse_transform(Z[:, :2])
    a = KernelPCA(n_components=3, kernel="rbf", eigen_solver="arpack", random_state=0).fit(X)
    b = KernelPCA(n_components=3, kernel="rbf").fit(X)
    np.testing.assert_allclose(a.transform(X), b.transform(X), atol=1e-8)
