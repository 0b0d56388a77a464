"""Pydantic bodies above INLINE_BODY_BYTES are decoded and validated on a worker thread, a piece at a time
(api/body.py, services/json_pieces.py); small ones inline, by FastAPI. The answers, errors included, are
FastAPI's own either way."""

import asyncio
import json

import numpy as np
import orjson
import pytest

from service.api import body as api_body
from service.schemas.models import DatasetCreateJSON, EvaluateRequest, ExplainRequest
from service.services import datasets as ds_service
from service.services import json_pieces
from service.services.inference import INLINE_BODY_BYTES
from tests.service.conftest import assert_problem, train

COLUMNS = [f"x{i}" for i in range(4)] + ["y"]


def _rows(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return np.column_stack([X, X @ np.array([1.0, -2.0, 0.5, 3.0])]).round(6).tolist()


def _on_loop() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False


@pytest.fixture
def calls(monkeypatch):
    """Every piecewise validation, with whether it ran on the event loop's thread."""
    seen = []
    real = json_pieces.validate_in_pieces

    def recording(raw, validate):
        seen.append(_on_loop())
        return real(raw, validate)

    monkeypatch.setattr(api_body, "validate_in_pieces", recording)
    monkeypatch.setattr(ds_service, "validate_in_pieces", recording)
    return seen


@pytest.fixture
def model(client):
    mid, job = train(client, algorithm="linear_regression", data={"columns": COLUMNS, "rows": _rows(200)},
                     target="y")
    assert job["status"] == "succeeded", job
    return mid


def test_large_bodies_of_every_kind_are_validated_off_the_loop_and_small_ones_inline(client, model, calls):
    big = {"columns": COLUMNS, "rows": _rows(3000)}
    assert len(orjson.dumps(big)) > 2 * INLINE_BODY_BYTES
    calls.clear()
    r = client.post(f"/v1/models/{model}/evaluate", json={"data": big})
    assert r.status_code == 200 and r.json()["n_samples"] == 3000 and r.json()["metrics"]["r2"] > 0.99, r.text
    r = client.post("/v1/datasets", json=big)
    assert r.status_code == 201 and r.json()["n_rows"] == 3000, r.text
    r = client.post("/v1/train", json={"algorithm": "linear_regression", "data": big, "target": "y"})
    assert r.status_code == 202, r.text
    instances = [{k: v + 1e-9 for k, v in zip(COLUMNS[:4], row, strict=False)} for row in big["rows"][:1000]]
    assert len(orjson.dumps({"instances": instances})) > INLINE_BODY_BYTES
    r = client.post(f"/v1/models/{model}/explain", json={"instances": instances})
    assert r.status_code == 200 and len(r.json()["contributions"]) == 1000, r.text[:300]
    assert calls == [False] * 4  # each one validated, none on the event loop's thread

    small = {"columns": COLUMNS, "rows": _rows(20)}
    for path, body in ((f"/v1/models/{model}/evaluate", {"data": small}), ("/v1/datasets", small),
                       ("/v1/train", {"algorithm": "linear_regression", "data": small, "target": "y"})):
        assert client.post(path, json=body).status_code < 300
    assert calls == [False] * 4  # FastAPI's own path: no piecewise validation, no thread hop


def test_the_model_built_in_pieces_is_the_whole_bodys():
    rows = _rows(5000)
    rows[7][2], rows[4000][0], rows[4999][1] = "a ], [ b", None, True
    for model, body in ((EvaluateRequest, {"target": "y", "data": {"columns": COLUMNS, "rows": rows}}),
                        (DatasetCreateJSON, {"name": "n", "columns": COLUMNS, "rows": rows, "types": None}),
                        (ExplainRequest, {"instances": [dict(zip(COLUMNS, r, strict=True)) for r in rows],
                                          "method": "linear"})):
        for raw in (orjson.dumps(body), json.dumps(body, indent=2).encode()):
            built = json_pieces.validate_in_pieces(raw, model.model_validate)
            assert built is not None and built == model.model_validate_json(raw)


@pytest.mark.parametrize("raw", [
    b'{"data": {"columns": ["a"], "rows": [[1], [2], "x"]}}',  # an element of the wrong type
    b'{"data": {"columns": ["a"], "rows": [[1], [2]], "rows": [[3]]}}',  # a repeated key
    b'{"data": {"columns": ["a"], "rows": [[1], [2]]}, "extra": 1}',  # an unknown field
    b'{"data": {"columns": ["a"], "rows": [[1], [2]]}',  # truncated
    b'{"data": {"columns": ["a"], "rows": [[NaN], [2]]}}',  # not JSON orjson decodes
    b'{"data": {"columns": ["a"], "rows": []}}',  # no elements
    b'{"note": "\\"rows\\": [[1]]", "data": {"columns": ["a"], "rows": [[1]]}}',  # the key inside a string
])
def test_anything_else_is_left_to_the_whole_body(raw):
    built = json_pieces.validate_in_pieces(raw, EvaluateRequest.model_validate)
    if built is not None:  # only when it is what a whole validation makes
        assert built == EvaluateRequest.model_validate_json(raw)


def test_release_empties_long_lists_a_slice_at_a_time():
    raw = orjson.dumps({"data": {"columns": COLUMNS, "rows": _rows(5000)}})
    built = json_pieces.validate_in_pieces(raw, EvaluateRequest.model_validate)
    json_pieces.release(built)
    assert built.data.rows == [] and built.data.columns == COLUMNS
    decoded = json.loads(raw)
    json_pieces.release(decoded)
    assert decoded["data"]["rows"] == []


def _pad(rows: list) -> list:
    return rows + _rows(3000, seed=1)


@pytest.mark.parametrize("path, raw", [
    # a value of the wrong type deep in the rows (and an unknown field): FastAPI's errors, in its order
    ("/v1/models/{m}/evaluate", orjson.dumps({"data": {"columns": COLUMNS, "rows": _pad([[1, 2, 3, 4, [5]]])},
                                              "bogus": 1})),
    ("/v1/models/{m}/evaluate", orjson.dumps({"data": {"columns": COLUMNS, "rows": _pad([])}})[:-7]),  # not JSON
    ("/v1/models/{m}/evaluate", b'{"data": "\xff' + b" " * INLINE_BODY_BYTES + b'"}'),  # not UTF-8
    ("/v1/train", orjson.dumps({"algorithm": "linear_regression", "data": {"columns": COLUMNS,
                                                                           "rows": _pad([{"a": 1}])}})),
    ("/v1/datasets", orjson.dumps({"columns": COLUMNS, "rows": _pad([[1, 2, 3, 4, {}]])})),
    ("/v1/datasets", orjson.dumps({"columns": COLUMNS, "rows": _pad([])})[:-3]),
])
def test_invalid_large_bodies_get_the_answers_of_the_inline_path(client, model, monkeypatch, path, raw):
    assert len(raw) > INLINE_BODY_BYTES
    path = path.format(m=model)
    headers = {"content-type": "application/json"}
    off_loop = client.post(path, content=raw, headers=headers)
    monkeypatch.setattr(api_body, "INLINE_BODY_BYTES", 1 << 30)
    monkeypatch.setattr(ds_service, "INLINE_BODY_BYTES", 1 << 30)
    monkeypatch.setattr("service.services.inference.INLINE_BODY_BYTES", 1 << 30)
    inline = client.post(path, content=raw, headers=headers)
    assert off_loop.status_code in (400, 422), off_loop.text[:300]
    assert (off_loop.status_code, off_loop.headers["content-type"], off_loop.json()) == (
        inline.status_code, inline.headers["content-type"], inline.json())


def test_a_key_without_the_scope_gets_its_403_before_a_large_bodys_422(tmp_path):
    from fastapi.testclient import TestClient

    from service.app import create_app
    from service.settings import Settings
    from tests.service.test_security import bearer, make_key

    settings = Settings(data_dir=tmp_path / "data", workers=0, max_body_bytes=2_000_000, secret_key="test-secret")
    with TestClient(create_app(settings)) as c:
        admin = make_key(c, None, ["admin"], name="root")["key"]
        read = make_key(c, admin, ["read"], name="reader")["key"]
        good = {"algorithm": "linear_regression", "data": {"columns": COLUMNS, "rows": _rows(3000)}, "target": "y"}
        bad = {**good, "data": {"columns": COLUMNS, "rows": _pad([[1, 2, 3, 4, [5]]])}}
        for body in (good, bad):
            r = c.post("/v1/train", content=orjson.dumps(body),
                       headers={"content-type": "application/json", **bearer(read)})
            assert r.status_code == 403 and "'train' scope" in r.json()["detail"], r.text[:300]
        r = c.post("/v1/train", content=orjson.dumps(bad), headers={"content-type": "application/json",
                                                                     **bearer(admin)})
        assert r.status_code == 422 and r.json()["errors"][0]["loc"][:4] == ["body", "data", "rows", 0], r.text[:300]


def test_a_streamed_body_over_the_limit_is_413_on_a_pydantic_route(client):
    """FastAPI read these bodies itself and answered the limit's error as an unparsable body (422)."""

    def chunks():  # no Content-Length: the streamed size is counted (the limit of the test settings: 2 MB)
        yield b'{"algorithm": "linear_regression", "params": {"a": "'
        for _ in range(300):
            yield b"1" * 10_000
        yield b'"}}'

    r = client.post("/v1/train", content=chunks(), headers={"content-type": "application/json"})
    assert_problem(r, 413, "ORCHARD_MAX_BODY_BYTES")


def test_a_large_body_the_pieces_do_not_cover_is_validated_whole_off_the_loop(client, monkeypatch):
    seen = []
    real = api_body.decode_validated

    def recording(raw, field):
        out = real(raw, field)
        seen.append((_on_loop(), type(out).__name__))
        return out

    monkeypatch.setattr(api_body, "decode_validated", recording)
    rows = [[*row, "a], [b"] for row in _rows(3000)]  # a cut inside every string: no piece decodes
    assert json_pieces.split(orjson.dumps({"rows": rows})) is None
    r = client.post("/v1/train", json={"algorithm": "linear_regression", "target": "y",
                                       "data": {"columns": [*COLUMNS, "note"], "rows": rows}})
    assert r.status_code == 202, r.text[:300]
    assert seen == [(False, "TrainRequest")]


def test_every_route_with_a_pydantic_body_takes_large_ones_off_the_loop(settings):
    from service.app import create_app
    from tests.service.test_security import api_routes

    routes = [r for r in api_routes(create_app(settings)) if r.body_field is not None]
    assert len(routes) >= 12 and all(isinstance(r, api_body.JSONBodyRoute) for r in routes), [
        r.path for r in routes if not isinstance(r, api_body.JSONBodyRoute)]
