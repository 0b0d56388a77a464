"""Explanations through the HTTP API: SHAP values, insight, partial dependence, importance jobs."""

import numpy as np
import pytest

from core import registry
from tests.core.example_params import example_data, example_params
from tests.service.conftest import train, wait_job

SUPERVISED = [n for n in registry.names() if registry.get(n).task in ("classification", "regression")]
EXTRA_PARAMS = {"quadratic_discriminant_analysis": {"reg_param": 0.1}}
EXACT_IN_PROBABILITY = {"gradient_boosting_classifier": "tree", "logistic_regression": "linear"}


def _mixed(client, n=160, seed=0):
    """colour (categorical, with missing), size (numeric, with missing), flag (boolean), two targets."""
    rng = np.random.default_rng(seed)
    colour = rng.choice(["red", "green", "blue"], n)
    size = rng.normal(size=n)
    flag = rng.random(n) < 0.5
    label = np.where((colour == "red") | (size > 0.8), "yes", "no")
    value = 2.0 * size + (colour == "blue") * 3.0 - flag + 0.1 * rng.normal(size=n)
    rows = [[c if i % 17 else None, float(s) if i % 13 else None, bool(f), lab, float(v)]
            for i, (c, s, f, lab, v) in enumerate(zip(colour, size, flag, label, value, strict=True))]
    r = client.post("/v1/datasets", json={"columns": ["colour", "size", "flag", "label", "value"], "rows": rows})
    assert r.status_code == 201, r.text
    return r.json()["id"], rows


def _fit(client, ds, algorithm, target, params=None):
    features = ["colour", "size", "flag"]
    mid, job = train(client, algorithm=algorithm, params=params or {}, dataset_id=ds, target=target,
                     features=features)
    assert job["status"] == "succeeded", job
    return mid


INSTANCES = [{"colour": "red", "size": 0.3, "flag": True}, {"colour": None, "size": None, "flag": False},
             {"colour": "blue", "size": -1.2}]


@pytest.mark.parametrize("algorithm,target,method,output", [
    ("random_forest_classifier", "label", "tree", "probability"),
    ("gradient_boosting_regressor", "value", "tree", "prediction"),
    ("gradient_boosting_classifier", "label", "tree", "probability"),
    ("gradient_boosting_classifier", "label", "tree", "margin"),
    ("logistic_regression", "label", "linear", "probability"),
    ("logistic_regression", "label", "linear", "margin"),
    ("ridge_regression", "value", "linear", "prediction"),
    ("knn_classifier", "label", "kernel", "probability"),
])
def test_explain_is_additive_over_original_features(client, algorithm, target, method, output):
    ds, _ = _mixed(client)
    mid = _fit(client, ds, algorithm, target, example_params(algorithm))
    body = {"instances": INSTANCES, "background": {"n": 50}}
    if output == "margin":
        body["output"] = "margin"
    r = client.post(f"/v1/models/{mid}/explain", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["method"] == method and out["output"] == output
    assert out["feature_names"] == ["colour", "size", "flag"]
    phi = np.asarray(out["contributions"])
    base = np.asarray(out["base_value"])
    pred = np.asarray(out["predictions"])
    assert phi.shape[:2] == (3, 3)
    np.testing.assert_allclose(base + phi.sum(axis=1), pred, atol=1e-8)
    p = client.post(f"/v1/models/{mid}/predict", json={"instances": INSTANCES, "return_proba": True}).json()
    if output == "probability":
        np.testing.assert_allclose(pred, p["probabilities"], atol=1e-8)
        assert out["classes"] == p["classes"]
    elif output == "prediction":
        np.testing.assert_allclose(pred, p["predictions"], atol=1e-8)
    else:  # margin, binary log-odds: class 1 score is the logit of its probability
        proba = np.asarray(p["probabilities"])[:, 1]
        np.testing.assert_allclose(1 / (1 + np.exp(-pred[:, 1])), proba, atol=1e-8)


def _example_table(cls, n=None):
    X, y = example_data(cls.name, np.random.default_rng(0))
    X = np.asarray(X, dtype=float)[:, :4]
    cols = [f"f{j}" for j in range(X.shape[1])] + ["target"]
    rows = [[None if np.isnan(v) else float(v) for v in x] + [t] for x, t in zip(X, np.asarray(y).tolist(),
                                                                                   strict=True)]
    return cols, rows


@pytest.mark.parametrize("name", SUPERVISED)
def test_additivity_for_every_supervised_algorithm(client, name):
    cls = registry.get(name)
    cols, rows = _example_table(cls)
    ds = client.post("/v1/datasets", json={"columns": cols, "rows": rows}).json()["id"]
    mid, job = train(client, algorithm=name, params={**example_params(name), **EXTRA_PARAMS.get(name, {})},
                     dataset_id=ds, target="target", features=cols[:-1])
    assert job["status"] == "succeeded", job
    r = client.post(f"/v1/models/{mid}/explain", json={"rows": [row[:-1] for row in rows[:2]],
                                                        "background": {"n": 12}})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["method"] == cls.capabilities()["explain"] or out["method"] == "kernel"
    if name in EXACT_IN_PROBABILITY:  # margin-additive classifiers: probabilities exactly, not sampled
        assert (out["method"], out["output"]) == (EXACT_IN_PROBABILITY[name], "probability")
    phi = np.asarray(out["contributions"])
    np.testing.assert_allclose(np.asarray(out["base_value"]) + phi.sum(axis=1), out["predictions"], atol=1e-8)
    p = client.post(f"/v1/models/{mid}/predict", json={"rows": [row[:-1] for row in rows[:2]],
                                                       "return_proba": True}).json()
    if cls.task == "regression":
        assert out["output"] == "prediction"
        np.testing.assert_allclose(out["predictions"], p["predictions"], atol=1e-8)
    elif p.get("probabilities") is not None:  # every classifier with predict_proba: probability by default
        assert out["output"] == "probability"
        np.testing.assert_allclose(out["predictions"], p["probabilities"], atol=1e-8)
    if cls.task == "classification":  # the margin on request: additive, or a 422 naming the field
        m = client.post(f"/v1/models/{mid}/explain", json={"rows": [row[:-1] for row in rows[:2]],
                                                            "background": {"n": 12}, "output": "margin"})
        if m.status_code == 422:
            assert m.json()["errors"][0]["loc"] == ["body", "output"], m.text
        else:
            assert m.status_code == 200, m.text
            mo = m.json()
            assert mo["output"] == "margin"
            np.testing.assert_allclose(np.asarray(mo["base_value"]) + np.asarray(mo["contributions"]).sum(axis=1),
                                       mo["predictions"], atol=1e-8)


def test_insight_on_the_model_record(client):
    ds, _ = _mixed(client)
    forest = client.get(f"/v1/models/{_fit(client, ds, 'random_forest_regressor', 'value')}").json()
    imp = forest["insight"]["feature_importances"]
    assert set(imp) == {"colour", "size", "flag"} and abs(sum(imp.values()) - 1) < 1e-9
    assert imp["size"] > imp["flag"]
    logit = client.get(f"/v1/models/{_fit(client, ds, 'logistic_regression', 'label')}").json()
    coef = logit["insight"]["coefficients"]
    assert {"colour=blue", "colour=green", "colour=red", "size", "flag"} <= set(coef)
    assert coef["colour=red"] > coef["colour=blue"]
    knn = client.get(f"/v1/models/{_fit(client, ds, 'knn_classifier', 'label')}").json()
    assert knn["insight"] is None


def test_importance_job_and_permutation_insight(client):
    ds, _ = _mixed(client)
    mid = _fit(client, ds, "gradient_boosting_regressor", "value", {"max_iter": 30})
    r = client.post(f"/v1/models/{mid}/importance", json={"dataset_id": ds, "n_repeats": 3, "metric": "rmse"})
    assert r.status_code == 202, r.text
    assert r.json()["job"]["kind"] == "importance"
    job = wait_job(client, r.json()["job"]["id"])
    assert job["status"] == "succeeded", job
    res = job["result"]
    assert res["metric"] == "rmse" and res["baseline"] > 0
    by = {f["name"]: f for f in res["features"]}
    assert by["size"]["mean"] > by["flag"]["mean"] > 0
    model = client.get(f"/v1/models/{mid}").json()
    assert model["status"] == "ready"
    assert model["insight"]["feature_importances_method"] == "permutation"
    assert model["insight"]["feature_importances"]["size"] == by["size"]["mean"]


def test_partial_dependence_against_direct_average(client):
    ds, rows = _mixed(client, n=120)
    mid = _fit(client, ds, "random_forest_regressor", "value", {"n_estimators": 10, "random_state": 0})
    r = client.post(f"/v1/models/{mid}/partial-dependence",
                    json={"dataset_id": ds, "features": ["size", "colour"], "grid_resolution": 5, "kind": "both"})
    assert r.status_code == 200, r.text
    res = {x["feature"]: x for x in r.json()["results"]}
    assert res["colour"]["grid"] == ["blue", "green", "red"]
    assert len(res["size"]["grid"]) == 5 and len(res["size"]["individual"]) == 120
    for feature, k in (("size", 2), ("colour", 0)):
        g = res[feature]["grid"][k]
        inst = [{"colour": row[0], "size": row[1], "flag": row[2], feature: g} for row in rows]
        direct = client.post(f"/v1/models/{mid}/predict", json={"instances": inst}).json()["predictions"]
        np.testing.assert_allclose(res[feature]["average"][k], np.mean(direct), atol=1e-9)
        np.testing.assert_allclose(np.asarray(res[feature]["individual"])[:, k], direct, atol=1e-9)


def test_bad_requests_are_422(client):
    ds, _ = _mixed(client)
    mid = _fit(client, ds, "logistic_regression", "label")
    url = f"/v1/models/{mid}"
    r = client.post(f"{url}/explain", json={"instances": [{"colour": "red", "weight": 3}]})
    assert r.status_code == 422 and "weight" in r.text
    r = client.post(f"{url}/explain", json={"instances": INSTANCES, "method": "tree"})
    assert r.status_code == 422 and "method" in str(r.json()["errors"][0]["loc"])
    r = client.post(f"{url}/explain", json={"instances": INSTANCES, "method": "shapley"})
    assert r.status_code == 422
    r = client.post(f"{url}/explain", json={"instances": INSTANCES, "output": "logit"})
    assert r.status_code == 422 and "output" in str(r.json()["errors"][0]["loc"])
    forest = _fit(client, ds, "random_forest_classifier", "label", {"n_estimators": 3})
    r = client.post(f"/v1/models/{forest}/explain", json={"instances": INSTANCES, "output": "margin"})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body", "output"], r.text
    ridge = _fit(client, ds, "ridge_regression", "value")
    r = client.post(f"/v1/models/{ridge}/explain", json={"instances": INSTANCES, "output": "probability"})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body", "output"], r.text
    no_target = client.post("/v1/datasets", json={"columns": ["colour", "size", "flag"],
                                                  "rows": [["red", 1.0, True], ["blue", 0.0, False]]}).json()["id"]
    r = client.post(f"{url}/importance", json={"dataset_id": no_target})
    assert r.status_code == 422 and "target" in r.text
    assert client.get("/v1/jobs", params={"kind": "importance"}).json()["count"] == 0
    r = client.post(f"{url}/importance", json={"dataset_id": ds, "metric": "rmse"})
    assert r.status_code == 422 and "metric" in r.text
    r = client.post(f"{url}/partial-dependence", json={"dataset_id": ds, "features": ["weight"]})
    assert r.status_code == 422 and "weight" in r.text
    r = client.post(f"{url}/explain", json={"instances": INSTANCES, "background": {"dataset_id": no_target,
                                                                                   "n": 5}})
    assert r.status_code == 200  # the background needs the features only
    assert client.post("/v1/models/nope/explain", json={"instances": INSTANCES}).status_code == 404
    r = client.post(f"{url}/explain", json={"instances": INSTANCES * 40, "method": "kernel"})
    assert r.status_code == 422 and "kernel" in r.text


def test_cancelling_an_importance_job_leaves_the_model_alone(client):
    ds, _ = _mixed(client, n=400)
    mid = _fit(client, ds, "random_forest_regressor", "value", {"n_estimators": 30, "random_state": 0})
    r = client.post(f"/v1/models/{mid}/importance", json={"dataset_id": ds, "n_repeats": 100})
    assert r.status_code == 202, r.text
    job_id = r.json()["job"]["id"]
    c = client.post(f"/v1/jobs/{job_id}/cancel")
    assert c.status_code in (202, 409)  # 409 only if it already finished
    job = wait_job(client, job_id)
    assert job["status"] in ("cancelled", "succeeded")
    model = client.get(f"/v1/models/{mid}").json()
    assert model["status"] == "ready"
    assert client.post(f"/v1/models/{mid}/predict", json={"instances": INSTANCES}).status_code == 200
    if job["status"] == "cancelled":  # the insight keeps its impurity importances
        assert model["insight"]["feature_importances_method"] == "impurity"
