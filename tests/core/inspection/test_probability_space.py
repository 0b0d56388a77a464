"""Probability-space contributions of margin-additive classifiers (boosting, logistic / softmax models).

Against shap's TreeExplainer(model_output="probability") on an equivalent scikit-learn model, against a
brute-force enumeration of each reference's game, and additivity to ``predict_proba``.
"""

import numpy as np
import pytest
from scipy.special import expit, softmax

from core import registry
from core.inspection import OutputNotApplicable, explain, tree_shap
from core.inspection._trees import tree_arrays
from core.inspection.link import detect_link, probability_contributions, rescale
from tests.core.inspection.test_tree_shap import _data, _sklearn_arrays, brute_force


def _labels(y_num, k):
    return np.where(y_num > 0, "yes", "no") if k == 2 else np.digitize(y_num, [-0.5, 0.7])


CLASSIFIERS = [
    ("gradient_boosting_classifier", {"max_iter": 5, "max_depth": 3}, 2, "tree"),
    ("gradient_boosting_classifier", {"max_iter": 4, "max_depth": 3}, 3, "tree"),
    ("logistic_regression", {}, 2, "linear"),
    ("logistic_regression", {}, 3, "linear"),
    ("linear_discriminant_analysis", {}, 3, "linear"),
]


@pytest.mark.parametrize("missing", [0.0, 0.1])
@pytest.mark.parametrize("name,params,k,method", CLASSIFIERS)
def test_probability_is_the_default_and_adds_up_to_predict_proba(name, params, k, method, missing):
    X, y_num = _data(n=200, missing=missing if method == "tree" else 0.0)
    est = registry.get(name)(**params).fit(X, _labels(y_num, k))
    r = explain(est, X[:6], X[40:80])
    assert (r["method"], r["output"], r["link"]) == (method, "probability", "logistic" if k == 2 else "softmax")
    assert r["phi"].shape == (6, X.shape[1], k)
    np.testing.assert_allclose(r["base"] + r["phi"].sum(axis=1), est.predict_proba(X[:6]), rtol=0, atol=1e-12)
    np.testing.assert_allclose(r["base"], est.predict_proba(X[40:80]).mean(axis=0), rtol=0, atol=1e-12)
    np.testing.assert_allclose(r["phi"].sum(axis=2), 0.0, atol=1e-12)  # probabilities sum to one
    m = explain(est, X[:6], X[40:80], output="margin")
    assert (m["method"], m["output"]) == (method, "margin")
    score = est.decision_function(X[:6])
    score = np.column_stack([-score, score]) if score.ndim == 1 else score
    np.testing.assert_allclose(m["base"] + m["phi"].sum(axis=1), score, rtol=0, atol=1e-9)


@pytest.mark.parametrize("rows", [5, 40])
def test_against_shap_probability_output(rows):
    """scikit-learn's binary GradientBoostingClassifier in the common array form: the same values as shap's
    TreeExplainer(model_output="probability", feature_perturbation="interventional")."""
    shap = pytest.importorskip("shap")
    from sklearn.ensemble import GradientBoostingClassifier

    X, y_num = _data(n=300, f=5)
    sk = GradientBoostingClassifier(n_estimators=8, max_depth=3, random_state=0).fit(X, y_num > 0)
    A = _sklearn_arrays(sk.estimators_[:, 0], 5)
    A.value *= len(sk.estimators_) * sk.learning_rate  # _sklearn_arrays averages; boosting sums, scaled
    A.offset = sk._raw_predict_init(X[:1])[0].astype(float)
    A.output = "raw"
    np.testing.assert_allclose(A.predict(X)[:, 0], sk.decision_function(X), atol=1e-12)
    Xe, Z = X[100 : 100 + rows], X[:30]
    phi_ref, _ = tree_shap(A, Xe, Z, per_reference=True)
    psi = probability_contributions("logistic", phi_ref, A.predict(Xe), A.predict(Z))[:, :, 0]
    ex = shap.TreeExplainer(sk, data=Z, feature_perturbation="interventional", model_output="probability")
    ref = ex.shap_values(Xe)
    ref = ref[..., 1] if np.ndim(ref) == 3 else ref
    # shap's C++ kernel keeps thresholds and values in single precision: agreement to ~1e-7
    np.testing.assert_allclose(psi, ref, rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.ravel(ex.expected_value)[-1], expit(A.predict(Z)[:, 0]).mean(), atol=1e-6)


@pytest.mark.parametrize("missing", [0.0, 0.15])
@pytest.mark.parametrize("k", [2, 3])
def test_each_reference_game_against_enumeration(k, missing):
    """Per reference z the values are the Shapley values of the game p(z) + R(x, z) (m(x_S, z_~S) - m(z)):
    the margin game of the pair, enumerated through the model on hybrid rows, carried by R."""
    X, y_num = _data(n=200, missing=missing)
    est = registry.get("gradient_boosting_classifier")(max_iter=4, max_depth=3).fit(X, _labels(y_num, k))
    A = tree_arrays(est)
    groups = np.array([0, 0, 1, 2, 3, 4])
    Xe, Z = X[:3], X[60:66]
    phi_ref, _ = tree_shap(A, Xe, Z, groups, per_reference=True)
    mx, mz = A.predict(Xe), A.predict(Z)
    R = rescale("logistic" if k == 2 else "softmax", mx, mz)
    psi = np.zeros((3, 5, R.shape[2]))
    for i in range(3):
        for r in range(Z.shape[0]):
            margin = brute_force(A.predict, Xe[i], Z[r : r + 1], groups)  # (players, V)
            np.testing.assert_allclose(phi_ref[i, r], margin, rtol=0, atol=1e-9)
            psi[i] += margin @ R[i, r].T / Z.shape[0]
    r_ = explain(est, Xe, Z, groups)
    got = r_["phi"][:, :, 1:] if k == 2 else r_["phi"]
    np.testing.assert_allclose(got, psi, rtol=0, atol=1e-12)


def test_one_player_is_the_exact_shapley_value_of_the_probability_game():
    """With one player the game has two coalitions: the value is p(x) - mean_z p(z), whatever the link."""
    X, y_num = _data(n=200)
    est = registry.get("logistic_regression")().fit(X, _labels(y_num, 3))
    groups = np.zeros(X.shape[1], dtype=np.intp)
    r = explain(est, X[:4], X[50:70], groups)
    np.testing.assert_allclose(r["phi"][:, 0], est.predict_proba(X[:4]) - est.predict_proba(X[50:70]).mean(0),
                               atol=1e-12)


def test_rescale_logistic_is_shaps_factor_and_softmax_the_mean_jacobian():
    rng = np.random.default_rng(0)
    mx, mz = rng.normal(size=(4, 1)) * 3, rng.normal(size=(5, 1)) * 3
    R = rescale("logistic", mx, mz)[:, :, 0, 0]
    np.testing.assert_allclose(R, (expit(mx) - expit(mz.T)) / (mx - mz.T), rtol=1e-12)
    same = rescale("logistic", np.array([[0.4]]), np.array([[0.4]]))[0, 0, 0, 0]
    assert same == pytest.approx(expit(0.4) * (1 - expit(0.4)), rel=1e-12)  # the limit, not shap's 1.0
    K = 4
    mx, mz = rng.normal(size=(3, K)) * 4, rng.normal(size=(2, K)) * 4
    R = rescale("softmax", mx, mz)
    t = np.linspace(0, 1, 20001)
    for i in range(3):
        for r in range(2):
            d = mx[i] - mz[r]
            dp = softmax(mx[i]) - softmax(mz[r])
            np.testing.assert_allclose(R[i, r] @ d, dp, rtol=0, atol=1e-14)  # exact: additivity
            p = softmax(mz[r][None, :] + t[:, None] * d[None, :], axis=1)
            J = p[:, :, None] * np.eye(K)[None] - p[:, :, None] * p[:, None, :]
            np.testing.assert_allclose(R[i, r], np.trapezoid(J, t, axis=0), rtol=0, atol=1e-7)
    # two classes under softmax: the logistic rule of the score difference
    mx2, mz2 = rng.normal(size=(3, 2)), rng.normal(size=(2, 2))
    R2 = rescale("softmax", mx2, mz2)
    Rl = rescale("logistic", mx2[:, 1:] - mx2[:, :1], mz2[:, 1:] - mz2[:, :1])[:, :, 0, 0]
    np.testing.assert_allclose(R2[:, :, 1, 1], Rl, atol=1e-12)
    np.testing.assert_allclose(R2[:, :, 1, 0], -Rl, atol=1e-12)


def test_link_detection_refuses_what_is_not_logistic_or_softmax():
    rng = np.random.default_rng(1)
    M = rng.normal(size=(10, 3))
    assert detect_link(M, softmax(M, axis=1)) == "softmax"
    ovr = expit(M) / expit(M).sum(axis=1, keepdims=True)  # one-vs-rest normalised: not softmax
    assert detect_link(M, ovr) is None
    assert detect_link(M[:, 0], np.column_stack([1 - expit(M[:, 0]), expit(M[:, 0])])) == "logistic"
    assert detect_link(M[:, :1], np.column_stack([1 - expit(2 * M[:, 0]), expit(2 * M[:, 0])])) is None


def test_output_errors():
    X, y_num = _data(n=150)
    forest = registry.get("random_forest_classifier")(n_estimators=3, max_depth=3).fit(X, _labels(y_num, 3))
    with pytest.raises(OutputNotApplicable, match="no margin"):
        explain(forest, X[:2], X[:10], output="margin")
    reg = registry.get("ridge_regression")().fit(X, y_num)
    with pytest.raises(OutputNotApplicable, match="regressor"):
        explain(reg, X[:2], X[:10], output="probability")
    with pytest.raises(OutputNotApplicable, match="unknown output"):
        explain(forest, X[:2], X[:10], output="logit")
