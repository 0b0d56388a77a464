"""Decision trees: worked examples of [Passerini §2.3.2, §2.3.4], criteria, pruning, missing/categorical."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from core import registry
from core.params import ParamError
from core.tree._tree import impurity
from core.validation import DataError

DTC = registry.get("decision_tree_classifier")
DTR = registry.get("decision_tree_regressor")


def _h(*p):
    p = np.asarray(p, dtype=float)
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


# ------------------------------------- threshold selection example: [Passerini §2.3.2]
W1_X = np.array([[2.5], [3.0], [4.5], [5.0], [6.0]])
W1_y = np.array(["+", "+", "-", "-", "+"])


def test_w1_information_gains_of_the_two_thresholds():
    H = _h(3 / 5, 2 / 5)
    assert H == pytest.approx(0.970951, abs=1e-6)
    ig_375 = H - 3 / 5 * _h(1 / 3, 2 / 3)
    ig_55 = H - 4 / 5 * 1.0
    assert ig_375 == pytest.approx(0.419973, abs=1e-6)
    assert ig_55 == pytest.approx(0.170951, abs=1e-6)
    # the same numbers from the tree's own impurity function on class counts
    counts = np.array([[2.0, 3.0], [0.0, 2.0], [2.0, 1.0], [2.0, 2.0], [0.0, 1.0]])
    H_all, H_l, H_r, H_l2, H_r2 = impurity(counts, "entropy")
    assert H_all - (2 / 5 * H_l + 3 / 5 * H_r) == pytest.approx(0.419973, abs=1e-6)
    assert H_all - (4 / 5 * H_l2 + 1 / 5 * H_r2) == pytest.approx(0.170951, abs=1e-6)


@pytest.mark.parametrize("criterion", ["entropy", "gain_ratio", "gini"])
def test_w1_tree_chooses_threshold_375(criterion):
    t = DTC(criterion=criterion, max_depth=1).fit(W1_X, W1_y).tree_
    assert t.threshold[0] == pytest.approx(3.75)
    assert t.feature[0] == 0
    # root impurity is H(S) and the realised gain is IG(3.75)
    if criterion == "entropy":
        W = t.weighted_n_node_samples
        gain = t.impurity[0] - (W[1] * t.impurity[1] + W[2] * t.impurity[2]) / W[0]
        assert t.impurity[0] == pytest.approx(0.970951, abs=1e-6)
        assert gain == pytest.approx(0.419973, abs=1e-6)


def test_w1_full_tree_uses_both_thresholds():
    t = DTC(criterion="entropy").fit(W1_X, W1_y).tree_
    thr = sorted(t.threshold[np.isfinite(t.threshold)])
    assert thr == pytest.approx([3.75, 5.5])
    assert DTC(criterion="entropy").fit(W1_X, W1_y).score(W1_X, W1_y) == 1.0


# ------------------------------- missing value, fractional propagation: [Passerini §2.3.4]
def _w2_tree():
    # OUTLOOK codes: 0 rain (5 examples, yes), 1 overcast (4, yes), 2 sunny (1, no)
    X = np.array([[0.0]] * 5 + [[1.0]] * 4 + [[2.0]])
    y = np.array(["yes"] * 9 + ["no"])
    return DTC(criterion="entropy").fit(X, y, categorical_features=[0])


def test_w2_fractional_missing_value_at_predict():
    m = _w2_tree()
    assert m.tree_.kind[0] == 2  # categorical multiway split
    assert m.tree_.node_count == 4  # root + one child per outlook value
    proba = m.predict_proba(np.array([[np.nan]]))
    yes = list(m.classes_).index("yes")
    assert proba[0, yes] == pytest.approx(0.9)
    assert proba[0, 1 - yes] == pytest.approx(0.1)
    assert m.predict(np.array([[np.nan]]))[0] == "yes"
    # known values follow their branch; an unseen category is routed like a missing value
    np.testing.assert_allclose(m.predict_proba(np.array([[2.0], [7.0]]))[:, yes], [0.0, 0.9])


def test_missing_values_at_fit_fractional_weights():
    # feature 0 decides the class; one sample of each class misses it
    X = np.array([[0.0], [0.0], [0.0], [1.0], [1.0], [np.nan], [np.nan]])
    y = np.array([0, 0, 0, 1, 1, 0, 1])
    m = DTC(criterion="entropy").fit(X, y)
    t = m.tree_
    assert t.threshold[0] == pytest.approx(0.5)
    # known weights 3 (left) and 2 (right): each missing sample is split 3/5 : 2/5
    np.testing.assert_allclose(t.weighted_n_node_samples[1:3], [3 + 2 * 0.6, 2 + 2 * 0.4])
    np.testing.assert_allclose(t.child_frac[:2], [0.6, 0.4])
    p = m.predict_proba(np.array([[np.nan]]))[0]
    np.testing.assert_allclose(p, 0.6 * t.value[1] + 0.4 * t.value[2])


def test_missing_values_do_not_break_learning():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    Xm = X.copy()
    Xm[rng.random(X.shape) < 0.15] = np.nan
    m = DTC(max_depth=6, random_state=0).fit(Xm[:300], y[:300])
    assert m.score(Xm[300:], y[300:]) > 0.7
    assert np.isfinite(m.predict_proba(Xm)).all()


def test_categorical_multiway_split_beats_threshold_on_nonmonotone_codes():
    rng = np.random.default_rng(1)
    c = rng.integers(0, 6, size=300).astype(float)
    y = np.isin(c, [0, 2, 5]).astype(int)
    X = np.c_[c, rng.normal(size=300)]
    cat = DTC(max_depth=1).fit(X, y, categorical_features=[True, False])
    assert cat.tree_.kind[0] == 2 and cat.tree_.feature[0] == 0
    assert cat.score(X, y) == 1.0
    assert DTC(max_depth=1).fit(X, y).score(X, y) < 1.0


def test_categorical_codes_validated():
    with pytest.raises(DataError, match="category codes"):
        DTC().fit(np.array([[0.5], [1.0]]), [0, 1], categorical_features=[0])


def test_gain_ratio_prefers_fewer_valued_attribute():
    # attribute 0: unique id (IG maximal, H_A large); attribute 1: perfect binary attribute
    n = 16
    ids = np.arange(n, dtype=float)
    y = np.array([0, 1] * (n // 2))
    X = np.c_[ids, y.astype(float)]
    m = DTC(criterion="gain_ratio", max_depth=1).fit(X, y, categorical_features=[0, 1])
    assert m.tree_.feature[0] == 1
    m = DTC(criterion="entropy", max_depth=1).fit(X, y, categorical_features=[0, 1])
    assert m.tree_.feature[0] == 0  # plain IG ties at H(S); the first (id) attribute wins


# ----------------------------------------------------------------- parity with scikit-learn trees
def test_exact_structure_matches_sklearn_on_breast_cancer():
    sk = pytest.importorskip("sklearn.tree")
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    for crit in ("gini", "entropy"):
        ours = DTC(criterion=crit, max_depth=4).fit(X, y)
        ref = sk.DecisionTreeClassifier(criterion=crit, max_depth=4, random_state=0).fit(X, y)
        assert ours.tree_.feature[0] == ref.tree_.feature[0]
        assert ours.tree_.threshold[0] == pytest.approx(ref.tree_.threshold[0])
        assert ours.tree_.n_leaves == ref.get_n_leaves()
        # equal-gain ties between features are broken differently (scikit-learn permutes features)
        same = np.isclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-12).all(axis=1)
        assert same.mean() >= 0.99
        assert np.argmax(ours.feature_importances_) == np.argmax(ref.feature_importances_)
        assert np.abs(ours.feature_importances_ - ref.feature_importances_).sum() < 0.15


def test_regressor_matches_sklearn_on_diabetes():
    sk = pytest.importorskip("sklearn.tree")
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    ours = DTR(max_depth=3).fit(X, y)
    ref = sk.DecisionTreeRegressor(max_depth=3).fit(X, y)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=1e-10)
    ours = DTR(max_depth=3, criterion="absolute_error").fit(X, y)
    ref = sk.DecisionTreeRegressor(max_depth=3, criterion="absolute_error").fit(X, y)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), rtol=1e-10)


def test_ccp_alpha_matches_sklearn():
    sk = pytest.importorskip("sklearn.tree")
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    for alpha in (0.0, 0.005, 0.02):
        ours = DTC(ccp_alpha=alpha).fit(X, y)
        ref = sk.DecisionTreeClassifier(ccp_alpha=alpha, random_state=0).fit(X, y)
        assert ours.get_n_leaves() == ref.get_n_leaves(), alpha
        same = np.isclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-12).all(axis=1)
        assert same.mean() >= 0.98  # feature ties aside, the same pruned tree


# ----------------------------------------------------------------- pre- and post-pruning
def test_pre_pruning_limits():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] + 0.5 * rng.normal(size=300) > 0).astype(int)
    full = DTC(random_state=0).fit(X, y)
    assert DTC(max_depth=3).fit(X, y).get_depth() <= 3
    m = DTC(min_samples_leaf=10).fit(X, y)
    leaves = m.tree_.kind == 0
    assert (m.tree_.n_node_samples[leaves] >= 10).all()
    m = DTC(min_samples_split=50).fit(X, y)
    internal = m.tree_.kind != 0
    assert (m.tree_.n_node_samples[internal] >= 50).all()
    assert DTC(min_impurity_decrease=0.01).fit(X, y).get_n_leaves() < full.get_n_leaves()
    assert DTC(min_samples_leaf=0.1).fit(X, y).get_n_leaves() <= 10


def test_reduced_error_pruning_shrinks_and_does_not_hurt_validation():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 5))
    y = (X[:, 0] + 0.8 * rng.normal(size=600) > 0).astype(int)
    full = DTC(random_state=0).fit(X[:400], y[:400])
    rep = DTC(pruning="reduced_error", validation_fraction=0.3, random_state=0).fit(X[:400], y[:400])
    assert rep.get_n_leaves() < full.get_n_leaves() / 3
    assert rep.score(X[400:], y[400:]) >= full.score(X[400:], y[400:]) - 0.02
    reg = DTR(pruning="reduced_error", random_state=0).fit(X[:400], X[:400, 0] + rng.normal(size=400))
    assert reg.get_n_leaves() < DTR().fit(X[:400], X[:400, 0] + rng.normal(size=400)).get_n_leaves()


def test_class_and_sample_weight_equivalence():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] > 0.3).astype(int)
    a = DTC(max_depth=3, class_weight={"1": 3.0}).fit(X, y)
    b = DTC(max_depth=3).fit(X, y, sample_weight=np.where(y == 1, 3.0, 1.0))
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X))
    # integer sample weights == duplicated rows
    w = rng.integers(1, 4, size=120)
    c = DTC(max_depth=3).fit(X, y, sample_weight=w.astype(float))
    d = DTC(max_depth=3).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    np.testing.assert_allclose(c.predict_proba(X), d.predict_proba(X))
    bal = DTC(max_depth=2, class_weight="balanced").fit(X, y)
    assert bal.tree_.value[0] == pytest.approx([0.5, 0.5])


def test_uniform_weights_grow_the_unweighted_tree_exactly():
    # without weights growth counts rows (no weight array); weights of 2.0 go through the weighted
    # sums: the trees must be the same, with exactly doubled weighted counts
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=6000, n_features=6, n_informative=4, random_state=1)
    t = X[:, 0] + 0.5 * X[:, 1] ** 2
    for est, target, n, splitter in (
        (DTC, y, 6000, "auto"),  # binned (> 5000 rows)
        (DTC, y, 700, "exact"),
        (DTR, t, 6000, "auto"),
    ):
        a = est(splitter=splitter, max_depth=12, random_state=0).fit(X[:n], target[:n]).tree_
        b = est(splitter=splitter, max_depth=12, random_state=0).fit(
            X[:n], target[:n], sample_weight=np.full(n, 2.0)
        ).tree_
        assert a.node_count > 50
        for attr in ("feature", "threshold", "kind", "child_ptr", "children", "child_frac", "value",
                     "impurity", "n_node_samples", "depth"):
            np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr), err_msg=attr)
        np.testing.assert_array_equal(b.weighted_n_node_samples, 2.0 * a.weighted_n_node_samples)


def test_impurity_matches_the_formulas():
    rng = np.random.default_rng(0)
    c = rng.integers(0, 6, size=(40, 3)).astype(float)
    c[:4] = 0.0  # empty: impurity 0
    W = c.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = c / W[:, None]
        gini = np.where(W > 0, 1.0 - (p**2).sum(axis=1), 0.0)
        ent = np.where(W > 0, -np.where(p > 0, p * np.log2(np.where(p > 0, p, 1.0)), 0.0).sum(axis=1), 0.0)
    np.testing.assert_allclose(impurity(c, "gini"), gini, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(impurity(c, "entropy"), ent, rtol=1e-12, atol=1e-15)
    assert impurity(np.array([1.0, 1.0]), "gini") == 0.5
    assert impurity(np.array([2.0, 2.0]), "entropy") == 1.0
    # regression totals (W, sum w y, sum w y^2): the weighted variance
    yv, wv = rng.normal(size=(30, 5)), rng.random((30, 5))
    st = np.stack([wv.sum(1), (wv * yv).sum(1), (wv * yv**2).sum(1)], axis=1)
    mean = (wv * yv).sum(1) / wv.sum(1)
    var = (wv * (yv - mean[:, None]) ** 2).sum(1) / wv.sum(1)
    np.testing.assert_allclose(impurity(st, "squared_error"), var, rtol=1e-9)
    assert impurity(np.zeros((2, 3)), "squared_error").tolist() == [0.0, 0.0]


def test_max_features_and_histogram_mode():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=3000, n_features=8, random_state=0)
    exact = DTC(max_depth=6, splitter="exact").fit(X, y)
    hist = DTC(max_depth=6, splitter="hist", max_bins=32).fit(X, y)
    assert abs(exact.score(X, y) - hist.score(X, y)) < 0.05
    # in hist mode every threshold sits between two training values of adjacent populated bins
    assert np.isfinite(hist.tree_.threshold[hist.tree_.kind == 1]).all()
    m = DTC(max_features="sqrt", random_state=0).fit(X, y)
    assert m.score(X, y) == 1.0
    with pytest.raises(ParamError, match="max_features"):
        DTC(max_features=20).fit(X, y)


def test_string_labels_pickle_and_feature_importances():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 4))
    y = np.where(X[:, 2] > 0, "pos", "neg")
    m = DTC().fit(X, y)
    assert set(m.predict(X)) <= {"pos", "neg"}
    assert m.feature_importances_.sum() == pytest.approx(1.0)
    assert np.argmax(m.feature_importances_) == 2
    m2 = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(m2.predict(X), m.predict(X))


def test_regressor_leaf_values_and_nan_target_rejected():
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    y = np.array([1.0, 1.0, 5.0, 7.0])
    m = DTR(max_depth=1).fit(X, y)
    np.testing.assert_allclose(m.predict(np.array([[0.5], [2.5]])), [1.0, 6.0])
    with pytest.raises(DataError):
        DTR().fit(X, np.array([1.0, np.nan, 2.0, 3.0]))


def test_apply_refuses_a_matrix_of_another_width():
    X, y = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 1.0], [3.0, 0.0]]), [0, 0, 1, 1]
    tree = DTC().fit(X, y)
    assert tree.apply(X).shape == (4,)
    with pytest.raises(DataError, match="3 features, but the model was fitted with 2"):
        tree.apply(np.zeros((2, 3)))
