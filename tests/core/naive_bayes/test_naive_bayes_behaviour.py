"""Naive Bayes mathematics: examples from the notes, smoothing, missing values, weights, errors."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from core import registry
from core.params import ParamError
from core.validation import DataError

GNB = registry.get("gaussian_nb")
MNB = registry.get("multinomial_nb")
BNB = registry.get("bernoulli_nb")
CNB = registry.get("categorical_nb")


def test_laplace_smoothed_die_categorical_nb():
    """[Arias Example A.8]: die sample {1,3,5,4,4,6}, pseudocount 1 per face."""
    faces = np.array([1, 3, 5, 4, 4, 6]) - 1.0
    # the die is class "d"; a second class makes it a classifier
    X = np.concatenate([faces, [0.0, 1.0]])[:, None]
    y = np.array(["d"] * 6 + ["o"] * 2)
    est = CNB(alpha=1.0, min_categories=6).fit(X, y)
    p = np.exp(est.feature_log_prob_[0][0])
    np.testing.assert_allclose(p, [2 / 12, 1 / 12, 2 / 12, 3 / 12, 2 / 12, 2 / 12])
    assert p[0] == pytest.approx(1 / 6) and p[1] == pytest.approx(1 / 12)


def test_bernoulli_nb_laplace_formula():
    """[da Silva Neto §1.4.4]: phi_{j|y} = (count + 1) / (class count + 2)."""
    X = np.array([[1, 0], [1, 1], [0, 0], [1, 0], [0, 0]], dtype=float)
    y = np.array([0, 0, 0, 1, 1])
    est = BNB(alpha=1.0, binarize=None).fit(X, y)
    np.testing.assert_allclose(np.exp(est.feature_log_prob_), [[3 / 5, 2 / 5], [2 / 4, 1 / 4]])
    # g_k(x) = log pi_k + sum_j [x_j log phi + (1 - x_j) log(1 - phi)]  ([Arias §4.3])
    x = np.array([[1.0, 0.0]])
    phi = np.exp(est.feature_log_prob_)
    g = np.log([3 / 5, 2 / 5]) + np.log(phi[:, 0]) + np.log(1 - phi[:, 1])
    np.testing.assert_allclose(est.predict_joint_log_proba(x)[0], g)


def test_multinomial_event_model_laplace_formula():
    """[da Silva Neto §1.4.5]: phi_{v|k} = (count of word v in class k + 1) / (words in k + V)."""
    X = np.array([[2, 1, 0], [1, 0, 0], [0, 1, 3]], dtype=float)
    y = np.array(["ham", "ham", "spam"])
    est = MNB(alpha=1.0).fit(X, y)
    np.testing.assert_allclose(np.exp(est.feature_log_prob_), [[4 / 7, 2 / 7, 1 / 7], [1 / 7, 2 / 7, 4 / 7]])
    x = np.array([[1.0, 0.0, 2.0]])
    g = np.log([2 / 3, 1 / 3]) + x @ est.feature_log_prob_.T
    np.testing.assert_allclose(est.predict_joint_log_proba(x), g)
    with pytest.raises(DataError, match="non-negative"):
        MNB().fit(-X, y)


def test_gaussian_nb_closed_form_and_missing_values():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)) + np.repeat([[0, 0, 0], [2, 1, 0]], 20, axis=0)
    y = np.repeat([0, 1], 20)
    est = GNB(var_smoothing=0.0).fit(X, y)
    np.testing.assert_allclose(est.theta_[1], X[20:].mean(axis=0))
    np.testing.assert_allclose(est.var_[1], X[20:].var(axis=0))
    x = np.array([[0.5, np.nan, -0.2]])
    jll = est.predict_joint_log_proba(x)[0]
    # missing feature 1 skipped: product over features 0 and 2 only
    for k in range(2):
        sd = np.sqrt(est.var_[k])
        ref = np.log(0.5) + sum(norm.logpdf(x[0, j], est.theta_[k, j], sd[j]) for j in (0, 2))
        assert jll[k] == pytest.approx(ref, rel=1e-12)
    # fit with missing entries: moments over the observed values only
    Xm = X.copy()
    Xm[::3, 0] = np.nan
    est2 = GNB(var_smoothing=0.0).fit(Xm, y)
    obs = ~np.isnan(Xm[:20, 0])
    assert est2.theta_[0, 0] == pytest.approx(Xm[:20, 0][obs].mean())
    assert est2.var_[0, 0] == pytest.approx(Xm[:20, 0][obs].var())
    assert np.isfinite(est2.predict_proba(Xm)).all()


def test_sample_weight_equals_repetition():
    rng = np.random.default_rng(1)
    X = rng.integers(0, 4, size=(30, 3)).astype(float)
    y = rng.integers(0, 2, size=30)
    w = rng.integers(1, 4, size=30)
    Xr, yr = np.repeat(X, w, axis=0), np.repeat(y, w)
    for cls in (GNB, MNB, BNB, CNB):
        a = cls().fit(X, y, sample_weight=w.astype(float))
        b = cls().fit(Xr, yr)
        np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), rtol=1e-8, atol=1e-12)


def test_categorical_nb_missing_and_unseen_codes_are_skipped():
    X = np.array([[0, 1], [1, 1], [0, 0], [2, 0], [np.nan, 1]], dtype=float)
    y = np.array([0, 0, 1, 1, 1])
    est = CNB(alpha=1.0).fit(X, y)
    # the NaN row does not count: class 1 feature 0 counts (1, 0, 1) over 2 observed
    np.testing.assert_allclose(np.exp(est.feature_log_prob_[0][1]), [2 / 5, 1 / 5, 2 / 5])
    only_f1 = est.predict_joint_log_proba(np.array([[np.nan, 1.0]]))
    unseen = est.predict_joint_log_proba(np.array([[7.0, 1.0]]))
    ref = est.class_log_prior_ + est.feature_log_prob_[1][:, 1]
    np.testing.assert_allclose(only_f1[0], ref)
    np.testing.assert_allclose(unseen[0], ref)
    with pytest.raises(DataError, match="integer category codes"):
        CNB().fit(np.array([[0.5], [1.0]]), [0, 1])


def test_categorical_nb_mixed_columns_add_gaussian_log_likelihoods():
    rng = np.random.default_rng(2)
    y = np.repeat([0, 1], 30)
    X = np.column_stack([(y + rng.integers(0, 2, 60)) % 3, rng.normal(size=60) + 2 * y])
    mixed = CNB(alpha=1.0).fit(X, y, categorical_features=[0])
    cat = CNB(alpha=1.0).fit(X[:, :1], y)
    gau = GNB().fit(X[:, 1:], y)
    # categorical part (with the class log prior) + Gaussian log-likelihood of the numeric column
    gauss_ll = gau.predict_joint_log_proba(X[:, 1:]) - np.log(gau.class_prior_)
    expected = cat.predict_joint_log_proba(X[:, :1]) + gauss_ll
    np.testing.assert_allclose(mixed.predict_joint_log_proba(X), expected, rtol=1e-10)


def test_bernoulli_nb_missing_values():
    X = np.array([[1, 0], [np.nan, 1], [0, 0], [1, 1]], dtype=float)
    y = np.array([0, 0, 1, 1])
    est = BNB(alpha=1.0, binarize=None).fit(X, y)
    # feature 0 in class 0: one observed value (1) -> (1 + 1) / (1 + 2)
    assert np.exp(est.feature_log_prob_[0, 0]) == pytest.approx(2 / 3)
    j = est.predict_joint_log_proba(np.array([[np.nan, 1.0]]))[0]
    np.testing.assert_allclose(j, est.class_log_prior_ + est.feature_log_prob_[:, 1])


def test_priors_validation_and_effect():
    X = np.array([[0.0], [0.1], [1.0], [1.1]])
    y = [0, 0, 1, 1]
    with pytest.raises(ParamError, match="priors"):
        GNB(priors=[0.5, 0.6]).fit(X, y)
    with pytest.raises(ParamError, match="class_prior"):
        MNB(class_prior=[1.0]).fit(X, y)
    est = MNB(class_prior=[0.9, 0.1]).fit(X, y)
    np.testing.assert_allclose(np.exp(est.class_log_prior_), [0.9, 0.1])
    np.testing.assert_allclose(np.exp(MNB(fit_prior=False).fit(X, [0, 1, 1, 1]).class_log_prior_), [0.5, 0.5])


def test_log_space_is_stable_for_many_features():
    # 2000 features: products of probabilities underflow, log-space does not
    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, size=(20, 2000)).astype(float)
    y = np.repeat([0, 1], 10)
    proba = BNB(binarize=None).fit(X, y).predict_proba(X)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
