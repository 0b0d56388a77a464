"""The remembered parts of repeated single-row requests (services/oip.py, services/bundle.py): a /v2 JSON document
whose bytes around ``data`` were seen before, a binary request's JSON header, a /v1 row packed in one call. Each
answers byte for byte as the general path, whatever changes between requests."""

import json

import numpy as np
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


# -- /v2 plans: what stays the same between a client's requests, checked once per bundle (oip._Plan) ---------------
def _labelled_csv(label) -> str:
    """Generated rows of three numeric features and a label column made by ``label(row)``."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(80, 3))
    lines = ["a,b,c,y"] + [",".join(f"{v:.6f}" for v in x) + f",{label(x)}" for x in X]
    return "\n".join(lines) + "\n"


def _models(client) -> dict[str, str]:
    """Models whose /v2 "predict" output has each datatype the plans write: text (iris species), INT64 and FP64
    labels, FP64 regression values (with a predict_std output)."""
    out = {"text": _model(client)}
    ints = upload_csv(client, _labelled_csv(lambda x: int(x[0] > 0) + int(x[1] > 0)), name="ints").json()["id"]
    floats = upload_csv(client, _labelled_csv(lambda x: 0.5 if x[0] > 0 else 2), name="floats").json()["id"]
    for key, ds, algorithm in (("int", ints, "logistic_regression"), ("float", floats, "logistic_regression"),
                               ("regression", ints, "bayesian_linear_regression")):
        target = "y" if algorithm == "logistic_regression" else "c"
        features = ["a", "b", "c"] if target == "y" else ["a", "b", "y"]
        mid, job = train(client, algorithm=algorithm, dataset_id=ds, target=target, features=features)
        assert job["status"] == "succeeded", job
        out[key] = mid
    return out


class _Spy:
    """Counts the general path's decodings (``oip.parse_infer_request``): a request the shortcut answered has none."""

    def __init__(self, monkeypatch):
        self.calls = 0
        real = oip.parse_infer_request

        def spy(*args):
            self.calls += 1
            return real(*args)

        monkeypatch.setattr(oip, "parse_infer_request", spy)

    def answer(self, *args):
        """``_answer(*args)`` and whether the general path decoded the request."""
        before = self.calls
        out = _answer(*args)
        return out, self.calls > before


def _answer(plane, bundle, name, body, hlen=None, general=False):
    """``plane.infer``'s answer (or its error's detail), through the shortcut or (``general``) without it."""
    real = oip._infer_plain
    if general:
        oip._infer_plain = lambda *a: None
    try:
        return plane.infer(bundle, name, body, hlen)
    except oip.V2Error as exc:
        return exc.detail
    finally:
        oip._infer_plain = real


def _doc(data, shape, datatype="FP64", outputs=("predict",), **extra):
    t = {"name": "x", "shape": shape, "datatype": datatype, "data": data}
    body = {"inputs": [t], **extra}
    if outputs is not None:
        body["outputs"] = [{"name": o} for o in outputs]
    return orjson.dumps(body)


def test_v2_json_plans_answer_as_v1_and_the_general_path(client, monkeypatch):
    plane = client.app.state.runtime.plane
    spy = _Spy(monkeypatch)
    rng = np.random.default_rng(3)
    for key, mid in _models(client).items():
        bundle = plane.model(mid)
        k = len(bundle.feature_names)
        rows = rng.normal(size=(8, k)) * 3
        wanted = [("predict",), ("predict_std",), ("predict", "predict_std")] if key == "regression" else [
            ("predict",), ("predict_proba",), None]
        for outputs in wanted:
            for extra in ({}, {"id": "req-7"}):
                for i, n in ((0, 1), (1, 1), (2, 1), (3, 1), (4, 2), (6, 2)):  # one row, then two a request
                    X = rows[i:i + n]
                    body = _doc(X.reshape(-1).tolist(), [n, k], outputs=outputs, **extra)
                    fast, general = spy.answer(plane, bundle, mid, body)
                    assert not general, (key, body)  # the shortcut answered
                    assert fast == _answer(plane, bundle, mid, body, general=True), (key, body)
                    if outputs == ("predict",):  # the numbers /v1 gives, in the protocol's datatype
                        v1 = orjson.loads(plane.predict(bundle, orjson.dumps({"rows": X.tolist()}))[0])
                        out = orjson.loads(fast[0])["outputs"][0]
                        assert out["data"] == v1["predictions"] and out["shape"] == [n]
                        assert out["datatype"] == {"text": "BYTES", "int": "INT64"}.get(key, "FP64")
                        assert fast[0].startswith(bundle.memo["v2_json_last"].head)  # written from the plan
        # the model named by its name as well as its id: each answer names it as asked
        name = client.get(f"/v1/models/{mid}").json()["name"]
        body = _doc(rows[0].tolist(), [1, k])
        for who in (name, mid, name):
            fast = _answer(plane, bundle, who, body)
            assert fast == _answer(plane, bundle, who, body, general=True)
            assert orjson.loads(fast[0])["model_name"] == who


def test_v2_json_near_misses_take_the_general_path(client, monkeypatch):
    plane = client.app.state.runtime.plane
    mid = _model(client)
    bundle = plane.model(mid)
    spy = _Spy(monkeypatch)
    row = [5.1, 3.5, 1.4, 0.2]
    good = _doc(row, [1, 4])
    near = [
        _doc(row, [1, 4], datatype="FP32"), _doc([5, 3, 1, 0], [1, 4], datatype="INT64"),
        _doc(row + [6.7, 3.0, 5.2, 2.3], [1, 4]),  # two rows' numbers in a one-row tensor
        _doc(row, [2, 4]), _doc(row[:3], [1, 3]), _doc(row + [1.0], [1, 5]), _doc(row, [4]), _doc(row, [1, 1, 4]),
        _doc(row, [1, 4], parameters={}), _doc(row, [1, 4], parameters={"binary_data_output": True}),
        good.replace(b'"datatype":"FP64"', b'"datatype":"FP64","parameters":{}'),
        good.replace(b'{"name":"predict"}', b'{"name":"predict","parameters":{"binary_data":true}}'),
        good.replace(b'{"name":"predict"}', b'{"name":"predict_std"}'),
        good.replace(b'{"name":"predict"}', b'{"name":"nope"}'),
        good.replace(b'"name":"x"', b'"name":"sepal_length"'), good.replace(b'"name":"x"', b'"name":""'),
        _doc(row, [1, 4], extra_field=1), _doc([5.1, 3.5, 1.4, "0.2"], [1, 4]), _doc([5.1, 3.5, 1.4, None], [1, 4]),
        _doc([True, False, True, True], [1, 4]), _doc([], [1, 4]), _doc(row, [1, 4], id=7),
        _doc(row, [1, 4], outputs=()), good[:-1], good + b"x", good.replace(b"[5.1", b"{5.1", 1),
        # a later duplicate "data" key is the tensor's data (the last one counts, as the general path reads it)
        good.replace(b'"data":[5.1,3.5,1.4,0.2]', b'"data":[5.1,3.5,1.4,0.2],"data":[]'),
        good.replace(b'"data":[5.1,3.5,1.4,0.2]', b'"data":[],"data":[]'),
    ]
    for body in [good, *near, good, *near]:  # each near miss once with a plan of the good document made, once more
        fast, general = spy.answer(plane, bundle, mid, body)
        assert general == (body != good), body
        assert fast == _answer(plane, bundle, mid, body, general=True), body
    # remembered bytes around another document's numbers: a duplicate "data" key after them is not skipped
    dup = good.replace(b'"data":[5.1,3.5,1.4,0.2]', b'"data":[6.7,3.0,5.2,2.3],"data":[]')
    assert _answer(plane, bundle, mid, dup) == _answer(plane, bundle, mid, dup, general=True)
    assert "needs 4 elements but data has 0" in _answer(plane, bundle, mid, dup)


def test_v2_binary_plans_answer_as_the_general_path(client, monkeypatch):
    plane = client.app.state.runtime.plane
    mid = _model(client)
    bundle = plane.model(mid)
    spy = _Spy(monkeypatch)

    def request(rows, shape=None, datatype="FP64", size=None, outputs=({"name": "predict"},)):
        X = np.asarray(rows, dtype=np.float64)
        shape = shape or list(X.shape)
        head = orjson.dumps({"inputs": [{"name": "x", "shape": shape, "datatype": datatype,
                                         "parameters": {"binary_data_size": size or X.nbytes}}],
                             "outputs": list(outputs)})
        return head + X.tobytes(), str(len(head))

    rows = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3], [4.9, 3.1, 1.5, np.nan]]
    taken = [request(rows[:1]), request(rows[1:2]), request(rows[:2]), request(rows[2:]),
             request(rows[:1], outputs=({"name": "predict_proba"},)),
             request(rows[1:2], outputs=({"name": "predict"}, {"name": "predict_proba"}))]
    body, hlen = taken[0]
    near = [(body, "0" + hlen), (body + b"\0" * 8, hlen), (body[:-8], hlen), request(rows[:1], datatype="FP32"),
            request(rows[:1], shape=[2, 4]), request(rows[:1], size=24), request([[5.1, 3.5, 1.4, np.inf]]),
            (body, "x"), (body, str(len(body) + 1)), request(rows[:1], outputs=())]
    for b, h in [*taken, *near, *taken, *near]:
        fast, general = spy.answer(plane, bundle, mid, b, h)
        assert general == ((b, h) in near and h != "0" + hlen), (b, h)  # another header text, the same header
        assert fast == _answer(plane, bundle, mid, b, h, general=True), (b, h)
    v1 = plane.predict(bundle, orjson.dumps({"rows": rows[:2]}))[0]
    assert orjson.loads(_answer(plane, bundle, mid, *request(rows[:2]))[0])["outputs"][0]["data"] == \
        orjson.loads(v1)["predictions"]


def _id_bodies(row, k):
    """One row as V2 JSON documents whose ``id`` changes from request to request, written as clients write them:
    compact or with Python's separators, the id before or after the inputs (so before or after the data)."""
    def doc(rid, *, first, spaced):
        t = {"name": "x", "shape": [1, k], "datatype": "FP64", "data": row}
        body = {"id": rid, "inputs": [t]} if first else {"inputs": [t], "id": rid}
        body["outputs"] = [{"name": "predict"}]
        return json.dumps(body).encode() if spaced else orjson.dumps(body)
    return doc


def _count_checks(monkeypatch) -> list[int]:
    """Counts ``oip._plain_head`` calls: the checks a request's JSON gets when no remembered plan matches it."""
    n = [0]
    real = oip._plain_head

    def counted(*args):
        n[0] += 1
        return real(*args)

    monkeypatch.setattr(oip, "_plain_head", counted)
    return n


def test_v2_requests_with_a_new_id_each_take_the_shortcut(client, monkeypatch):
    """Clients that send a new ``id`` with every request (a counter, a UUID) keep the shortcut: the plan holds
    the bytes around the id too, and each answer carries its own request's id, as the general path's does."""
    plane = client.app.state.runtime.plane
    mid = _model(client)
    bundle = plane.model(mid)
    spy = _Spy(monkeypatch)
    checks = _count_checks(monkeypatch)
    row = [5.1, 3.5, 1.4, 0.2]
    doc = _id_bodies(row, 4)
    for first in (True, False):
        for spaced in (False, True):
            for i, rid in enumerate(["req-1", "req-2", "", "a much longer id 0c2f9e7a-51d4", "é-ü-∑", "req-3"]):
                body = doc(rid, first=first, spaced=spaced)
                before = checks[0]
                fast, general = spy.answer(plane, bundle, mid, body)
                assert not general
                escaped = spaced and not rid.isascii()  # json.dumps writes "\u00e9": not read from the bytes
                assert (checks[0] == before) == (i > 0 and not escaped), (first, spaced, rid)
                assert fast == _answer(plane, bundle, mid, body, general=True)
                assert orjson.loads(fast[0])["id"] == rid
    # ids written with escapes are not read from the bytes (each is checked as a new document); ids that are not
    # JSON strings take the general path, which refuses them
    for first in (True, False):
        for rid in ['say "hi"', "back\\slash", "tab\there", "line\u2028sep", 'say "hi"']:
            body = doc(rid, first=first, spaced=False)
            fast = _answer(plane, bundle, mid, body)
            assert fast == _answer(plane, bundle, mid, body, general=True)
            assert orjson.loads(fast[0])["id"] == rid
        bad = doc("req-9", first=first, spaced=False).replace(b"req-9", b"req-\xff")  # not UTF-8
        assert spy.answer(plane, bundle, mid, bad)[1]
        assert _answer(plane, bundle, mid, bad) == _answer(plane, bundle, mid, bad, general=True)
        raw = doc("req-9", first=first, spaced=False).replace(b"req-9", b"req\x01")  # a raw control character
        assert spy.answer(plane, bundle, mid, raw)[1]
        assert _answer(plane, bundle, mid, raw) == _answer(plane, bundle, mid, raw, general=True)


def test_v2_changing_ids_are_read_only_where_the_id_is(client, monkeypatch):
    """The bytes taken for the id are the request's id and nothing else: an id equal to the tensor's name, a
    second ``id`` key, an id in the wrong place, or other bytes around it are answered as the general path does."""
    plane = client.app.state.runtime.plane
    mid = _model(client)
    bundle = plane.model(mid)
    spy = _Spy(monkeypatch)
    row = [5.1, 3.5, 1.4, 0.2]
    doc = _id_bodies(row, 4)
    good = doc("x", first=True, spaced=False)  # the id "x" is also the tensor's name
    assert good.count(b'"x"') == 2
    variants = [doc("y", first=True, spaced=False), good.replace(b'"name":"x"', b'"name":"y"'),
                good.replace(b'{"id":"x",', b'{"id":"x","id":"z",'), good.replace(b'{"id":"x",', b'{"id":7,'),
                good.replace(b'{"id":"x",', b'{"id" :"x",'), good.replace(b'{"id":"x",', b'{"id":"x" ,'),
                good.replace(b'"outputs"', b'"id":"q","outputs"')]
    for body in [good, *variants, good, *variants]:
        fast, general = spy.answer(plane, bundle, mid, body)
        assert fast == _answer(plane, bundle, mid, body, general=True), body
    checks = _count_checks(monkeypatch)
    assert not spy.answer(plane, bundle, mid, doc("w", first=True, spaced=False))[1]  # the id plan still holds
    assert checks[0] == 0
    # plans with a changing id are bounded per bundle: many layouts never grow the memo past the limit
    for j in range(3 * oip._ID_PLANS_MAX):
        body = orjson.dumps({"id": "r", "inputs": [{"name": f"t{j}", "shape": [1, 4], "datatype": "FP64",
                                                        "data": row}]})
        assert _answer(plane, bundle, mid, body) == _answer(plane, bundle, mid, body, general=True)
    assert len(bundle.memo["v2_json_ids"]) <= oip._ID_PLANS_MAX


def test_v2_binary_requests_with_a_new_id_each_take_the_shortcut(client, monkeypatch):
    plane = client.app.state.runtime.plane
    mid = _model(client)
    bundle = plane.model(mid)
    spy = _Spy(monkeypatch)
    checks = _count_checks(monkeypatch)
    X = np.array([[5.1, 3.5, 1.4, 0.2]])

    def request(rid, first=True):
        t = {"name": "x", "shape": [1, 4], "datatype": "FP64", "parameters": {"binary_data_size": 32}}
        head = {"id": rid, "inputs": [t]} if first else {"inputs": [t], "id": rid}
        head = orjson.dumps({**head, "outputs": [{"name": "predict"}]})
        return head + X.tobytes(), str(len(head))

    for first in (True, False):
        for i, rid in enumerate(["1", "22", "333", "", "1"]):
            b, h = request(rid, first)
            before = checks[0]
            fast, general = spy.answer(plane, bundle, mid, b, h)
            assert not general
            assert checks[0] == before or i == 0, (first, rid)  # only a layout's first header is checked
            assert fast == _answer(plane, bundle, mid, b, h, general=True)
            assert orjson.loads(fast[0])["id"] == rid
    for rid in ('q"uote', "q\\uote", 'q"uote'):  # escaped ids
        b, h = request(rid)
        assert _answer(plane, bundle, mid, b, h) == _answer(plane, bundle, mid, b, h, general=True)
        assert orjson.loads(_answer(plane, bundle, mid, b, h)[0])["id"] == rid
    b, h = request("12")
    assert _answer(plane, bundle, mid, b, str(int(h) + 1)) == _answer(plane, bundle, mid, b, str(int(h) + 1),
                                                                    general=True)


def test_plans_remember_only_requests_of_bounded_size(client):
    """What a plan holds comes from the client: a request whose bytes around its data (a long id, a long
    tensor name) exceed ``_PLAN_BYTES_MAX`` is answered by the general path and never remembered."""
    plane = client.app.state.runtime.plane
    mid = _model(client)
    bundle = plane.model(mid)
    row = [5.1, 3.5, 1.4, 0.2]
    X = np.array([row])
    long = "n" * oip._PLAN_BYTES_MAX
    for extra in ({"id": long}, {"id": "s" + long}):
        body = _doc(row, [1, 4], **extra)
        assert _answer(plane, bundle, mid, body) == _answer(plane, bundle, mid, body, general=True)
    named = orjson.dumps({"inputs": [{"name": long, "shape": [1, 4], "datatype": "FP64", "data": row}]})
    assert _answer(plane, bundle, mid, named) == _answer(plane, bundle, mid, named, general=True)
    head = orjson.dumps({"id": long, "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP64",
                                                 "parameters": {"binary_data_size": 32}}]})
    b, h = head + X.tobytes(), str(len(head))
    assert _answer(plane, bundle, mid, b, h) == _answer(plane, bundle, mid, b, h, general=True)
    remembered = [bundle.memo.get(k) or () for k in ("v2_json", "v2_json_ids", "v2_heads", "v2_heads_ids")]
    for plans in remembered:
        for plan in (plans.values() if isinstance(plans, dict) else plans):
            assert len(plan.prefix) + len(plan.suffix) <= oip._PLAN_BYTES_MAX
    assert not any(remembered)


def test_large_v2_json_tensors_are_decoded_a_piece_at_a_time(client, monkeypatch):
    """A large JSON tensor (here ~20,000 rows) is never decoded whole: its plan is found from stand-ins and its
    numbers are decoded in pieces (the GIL changes hands between them, docs/decisions/model-cache.md). The answer
    is the general path's, byte for byte, and odd arrays still take the general path."""
    from service.services import chunked_rows

    plane = client.app.state.runtime.plane
    mid = _model(client)
    bundle = plane.model(mid)
    X = np.random.default_rng(5).normal(size=(20_000, 4)) * 2 + 4
    checks = []
    real_head = oip._plain_head
    monkeypatch.setattr(oip, "_plain_head", lambda b, head, binary: checks.append(len(head)) or real_head(b, head,
                                                                                                         binary))
    pieced = []
    real_flat = chunked_rows.flat_numbers
    monkeypatch.setattr(chunked_rows, "flat_numbers", lambda *a: pieced.append(r := real_flat(*a)) or r)
    for rid in (None, "big-1", "big-2"):
        for rows in (X, X[:3000], X[::-1]):
            body = _doc(rows.reshape(-1).tolist(), [len(rows), 4], **({} if rid is None else {"id": rid}))
            assert len(body) > chunked_rows.PIECE_BYTES
            fast = _answer(plane, bundle, mid, body)
            assert fast == _answer(plane, bundle, mid, body, general=True)
            assert len(orjson.loads(fast[0])["outputs"][0]["data"]) == len(rows)
    assert max(checks) < 1024  # only documents with a stand-in for the data were checked
    assert pieced and all(A is not None for A in pieced)
    v1 = plane.predict(bundle, orjson.dumps({"rows": X.tolist()}))[0]
    assert orjson.loads(_answer(plane, bundle, mid, _doc(X.reshape(-1).tolist(), [20_000, 4]))[0])["outputs"][0][
        "data"] == orjson.loads(v1)["predictions"]
    text = _doc(X.reshape(-1).tolist(), [20_000, 4])
    odd = [text.replace(b"]}]", b",]}]", 1), text.replace(b'"data":[', b'"data":[[', 1).replace(b"]}]", b"]]}]", 1),
           text.replace(b"]}]", b',"7"]}]', 1), text.replace(b"]}]", b",null]}]", 1),
           _doc(X[:-1].reshape(-1).tolist(), [20_000, 4]), _doc(X.astype(int).reshape(-1).tolist(), [20_000, 4])]
    for body in odd:
        assert _answer(plane, bundle, mid, body) == _answer(plane, bundle, mid, body, general=True)
