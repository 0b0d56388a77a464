"""Linear closed form, the model-agnostic estimator, permutation importance, partial dependence."""

import itertools
import math

import numpy as np
import pytest

from core import registry
from core.inspection import (
    explain,
    linear_shap,
    linear_weights,
    partial_dependence,
    permutation_importance,
    permutation_shap,
)


def _xy(n=120, f=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    return X, X @ np.arange(1.0, f + 1) + 0.1 * rng.normal(size=n)


@pytest.mark.parametrize("name", ["linear_regression", "ridge_regression", "lasso_regression"])
def test_linear_closed_form_regressors(name):
    X, y = _xy()
    est = registry.get(name)().fit(X, y)
    W, b = linear_weights(est, X[:50])
    np.testing.assert_allclose(W[:, 0], est.coef_, atol=1e-12)
    phi, base = linear_shap(W, b, X[:7], X[:50])
    np.testing.assert_allclose(phi[:, :, 0], est.coef_ * (X[:7] - X[:50].mean(0)), atol=1e-12)
    np.testing.assert_allclose(base + phi.sum(1)[:, 0], est.predict(X[:7]), atol=1e-9)


@pytest.mark.parametrize("name", ["logistic_regression", "softmax_regression", "linear_discriminant_analysis"])
def test_linear_classifiers_explain_their_scores(name):
    X, y = _xy()
    labels = np.digitize(y, [-2, 2])
    est = registry.get(name)().fit(X, labels)
    r = explain(est, X[:5], X[:40], output="margin")
    assert r["method"] == "linear" and r["output"] == "margin"
    scores = est.decision_function(X[:5])
    np.testing.assert_allclose(r["base"] + r["phi"].sum(1), scores, atol=1e-9)
    p = explain(est, X[:5], X[:40])  # probabilities by default, exact through the link
    assert p["method"] == "linear" and p["output"] == "probability"
    np.testing.assert_allclose(p["base"] + p["phi"].sum(1), est.predict_proba(X[:5]), rtol=0, atol=1e-12)


def test_linear_groups_sum_columns():
    X, y = _xy()
    est = registry.get("linear_regression")().fit(X, y)
    W, b = linear_weights(est, X)
    phi, _ = linear_shap(W, b, X[:3], X, groups=np.array([0, 0, 1, 1, 2]))
    full, _ = linear_shap(W, b, X[:3], X)
    np.testing.assert_allclose(phi[:, 0], full[:, 0] + full[:, 1])


def test_not_linear_is_detected():
    X, y = _xy()
    est = registry.get("poisson_regression")().fit(X, np.exp(y / 10))
    assert linear_weights(est, X) is None
    assert explain(est, X[:2], X[:20])["method"] == "kernel"


def _brute(f, x, Z, groups):
    G = int(groups.max()) + 1
    v = {S: np.atleast_2d(f(np.where(np.isin(groups, S), x, Z))).reshape(len(Z), -1).mean(0)
         for r in range(G + 1) for S in itertools.combinations(range(G), r)}
    phi = np.zeros((G, len(v[()])))
    for i in range(G):
        for r in range(G):
            for S in itertools.combinations([j for j in range(G) if j != i], r):
                w = math.factorial(r) * math.factorial(G - r - 1) / math.factorial(G)
                phi[i] += w * (v[tuple(sorted((*S, i)))] - v[S])
    return phi


def _nonlinear(X):
    return np.sin(X[:, 0]) * X[:, 1] + X[:, 2] ** 2 - X[:, 3] * X[:, 4]


def test_permutation_shap_exact_mode_equals_brute_force():
    X, _ = _xy()
    phi, base, se = permutation_shap(_nonlinear, X[:3], X[:15])
    for i in range(3):
        np.testing.assert_allclose(phi[i], _brute(_nonlinear, X[i], X[:15], np.arange(5)), atol=1e-12)
    assert not se.any()


def test_permutation_sampling_is_additive_seeded_and_within_its_error():
    X, _ = _xy()
    exact = np.stack([_brute(_nonlinear, X[i], X[:15], np.arange(5)) for i in range(3)])
    phi, base, se = permutation_shap(_nonlinear, X[:3], X[:15], exact_max_players=0, n_permutations=40,
                                     random_state=3)
    np.testing.assert_allclose(base + phi.sum(1)[:, 0], _nonlinear(X[:3]), atol=1e-12)
    again, _, _ = permutation_shap(_nonlinear, X[:3], X[:15], exact_max_players=0, n_permutations=40,
                                   random_state=3)
    np.testing.assert_array_equal(phi, again)
    # the reported standard errors describe the actual error (5 standard errors, plus rounding)
    assert np.all(np.abs(phi - exact) <= 5 * se + 1e-9)


def test_permutation_importance_matches_sklearn():
    sk_inspection = pytest.importorskip("sklearn.inspection")
    from sklearn.base import BaseEstimator, RegressorMixin

    X, y = _xy(n=200)
    est = registry.get("ridge_regression")().fit(X, y)

    class Wrapped(RegressorMixin, BaseEstimator):  # the same fitted function, for scikit-learn
        def fit(self, X, y):
            return self

        def predict(self, X):
            return est.predict(X)

    from core.metrics import r2_score

    ours = permutation_importance(lambda A, t: r2_score(t, est.predict(A)), X, y, n_repeats=4, random_state=0)
    ref = sk_inspection.permutation_importance(Wrapped().fit(X, y), X, y, n_repeats=4, random_state=0,
                                               scoring="r2")
    from sklearn.metrics import r2_score as sk_r2

    # the shuffles differ (scikit-learn draws them from a RandomState): same baseline, close estimates
    np.testing.assert_allclose(ours["baseline"], sk_r2(y, est.predict(X)), rtol=1e-12)
    np.testing.assert_allclose(ours["mean"], ref.importances_mean, rtol=0.25, atol=0.02)
    assert np.argsort(ours["mean"]).tolist() == np.argsort(ref.importances_mean).tolist()


def test_permutation_importance_groups_and_losses():
    X, y = _xy(n=200)
    est = registry.get("ridge_regression")().fit(X, y)

    def mse(A, t):
        return float(np.mean((est.predict(A) - t) ** 2))

    out = permutation_importance(mse, X, y, groups=np.array([0, 0, 1, 2, 3]), n_repeats=3,
                                 greater_is_better=False)
    assert out["importances"].shape == (4, 3)
    assert (out["mean"] > 0).all()  # losses grow when a used feature is shuffled


def test_partial_dependence_against_direct_average():
    X, y = _xy()
    est = registry.get("random_forest_regressor")(n_estimators=5, random_state=0).fit(X, y)
    grid = np.array([-1.0, 0.0, 2.0])
    avg, ice = partial_dependence(est.predict, X, 1, grid)
    for k, g in enumerate(grid):
        Xg = X.copy()
        Xg[:, 1] = g
        np.testing.assert_allclose(avg[k, 0], est.predict(Xg).mean(), atol=1e-12)
        np.testing.assert_allclose(ice[:, k, 0], est.predict(Xg), atol=1e-12)
    # several columns set together (one-hot columns of a category)
    avg2, _ = partial_dependence(est.predict, X, [0, 1], np.array([[1.0, 0.0], [0.0, 1.0]]))
    Xg = X.copy()
    Xg[:, 0], Xg[:, 1] = 0.0, 1.0
    np.testing.assert_allclose(avg2[1, 0], est.predict(Xg).mean(), atol=1e-12)
