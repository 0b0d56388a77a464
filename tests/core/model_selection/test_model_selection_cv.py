"""Cross-validation, paired t-test, estimator comparison, learning curves, scorers."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import sklearn.metrics as skm
from numpy.testing import assert_allclose
from scipy import stats
from sklearn.datasets import load_diabetes, load_iris
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.model_selection import cross_validate as sk_cross_validate

from core.context import FitCancelled, FitContext
from core.model_selection import (
    FixedSplits,
    KFold,
    StratifiedKFold,
    check_cv,
    compare_estimators,
    cross_validate,
    get_scorer,
    learning_curve,
    paired_ttest,
)
from core.params import ParamError
from core.validation import DataError
from tests.core.model_selection._selection_toys import LeastSquares, NearestCentroid


def test_stratified_kfold_fold_class_counts():
    y = np.array(["a"] * 50 + ["b"] * 30 + ["c"] * 7)
    for shuffle in (False, True):
        folds = list(StratifiedKFold(5, shuffle=shuffle, random_state=0).split(np.zeros(len(y)), y))
        test_all = np.sort(np.concatenate([te for _, te in folds]))
        assert np.array_equal(test_all, np.arange(len(y)))  # a partition
        for cls, total in (("a", 50), ("b", 30), ("c", 7)):
            counts = [int((y[te] == cls).sum()) for _, te in folds]
            assert sum(counts) == total
            assert max(counts) - min(counts) <= 1
        sizes = [len(te) for _, te in folds]
        assert max(sizes) - min(sizes) <= 1


def test_check_cv_variants():
    X = np.zeros((20, 2))
    y = np.array([0, 1] * 10)
    assert len(check_cv(4, X, y, classifier=True)) == 4
    folds = check_cv(KFold(3), X, y)
    assert [len(te) for _, te in folds] == [7, 7, 6]
    fixed = [(np.arange(10), np.arange(10, 20)), (np.arange(10, 20), np.arange(10))]
    assert len(check_cv(fixed, X, y)) == 2
    with pytest.raises(ParamError, match="cv"):
        check_cv(1, X, y)
    with pytest.raises(ParamError, match="cv"):
        check_cv("five", X, y)


def test_cross_validate_matches_sklearn_on_same_folds():
    X, y = load_diabetes(return_X_y=True)
    folds = list(KFold(5, shuffle=True, random_state=0).split(X))
    res = cross_validate(LeastSquares(), X, y, cv=FixedSplits(folds), scoring=["r2", "mse", "mae"])
    ref = sk_cross_validate(
        LinearRegression(),
        X,
        y,
        cv=folds,
        scoring=["r2", "neg_mean_squared_error", "neg_mean_absolute_error"],
    )
    assert_allclose(res["scores"]["r2"], ref["test_r2"], rtol=0, atol=1e-10)
    assert_allclose(res["scores"]["mse"], -ref["test_neg_mean_squared_error"], rtol=1e-10)
    assert_allclose(res["scores"]["mae"], -ref["test_neg_mean_absolute_error"], rtol=1e-10)
    assert res["mean"]["r2"] == pytest.approx(np.mean(ref["test_r2"]), abs=1e-10)
    assert res["std"]["r2"] == pytest.approx(np.std(ref["test_r2"], ddof=1), abs=1e-10)
    # [Passerini §4 (k-fold CV)]: Var(mean) = 1/(k(k-1)) sum (S_i - S)^2
    s = np.asarray(res["scores"]["r2"])
    assert res["sem"]["r2"] == pytest.approx(np.sqrt(((s - s.mean()) ** 2).sum() / 20), abs=1e-12)
    assert res["greater_is_better"] == {"r2": True, "mse": False, "mae": False}
    assert [f["n_test"] for f in res["folds"]] == [len(te) for _, te in folds]
    # ridge with the same penalty (sklearn Ridge centres data the same way)
    res = cross_validate(LeastSquares(alpha=3.0), X, y, cv=FixedSplits(folds), scoring="rmse")
    ref = sk_cross_validate(Ridge(alpha=3.0), X, y, cv=folds, scoring="neg_root_mean_squared_error")
    assert_allclose(res["scores"]["rmse"], -ref["test_score"], rtol=1e-9)


def test_cross_validate_classifier_string_labels_and_proba_scorers():
    X, y_int = load_iris(return_X_y=True)
    y = np.array(["setosa", "versicolor", "virginica"])[y_int]
    res = cross_validate(
        NearestCentroid(),
        X,
        y,
        cv=5,
        random_state=3,
        scoring=["accuracy", "balanced_accuracy", "f1_macro", "log_loss", "roc_auc"],
        return_train_score=True,
        return_estimators=True,
    )
    folds = check_cv(5, X, y, classifier=True, random_state=3)
    for i, (tr, te) in enumerate(folds):
        est = res["estimators"][i]
        assert np.array_equal(est.means_, NearestCentroid().fit(X[tr], y[tr]).means_)
        pred, P = est.predict(X[te]), est.predict_proba(X[te])
        assert res["scores"]["accuracy"][i] == pytest.approx(skm.accuracy_score(y[te], pred), abs=1e-12)
        assert res["scores"]["f1_macro"][i] == pytest.approx(
            skm.f1_score(y[te], pred, average="macro"), abs=1e-12
        )
        assert res["scores"]["log_loss"][i] == pytest.approx(
            skm.log_loss(y[te], P, labels=est.classes_), abs=1e-12
        )
        assert res["scores"]["roc_auc"][i] == pytest.approx(
            skm.roc_auc_score(y[te], P, multi_class="ovr"), abs=1e-12
        )
    assert res["mean"]["accuracy"] > 0.85
    assert set(res["train_mean"]) == set(res["scoring"])
    # binary roc_auc with string labels
    mask = y != "setosa"
    r = cross_validate(NearestCentroid(), X[mask], y[mask], cv=3, scoring="roc_auc", random_state=0)
    assert 0.5 < r["mean"]["roc_auc"] <= 1.0


def test_cross_validate_progress_and_cancellation():
    X, y = load_iris(return_X_y=True)
    seen = []
    ctx = FitContext(on_progress=lambda frac, metrics: seen.append((frac, dict(metrics))), min_interval=0.0)
    cross_validate(NearestCentroid(), X, y, cv=4, ctx=ctx, random_state=0)
    fold_reports = [m for _, m in seen if "fold" in m]
    assert [m["fold"] for m in fold_reports] == [0, 1, 2, 3]
    assert seen[-1][0] == 1.0
    fracs = [f for f, _ in seen]
    assert fracs == sorted(fracs)
    calls = {"n": 0}

    def cancelled():
        calls["n"] += 1
        return calls["n"] > 2

    with pytest.raises(FitCancelled):
        cross_validate(
            NearestCentroid(), X, y, cv=5, ctx=FitContext(is_cancelled=cancelled, cancel_interval=0.0)
        )


def test_cross_validate_slices_sample_weight_and_rejects_bad_scoring():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = X @ [1.0, 2.0, 0.0] + rng.normal(0, 0.1, 60)
    w = rng.uniform(0.5, 2, 60)
    folds = list(KFold(3).split(X))
    res = cross_validate(
        LeastSquares(),
        X,
        y,
        cv=FixedSplits(folds),
        fit_params={"sample_weight": w},
        return_estimators=True,
        scoring="mse",
    )
    tr = folds[0][0]
    ref = LeastSquares().fit(X[tr], y[tr], sample_weight=w[tr])
    assert_allclose(res["estimators"][0].coef_, ref.coef_, rtol=1e-12)
    with pytest.raises(ParamError, match="unknown scoring 'auc'"):
        cross_validate(LeastSquares(), X, y, scoring="auc")
    with pytest.raises(ParamError, match="'accuracy' is a classification metric"):
        cross_validate(LeastSquares(), X, y, scoring="accuracy")
    with pytest.raises(DataError, match="sample_weight"):
        cross_validate(LeastSquares(), X, y, fit_params={"sample_weight": w[:10]})


def test_paired_ttest_matches_scipy():
    rng = np.random.default_rng(1)
    for k in (5, 10):
        a = rng.normal(0.8, 0.05, k)
        b = a - rng.normal(0.02, 0.03, k)
        res = paired_ttest(a, b)
        ref = stats.ttest_rel(a, b)
        assert res["statistic"] == pytest.approx(ref.statistic, rel=1e-12)
        assert res["p_value"] == pytest.approx(ref.pvalue, rel=1e-10)
        assert res["df"] == k - 1
        assert res["critical_value"] == pytest.approx(stats.t.ppf(0.975, k - 1), rel=1e-12)
        assert res["reject_null"] == (res["p_value"] < 0.05)
    # a clearly better A (higher accuracy) and a clearly better A on a loss
    a = np.array([0.90, 0.91, 0.92, 0.93, 0.94])
    b = a - np.array([0.10, 0.11, 0.09, 0.10, 0.12])
    assert paired_ttest(a, b)["verdict"] == "a_better"
    assert paired_ttest(a, b, greater_is_better=False)["verdict"] == "b_better"
    assert paired_ttest(a, a + [0.01, -0.01, 0.02, -0.02, 0.0])["verdict"] == "no_significant_difference"
    same = paired_ttest(a, a)
    assert same["statistic"] == 0.0 and same["p_value"] == 1.0
    shifted = paired_ttest(a + 0.1, a)
    assert shifted["statistic"] == np.inf and shifted["verdict"] == "a_better"
    with pytest.raises(DataError, match="share folds"):
        paired_ttest([1, 2, 3], [1, 2])
    with pytest.raises(DataError, match="at least 2"):
        paired_ttest([1.0], [2.0])


def test_compare_estimators_uses_the_same_folds():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(120, 5))
    y = X @ [3.0, -2.0, 1.0, 0.0, 0.0] + rng.normal(0, 0.3, 120)
    res = compare_estimators(
        LeastSquares(), LeastSquares(alpha=500.0), X, y, cv=6, metric="mse", random_state=4
    )
    folds = check_cv(6, X, y, random_state=4)
    a = cross_validate(LeastSquares(), X, y, cv=FixedSplits(folds), scoring="mse")["scores"]["mse"]
    assert_allclose(res["a"]["scores"], a, rtol=1e-12)
    t = stats.ttest_rel(res["a"]["scores"], res["b"]["scores"])
    assert res["test"]["p_value"] == pytest.approx(t.pvalue, rel=1e-10)
    assert res["greater_is_better"] is False
    assert res["test"]["verdict"] == "a_better"  # lower mse for the unpenalised fit


def test_learning_curve_shapes_and_trend():
    X, y = load_iris(return_X_y=True)
    res = learning_curve(NearestCentroid(), X, y, train_sizes=[0.05, 0.5, 1.0], cv=4, random_state=0)
    assert res["train_sizes"] == [5, 56, 112]
    assert len(res["test_scores"]) == 3 and all(len(r) == 4 for r in res["test_scores"])
    assert res["test_mean"][-1] > 0.85
    # absolute sizes; a size too small for two classes scores None instead of failing
    res = learning_curve(
        LeastSquares(),
        *load_diabetes(return_X_y=True),
        train_sizes=[30, 200],
        cv=3,
        scoring="r2",
        random_state=0,
    )
    assert res["train_sizes"] == [30, 200] and res["test_mean"][1] > res["test_mean"][0]
    r1 = learning_curve(NearestCentroid(), X[:100], y[:100], train_sizes=[1, 10], cv=2, random_state=0)
    assert r1["test_scores"][0] == [None, None]
    with pytest.raises(ParamError, match="train_sizes"):
        learning_curve(NearestCentroid(), X, y, train_sizes=[0.0, 1.0])


def test_scorers_pickle_and_know_direction():
    for name, better in [
        ("accuracy", True),
        ("log_loss", False),
        ("neg_log_loss", False),
        ("r2", True),
        ("rmse", False),
        ("roc_auc", True),
    ]:
        s = get_scorer(name)
        assert s.greater_is_better is better
        assert pickle.loads(pickle.dumps(s)) is s


def test_train_val_test_split_is_a_stratified_partition():
    from core.model_selection import train_val_test_split_indices

    y = np.array(["a"] * 60 + ["b"] * 30 + ["c"] * 10)
    tr, va, te = train_val_test_split_indices(100, 0.2, 0.2, stratify=y, random_state=0)
    assert np.array_equal(np.sort(np.concatenate([tr, va, te])), np.arange(100))
    assert (len(tr), len(va), len(te)) == (60, 20, 20)
    for part in (va, te):
        assert [int((y[part] == c).sum()) for c in "abc"] == [12, 6, 2]
    again = train_val_test_split_indices(100, 0.2, 0.2, stratify=y, random_state=0)
    assert all(np.array_equal(a, b) for a, b in zip(again, (tr, va, te), strict=True))
    with pytest.raises(DataError, match="val_size \\+ test_size < 1"):
        train_val_test_split_indices(100, 0.5, 0.5)
