"""The JSON reports of the evaluate endpoint: every number equal to scikit-learn's (1e-12), JSON-ready."""

from __future__ import annotations

import json

import numpy as np
import pytest
import sklearn.metrics as skm
from numpy.testing import assert_allclose

from service.services.evaluation import classification_metrics, regression_metrics
from tests.core.metrics.test_classification_metrics import LABELSETS, TOL, _data
from tests.core.metrics.test_regression_metrics import _data as _regression_data

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


@pytest.mark.parametrize("key", ["str4", "str_bin", "int3"])
def test_classification_metrics_matches_sklearn_and_is_json(key):
    labels = LABELSETS[key]
    yt, yp, P, _ = _data(labels, n=1000, seed=10)
    classes = np.sort(np.asarray(labels))
    rep = classification_metrics(yt, yp, P, classes)
    json.dumps(rep, allow_nan=False)
    assert_allclose(rep["accuracy"], skm.accuracy_score(yt, yp), **TOL)
    assert_allclose(rep["balanced_accuracy"], skm.balanced_accuracy_score(yt, yp), **TOL)
    for avg in ("macro", "micro", "weighted"):
        p, r, f, _ = skm.precision_recall_fscore_support(yt, yp, average=avg, zero_division=0)
        assert_allclose([rep[f"precision_{avg}"], rep[f"recall_{avg}"], rep[f"f1_{avg}"]], [p, r, f], **TOL)
    p, r, f, s = skm.precision_recall_fscore_support(yt, yp, labels=classes, average=None, zero_division=0)
    for i, lab in enumerate(classes.tolist()):
        pc = rep["per_class"][str(lab)]
        assert_allclose([pc["precision"], pc["recall"], pc["f1"]], [p[i], r[i], f[i]], **TOL)
        assert pc["support"] == s[i]
    assert rep["confusion_matrix"]["labels"] == classes.tolist()
    assert rep["confusion_matrix"]["matrix"] == skm.confusion_matrix(yt, yp, labels=classes).tolist()
    assert_allclose(rep["log_loss"], skm.log_loss(yt, P, labels=classes), **TOL)
    if len(classes) == 2:
        yb = yt == classes[1]
        assert_allclose(rep["roc_auc"], skm.roc_auc_score(yb, P[:, 1]), **TOL)
        assert_allclose(rep["average_precision"], skm.average_precision_score(yb, P[:, 1]), **TOL)
        assert list(rep["curves"]["roc"]) == [str(classes[1])]
        assert rep["positive_label"] == classes[1]
    else:
        assert_allclose(rep["roc_auc"], skm.roc_auc_score(yt, P, multi_class="ovr"), **TOL)
        assert_allclose(
            rep["roc_auc_weighted"], skm.roc_auc_score(yt, P, multi_class="ovr", average="weighted"), **TOL
        )
        assert list(rep["curves"]["roc"]) == [str(c) for c in classes]
    for curve in rep["curves"]["roc"].values():
        assert 2 <= len(curve["fpr"]) <= 200
        assert len(curve["fpr"]) == len(curve["tpr"]) == len(curve["thresholds"])
        assert curve["fpr"][0] == 0.0 and curve["tpr"][-1] == 1.0
        assert curve["thresholds"][0] is None  # +inf
    assert rep["notes"] == []


def test_classification_metrics_curve_downsampling_keeps_endpoints():
    rng = np.random.default_rng(11)
    y = rng.integers(0, 2, 5000)
    s = rng.random(5000) * 0.5 + 0.5 * y * rng.random(5000)
    P = np.stack([1 - s, s], axis=1)
    rep = classification_metrics(y, (s > 0.5).astype(int), P, [0, 1], max_curve_points=50)
    fpr, tpr, _ = skm.roc_curve(y, s)
    c = rep["curves"]["roc"]["1"]
    assert len(c["fpr"]) <= 50 and len(fpr) > 50
    assert c["fpr"][0] == fpr[0] and c["fpr"][-1] == fpr[-1] and c["tpr"][-1] == tpr[-1]
    pr = rep["curves"]["precision_recall"]["1"]
    assert len(pr["precision"]) <= 50 and pr["precision"][-1] == 1.0 and pr["recall"][-1] == 0.0


def test_classification_metrics_without_proba_and_unseen_labels():
    rep = classification_metrics(["a", "b", "c"], ["a", "b", "b"])
    assert "log_loss" not in rep and "curves" not in rep
    assert rep["per_class"]["c"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    # y_true holds a label the model never saw: proba metrics omitted with a note, the rest reported
    P = np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    rep = classification_metrics(["a", "b", "z"], ["a", "b", "a"], P, ["a", "b"])
    assert "log_loss" not in rep and rep["notes"]
    assert rep["confusion_matrix"]["labels"] == ["a", "b", "z"]
    assert rep["confusion_matrix"]["matrix"] == [[1, 0, 0], [0, 1, 0], [1, 0, 0]]


def test_classification_metrics_with_a_class_absent_from_the_data():
    yt, yp, P, _ = _data(["a", "b", "c"], n=400, seed=12)
    keep = yt != "c"
    yt, yp, P = yt[keep], np.where(yp[keep] == "c", "a", yp[keep]), P[keep]
    rep = classification_metrics(yt, yp, P, ["a", "b", "c"])
    # averages follow scikit-learn (labels seen in y_true / y_pred); "c" listed with zeros
    assert_allclose(rep["f1_macro"], skm.f1_score(yt, yp, average="macro"), **TOL)
    assert rep["per_class"]["c"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    assert rep["confusion_matrix"]["labels"] == ["a", "b", "c"]
    # one-vs-rest AUC is undefined for "c": averaged over the classes present, with a note
    per = [skm.roc_auc_score(yt == c, P[:, i]) for i, c in enumerate("ab")]
    assert_allclose(rep["roc_auc"], np.mean(per), **TOL)
    assert list(rep["curves"]["roc"]) == ["a", "b"] and rep["notes"]
    assert_allclose(rep["log_loss"], skm.log_loss(yt, P, labels=["a", "b", "c"]), **TOL)


def test_regression_metrics_match_sklearn_and_are_json():
    y, p, _ = _regression_data(4, n=30)
    rep = regression_metrics(y, p, n_features=3)
    json.dumps(rep, allow_nan=False)
    assert set(rep) == {"n_samples", "mse", "rmse", "mae", "r2", "adjusted_r2"}
    assert rep["n_samples"] == 30
    assert_allclose(rep["mse"], skm.mean_squared_error(y, p), **TOL)
    assert_allclose(rep["rmse"], skm.root_mean_squared_error(y, p), **TOL)
    assert_allclose(rep["mae"], skm.mean_absolute_error(y, p), **TOL)
    assert_allclose(rep["r2"], skm.r2_score(y, p), **TOL)
    assert_allclose(rep["adjusted_r2"], 1 - (1 - skm.r2_score(y, p)) * 29 / 26, **TOL)
    assert "adjusted_r2" not in regression_metrics(y, p)
    assert regression_metrics([1.0], [2.0])["r2"] is None
