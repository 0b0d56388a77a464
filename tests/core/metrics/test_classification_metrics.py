"""Classification metrics: identical numbers to sklearn.metrics (1e-12), string labels, edge cases."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import sklearn.metrics as skm
from numpy.testing import assert_allclose, assert_array_equal

from core import metrics as M
from core.validation import DataError

TOL = dict(rtol=0, atol=1e-12)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


def _sk(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **kw)


def _data(labels, n=300, seed=0, skew=True):
    rng = np.random.default_rng(seed)
    labels = np.asarray(labels)
    p = np.linspace(1, 2, len(labels)) if skew else np.ones(len(labels))
    yt = rng.choice(labels, n, p=p / p.sum())
    # predictions correct ~60% of the time
    yp = np.where(rng.random(n) < 0.6, yt, rng.choice(labels, n))
    P = rng.dirichlet(np.ones(len(labels)), n)
    idx = np.searchsorted(np.sort(labels), yt)
    P[np.arange(n), idx] += rng.random(n)  # informative scores
    P /= P.sum(axis=1, keepdims=True)
    w = rng.uniform(0.5, 2.0, n)
    return yt, yp, P, w


LABELSETS = {
    "int3": [0, 1, 2],
    "str4": ["cat", "dog", "eel", "fox"],
    "int_bin": [0, 1],
    "str_bin": ["no", "yes"],
}


@pytest.mark.parametrize("key", list(LABELSETS))
def test_simple_scores_match_sklearn(key):
    yt, yp, _, w = _data(LABELSETS[key])
    for sw in (None, w):
        assert_allclose(
            M.accuracy_score(yt, yp, sample_weight=sw), skm.accuracy_score(yt, yp, sample_weight=sw), **TOL
        )
        assert_allclose(
            M.accuracy_score(yt, yp, normalize=False, sample_weight=sw),
            skm.accuracy_score(yt, yp, normalize=False, sample_weight=sw),
            **TOL,
        )
        assert_allclose(
            M.zero_one_loss(yt, yp, sample_weight=sw), skm.zero_one_loss(yt, yp, sample_weight=sw), **TOL
        )
        assert_allclose(
            M.zero_one_loss(yt, yp, normalize=False, sample_weight=sw),
            skm.zero_one_loss(yt, yp, normalize=False, sample_weight=sw),
            **TOL,
        )
        for adjusted in (False, True):
            assert_allclose(
                M.balanced_accuracy_score(yt, yp, sample_weight=sw, adjusted=adjusted),
                skm.balanced_accuracy_score(yt, yp, sample_weight=sw, adjusted=adjusted),
                **TOL,
            )


@pytest.mark.parametrize("key", list(LABELSETS))
@pytest.mark.parametrize("average", [None, "macro", "micro", "weighted"])
@pytest.mark.parametrize("beta", [1.0, 0.5, 2.0])
def test_prf_match_sklearn(key, average, beta):
    yt, yp, _, w = _data(LABELSETS[key], seed=1)
    for sw in (None, w):
        ours = M.precision_recall_fscore_support(yt, yp, beta=beta, average=average, sample_weight=sw)
        ref = skm.precision_recall_fscore_support(yt, yp, beta=beta, average=average, sample_weight=sw)
        for a, b in zip(ours, ref, strict=True):
            if b is None:
                assert a is None
            else:
                assert_allclose(a, b, **TOL)


def test_prf_binary_pos_label_and_label_subsets():
    yt, yp, _, _ = _data(["no", "yes"], seed=2)
    for fn in ("precision_score", "recall_score", "f1_score"):
        assert_allclose(
            getattr(M, fn)(yt, yp, pos_label="yes"), getattr(skm, fn)(yt, yp, pos_label="yes"), **TOL
        )
        assert_allclose(
            getattr(M, fn)(yt, yp, pos_label="no"), getattr(skm, fn)(yt, yp, pos_label="no"), **TOL
        )
    assert_allclose(
        M.fbeta_score(yt, yp, beta=3, pos_label="yes"),
        skm.fbeta_score(yt, yp, beta=3, pos_label="yes"),
        **TOL,
    )
    yt, yp, _, _ = _data(["a", "b", "c", "d"], seed=3)
    for avg in ("macro", "micro", "weighted", None):
        # a subset and a label absent from the data ("zz")
        for labels in (["c", "a"], ["d", "zz", "b"]):
            ours = M.precision_recall_fscore_support(yt, yp, labels=labels, average=avg, zero_division=0.0)
            ref = _sk(
                skm.precision_recall_fscore_support, yt, yp, labels=labels, average=avg, zero_division=0.0
            )
            for a, b in zip(ours[:3], ref[:3], strict=True):
                assert_allclose(a, b, **TOL)
    with pytest.raises(DataError, match="pos_label='maybe' is not a valid label"):
        M.precision_score(["no", "yes"], ["yes", "yes"], pos_label="maybe")
    with pytest.raises(DataError, match="multiclass but average='binary'"):
        M.f1_score([0, 1, 2], [0, 1, 1])


@pytest.mark.parametrize("zero_division", [0.0, 1.0, np.nan, "warn"])
@pytest.mark.parametrize("average", [None, "macro", "micro", "weighted"])
def test_zero_division_edge_cases(zero_division, average):
    # class "c" is never predicted (precision 0/0), class "d" never true (recall 0/0),
    # and class "e" is neither true nor predicted but requested through labels (F 0/0)
    yt = np.array(["a", "a", "b", "c", "c", "b"])
    yp = np.array(["a", "b", "b", "a", "d", "b"])
    for labels in (None, ["a", "b", "c", "d", "e"]):
        ours = M.precision_recall_fscore_support(
            yt, yp, labels=labels, average=average, zero_division=zero_division
        )
        ref = _sk(
            skm.precision_recall_fscore_support,
            yt,
            yp,
            labels=labels,
            average=average,
            zero_division=zero_division,
        )
        for a, b in zip(ours, ref, strict=True):
            if b is None:
                assert a is None
            else:
                assert_allclose(a, b, equal_nan=True, **TOL)
    # all predictions wrong in a binary problem: precision and recall are 0, F is 0
    assert M.f1_score([0, 0, 1], [1, 1, 0], zero_division=zero_division) == 0.0


@pytest.mark.parametrize("key", list(LABELSETS))
def test_confusion_matrix_matches_sklearn(key):
    labels = LABELSETS[key]
    yt, yp, _, w = _data(labels, seed=4)
    assert_array_equal(M.confusion_matrix(yt, yp), skm.confusion_matrix(yt, yp))
    rev = list(reversed(labels))
    assert_array_equal(M.confusion_matrix(yt, yp, labels=rev), skm.confusion_matrix(yt, yp, labels=rev))
    assert M.confusion_matrix(yt, yp).dtype.kind == "i"
    sub = labels[:2]
    assert_array_equal(M.confusion_matrix(yt, yp, labels=sub), skm.confusion_matrix(yt, yp, labels=sub))
    for normalize in ("true", "pred", "all"):
        assert_allclose(
            M.confusion_matrix(yt, yp, sample_weight=w, normalize=normalize),
            skm.confusion_matrix(yt, yp, sample_weight=w, normalize=normalize),
            **TOL,
        )


def test_confusion_matrix_worked_example():
    # [Passerini §4 (multiclass confusion matrix)]: rows truth, columns prediction; diagonal = TP
    cm = M.confusion_matrix(["x", "x", "y", "y", "y"], ["x", "y", "y", "y", "x"])
    assert cm.tolist() == [[1, 1], [1, 2]]


@pytest.mark.parametrize("drop", [True, False])
def test_roc_and_pr_curves_match_sklearn(drop):
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 400)
    s = np.round(rng.random(400) + 0.3 * y, 2)  # many ties
    w = rng.uniform(0, 2, 400)
    w[:10] = 0.0
    for sw in (None, w):
        for a, b in zip(
            M.roc_curve(y, s, sample_weight=sw, drop_intermediate=drop),
            skm.roc_curve(y, s, sample_weight=sw, drop_intermediate=drop),
            strict=True,
        ):
            assert_allclose(a, b, **TOL)
        for a, b in zip(
            M.precision_recall_curve(y, s, sample_weight=sw, drop_intermediate=drop),
            skm.precision_recall_curve(y, s, sample_weight=sw, drop_intermediate=drop),
            strict=True,
        ):
            assert_allclose(a, b, **TOL)
        assert_allclose(
            M.roc_auc_score(y, s, sample_weight=sw), skm.roc_auc_score(y, s, sample_weight=sw), **TOL
        )
        assert_allclose(
            M.average_precision_score(y, s, sample_weight=sw),
            skm.average_precision_score(y, s, sample_weight=sw),
            **TOL,
        )
    # string labels with an explicit positive label; -1/+1 labels inferred
    ys = np.array(["neg", "pos"])[y]
    for a, b in zip(M.roc_curve(ys, s, pos_label="pos"), skm.roc_curve(ys, s, pos_label="pos"), strict=True):
        assert_allclose(a, b, **TOL)
    assert_allclose(
        M.average_precision_score(ys, s, pos_label="pos"),
        skm.average_precision_score(ys, s, pos_label="pos"),
        **TOL,
    )
    assert_allclose(M.roc_auc_score(ys, s), skm.roc_auc_score(ys, s), **TOL)
    assert_allclose(M.roc_auc_score(2 * y - 1, s), skm.roc_auc_score(2 * y - 1, s), **TOL)
    with pytest.raises(DataError, match="pass pos_label"):
        M.roc_curve(ys, s)


def test_auc_trapezoid_and_known_values():
    assert M.auc([0, 0.5, 1], [0, 1, 1]) == pytest.approx(0.75, abs=1e-15)
    assert M.auc([1, 0.5, 0], [1, 1, 0]) == pytest.approx(0.75, abs=1e-15)
    assert M.roc_auc_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == 0.75
    assert M.average_precision_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == pytest.approx(0.8333333333333333)
    with pytest.raises(DataError, match="neither increasing nor decreasing"):
        M.auc([0, 1, 0.5], [0, 1, 1])


@pytest.mark.parametrize("key", ["int3", "str4"])
@pytest.mark.parametrize("average", ["macro", "weighted", "micro"])
def test_multiclass_roc_auc_and_ap_match_sklearn(key, average):
    yt, _, P, w = _data(LABELSETS[key], seed=6)
    assert_allclose(
        M.roc_auc_score(yt, P, average=average),
        skm.roc_auc_score(yt, P, multi_class="ovr", average=average),
        **TOL,
    )
    assert_allclose(
        M.roc_auc_score(yt, P, average=average, sample_weight=w),
        skm.roc_auc_score(yt, P, multi_class="ovr", average=average, sample_weight=w),
        **TOL,
    )
    assert_allclose(
        M.average_precision_score(yt, P, average=average),
        skm.average_precision_score(yt, P, average=average),
        **TOL,
    )
    assert_allclose(
        M.roc_auc_score(yt, P, average=None), skm.roc_auc_score(yt, P, multi_class="ovr", average=None), **TOL
    )


def test_binary_roc_auc_accepts_two_column_proba():
    yt, _, P, _ = _data(["no", "yes"], seed=7)
    assert_allclose(M.roc_auc_score(yt, P), skm.roc_auc_score(yt, P[:, 1]), **TOL)


@pytest.mark.parametrize("key", list(LABELSETS))
def test_log_loss_matches_sklearn(key):
    labels = LABELSETS[key]
    yt, _, P, w = _data(labels, seed=8)
    assert_allclose(M.log_loss(yt, P), skm.log_loss(yt, P), **TOL)
    assert_allclose(M.log_loss(yt, P, sample_weight=w), skm.log_loss(yt, P, sample_weight=w), **TOL)
    assert_allclose(M.log_loss(yt, P, normalize=False), skm.log_loss(yt, P, normalize=False), **TOL)
    # a probability of exactly 0 for the true class is clipped to eps
    Q = P.copy()
    j = np.searchsorted(np.sort(labels), yt[0])
    Q[0] = 0.0
    Q[0, (j + 1) % len(labels)] = 1.0
    assert_allclose(M.log_loss(yt, Q), skm.log_loss(yt, Q), **TOL)
    # y_true holding only some of the labels: pass labels
    sub = yt[np.isin(yt, labels[:2])]
    Ps = P[np.isin(yt, labels[:2])]
    assert_allclose(M.log_loss(sub, Ps, labels=labels), skm.log_loss(sub, Ps, labels=labels), **TOL)
    if len(labels) == 2:
        assert_allclose(M.log_loss(yt, P[:, 1]), skm.log_loss(yt, P[:, 1]), **TOL)
    with pytest.raises(DataError, match="only one label"):
        M.log_loss([labels[0]] * 3, np.full((3, 2), 0.5))


def test_hinge_loss_matches_sklearn():
    rng = np.random.default_rng(9)
    y = rng.integers(0, 2, 100)
    d = rng.normal(size=100)
    assert_allclose(M.hinge_loss(y, d), skm.hinge_loss(y, d), **TOL)
    ys = np.array(["a", "b"])[y]
    assert_allclose(M.hinge_loss(ys, d), skm.hinge_loss(ys, d), **TOL)
    y3 = rng.integers(0, 3, 100)
    D = rng.normal(size=(100, 3))
    assert_allclose(M.hinge_loss(y3, D), skm.hinge_loss(y3, D), **TOL)
    D4 = rng.normal(size=(100, 4))
    assert_allclose(
        M.hinge_loss(y3, D4, labels=[0, 1, 2, 3]), skm.hinge_loss(y3, D4, labels=[0, 1, 2, 3]), **TOL
    )
    w = rng.random(100)
    assert_allclose(M.hinge_loss(y3, D, sample_weight=w), skm.hinge_loss(y3, D, sample_weight=w), **TOL)


def test_label_type_errors():
    with pytest.raises(DataError, match="mix of string and numeric labels"):
        M.accuracy_score(["a", "b"], [0, 1])
    with pytest.raises(DataError, match="inconsistent numbers of samples"):
        M.accuracy_score([0, 1, 1], [0, 1])
    with pytest.raises(DataError, match="empty"):
        M.accuracy_score([], [])
