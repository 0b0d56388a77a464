"""The remembered parts of repeated single-row requests (services/oip.py, services/bundle.py): a /v2 JSON document
whose bytes around ``data`` were seen before, a binary request's JSON header, a /v1 row packed in one call. Each
answers byte for byte as the general path, whatever changes between requests."""

import orjson

from service.services import oip
from tests.service.conftest import iris_csv, train, upload_csv


def _model(client):
    ds = upload_csv(client, iris_csv(), name="iris").json()["id"]
    mid, job = train(client, algorithm="logistic_regression", dataset_id=ds, target="species")
    assert job["status"] == "succeeded"
    return mid


def test_repeated_v2_json_documents_answer_as_the_general_path(client, monkeypatch):
    plane = client.app.state.runtime.plane
    bundle = plane.model(_model(client))

    def doc(data, **extra):
        return orjson.dumps({**extra, "inputs": [{"name": "m", "shape": [1, 4], "datatype": "FP64", "data": data}],
                             "outputs": [{"name": "predict"}]})

    bodies = [doc([5.1, 3.5, 1.4, 0.2]), doc([6.7, 3.0, 5.2, 2.3]), doc([6.7, 3.0, 5.2, 2.3]),
              doc([1, 2, 3, 4]), doc([[5.1, 3.5, 1.4, 0.2]]), doc([5.1, 3.5, 1.4]), doc([5.1, 3.5, 1.4, None]),
              doc([5.1, 3.5, 1.4, 0.2], id='a "data": ] [ id'), doc([4.9, 3.1, 1.5, 0.1], id='a "data": ] [ id'),
              doc([5.1, 3.5, 1.4, 0.2]).replace(b"]}],", b"]},{}],", 1), doc([5.1, 3.5, 1.4, 0.2]) + b" ",
              doc([5.1, 3.5, 1.4, 0.2]).replace(b"[5.1", b"[[5.1", 1)]

    def answer(body, shortcut):
        monkeypatch.setattr(oip, "_infer_plain", shortcut)
        try:
            return plane.infer(bundle, "m", body, None)
        except oip.V2Error as exc:
            return exc.detail

    shortcut = oip._infer_plain
    for body in bodies + bodies:
        assert answer(body, shortcut) == answer(body, lambda *a: None), body
    assert bundle.memo["v2_json"]  # the documents' outer bytes were remembered


def test_one_v1_row_of_any_numbers_answers_as_the_array_path(client, monkeypatch):
    plane = client.app.state.runtime.plane
    bundle = plane.model(_model(client))

    def answer(body, packed):
        if not packed:
            monkeypatch.setattr(bundle, "matrix_from_flat", lambda values, n: None)
        try:
            return plane.predict(bundle, body)[0]
        except Exception as exc:  # noqa: BLE001 - the same refusal either way
            return repr(exc)
        finally:
            monkeypatch.undo()

    for row in ([5.1, 3.5, 1.4, 0.2], [5, 3, 1, 0], [True, 3.5, False, 0.2], [True, False, True, True],
                [5.1, 3.5, 1.4, None], [5.1, 3.5, 1.4], [10**30, 3.5, 1.4, 0.2], [10**400, 3.5, 1.4, 0.2],
                [5.1, 3.5, 1.4, 1e300], ["5.1", 3.5, 1.4, 0.2], [[5.1], 3.5, 1.4, 0.2]):
        body = orjson.dumps({"rows": [row]}) if not isinstance(row[0], int) or row[0] < 2**64 else (
            b'{"rows": [[' + b",".join(str(v).encode() for v in row) + b"]]}")
        assert answer(body, True) == answer(body, False), row
