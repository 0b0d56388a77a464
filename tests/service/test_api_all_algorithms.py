"""Every registered algorithm is trained, predicted and evaluated through the HTTP API."""

import numpy as np
import pytest

from core import registry
from tests.service.conftest import train

NAMES = registry.names()
# the example data's rarest class keeps ~4 rows after the default 20% hold-out: regularise its covariance
EXTRA_PARAMS = {"quadratic_discriminant_analysis": {"reg_param": 0.1}}


def _table(cls):
    X, y = cls._example_data(np.random.default_rng(0))
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
    params = {**cls._example_params(), **EXTRA_PARAMS.get(name, {})}
    body = {"algorithm": name, "params": params, "dataset_id": ds.json()["id"]}
    if "target" in cols:
        body["target"] = "target"
    mid, job = train(client, **body)
    assert job["status"] == "succeeded", job
    model = client.get(f"/v1/models/{mid}").json()
    assert model["status"] == "ready" and model["task"] == cls.task
    n = 5
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
