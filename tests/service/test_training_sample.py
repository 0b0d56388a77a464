"""Training jobs: a lazy learner's metrics.training is measured on a bounded, seeded sample of the training rows
(ORCHARD_TRAINING_METRICS_MAX_ROWS), counted on the rows the model is asked to predict; the service passes
ORCHARD_HIST_WORKERS to histogram boosting as n_jobs."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from core.ensemble._hist_gradient_boosting import gradient_boosting as gb_mod
from core.linear.logistic_regression import LogisticRegression
from core.neighbors.knn_classifier import KNNClassifier
from service.app import create_app
from service.settings import Settings
from tests.service.conftest import train, upload_csv

N_ROWS = 400


def _csv(n=N_ROWS, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.where(X[:, 0] + X[:, 1] > 0, "yes", "no")
    lines = ["a,b,c,label"] + [f"{a:.5f},{b:.5f},{c:.5f},{t}" for (a, b, c), t in zip(X, y, strict=True)]
    return "\n".join(lines) + "\n"


@pytest.fixture
def client(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", workers=0, secret_key="test-secret", training_metrics_max_rows=100,
                        hist_workers=2)
    with TestClient(create_app(settings)) as c:
        yield c


def _count_predicted_rows(monkeypatch, cls):
    """Row counts of every predict / predict_proba call on ``cls``."""
    seen = []
    for name in ("predict", "predict_proba"):
        original = getattr(cls, name)

        def counting(self, X, _original=original):
            seen.append(len(X))
            return _original(self, X)

        monkeypatch.setattr(cls, name, counting)
    return seen


def test_a_lazy_learner_is_scored_on_a_bounded_seeded_sample(client, monkeypatch):
    seen = _count_predicted_rows(monkeypatch, KNNClassifier)
    ds = upload_csv(client, _csv()).json()["id"]
    mid, job = train(client, algorithm="knn_classifier", dataset_id=ds, target="label")
    assert job["status"] == "succeeded", job
    assert seen and max(seen) == 100 and sum(seen) <= 2 * 100  # never the 400 training rows
    model = client.get(f"/v1/models/{mid}").json()
    training = model["metrics"]["training"]
    assert training["sampled_rows"] == 100 and training["n_samples"] == 100
    assert any("sample of 100 of the 400 training rows" in note for note in job["result"]["notes"])
    # seeded: a second job reports the same figure
    _, again = train(client, algorithm="knn_classifier", dataset_id=ds, target="label")
    assert again["result"]["metrics"]["training"] == job["result"]["metrics"]["training"]


def test_validation_metrics_of_a_lazy_learner_use_every_held_out_row(client, monkeypatch):
    ds = upload_csv(client, _csv()).json()["id"]
    _, job = train(client, algorithm="knn_classifier", dataset_id=ds, target="label",
                   validation={"holdout": 0.5, "random_state": 3})
    metrics = job["result"]["metrics"]
    assert metrics["validation"]["n_samples"] == 200 and "sampled_rows" not in metrics["validation"]
    assert metrics["training"]["n_samples"] == 100 and metrics["training"]["sampled_rows"] == 100


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
