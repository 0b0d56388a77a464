"""A lazy learner (``lazy_learner = True``) is scored on a bounded, seeded sample of its training rows
(ORCHARD_TRAINING_METRICS_MAX_ROWS): a training job's metrics.training, the train scores of model selection
(learning curves) and a tune's refitted model, counted on the rows the model is asked to predict; the set of lazy
learners is pinned. The service passes ORCHARD_HIST_WORKERS to histogram boosting as n_jobs."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from core import registry
from core.ensemble._hist_gradient_boosting import gradient_boosting as gb_mod
from core.linear.logistic_regression import LogisticRegression
from core.neighbors.knn_classifier import KNNClassifier
from service.app import create_app
from service.services import selection
from service.settings import Settings
from tests.service.conftest import train, upload_csv, wait_job

N_ROWS = 400


LIMIT = 100
# predicting a row compares it with the training rows (or a kernel column over them): scoring n rows costs ~n^2.
# SVMs are not lazy: scoring costs n x support vectors, about what the SMO fit itself spent
# (docs/decisions/training-metrics-sample.md).
LAZY_LEARNERS = {"gaussian_process_classifier", "gaussian_process_regressor", "kernel_perceptron",
                 "kernel_ridge_regression", "knn_classifier", "knn_regressor", "locally_weighted_regression"}


def _csv(n=N_ROWS, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.where(X[:, 0] + X[:, 1] > 0, "yes", "no")
    r = X[:, 0] - 2 * X[:, 2] + 0.1 * rng.normal(size=n)
    lines = ["a,b,c,label,value"] + [f"{a:.5f},{b:.5f},{c:.5f},{t},{v:.5f}"
                                     for (a, b, c), t, v in zip(X, y, r, strict=True)]
    return "\n".join(lines) + "\n"


CHEAP = {"gaussian_process_classifier": {"optimizer": "none"}, "gaussian_process_regressor": {"optimizer": "none"}}


def _params(name):
    """Cheap settings, and the model's own seed pinned where it has one (kernel_perceptron shuffles with fresh
    entropy by default): the second job must differ from the first only in the sample's seeding."""
    params = dict(CHEAP.get(name, {}))
    if "random_state" in registry.get(name).params:
        params["random_state"] = 0
    return params


def _target(cls):
    return "label" if cls.task == "classification" else "value"


def _lazy():
    return sorted(n for n, c in registry.all().items() if getattr(c, "lazy_learner", False))


@pytest.fixture
def client(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", workers=0, secret_key="test-secret",
                        training_metrics_max_rows=LIMIT, hist_workers=2)
    with TestClient(create_app(settings)) as c:
        yield c


def _count_predicted_rows(monkeypatch, cls):
    """Row counts of every predict / predict_proba / decision_function / predict_std call on ``cls``."""
    seen = []
    for name in ("predict", "predict_proba", "decision_function", "predict_std"):
        original = getattr(cls, name, None)
        if not callable(original):
            continue

        def counting(self, X, _original=original):
            seen.append(len(X))
            return _original(self, X)

        monkeypatch.setattr(cls, name, counting)
    return seen


def test_the_lazy_learners_are_exactly_these():
    """Dropping ``lazy_learner`` from one of them (or setting it on another algorithm) is a decision to record."""
    assert set(_lazy()) == LAZY_LEARNERS


@pytest.mark.parametrize("name", sorted(LAZY_LEARNERS))
def test_a_lazy_learner_is_scored_on_a_bounded_seeded_sample(client, monkeypatch, name):
    cls = registry.get(name)
    seen = _count_predicted_rows(monkeypatch, cls)
    ds = upload_csv(client, _csv()).json()["id"]
    mid, job = train(client, algorithm=name, dataset_id=ds, target=_target(cls), features=["a", "b", "c"],
                     params=_params(name))
    assert job["status"] == "succeeded", job
    assert seen and max(seen) == LIMIT and sum(seen) <= 3 * LIMIT  # never the 400 training rows
    model = client.get(f"/v1/models/{mid}").json()
    training = model["metrics"]["training"]
    assert training["sampled_rows"] == LIMIT and training["n_samples"] == LIMIT
    assert any(f"sample of {LIMIT} of the {N_ROWS} training rows" in note for note in job["result"]["notes"])
    # seeded: a second job reports the same figure
    _, again = train(client, algorithm=name, dataset_id=ds, target=_target(cls), features=["a", "b", "c"],
                     params=_params(name))
    assert again["result"]["metrics"]["training"] == job["result"]["metrics"]["training"]


def _task_data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(N_ROWS, 3))
    cols = {n: X[:, j] for j, n in enumerate("abc")}
    return X, cols


@pytest.mark.parametrize("name", [*sorted(LAZY_LEARNERS), "logistic_regression", "ridge_regression"])
def test_model_selection_train_scores_of_a_lazy_learner_use_the_same_bounded_sample(monkeypatch, name):
    """``selection.fit_score`` (learning curves' train scores): the training job's sample, seeded per fold."""
    from core.context import NULL_CONTEXT
    from core.params import validate_params
    from service.services.training import training_sample

    cls = registry.get(name)
    monkeypatch.setattr("service.services.training._settings", lambda: Settings(training_metrics_max_rows=LIMIT))
    X, cols = _task_data()
    y = np.where(X[:, 0] > 0, "yes", "no") if cls.task == "classification" else X[:, 0] - X[:, 1]
    data = selection.TaskData("ds-lazy", "t", cls.task, [{"name": n, "type": "numeric"} for n in "abc"], cols, y,
                              np.arange(N_ROWS))
    train, test = np.arange(0, 300), np.arange(300, N_ROWS)
    metric = "accuracy" if cls.task == "classification" else "r2"
    seen = _count_predicted_rows(monkeypatch, cls)
    params = validate_params(cls.params, _params(name))
    out = selection.fit_score(data, cls, params, list("abc"), train, test, [metric], NULL_CONTEXT, train_scores=True,
                              sample_seed=4)
    if name in LAZY_LEARNERS:
        assert out["train_sampled_rows"] == LIMIT and max(seen) == LIMIT  # never the 300 training rows
        pick = training_sample(cls, train, 4)
        assert pick is not None and len(pick) == LIMIT
        # the score is the one of exactly that seeded sample
        seen.clear()
        again = selection.fit_score(data, cls, params, list("abc"), train, test, [metric], NULL_CONTEXT,
                                    train_scores=True, sample_seed=4)
        assert again["train"] == out["train"]
    else:
        assert "train_sampled_rows" not in out and max(seen) == len(train)


def test_a_learning_curve_of_a_lazy_learner_reports_its_sampled_train_scores(client, monkeypatch):
    seen = _count_predicted_rows(monkeypatch, KNNClassifier)
    ds = upload_csv(client, _csv()).json()["id"]
    r = client.post("/v1/learning-curve", json={"algorithm": "knn_classifier", "dataset_id": ds, "target": "label",
                                                "features": ["a", "b", "c"], "train_sizes": [0.2, 1.0],
                                                "folds": 4, "random_state": 0})
    assert r.status_code == 202, r.text
    job = wait_job(client, r.json()["job"]["id"])
    assert job["status"] == "succeeded", job
    res = job["result"]
    assert res["train_sizes"] == [60, 300]
    assert res["train"]["sampled_rows"] == [None, LIMIT]  # 60 rows: all of them; 300 rows: the bounded sample
    assert 60 in seen and max(seen) == LIMIT  # the test folds have 100 rows; never the 300 training rows
    assert any("the train score was measured on a seeded random sample" in n for n in res["notes"])


def test_the_refit_of_a_tuned_lazy_learner_reports_sampled_training_metrics(client, monkeypatch):
    ds = upload_csv(client, _csv()).json()["id"]
    r = client.post("/v1/tune", json={"algorithm": "knn_classifier", "search": "grid",
                                      "space": {"n_neighbors": [3, 5]}, "dataset_id": ds, "target": "label",
                                      "features": ["a", "b", "c"], "folds": 2, "random_state": 0})
    assert r.status_code == 202, r.text
    seen = _count_predicted_rows(monkeypatch, KNNClassifier)
    job = wait_job(client, r.json()["job"]["id"])
    assert job["status"] == "succeeded", job
    assert max(seen) <= 200  # the folds' test rows; never the 400 rows of the refit
    model = client.get(f"/v1/models/{job['result']['model_id']}").json()
    assert model["metrics"]["training"]["sampled_rows"] == LIMIT
    assert any(f"sample of {LIMIT} of the {N_ROWS} training rows" in n for n in model["notes"])


def test_validation_metrics_of_a_lazy_learner_use_every_held_out_row(client, monkeypatch):
    ds = upload_csv(client, _csv()).json()["id"]
    _, job = train(client, algorithm="knn_classifier", dataset_id=ds, target="label",
                   validation={"holdout": 0.5, "random_state": 3})
    metrics = job["result"]["metrics"]
    assert metrics["validation"]["n_samples"] == 200 and "sampled_rows" not in metrics["validation"]
    assert metrics["training"]["n_samples"] == LIMIT and metrics["training"]["sampled_rows"] == LIMIT


def test_an_eager_learner_is_scored_on_every_training_row(client, monkeypatch):
    seen = _count_predicted_rows(monkeypatch, LogisticRegression)
    ds = upload_csv(client, _csv()).json()["id"]
    _, job = train(client, algorithm="logistic_regression", dataset_id=ds, target="label")
    training = job["result"]["metrics"]["training"]
    assert training["n_samples"] == N_ROWS and "sampled_rows" not in training
    assert max(seen) == N_ROWS


def test_histogram_boosting_gets_n_jobs_from_the_settings_unless_the_request_sets_it(client, monkeypatch):
    asked = []
    original = gb_mod.max_workers
    monkeypatch.setattr(gb_mod, "max_workers", lambda n_jobs: asked.append(n_jobs) or original(n_jobs))
    monkeypatch.setattr(gb_mod, "_PARALLEL_MIN_WORK", 0)  # a small fit asks too
    ds = upload_csv(client, _csv()).json()["id"]
    mid, job = train(client, algorithm="gradient_boosting_classifier", dataset_id=ds, target="label",
                     params={"max_iter": 3})
    assert job["status"] == "succeeded", job
    assert asked == [2]
    assert client.get(f"/v1/models/{mid}").json()["params"]["n_jobs"] is None  # the request's params are kept
    _, job = train(client, algorithm="gradient_boosting_classifier", dataset_id=ds, target="label",
                   params={"max_iter": 3, "n_jobs": 1})
    assert job["status"] == "succeeded" and asked == [2, 1]
