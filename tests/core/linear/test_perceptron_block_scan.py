"""The perceptron's block scan (margins of a block by one product, Python work only at candidate mistakes)
makes the updates of the sample-by-sample rule, in the same order: the same weights bit for bit."""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits, load_iris

from core import registry
from core.linear import perceptron as perceptron_mod


def _reference(X, T, s, p, rng):
    """Rosenblatt's rule one sample at a time (the loop the block scan replaces)."""
    n, d = X.shape
    m = T.shape[1]
    W, b = np.zeros((m, d)), np.zeros(m)
    active, best, stall = np.ones(m, dtype=bool), np.full(m, np.inf), np.zeros(m, dtype=int)
    n_part = np.maximum((T != 0).sum(axis=0), 1)
    order = np.arange(n)
    n_iter = 0
    for n_iter in range(1, p["max_iter"] + 1):  # noqa: B007 - returned after the loop
        if p["shuffle"]:
            rng.shuffle(order)
        loss, mistakes, act = np.zeros(m), np.zeros(m), active.astype(float)
        for i in order:
            x, t = X[i], T[i]
            margin = t * (W @ x + b)
            mis = (margin <= 0.0) & (t != 0)
            if mis.any():
                loss -= np.where(mis, margin, 0.0)
                mistakes += mis
                u = (p["eta0"] * s[i] * act) * np.where(mis, t, 0.0)
                W += np.outer(u, x)
                if p["fit_intercept"]:
                    b += u
        if p["tol"] is not None:
            worse = loss > best - p["tol"] * n_part
            stall = np.where(worse, stall + 1, 0)
            best = np.minimum(best, loss)
            active &= ~((stall >= p["n_iter_no_change"]) | (mistakes == 0))
        else:
            active &= mistakes != 0
        if not active.any():
            break
    return W, b, n_iter


def _sets():
    rng = np.random.default_rng(4)
    Xi = rng.integers(-3, 4, size=(700, 6)).astype(float)  # integer data: margins exactly 0 happen
    Xc, yc = load_breast_cancer(return_X_y=True)
    Xr, yr = load_iris(return_X_y=True)
    Xd, yd = load_digits(return_X_y=True)
    Xd = Xd[:400] / 16.0  # ten problems on 64 features: their margins are one matrix-vector product
    return {"digits (10 classes)": (Xd, yd[:400]),
            "integers": (Xi, (Xi[:, 0] + Xi[:, 1] - Xi[:, 2] > 0).astype(int)),
            "breast_cancer": ((Xc - Xc.mean(0)) / Xc.std(0), yc), "iris (3 classes)": (Xr, yr)}


@pytest.mark.parametrize("name", list(_sets()))
@pytest.mark.parametrize("kw", [{}, {"multi_class": "ovo"}, {"tol": None, "max_iter": 20}, {"fit_intercept": False},
                                {"eta0": 0.3, "shuffle": False}])
def test_block_scan_matches_the_sample_by_sample_rule(monkeypatch, name, kw):
    X, y = _sets()[name]
    _check(monkeypatch, X, y, kw, np.random.default_rng(1).uniform(0.5, 2.0, len(y)))


@pytest.mark.parametrize("name", list(_sets()))
@pytest.mark.parametrize("kw", [{}, {"multi_class": "ovo"}])
def test_block_scan_matches_the_sample_by_sample_rule_unit_steps(monkeypatch, name, kw):
    # no sample weights and eta0 = 1: the updates' rows are the block's rows themselves (no product)
    X, y = _sets()[name]
    _check(monkeypatch, X, y, kw, None)


def _check(monkeypatch, X, y, kw, weights):
    monkeypatch.setattr(perceptron_mod, "_BLOCK", 64)  # several blocks per epoch
    captured = {}
    train = perceptron_mod._train_perceptrons

    def capture(X_, T, s, p, rng, ctx):
        captured["args"] = (X_.copy(), T.copy(), s.copy(), dict(p), np.random.default_rng(p["random_state"]))
        return train(X_, T, s, p, rng, ctx)

    monkeypatch.setattr(perceptron_mod, "_train_perceptrons", capture)
    model = registry.get("perceptron")(random_state=7, **kw).fit(X, y, sample_weight=weights)
    W, b, n_iter = _reference(*captured["args"])
    assert n_iter == model.n_iter_
    np.testing.assert_array_equal(model.coef_, W)
    np.testing.assert_array_equal(model.intercept_, b)
