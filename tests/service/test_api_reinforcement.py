"""Reinforcement learning over REST: training, progress, cancellation, predict, evaluate, /v2 and 422s."""

import time

import pytest

from tests.service.conftest import assert_problem, train, upload_csv, wait_job

COLUMNS = ["state", "action", "next_state", "probability", "reward"]


def _chain(n=6, p_slip=0.1):
    """States 0..n-1 on a line; 'right' moves right with 1 - p_slip (else stays); reaching n-1 pays 1."""
    rows = []
    for s in range(n - 1):
        nxt = s + 1
        rows.append([s, "right", nxt, 1 - p_slip, 1.0 if nxt == n - 1 else 0.0])
        rows.append([s, "right", s, p_slip, 0.0])
        rows.append([s, "left", max(s - 1, 0), 1.0, 0.0])
    return rows


def _dataset(client, rows, columns=COLUMNS):
    r = client.post("/v1/datasets", json={"columns": columns, "rows": rows})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_algorithms_are_listed_with_task_reinforcement(client):
    algos = {a["name"]: a for a in client.get("/v1/algorithms").json()["data"]}
    for name in ("mdp_value_iteration", "mdp_policy_iteration", "q_learning", "sarsa", "td_learning", "lqr",
                 "fitted_value_iteration"):
        assert algos[name]["task"] == "reinforcement"
        assert algos[name]["capabilities"]["progress"] is True
        schema = algos[name]["params_schema"]
        assert schema["additionalProperties"] is False
    sim = algos["q_learning"]["params_schema"]["properties"]["simulate"]
    assert sim["default"] is None and "episodes" in str(sim)


def test_value_iteration_train_predict_evaluate_and_v2(client):
    ds = _dataset(client, _chain())
    mid, job = train(client, algorithm="mdp_value_iteration", dataset_id=ds,
                     params={"gamma": 0.9, "terminal_states": [5]})
    assert job["status"] == "succeeded", job
    model = client.get(f"/v1/models/{mid}").json()
    assert model["task"] == "reinforcement" and model["target"] is None
    assert model["metrics"]["training"]["policy_agreement"] == 1.0
    out = client.post(f"/v1/models/{mid}/predict", json={"instances": [{"state": 0}, {"state": 4}, {"state": 5}]})
    assert out.status_code == 200, out.text
    body = out.json()
    assert body["predictions"] == ["right", "right", None]
    assert body["values"][2] == 0.0 and body["values"][1] == pytest.approx(1.0 / (1 - 0.9 * 0.1) * 0.9, rel=1e-6)
    assert set(body["q_values"][0]) == {"left", "right"} and body["q_values"][2] == {}
    ev = client.post(f"/v1/models/{mid}/evaluate", json={"dataset_id": ds})
    assert ev.status_code == 200 and ev.json()["metrics"]["bellman_residual"] < 1e-6
    # unknown state: 422 naming it
    assert_problem(client.post(f"/v1/models/{mid}/predict", json={"instances": [{"state": 99}]}), 422, "99")
    assert_problem(client.post(f"/v1/models/{mid}/predict", json={"instances": [{"position": 1}]}), 422, "position")
    # /v2: INT64 states
    inf = client.post(f"/v2/models/{mid}/infer", json={"inputs": [
        {"name": "state", "datatype": "INT64", "shape": [2, 1], "data": [0, 4]}]})
    assert inf.status_code == 200, inf.text
    outs = {o["name"]: o for o in inf.json()["outputs"]}
    assert outs["predict"]["data"] == ["right", "right"] and outs["predict"]["datatype"] == "BYTES"
    assert outs["value"]["data"][1] == pytest.approx(body["values"][1])
    assert outs["q_values"]["shape"] == [2, 2]
    meta = client.get(f"/v2/models/{mid}").json()
    assert meta["inputs"] == [{"name": "state", "datatype": "INT64", "shape": [-1]}]
    assert [o["name"] for o in meta["outputs"]] == ["predict", "value", "q_values"]


def test_q_learning_by_simulation_and_string_states_over_v2(client):
    rows = [[f"s{r[0]}", r[1], f"s{r[2]}", r[3], r[4]] for r in _chain()]
    ds = _dataset(client, rows)
    mid, job = train(client, algorithm="q_learning", dataset_id=ds,
                     params={"gamma": 0.9, "terminal_states": ["s5"], "epsilon": 0.3, "random_state": 0,
                             "simulate": {"episodes": 300, "max_steps": 50}})
    assert job["status"] == "succeeded", job
    ev = client.post(f"/v1/models/{mid}/evaluate", json={"dataset_id": ds}).json()["metrics"]
    assert ev["policy_agreement"] == 1.0
    inf = client.post(f"/v2/models/{mid}/infer", json={"inputs": [
        {"name": "state", "datatype": "BYTES", "shape": [2], "data": ["s0", "s3"]}]})
    assert inf.status_code == 200 and inf.json()["outputs"][0]["data"] == ["right", "right"]


def test_logged_experience_sarsa_and_td(client):
    rows = []
    for e in range(30):
        for s in range(5):
            rows.append([f"s{s}", "right", 1.0 if s == 4 else 0.0, f"s{s + 1}", s == 4, e])
    cols = ["state", "action", "reward", "next_state", "done", "episode"]
    ds = _dataset(client, rows, cols)
    for algo in ("sarsa", "td_learning"):
        mid, job = train(client, algorithm=algo, dataset_id=ds, params={"gamma": 0.5, "alpha": 0.5})
        assert job["status"] == "succeeded", job
        out = client.post(f"/v1/models/{mid}/predict", json={"rows": [["s3"], ["s4"]]}).json()
        assert out["values"] == pytest.approx([0.5, 1.0], abs=1e-3)
        assert out["predictions"] == ["right", "right"]
        ev = client.post(f"/v1/models/{mid}/evaluate", json={"dataset_id": ds}).json()["metrics"]
        assert ev["bellman_residual"] < 1e-3


def test_lqr_from_matrices_without_a_dataset(client):
    mid, job = train(client, algorithm="lqr", params={"A": [[1.0]], "B": [[1.0]], "Q": [[1.0]], "R": [[1.0]],
                                                      "horizon": 1})
    assert job["status"] == "succeeded", job
    out = client.post(f"/v1/models/{mid}/predict", json={"rows": [[2.0]]}).json()
    assert out["predictions"] == [[pytest.approx(-1.0)]]
    inf = client.post(f"/v2/models/{mid}/infer", json={"inputs": [
        {"name": "x", "datatype": "FP64", "shape": [1, 1], "data": [2.0]}]})
    assert inf.status_code == 200 and inf.json()["outputs"][0]["data"] == [pytest.approx(-1.0)]


@pytest.mark.parametrize("rows, fragment", [
    ([["a", "x", "a", 0.5, 0.0]], "sum to 0.5"),
    ([["a", "x", "a", 1.5, 0.0], ["a", "x", "a", -0.5, 0.0]], "negative probability"),
    ([["a", "x", "b", 1.0, 0.0]], "'b'"),
    ([["a", "x", "a", 1.0, "lots"]], "'reward'"),
])
def test_bad_transition_tables_are_422_before_queueing(client, rows, fragment):
    before = client.get("/v1/jobs").json()["count"]
    r = client.post("/v1/train", json={"algorithm": "mdp_value_iteration",
                                       "data": {"columns": COLUMNS, "rows": rows}})
    assert_problem(r, 422, fragment)
    assert client.get("/v1/jobs").json()["count"] == before


def test_missing_or_infinite_rewards_are_422(client):
    # infinity is refused by the upload itself; a missing reward is refused by the training request
    assert_problem(upload_csv(client, "state,action,next_state,probability,reward\na,x,a,1,inf\n"), 422, "reward")
    ds = upload_csv(client, "state,action,next_state,probability,reward\na,x,a,1,\n").json()
    r = client.post("/v1/train", json={"algorithm": "mdp_value_iteration", "dataset_id": ds["id"]})
    assert_problem(r, 422, "'reward' must hold finite")


@pytest.mark.parametrize("algorithm, params, fragment, loc", [
    ("mdp_value_iteration", {"gamma": 1.5}, "gamma", "params"),
    ("mdp_value_iteration", {"gamma": 1.0}, "gamma = 1", "params"),
    ("lqr", {"A": [[1.0, 0.0]], "B": [[1.0]]}, "must be 1 x 1", "params"),
    ("lqr", {"A": [[1.0]], "B": [[1.0], [1.0]]}, "must be 1 x 1", "params"),
    ("q_learning", {}, "'done'", "data"),
    ("q_learning", {"simulate": {"episodes": 10}}, "max_steps", "params"),
])
def test_bad_params_and_columns_are_422(client, algorithm, params, fragment, loc):
    r = client.post("/v1/train", json={"algorithm": algorithm, "params": params,
                                       "data": {"columns": COLUMNS, "rows": [["a", "x", "a", 1.0, 0.0]]}})
    body = assert_problem(r, 422, fragment)
    assert body["errors"][0]["loc"][1] == loc


@pytest.mark.parametrize("extra, fragment", [({"target": "reward"}, "no target"),
                                             ({"features": ["state"]}, "features"),
                                             ({"validation": {"holdout": 0.2}}, "hold-out")])
def test_supervised_fields_are_rejected(client, extra, fragment):
    r = client.post("/v1/train", json={"algorithm": "mdp_value_iteration", **extra,
                                       "data": {"columns": COLUMNS, "rows": [["a", "x", "a", 1.0, 0.0]]}})
    assert_problem(r, 422, fragment)


def test_lqr_needs_matrices_or_data(client):
    assert_problem(client.post("/v1/train", json={"algorithm": "lqr"}), 422, "A and B")
    assert_problem(client.post("/v1/train", json={"algorithm": "q_learning"}), 422, "needs a dataset")


def test_progress_and_cancellation_of_a_long_simulation(client):
    ds = _dataset(client, _chain())
    r = client.post("/v1/train", json={"algorithm": "q_learning", "dataset_id": ds, "params": {
        "gamma": 0.9, "terminal_states": [5], "n_envs": 1, "simulate": {"episodes": 10_000_000, "max_steps": 1000}}})
    assert r.status_code == 202, r.text
    job_id = r.json()["job"]["id"]
    deadline = time.monotonic() + 30
    while True:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] == "running" and job["progress"] > 0:
            break
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
    assert client.post(f"/v1/jobs/{job_id}/cancel").status_code == 202
    assert wait_job(client, job_id, timeout=20)["status"] == "cancelled"
