"""Every registered algorithm is trained, predicted and evaluated through the HTTP API."""

import numpy as np
import pytest

from core import registry
from tests.core.example_params import example_data, example_params
from tests.service.conftest import train

NAMES = registry.names()
# the example data's rarest class keeps ~4 rows after the default 20% hold-out: regularise its covariance
EXTRA_PARAMS = {"quadratic_discriminant_analysis": {"reg_param": 0.1}}


def _table(cls):
    X, y = example_data(cls.name, np.random.default_rng(0))
    if getattr(X, "dtype", None) is not None and X.dtype.names:  # a table (reinforcement): columns as they are
        cols = list(X.dtype.names)
        rows = [[v.item() if isinstance(v, np.generic) else v for v in r] for r in X.tolist()]
        return cols, rows, X
    X = np.asarray(X, dtype=float)
    cols = [f"f{j}" for j in range(X.shape[1])]
    rows = [[None if np.isnan(v) else float(v) for v in x] for x in X]
    if y is not None:
        cols.append("target")
        yv = np.asarray(y).tolist()
        rows = [r + [t] for r, t in zip(rows, yv, strict=True)]
    return cols, rows, X


@pytest.mark.parametrize("name", NAMES)
def test_train_predict_evaluate(client, name):
    cls = registry.get(name)
    cols, rows, X = _table(cls)
    ds = client.post("/v1/datasets", json={"columns": cols, "rows": rows})
    assert ds.status_code == 201, ds.text
    params = {**example_params(name), **EXTRA_PARAMS.get(name, {})}
    body = {"algorithm": name, "params": params, "dataset_id": ds.json()["id"]}
    if "target" in cols:
        body["target"] = "target"
    mid, job = train(client, **body)
    assert job["status"] == "succeeded", job
    model = client.get(f"/v1/models/{mid}").json()
    assert model["status"] == "ready" and model["task"] == cls.task
    n = 5
    if cls.task == "reinforcement":
        _check_reinforcement(client, cls, model, ds.json()["id"], X, n)
        return
    p = client.post(f"/v1/models/{mid}/predict", json={"rows": [r[: X.shape[1]] for r in rows[:n]],
                                                       "return_proba": True, "return_std": True})
    assert p.status_code == 200, p.text
    out = p.json()
    if cls.task in ("classification", "regression", "clustering"):
        assert len(out["predictions"]) == n
    if cls.task == "classification":
        assert set(out["predictions"]) <= set(model["classes"])
        if cls.capabilities()["predict_proba"]:
            assert np.allclose(np.sum(out["probabilities"], axis=1), 1.0)
    if cls.task == "regression" and cls.has_predict_std:
        assert len(out["std"]) == n and min(out["std"]) >= 0
    if cls.task == "decomposition":
        assert len(out["components"]) == n
    if cls.task == "density":
        assert len(out["log_density"]) == n and all(np.isfinite(out["log_density"]))
    ev = client.post(f"/v1/models/{mid}/evaluate", json={"dataset_id": ds.json()["id"]})
    assert ev.status_code == 200, ev.text
    metrics = ev.json()["metrics"]
    expected = {"classification": "accuracy", "regression": "r2", "clustering": "inertia",
                "decomposition": "n_components", "density": "mean_log_density"}[cls.task]
    assert expected in metrics, metrics


def _check_reinforcement(client, cls, model, dataset_id, X, n):
    names = [f["name"] for f in model["features"]]
    instances = [{k: (X[k][i].item() if isinstance(X[k][i], np.generic) else X[k][i]) for k in names}
                 for i in range(n)]
    p = client.post(f"/v1/models/{model['id']}/predict", json={"instances": instances})
    assert p.status_code == 200, p.text
    out = p.json()
    assert len(out["predictions"]) == n
    if cls.name != "lqr":
        assert len(out["values"]) == n and len(out["q_values"]) == n
    rows = client.post(f"/v1/models/{model['id']}/predict", json={"rows": [[i[k] for k in names] for i in instances]})
    assert rows.status_code == 200 and rows.json()["predictions"] == out["predictions"]
    ev = client.post(f"/v1/models/{model['id']}/evaluate", json={"dataset_id": dataset_id})
    assert ev.status_code == 200, ev.text
    assert ev.json()["task"] == "reinforcement" and "bellman_residual" in ev.json()["metrics"]
    assert "bellman_residual" in model["metrics"]["training"]


NATIVE = [n for n in NAMES if registry.get(n).native_categorical and registry.get(n).task == "classification"]


@pytest.mark.parametrize("name", NATIVE + ["logistic_regression", "knn_classifier"])
def test_categorical_and_missing_features_through_the_service(client, name):
    """A categorical column (native codes or one-hot, chosen per algorithm) and missing values."""
    rng = np.random.default_rng(1)
    n = 200
    colour = rng.choice(["red", "green", "blue"], n)
    size = rng.normal(size=n)
    label = np.where((colour == "red") | (size > 1.0), "yes", "no")
    rows = [[c if i % 17 else None, float(s) if i % 13 else None, lab]
            for i, (c, s, lab) in enumerate(zip(colour, size, label, strict=True))]
    ds = client.post("/v1/datasets", json={"columns": ["colour", "size", "label"], "rows": rows}).json()["id"]
    params = example_params(name)
    mid, job = train(client, algorithm=name, params=params, dataset_id=ds, target="label",
                     validation={"holdout": 0.2})
    assert job["status"] == "succeeded", job
    model = client.get(f"/v1/models/{mid}").json()
    assert model["features"][0] == {"name": "colour", "type": "categorical", "categories": ["blue", "green", "red"]}
    assert model["metrics"]["validation"]["accuracy"] >= 0.8, model["metrics"]
    p = client.post(f"/v1/models/{mid}/predict", json={"instances": [
        {"colour": "red", "size": 0.0}, {"colour": "blue", "size": -1.0}, {"colour": "purple"}, {}]})
    assert p.status_code == 200, p.text
    assert p.json()["predictions"][:2] == ["yes", "no"]
    assert len(p.json()["predictions"]) == 4  # unknown category and all-missing rows still predict
