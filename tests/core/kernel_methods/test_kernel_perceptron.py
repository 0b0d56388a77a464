"""kernel_perceptron: dual perceptron ([Colombo §6, eq. 68]) vs a direct per-sample implementation."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import datasets

from core.kernel_methods.kernel_perceptron import KernelPerceptron
from core.kernels import build_kernel
from core.model_selection import StratifiedKFold


def _reference(K, t, epochs):
    """Textbook dual perceptron, one sample at a time, no shuffling: a_i += 1 and b += t_i on mistakes."""
    n = len(t)
    a = np.zeros(n)
    b = 0.0
    for _ in range(epochs):
        mistakes = 0
        for i in range(n):
            f = (a * t) @ (K[:, i] + 1.0)
            if t[i] * f <= 0:
                a[i] += 1
                b += t[i]
                mistakes += 1
        if mistakes == 0:
            break
    return a, b


def test_matches_textbook_dual_perceptron():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    y = (X[:, 0] ** 2 + X[:, 1] ** 2 > 1.2).astype(int)
    m = KernelPerceptron(kernel="rbf", gamma=0.5, shuffle=False, max_iter=30).fit(X, y)
    t = np.where(y == 1, 1.0, -1.0)
    a, b = _reference(build_kernel("rbf", gamma=0.5)(X), t, 30)
    coef = np.zeros(60)
    coef[m.support_] = m.dual_coef_[0]
    np.testing.assert_allclose(coef, a * t)
    assert m.intercept_[0] == pytest.approx(b)


def test_separable_in_feature_space_reaches_zero_training_error():
    # XOR: not linearly separable, separable with an rbf or quadratic kernel
    X = np.array([[0, 0], [1, 1], [0, 1], [1, 0]] * 5, dtype=float)
    X += np.random.default_rng(1).normal(scale=0.05, size=X.shape)
    y = np.array([0, 0, 1, 1] * 5)
    for kernel in ["rbf", "poly"]:
        m = KernelPerceptron(kernel=kernel, gamma=2.0, degree=2, coef0=1.0, random_state=0).fit(X, y)
        assert m.score(X, y) == 1.0
        assert m.n_iter_ < 100
    lin = KernelPerceptron(kernel="linear", max_iter=20, random_state=0).fit(X, y)
    assert lin.score(X, y) < 1.0


def test_multiclass_ovr_on_iris():
    X, y = datasets.load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    accs = []
    for tr, te in StratifiedKFold(3, shuffle=True, random_state=0).split(X, y):
        m = KernelPerceptron(kernel="rbf", random_state=0).fit(X[tr], y[tr])
        assert m.dual_coef_.shape[0] == 3
        accs.append(m.score(X[te], y[te]))
    assert np.mean(accs) > 0.9


def test_string_labels_and_decision_shape():
    X, y = datasets.load_wine(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    labels = np.array(["a", "b", "c"])[y]
    m = KernelPerceptron(kernel="linear", random_state=0).fit(X, labels)
    assert m.decision_function(X).shape == (len(y), 3)
    assert m.score(X, labels) > 0.95
