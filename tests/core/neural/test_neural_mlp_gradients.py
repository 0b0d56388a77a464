"""Back-propagation checked against central finite differences ([Passerini §13.2.3]).

The notes' delta formulas [Passerini §13] are garbled, so every activation/output pair, batch
normalisation, the L1/L2 penalties and sample weights are verified numerically.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from core.neural._mlp_engine import MLPNetwork


def _targets(output, rng, B, k):
    if output == "softmax":
        Y = np.zeros((B, k))
        Y[np.arange(B), rng.integers(0, k, B)] = 1.0
        return Y
    if output == "sigmoid":
        return rng.integers(0, 2, (B, 1)).astype(float)
    return rng.normal(size=(B, k))


def _check(activation, output, batch_norm=False, alpha=0.0, l1=0.0, weighted=False, seed=0):
    rng = np.random.default_rng(seed)
    k = 1 if output == "sigmoid" else 3
    net = MLPNetwork([4, 5, 3, k], activation, output, batch_norm=batch_norm)
    net.initialize(rng, "glorot")
    # move every parameter away from its initial value (biases 0, BN scales 1) and from kinks
    net.params += rng.normal(scale=0.3, size=net.n_params)
    B = 7
    X = rng.normal(size=(B, 4))
    Y = _targets(output, rng, B, k)
    sw = rng.uniform(0.5, 2.0, size=B) if weighted else None
    net.loss_grad(X, Y, sw, alpha=alpha, l1=l1)
    analytic = net.grad.copy()
    numeric = np.empty_like(analytic)
    h = 1e-6
    base = net.params.copy()
    for i in range(net.n_params):
        net.params[i] = base[i] + h
        lp = net.loss_grad(X, Y, sw, alpha=alpha, l1=l1)
        net.params[i] = base[i] - h
        lm = net.loss_grad(X, Y, sw, alpha=alpha, l1=l1)
        net.params[i] = base[i]
        numeric[i] = (lp - lm) / (2 * h)
    err = np.abs(analytic - numeric).max() / max(1e-8, np.abs(numeric).max())
    assert err < 1e-6, (activation, output, batch_norm, alpha, l1, err)
    assert np.abs(analytic).max() > 1e-4  # a non-trivial gradient was compared


@pytest.mark.parametrize(
    "activation,output",
    list(itertools.product(["identity", "logistic", "tanh", "relu"], ["softmax", "sigmoid", "identity"])),
)
def test_backprop_matches_finite_differences(activation, output):
    _check(activation, output)


@pytest.mark.parametrize("activation", ["logistic", "tanh", "relu"])
@pytest.mark.parametrize("output", ["softmax", "sigmoid", "identity"])
def test_backprop_with_batch_norm(activation, output):
    _check(activation, output, batch_norm=True, seed=1)


@pytest.mark.parametrize("output", ["softmax", "sigmoid", "identity"])
def test_backprop_with_penalties_and_weights(output):
    _check("tanh", output, alpha=0.3, seed=2)
    _check("tanh", output, l1=0.2, seed=3)
    _check("relu", output, alpha=0.1, l1=0.05, weighted=True, batch_norm=True, seed=4)


def test_loss_values_closed_form():
    """The loss itself: softmax CE, binary CE and ½ squared error at known outputs."""
    net = MLPNetwork([2, 3], "identity", "softmax")  # no hidden layer: z = xW + b
    net.params[:] = 0.0
    X = np.array([[1.0, 0.0]])
    net.W[0][0] = [1.0, 2.0, 3.0]
    Y = np.array([[0.0, 0.0, 1.0]])
    expected = np.log(np.exp(1) + np.exp(2) + np.exp(3)) - 3.0
    assert net.loss_grad(X, Y) == pytest.approx(expected, rel=1e-12)
    # extreme logits stay finite (log-sum-exp)
    net.W[0][0] = [1000.0, -1000.0, 0.0]
    assert net.loss_grad(X, np.array([[0.0, 1.0, 0.0]])) == pytest.approx(2000.0)

    net = MLPNetwork([1, 1], "identity", "sigmoid")
    net.params[:] = [2.0, 0.0]
    X = np.array([[1.0], [-1.0]])
    Y = np.array([[1.0], [1.0]])
    expected = (np.log1p(np.exp(-2.0)) + np.log1p(np.exp(2.0))) / 2
    assert net.loss_grad(X, Y) == pytest.approx(expected, rel=1e-12)
    net.params[:] = [800.0, 0.0]
    assert net.loss_grad(X, Y) == pytest.approx(400.0)

    net = MLPNetwork([1, 1], "identity", "identity")
    net.params[:] = [2.0, 1.0]
    assert net.loss_grad(np.array([[1.0], [0.0]]), np.array([[0.0], [0.0]])) == pytest.approx(
        (9.0 + 1.0) / 4
    )
    # L2 as scikit-learn: + alpha/(2 n) ||W||²
    assert net.loss_grad(np.array([[1.0], [0.0]]), np.array([[0.0], [0.0]]), alpha=0.5) == pytest.approx(
        2.5 + 0.5 / 4 * 4.0
    )
