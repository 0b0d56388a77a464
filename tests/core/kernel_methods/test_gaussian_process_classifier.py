"""gaussian_process_classifier: Laplace evidence and gradient, fixed-kernel and fitted parity with scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.gaussian_process import GaussianProcessClassifier as SKGPC
from sklearn.gaussian_process import kernels as skk
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from core.context import FitCancelled, FitContext
from core.kernel_methods.gaussian_process_classifier import GaussianProcessClassifier, laplace_log_marginal_likelihood
from core.kernel_methods.gp_kernels import build_gp_kernel

FIXED = {"product": [{"name": "constant", "constant_value": 2.0}, {"name": "rbf", "length_scale": 3.0}]}


def _split(X, y):
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    sc = StandardScaler().fit(Xtr)
    return sc.transform(Xtr), sc.transform(Xte), ytr, yte


def _cancer():
    return _split(*load_breast_cancer(return_X_y=True))


def _three_classes():
    X, y = make_classification(n_samples=300, n_features=6, n_informative=4, n_redundant=0, n_classes=3,
                               n_clusters_per_class=1, random_state=0)
    return _split(X, y)


@pytest.mark.parametrize("expr", ["constant*rbf", "rbf*linear", {"product": [
    {"name": "constant"}, {"name": "rbf", "length_scale": [1.0, 2.0, 0.5]}]}], ids=str)
def test_laplace_evidence_gradient_matches_finite_differences(expr):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=40) > 0).astype(float)
    k = build_gp_kernel(expr, 3)
    theta = k.theta + rng.normal(scale=0.3, size=k.n_dims)
    _, grad = laplace_log_marginal_likelihood(k.with_theta(theta), X, y, eval_gradient=True)
    h = 1e-6
    for q in range(theta.size):
        tp, tm = theta.copy(), theta.copy()
        tp[q] += h
        tm[q] -= h
        fd = (laplace_log_marginal_likelihood(k.with_theta(tp), X, y)
              - laplace_log_marginal_likelihood(k.with_theta(tm), X, y)) / (2 * h)
        assert grad[q] == pytest.approx(fd, rel=1e-4, abs=1e-6)


def test_fixed_kernel_equals_sklearn():
    Xtr, Xte, ytr, _ = _cancer()
    ref = SKGPC(kernel=skk.ConstantKernel(2.0) * skk.RBF(3.0), optimizer=None).fit(Xtr, ytr)
    ours = GaussianProcessClassifier(kernel=FIXED, optimizer="none").fit(Xtr, ytr)
    np.testing.assert_allclose(ours.predict_proba(Xte), ref.predict_proba(Xte), atol=1e-8)
    assert ours.log_marginal_likelihood_value_ == pytest.approx(ref.log_marginal_likelihood_value_, rel=1e-9)
    np.testing.assert_allclose(
        laplace_log_marginal_likelihood(ours.kernel_, Xtr, ytr.astype(float), eval_gradient=True)[1],
        ref.log_marginal_likelihood(ref.kernel_.theta, eval_gradient=True)[1], rtol=1e-6)


@pytest.mark.parametrize("data", [_cancer, _three_classes], ids=["breast_cancer", "three_classes"])
def test_fitted_parity_with_sklearn(data):
    Xtr, Xte, ytr, yte = data()
    ref = SKGPC(kernel=skk.ConstantKernel() * skk.RBF(), random_state=0).fit(Xtr, ytr)
    ours = GaussianProcessClassifier(random_state=0).fit(Xtr, ytr)
    acc, acc_ref = accuracy_score(yte, ours.predict(Xte)), accuracy_score(yte, ref.predict(Xte))
    ll, ll_ref = log_loss(yte, ours.predict_proba(Xte)), log_loss(yte, ref.predict_proba(Xte))
    assert acc >= 0.9 and abs(acc - acc_ref) <= 0.02
    assert abs(ll - ll_ref) <= 0.1 * ll_ref
    assert ours.predict_proba(Xte).shape == (len(Xte), len(np.unique(ytr)))


def test_labels_restarts_and_fixed_kernel():
    Xtr, Xte, ytr, _ = _three_classes()
    labels = np.array(["low", "mid", "high"])[ytr]
    m = GaussianProcessClassifier(n_restarts_optimizer=1, random_state=3).fit(Xtr[:90], labels[:90])
    assert list(m.classes_) == ["high", "low", "mid"] and len(m.kernels_) == 3
    again = GaussianProcessClassifier(n_restarts_optimizer=1, random_state=3).fit(Xtr[:90], labels[:90])
    np.testing.assert_array_equal(m.predict_proba(Xte), again.predict_proba(Xte))
    one = GaussianProcessClassifier(random_state=3).fit(Xtr[:90], labels[:90])
    assert m.log_marginal_likelihood_value_ >= one.log_marginal_likelihood_value_ - 1e-6
    fixed = GaussianProcessClassifier(kernel=FIXED, optimizer=None).fit(Xtr[:90], labels[:90])
    np.testing.assert_allclose(fixed.kernel_.theta, np.log([2.0, 3.0]))
    # far from the data the latent variance is the prior's: probabilities move towards the base rates
    far = fixed.predict_proba(np.full((1, Xtr.shape[1]), 50.0))
    assert far.max() < 0.5


def test_cancellation_leaves_the_model_unfitted():
    Xtr, _, ytr, _ = _cancer()
    calls = {"n": 0}

    def cancel():
        calls["n"] += 1
        return calls["n"] > 3

    m = GaussianProcessClassifier()
    with pytest.raises(FitCancelled):
        m.fit(Xtr[:100], ytr[:100], ctx=FitContext(is_cancelled=cancel, cancel_interval=0.0))
    assert not hasattr(m, "classes_")
