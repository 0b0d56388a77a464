"""MLP behaviour: optimisers, schedules, early stopping, batch norm, penalties, initialisation,
progress, sample weights, labels."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.context import FitCancelled, FitContext
from core.neural._mlp_engine import MLPNetwork, _learning_rate, common_params, validation_split
from core.neural.mlp_classifier import MLPClassifier
from core.neural.mlp_regressor import MLPRegressor
from core.params import ParamError, validate_params


def _blobs(n=300, seed=0, k=3):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=3.0, size=(k, 4))
    y = rng.integers(0, k, n)
    return centers[y] + rng.normal(size=(n, 4)), y


def _xor(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    return X, np.where(X[:, 0] * X[:, 1] > 0, "same", "diff")


@pytest.mark.parametrize(
    "solver,lr", [("sgd", 0.1), ("momentum", 0.05), ("nesterov", 0.05), ("adagrad", 0.1),
                  ("rmsprop", 0.01), ("adam", 0.01)]
)
def test_every_solver_learns_xor(solver, lr):
    """XOR is not linearly separable ([Passerini §10.1]): a hidden layer is needed."""
    X, y = _xor()
    m = MLPClassifier(hidden_layer_sizes=[16], activation="tanh", solver=solver, learning_rate_init=lr,
                      max_iter=150, random_state=0, momentum=0.9).fit(X, y)
    assert m.score(X, y) > 0.93, solver
    assert m.loss_curve_[-1] < 0.5 * m.loss_curve_[0]
    assert list(m.classes_) == ["diff", "same"]
    proba = m.predict_proba(X)
    assert proba.shape == (len(X), 2)
    np.testing.assert_array_equal(m.predict(X), m.classes_[(proba[:, 1] > 0.5).astype(int)])


def test_no_hidden_layer_is_logistic_regression():
    X, y = _xor()
    m = MLPClassifier(hidden_layer_sizes=[], max_iter=100, learning_rate_init=0.05, random_state=0).fit(X, y)
    assert len(m.coefs_) == 1 and m.coefs_[0].shape == (2, 1)
    assert m.score(X, y) < 0.7  # a linear model cannot do XOR


@pytest.mark.parametrize("activation", ["identity", "logistic", "sigmoid", "tanh", "relu"])
def test_activations_multiclass(activation):
    X, y = _blobs()
    m = MLPClassifier(hidden_layer_sizes=[10, 6], activation=activation, max_iter=60,
                      learning_rate_init=0.01, random_state=1).fit(X, y)
    assert m.score(X, y) > 0.9
    assert m.out_activation_ == "softmax" and m.n_layers_ == 4
    np.testing.assert_allclose(m.predict_proba(X).sum(axis=1), 1.0)


def test_linear_schedule_values():
    p = validate_params(common_params(), {"learning_rate": "linear", "learning_rate_init": 0.1,
                                          "learning_rate_min": 0.01, "decay_epochs": 10})
    lrs = [_learning_rate(p, t, 0, 0.1) for t in range(12)]
    # [Passerini §13.4]: eta_t = (1 - t/tau) eta_0 + (t/tau) eta_min, then eta_min
    np.testing.assert_allclose(lrs[:10], [(1 - t / 10) * 0.1 + t / 10 * 0.01 for t in range(10)])
    assert lrs[10] == lrs[11] == 0.01
    p = validate_params(common_params(), {"learning_rate": "linear", "learning_rate_init": 0.1,
                                          "max_iter": 4})
    assert _learning_rate(p, 2, 0, 0.1) == pytest.approx(0.5 * 0.1 + 0.5 * 0.001)
    p = validate_params(common_params(), {"learning_rate": "invscaling", "learning_rate_init": 0.1})
    assert _learning_rate(p, 3, 99, 0.1) == pytest.approx(0.1 / 100**0.5)


def test_linear_schedule_and_adaptive_train():
    X, y = _blobs()
    for sched, lr in (("linear", 0.1), ("invscaling", 0.3), ("adaptive", 0.1)):
        m = MLPClassifier(hidden_layer_sizes=[8], solver="sgd", learning_rate=sched, learning_rate_init=lr,
                          max_iter=40, random_state=0).fit(X, y)
        assert m.score(X, y) > 0.85, sched
        assert m.loss_curve_[-1] < 0.5 * m.loss_curve_[0], sched


def test_early_stopping_restores_best_and_stops():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 10))
    y = (X[:, 0] + rng.normal(scale=2.0, size=200) > 0).astype(int)  # noisy: overfits
    m = MLPClassifier(hidden_layer_sizes=[64], early_stopping=True, n_iter_no_change=5, max_iter=500,
                      learning_rate_init=0.01, random_state=0).fit(X, y)
    assert m.n_iter_ < 500
    assert len(m.validation_scores_) == m.n_iter_ == len(m.loss_curve_)
    assert m.best_validation_score_ == max(m.validation_scores_)
    # stops n_iter_no_change + 1 epochs after the last improvement (as scikit-learn)
    assert m.n_iter_ - 1 - int(np.argmax(m.validation_scores_)) >= 6
    # engine level: after training the restored parameters reproduce the best validation score
    from core.context import NULL_CONTEXT
    from core.neural._mlp_engine import train_network
    from core.neural.mlp_classifier import _accuracy

    p = validate_params(common_params(), {"hidden_layer_sizes": [64], "learning_rate_init": 0.01,
                                          "n_iter_no_change": 5, "max_iter": 500, "early_stopping": True})
    net = MLPNetwork([10, 64, 1], "relu", "sigmoid")
    rng = np.random.default_rng(0)
    net.initialize(rng)
    Y = y[:160, None].astype(float)
    info = train_network(net, X[:160], Y, None, p, rng, NULL_CONTEXT, val=(X[160:], y[160:]),
                         score_fn=_accuracy)
    assert info["n_iter"] < 500
    assert _accuracy(net, X[160:], y[160:]) == info["best_validation_score"] == max(info["validation_scores"])
    assert info["validation_scores"][-1] < info["best_validation_score"]


def test_validation_split_is_stratified_and_sized():
    codes = np.repeat([0, 1, 2], [50, 30, 20])
    tr, va = validation_split(100, 0.2, np.random.default_rng(0), codes)
    assert len(va) == 20 and len(tr) == 80 and not set(tr) & set(va)
    assert list(np.bincount(codes[va])) == [10, 6, 4]
    with pytest.raises(ValueError, match="validation"):
        validation_split(5, 0.1, np.random.default_rng(0))


def test_stopping_on_training_loss_plateau():
    X, y = _blobs()
    m = MLPClassifier(hidden_layer_sizes=[8], max_iter=1000, tol=1e-2, n_iter_no_change=3,
                      learning_rate_init=0.01, random_state=0).fit(X, y)
    assert m.n_iter_ < 1000
    assert m.best_loss_ == pytest.approx(min(m.loss_curve_))


def test_batch_norm_trains_and_uses_running_statistics():
    X, y = _blobs(n=400, seed=3)
    X = X * 50 + 100  # badly scaled inputs: batch norm copes
    m = MLPClassifier(hidden_layer_sizes=[16, 16], batch_norm=True, max_iter=40, learning_rate_init=0.01,
                      random_state=0).fit(X, y)
    assert m.score(X, y) > 0.9
    net = m.net_
    assert net.batch_norm and len(net.running_mean) == 2
    assert np.abs(net.running_mean[0]).max() > 1.0  # the statistics were tracked
    # inference does not depend on the batch composition
    np.testing.assert_allclose(m.predict_proba(X[:5]), m.predict_proba(X)[:5], atol=1e-12)


def test_l1_sparsifies_and_l2_shrinks():
    X, y = _blobs(seed=2)
    kw = dict(hidden_layer_sizes=[32], max_iter=80, learning_rate_init=0.01, random_state=0, solver="adam")
    plain = MLPClassifier(alpha=0.0, **kw).fit(X, y)
    l2 = MLPClassifier(alpha=30.0, **kw).fit(X, y)
    l1 = MLPClassifier(alpha=0.0, l1=3.0, **kw).fit(X, y)

    def norm(m):
        return sum(float(np.sum(w**2)) for w in m.coefs_)

    def small(m):
        return np.mean(np.abs(np.concatenate([w.ravel() for w in m.coefs_])) < 1e-2)

    assert norm(l2) < 0.5 * norm(plain)
    assert small(l1) > small(plain) + 0.2


@pytest.mark.parametrize("init,activation", [("glorot", "tanh"), ("he", "relu"), ("auto", "relu"),
                                             ("auto", "logistic")])
def test_initialisation_bounds(init, activation):
    net = MLPNetwork([400, 300, 10], activation, "softmax")
    net.initialize(np.random.default_rng(0), init)
    use_he = init == "he" or (init == "auto" and activation == "relu")
    b0 = math.sqrt(6 / 400) if use_he else math.sqrt(6 / 700)
    W0 = net.W[0]
    assert np.abs(W0).max() <= b0 and np.abs(W0).max() > 0.98 * b0
    assert np.var(W0) == pytest.approx(b0**2 / 3, rel=0.02)
    assert np.abs(net.W[1]).max() <= math.sqrt(6 / 310)  # output layer: Glorot
    assert not net.b[0].any()


def test_progress_once_per_epoch_with_loss():
    X, y = _blobs()
    seen = []
    ctx = FitContext(on_progress=lambda f, m: seen.append((f, m)), min_interval=0.0)
    m = MLPRegressor(hidden_layer_sizes=[4], max_iter=7, tol=0.0, random_state=0).fit(X, y.astype(float),
                                                                                      ctx=ctx)
    assert [round(f * 7) for f, _ in seen] == list(range(1, 8))
    assert [d["loss"] for _, d in seen] == m.loss_curve_
    ctx = FitContext(is_cancelled=lambda: True, cancel_interval=0.0)
    est = MLPClassifier(max_iter=5)
    with pytest.raises(FitCancelled):
        est.fit(X, y, ctx=ctx)
    assert not hasattr(est, "coefs_")


def test_batch_size_auto_and_clipping():
    X, y = _blobs(n=50)
    m = MLPClassifier(hidden_layer_sizes=[4], max_iter=2, batch_size=1000, random_state=0).fit(X, y)
    assert m.n_iter_ == 2
    m2 = MLPClassifier(hidden_layer_sizes=[4], max_iter=2, batch_size="auto", random_state=0).fit(X, y)
    np.testing.assert_allclose(m.coefs_[0], m2.coefs_[0])  # auto = min(200, 50) = 50 = clipped 1000
    with pytest.raises(ParamError) as info:
        MLPClassifier(batch_size=0).fit(X, y)
    assert info.value.param == "batch_size"


def test_integer_sample_weights_equal_duplicated_rows():
    X, y = _blobs(n=60)
    w = np.random.default_rng(0).integers(1, 4, size=60)
    kw = dict(hidden_layer_sizes=[5], max_iter=10, batch_size=1000, shuffle=False, random_state=0,
              learning_rate_init=0.05)
    a = MLPClassifier(**kw).fit(X, y, sample_weight=w.astype(float))
    b = MLPClassifier(**kw).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    np.testing.assert_allclose(a.coefs_[0], b.coefs_[0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a.loss_curve_, b.loss_curve_, rtol=1e-9)


def test_regressor_fits_nonlinear_function():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(500, 1))
    y = np.sin(2 * X[:, 0]) + 0.05 * rng.normal(size=500)
    m = MLPRegressor(hidden_layer_sizes=[32, 32], activation="tanh", max_iter=200, learning_rate_init=0.01,
                     random_state=0).fit(X, y)
    assert m.score(X, y) > 0.95
    assert m.out_activation_ == "identity"
    es = MLPRegressor(hidden_layer_sizes=[16], early_stopping=True, max_iter=300, random_state=0).fit(X, y)
    assert es.validation_scores_ is not None and es.best_validation_score_ > 0.5


def test_divergence_raises_clear_error():
    X, y = _blobs()
    with pytest.raises(ValueError, match="diverged"):
        MLPRegressor(solver="sgd", momentum=0.0, learning_rate_init=1e3, max_iter=20,
                     random_state=0).fit(X * 100, y * 1e6)


def test_data_errors():
    X, y = _blobs(n=20)
    with pytest.raises(ValueError, match="class"):
        MLPClassifier().fit(X, np.zeros(20))
    m = MLPClassifier(hidden_layer_sizes=[3], max_iter=2).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        m.predict(X[:, :2])
    with pytest.raises(ValueError, match="NaN"):
        MLPClassifier().fit(np.where(X > 1, np.nan, X), y)
