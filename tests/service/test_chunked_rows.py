"""Large predict bodies decoded a piece at a time (service/services/chunked_rows.py): the same matrix as decoding
the whole body, or None (the caller then decodes it whole) whenever a cut might not be at a row boundary."""

import json

import numpy as np
import orjson
import pytest

from service.services import chunked_rows

NAMES = ["a", "b", "c"]


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch):
    monkeypatch.setattr(chunked_rows, "PIECE_BYTES", 50)  # many pieces even for small bodies


def whole(body: bytes, field: str) -> np.ndarray:
    data = orjson.loads(body)[field]
    if field == "instances":
        data = [[inst.get(n) for n in NAMES] for inst in data]
    return np.array(data, dtype=np.float64)


def pieces_matrix(body: bytes):
    parts = chunked_rows.split(body)
    if parts is None:
        return None
    field, rest, pieces = parts
    A = chunked_rows.matrix(pieces, field, NAMES, 10**6)
    return None if A is None else (field, rest, A, len(pieces))


@pytest.mark.parametrize("dumps", [orjson.dumps, lambda o: json.dumps(o).encode(),
                                   lambda o: json.dumps(o, indent=1).encode()])
def test_rows_and_instances_decode_to_the_whole_bodys_matrix(dumps):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)) * 10.0 ** rng.integers(-5, 5, size=(300, 3))
    rows = X.tolist()
    rows[7] = [1, 2, 3]  # integers in one piece, floats in the others
    for body_obj, field in (({"rows": rows}, "rows"), ({"return_proba": True, "rows": rows}, "rows"),
                            ({"rows": rows, "return_std": False}, "rows"),
                            ({"instances": [dict(zip(NAMES, r, strict=True)) for r in rows]}, "instances"),
                            ({"instances": [{"c": r[2], "b": r[1], "a": r[0]} for r in rows]}, "instances")):
        body = dumps(body_obj)
        got = pieces_matrix(body)
        assert got is not None, body[:80]
        f, rest, A, n_pieces = got
        assert f == field and n_pieces > 5
        assert rest == {k: v for k, v in body_obj.items() if k != field}
        expected = whole(body, field)
        assert A.shape == expected.shape
        np.testing.assert_array_equal(np.asarray(A, dtype=np.float64), expected)


@pytest.mark.parametrize("body", [
    b'{"instances": [{"a": 1, "b": "x},{y", "c": 2}, {"a": 1, "b": 2, "c": 3}]}',  # a separator inside a string
    b'{"rows": [[1, [2, 3]], [4, 5, 6]]}',  # a separator inside a nested element
    b'{"rows": [[1, 2, 3], [4, 5, "6"]]}',  # text
    b'{"rows": [[1, 2, 3], [4, 5, null]]}',  # missing
    b'{"rows": [[1, 2, 3], [4, 5]]}',  # a short row
    b'{"rows": [[1, 2, 3],]}',  # a trailing comma
    b'{"rows": []}',
    b'{"rows": [[1, 2, 3]], "rows": [[1, 2, 3]]}',  # a repeated key
    b'{"unknown": 1, "rows": [[1, 2, 3]]}',
    b'{"rows": [[1, 2, 3]], "return_proba": 1}',
    b'{"rows": [[1, 2, 3]]}\x0c',  # not JSON whitespace
    b'{"rows": [[1, 2, 3], [4, 5, 1e999]]}',  # out of range: orjson refuses
    b'{"instances": [{"a": 1, "b": 2, "c": 3, "d": 4}]}',  # an unknown feature
    b'{"instances": [{"a": 1, "b": 2}]}',  # a missing feature
    b'["rows", [[1, 2, 3]]]',
])
def test_anything_but_plain_numeric_rows_is_left_to_the_whole_decoder(body):
    assert pieces_matrix(body) is None


def test_too_many_rows_stops_the_decoding():
    body = orjson.dumps({"rows": [[1.0, 2.0, 3.0]] * 50})
    field, _, pieces = chunked_rows.split(body)
    with pytest.raises(chunked_rows.TooMany):
        chunked_rows.matrix(pieces, field, NAMES, 10)


def test_long_answers_are_encoded_in_slices_byte_for_byte(monkeypatch):
    monkeypatch.setattr(chunked_rows, "SLICE", 7)
    rng = np.random.default_rng(1)
    for out in ({"predictions": rng.normal(size=50).tolist()},
                {"predictions": ["x", 'q"'] * 20, "probabilities": rng.random((40, 2)).tolist(),
                 "classes": ["x", 'q"']},
                {"predictions": [1.5] * 3, "std": [0.1] * 3}):
        assert chunked_rows.dumps(out) == orjson.dumps(out)


def _flat(text: bytes):
    return chunked_rows.flat_numbers(text, 0, len(text))


@pytest.mark.parametrize("dumps", [orjson.dumps, lambda o: json.dumps(o).encode(),
                                   lambda o: b"  \n" + json.dumps(o, indent=1).encode() + b" \t"])
def test_a_flat_array_decodes_to_the_whole_arrays_numbers(dumps):
    """A V2 tensor's flat ``data`` (services/oip.py): the same float64 numbers as decoding it whole, in many
    pieces, whatever the spacing; integers among floats convert as np.array converts them."""
    rng = np.random.default_rng(2)
    for values in (rng.normal(size=300).tolist(), [1, 2.5, -3, 4e-300, 1.7976931348623157e308] * 40,
                   [0.5] + [7] * 200, [7] * 200 + [0.5], [True, 2.5, False] * 30, [1.25], [0.5, 2**63 - 1, -2**63]):
        text = dumps(values)
        A = _flat(text)
        assert A is not None and A.dtype == np.float64
        np.testing.assert_array_equal(A, np.asarray(orjson.loads(text), dtype=np.float64))
        assert A.tobytes() == np.asarray(orjson.loads(text), dtype=np.float64).tobytes()


@pytest.mark.parametrize("text", [
    b"[]", b"[ ]", b"[1, 2, 3]", b"[" + b"7," * 100 + b"7]",  # only integers: the whole array decides
    b"[1.5, 2.5,]", b"[1.5, 2.5, ]", b"[,1.5]", b"[1.5,,2.5]", b"[1.5 2.5]", b"[1.5, 2.5", b"1.5, 2.5]",
    b"[[1.5, 2.5], [3.5, 4.5]]", b"[1.5, [2.5]]", b"[1.5, null]", b'[1.5, "2.5"]', b"[1.5, {}]",
    b"[1.5, 1e400]", b"[1.5, NaN]", b"[" + b"true," * 60 + b"1.5]",
    b"[1.5]" + b" x", b"[1.5], [2.5]",
])
def test_anything_but_a_flat_array_of_numbers_is_left_to_the_whole_decoder(text):
    assert _flat(text) is None
