"""bayesian_network_classifier: posteriors against brute-force enumeration of the fitted joint,
naive structure against scikit-learn's CategoricalNB, missing values, edges, discretisation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.naive_bayes import CategoricalNB

from core.context import FitContext
from core.graphical.bayesian_network_classifier import BayesianNetworkClassifier
from core.model_selection.split import StratifiedKFold
from core.params import ParamError


def _categorical_data(rng, n=300):
    y = rng.integers(0, 3, n)
    x0 = (y + rng.integers(0, 2, n)) % 3
    x1 = np.where(rng.random(n) < 0.7, x0 % 2, rng.integers(0, 2, n))
    x2 = rng.integers(0, 4, n)
    x3 = np.where(rng.random(n) < 0.8, y, rng.integers(0, 3, n))
    return np.column_stack([x0, x1, x2, x3]).astype(float), np.array(["lo", "mid", "hi"])[y]


def _brute_posterior(clf, x_codes):
    """P(y | observed codes) by summing the fitted network's full joint (NaN = missing)."""
    bn = clf.network_
    joint = bn.joint_table()
    idx = []
    for v in bn.nodes:
        if v == "y":
            idx.append(slice(None))
        else:
            c = x_codes[v]
            idx.append(slice(None) if np.isnan(c) else int(c))
    sub = joint[tuple(idx)]
    y_axis = [v for v, i in zip(bn.nodes, idx, strict=True) if isinstance(i, slice)].index("y")
    other = tuple(a for a in range(sub.ndim) if a != y_axis)
    p = sub.sum(axis=other)
    return p / p.sum()


@pytest.mark.parametrize(
    "edges",
    [None, [["y", 0], ["y", 1], ["y", 3], [0, 1], ["target", 2], [3, 2]], [[0, "y"], ["y", 3], [1, "y"]]],
)
def test_posterior_matches_brute_force_with_missing_values(edges):
    rng = np.random.default_rng(0)
    X, y = _categorical_data(rng)
    Xm = X.copy()
    Xm[rng.random(X.shape) < 0.15] = np.nan
    clf = BayesianNetworkClassifier(edges=edges, alpha=0.5).fit(Xm, y, categorical_features=[0, 1, 2, 3])
    assert clf.n_iter_ > 1  # EM ran
    Xt = X[:25].copy()
    Xt[rng.random(Xt.shape) < 0.3] = np.nan
    proba = clf.predict_proba(Xt)
    for i in range(len(Xt)):
        np.testing.assert_allclose(proba[i], _brute_posterior(clf, Xt[i]), atol=1e-10)


def test_naive_structure_equals_categorical_nb():
    """Complete data, naive structure: P(x_j | y) = (N + a)/(N_y + a k_j) as CategoricalNB;
    the class prior is also smoothed here, so compare with the prior plugged in."""
    rng = np.random.default_rng(1)
    X, y = _categorical_data(rng)
    clf = BayesianNetworkClassifier(alpha=1.0).fit(X, y)
    assert clf.categorical_.all() and clf.n_iter_ == 1
    prior = clf.network_.cpt["y"]
    nb = CategoricalNB(alpha=1.0, class_prior=prior).fit(X.astype(int), y)
    np.testing.assert_array_equal(nb.classes_, clf.classes_)
    np.testing.assert_allclose(clf.predict_proba(X), nb.predict_proba(X.astype(int)), atol=1e-12)
    # MLE (alpha=0) class prior = empirical frequencies
    clf0 = BayesianNetworkClassifier(alpha=0.0).fit(X, y)
    np.testing.assert_allclose(
        clf0.network_.cpt["y"], [np.mean(y == c) for c in clf0.classes_], atol=1e-12
    )


def test_parity_with_categorical_nb_on_folds():
    rng = np.random.default_rng(2)
    X, y = _categorical_data(rng, n=600)
    ours, ref = [], []
    for tr, te in StratifiedKFold(5, shuffle=True, random_state=0).split(X, y):
        ours.append(BayesianNetworkClassifier().fit(X[tr], y[tr]).score(X[te], y[te]))
        nb = CategoricalNB(alpha=1.0, min_categories=[3, 2, 4, 3]).fit(X[tr].astype(int), y[tr])
        ref.append(np.mean(nb.predict(X[te].astype(int)) == y[te]))
    assert abs(np.mean(ours) - np.mean(ref)) < 0.02
    assert np.mean(ours) > 0.6


def test_structure_matters_on_xor():
    """y = x0 XOR x1: naive Bayes cannot represent it, the DAG x0 -> y <- x1 can."""
    rng = np.random.default_rng(3)
    X = rng.integers(0, 2, size=(400, 2)).astype(float)
    y = (X[:, 0] != X[:, 1]).astype(int)
    naive = BayesianNetworkClassifier().fit(X, y)
    full = BayesianNetworkClassifier(edges=[[0, "y"], [1, "y"]]).fit(X, y)
    assert naive.score(X, y) < 0.7
    assert full.score(X, y) == 1.0
    assert full.network_.d_separated(0, 1)  # parents of y are marginally independent
    assert not full.network_.d_separated(0, 1, ["y"])


def test_numeric_features_are_quantile_binned():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(500, 2))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    clf = BayesianNetworkClassifier(n_bins=4).fit(X, y)
    assert not clf.categorical_.any()
    np.testing.assert_allclose(clf.bin_edges_[0], np.quantile(X[:, 0], [0.25, 0.5, 0.75]))
    assert list(clf.cardinalities_) == [4, 4]
    assert clf.score(X, y) > 0.8
    # explicit mask: column 1 declared categorical must hold codes
    with pytest.raises(ValueError, match="category codes"):
        BayesianNetworkClassifier().fit(X, y, categorical_features=[1])


def test_unseen_category_is_treated_as_missing():
    rng = np.random.default_rng(5)
    X, y = _categorical_data(rng)
    clf = BayesianNetworkClassifier().fit(X, y, categorical_features=np.ones(4, dtype=bool))
    row = X[:1].copy()
    row[0, 2] = 17.0
    missing = X[:1].copy()
    missing[0, 2] = np.nan
    np.testing.assert_allclose(clf.predict_proba(row), clf.predict_proba(missing))


def test_invalid_edges_rejected():
    rng = np.random.default_rng(6)
    X, y = _categorical_data(rng, n=60)
    with pytest.raises(ParamError) as info:
        BayesianNetworkClassifier(edges=[[0, 1], [1, 0]]).fit(X, y)
    assert info.value.param == "edges" and "cycle" in str(info.value)
    with pytest.raises(ParamError) as info:
        BayesianNetworkClassifier(edges=[["y", 9]]).fit(X, y)
    assert info.value.param.startswith("edges")
    with pytest.raises(ParamError):
        BayesianNetworkClassifier(edges=[["y", "x"]]).fit(X, y)


def test_em_reports_progress_per_step():
    rng = np.random.default_rng(7)
    X, y = _categorical_data(rng)
    X[rng.random(X.shape) < 0.2] = np.nan
    seen = []
    ctx = FitContext(on_progress=lambda f, m: seen.append((f, m)), min_interval=0.0)
    edges = [["y", 0], [0, 1], ["y", 3], [3, 2]]
    clf = BayesianNetworkClassifier(edges=edges, max_iter=30, tol=0.0).fit(X, y, ctx=ctx)
    assert clf.n_iter_ > 3
    lls = [m["log_likelihood"] for _, m in seen]
    assert len(lls) == clf.n_iter_ + (clf.n_iter_ < 30)  # + the final 100% step when converged early
    lls = lls[: clf.n_iter_]
    assert np.all(np.diff(lls) >= -1e-8)  # EM is monotone (MAP objective)


def test_all_combinations_of_observed_features_single_rows():
    rng = np.random.default_rng(8)
    X, y = _categorical_data(rng)
    clf = BayesianNetworkClassifier(edges=[["y", 0], [0, 1], ["y", 3], [3, 2]]).fit(X, y)
    x = X[3]
    for mask in itertools.product([False, True], repeat=4):
        row = np.where(mask, np.nan, x)
        np.testing.assert_allclose(clf.predict_proba(row[None])[0], _brute_posterior(clf, row), atol=1e-12)


def test_integer_sample_weights_equal_duplicated_rows():
    rng = np.random.default_rng(10)
    X, y = _categorical_data(rng, n=120)
    X[rng.random(X.shape) < 0.15] = np.nan
    w = rng.integers(1, 4, size=len(y))
    edges = [["y", 0], [0, 1], ["y", 3], [3, 2]]
    kw = dict(edges=edges, tol=0.0, max_iter=8)
    a = BayesianNetworkClassifier(**kw).fit(X, y, sample_weight=w.astype(float))
    b = BayesianNetworkClassifier(**kw).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    for v in a.network_.nodes:
        np.testing.assert_allclose(a.network_.cpt[v], b.network_.cpt[v], rtol=1e-10)
    assert a.log_likelihood_ == pytest.approx(b.log_likelihood_, rel=1e-10)
