"""Open Inference Protocol (KServe V2) tensors <-> Orchard model bundles.

Decoding: JSON tensors (``data`` flat in row-major order, or nested) and the binary tensor data extension
(``Inference-Header-Content-Length`` + raw little-endian buffers, BYTES as 4-byte length-prefixed items), which
tritonclient uses by default. Inputs are either one tensor of shape [n, n_features] (columns in the model's
feature order) or one tensor per feature, named by the feature, of shape [n] or [n, 1].

Encoding: named outputs ``predict``, ``predict_proba``, ``predict_std``, ``transform``, ``score_samples`` (those
that apply to the model's task), as JSON or binary per the request. See docs/decisions/open-inference-protocol.md.
"""

from __future__ import annotations

import math
import struct
import sys
from dataclasses import dataclass
from itertools import chain

import numpy as np
import orjson

from ..errors import NotFound
from . import chunked_rows, rl
from .tensors import DTYPES, Tensor, V2Error, as_text, bad, check_rows, label_datatype, typed

_F64 = DTYPES["FP64"]
_REQUEST_FIELDS = frozenset({"id", "parameters", "inputs", "outputs"})


@dataclass
class InferRequest:
    id: str | None
    inputs: list[Tensor]
    outputs: list[dict] | None
    binary_output: bool


# -- decoding ------------------------------------------------------------------------------------
def _parse_bytes(buf: memoryview, count: int, name: str) -> np.ndarray:
    out = np.empty(count, dtype=object)
    pos = 0
    for i in range(count):
        if pos + 4 > len(buf):
            raise bad(f"input {name!r}: binary BYTES data ends after {i} of {count} elements")
        (n,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        if pos + n > len(buf):
            raise bad(f"input {name!r}: binary BYTES element {i} is truncated")
        out[i] = bytes(buf[pos:pos + n])
        pos += n
    if pos != len(buf):
        raise bad(f"input {name!r}: {len(buf) - pos} trailing bytes after {count} BYTES elements")
    return out


def _shape(raw, name: str) -> list[int]:
    if not isinstance(raw, list) or not all(type(d) is int and d >= 0 for d in raw):
        raise bad(f"input {name!r}: 'shape' must be a list of non-negative integers, got {raw!r}")
    return raw


def _tensor_from_json(t: dict, blob: memoryview | None) -> Tensor:
    if not isinstance(t, dict):
        raise bad("each element of 'inputs' must be an object with name, shape, datatype and data")
    name = t.get("name")
    if not isinstance(name, str) or not name:
        raise bad("every input needs a non-empty string 'name'")
    datatype = t.get("datatype")
    if datatype not in DTYPES:
        raise bad(f"input {name!r}: datatype {datatype!r} is not supported (use one of {', '.join(DTYPES)})")
    shape = _shape(t.get("shape"), name)
    count = math.prod(shape)
    dtype = DTYPES[datatype]
    if blob is not None:
        if datatype == "BYTES":
            arr = _parse_bytes(blob, count, name)
        else:
            if len(blob) != count * dtype.itemsize:
                raise bad(f"input {name!r}: {len(blob)} bytes of binary data do not hold {count} {datatype} "
                          f"elements of shape {shape}")
            arr = np.frombuffer(blob, dtype=dtype)
        return Tensor(name, datatype, shape, arr.reshape(shape))
    if "data" not in t:
        raise bad(f"input {name!r} has neither 'data' nor parameters.binary_data_size")
    data = t["data"]
    if not isinstance(data, list):
        data = [data]
    try:
        if datatype == "BYTES":
            arr = np.array(data, dtype=object).reshape(-1)
            for v in arr:
                if not isinstance(v, str | bytes):
                    raise bad(f"input {name!r}: BYTES data must be strings, got {v!r}")
        elif datatype == "BOOL":
            arr = np.array(data, dtype=object).reshape(-1)
            if not all(type(v) is bool for v in arr):
                raise bad(f"input {name!r}: BOOL data must be true or false")
            arr = arr.astype(bool)
        else:
            kind = dtype.kind
            quick = np.asarray(data)
            if quick.dtype is _F64 and dtype is _F64:  # JSON numbers for an FP64 tensor: the array as it is
                if quick.size != count:
                    raise bad(f"input {name!r}: shape {shape} needs {count} elements but data has {quick.size}")
                return Tensor(name, datatype, shape, quick.reshape(shape), True)
            if quick.dtype.kind in "iu" or (quick.dtype.kind == "f" and kind == "f"):
                arr = quick.reshape(-1).astype(dtype)
                if arr.size != count:
                    raise bad(f"input {name!r}: shape {shape} needs {count} elements but data has {arr.size}")
                return Tensor(name, datatype, shape, arr.reshape(shape))
            arr = np.array(data, dtype=object).reshape(-1)
            for v in arr:
                if isinstance(v, bool) or not isinstance(v, int | float) or (kind in "iu" and isinstance(v, float)):
                    what = "integers" if kind in "iu" else "numbers"
                    raise bad(f"input {name!r}: {datatype} data must be {what}, got {v!r}")
            arr = arr.astype(dtype)
    except (ValueError, OverflowError) as exc:
        raise bad(f"input {name!r}: data does not fit datatype {datatype}: {exc}") from None
    if arr.size != count:
        raise bad(f"input {name!r}: shape {shape} needs {count} elements but data has {arr.size}")
    return Tensor(name, datatype, shape, arr.reshape(shape))


def _parameters(item: dict, kind: str) -> dict:
    """An input's or output's ``parameters``: an object (or absent)."""
    params = item.get("parameters")
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise bad(f"{kind} {item.get('name')!r}: 'parameters' must be an object")
    return params


def parse_infer_request(body: bytes, header_length: str | None) -> InferRequest:
    if header_length is not None:
        try:
            hlen = int(header_length)
        except ValueError:
            raise bad("Inference-Header-Content-Length must be an integer") from None
        if not 0 < hlen <= len(body):
            raise bad(f"Inference-Header-Content-Length {hlen} does not fit the {len(body)}-byte body")
        head, rest = body[:hlen], memoryview(body)[hlen:]
    else:
        head, rest = body, memoryview(b"")
    if not head:
        raise bad("the request body is empty; send an inference request object with 'inputs'")
    try:
        req = orjson.loads(head)
    except orjson.JSONDecodeError as exc:
        raise bad(f"the inference request is not valid JSON: {exc}") from None
    if not isinstance(req, dict):
        raise bad("the inference request must be a JSON object with 'inputs'")
    if not req.keys() <= _REQUEST_FIELDS:
        unknown = sorted(set(req) - _REQUEST_FIELDS)[0]
        raise bad(f"unknown field {unknown!r} in the inference request (allowed: id, parameters, inputs, outputs)")
    params = req.get("parameters") or {}
    if not isinstance(params, dict):
        raise bad("'parameters' must be an object")
    inputs = req.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise bad("'inputs' must be a non-empty list of tensors")
    tensors, offset = [], 0
    for t in inputs:
        size = _parameters(t, "input").get("binary_data_size") if isinstance(t, dict) else None
        blob = None
        if size is not None:
            if type(size) is not int or size < 0 or offset + size > len(rest):
                raise bad(f"input {t.get('name')!r}: binary_data_size {size!r} exceeds the binary data sent")
            blob = rest[offset:offset + size]
            offset += size
        tensors.append(_tensor_from_json(t, blob))
    if offset != len(rest):
        raise bad(f"{len(rest) - offset} bytes of binary data are not claimed by any input's binary_data_size")
    if len(tensors) > 1 and len({t.name for t in tensors}) != len(tensors):
        raise bad("input names must be unique")
    outputs = req.get("outputs")
    if outputs is not None:
        if not isinstance(outputs, list) or not all(isinstance(o, dict) and isinstance(o.get("name"), str)
                                                    for o in outputs):
            raise bad("'outputs' must be a list of objects with a 'name'")
        for o in outputs:
            _parameters(o, "output")
    rid = req.get("id")
    if rid is not None and not isinstance(rid, str):
        raise bad("'id' must be a string")
    return InferRequest(rid, tensors, outputs, bool(params.get("binary_data_output", False)))


# -- inputs -> model matrix ------------------------------------------------------------------------
def matrix_from_tensors(bundle, tensors: list[Tensor], max_rows: int) -> np.ndarray:
    if bundle.task == rl.TASK:  # states (BYTES or INT64 labels; FP64 vectors), not a feature matrix
        return rl.v2_input(bundle, tensors, max_rows)
    names = bundle.feature_names
    index = bundle.feature_index
    k = len(names)
    fast = bundle.numeric_only
    if len(tensors) == 1 and tensors[0].name not in index:
        t = tensors[0]
        arr = t.array
        if arr.ndim != 2 or arr.shape[1] != k:
            raise bad(f"input {t.name!r} has shape {t.shape}; a single input tensor must have shape [n, {k}] "
                      f"(columns in the model's feature order: {', '.join(names)}), or send one tensor per "
                      "feature named by the feature")
        n = arr.shape[0]
        check_rows(n, max_rows)
        if fast and t.plain:  # as /v1 treats plain JSON numbers
            return bundle.matrix_from_numbers(arr)
        if fast and t.datatype != "BYTES":
            A = np.array(arr, dtype=np.float64, order="C")  # a copy the transform may work in
            if np.isinf(A).any():
                raise bad(f"input {t.name!r}: values must be finite (NaN means missing)")
            return bundle.preprocessor.transform_matrix(A, copy=False)
        rows = [as_text(r) for r in arr] if t.datatype == "BYTES" else arr.tolist()
        return bundle.preprocessor.transform(bundle.columns_from_rows(rows, loc_root=t.name))
    n = None
    by_name: dict[str, Tensor] = {}
    for t in tensors:
        if t.name not in index:
            raise bad(f"unknown input {t.name!r}: inputs are the model's features ({', '.join(names)}), one tensor "
                      f"each of shape [n] or [n, 1], or a single tensor of shape [n, {k}]")
        arr = t.array
        if not (arr.ndim == 1 or (arr.ndim == 2 and arr.shape[1] == 1)):
            raise bad(f"input {t.name!r} has shape {t.shape}; a feature tensor must have shape [n] or [n, 1]")
        if n is None:
            n = arr.shape[0]
        elif arr.shape[0] != n:
            raise bad(f"input {t.name!r} has {arr.shape[0]} rows but other inputs have {n}")
        by_name[t.name] = t
    check_rows(n, max_rows)
    if fast and all(t.datatype != "BYTES" for t in by_name.values()):
        A = np.full((n, k), np.nan)
        for name, t in by_name.items():
            A[:, index[name]] = t.array.reshape(-1)
        if np.isinf(A).any():
            raise bad("input values must be finite (NaN means missing)")
        return bundle.preprocessor.transform_matrix(A)
    cols = {}
    for f in bundle.features:
        t = by_name.get(f["name"])
        values = [None] * n if t is None else (as_text(t.array.reshape(-1)) if t.datatype == "BYTES"
                                               else t.array.reshape(-1).tolist())
        cols[f["name"]] = bundle.convert_feature(f, values, "inputs")
    return bundle.preprocessor.transform(cols)


# -- outputs ---------------------------------------------------------------------------------------
def available_outputs(task: str, caps: dict, classes: list | None, n_components: int | None = None) -> list[dict]:
    """Output tensor metadata ``{name, datatype, shape}`` for a model's task and capabilities."""
    if task == "classification":
        out = [{"name": "predict", "datatype": label_datatype(classes or []), "shape": [-1]}]
        if caps.get("predict_proba"):
            out.append({"name": "predict_proba", "datatype": "FP64", "shape": [-1, len(classes or [])]})
        return out
    if task == "regression":
        out = [{"name": "predict", "datatype": "FP64", "shape": [-1]}]
        if caps.get("predict_std"):
            out.append({"name": "predict_std", "datatype": "FP64", "shape": [-1]})
        return out
    if task == "clustering":
        out = [{"name": "predict", "datatype": "INT64", "shape": [-1]}]
        if caps.get("predict_proba"):
            out.append({"name": "predict_proba", "datatype": "FP64", "shape": [-1, -1]})
        if caps.get("score_samples"):
            out.append({"name": "score_samples", "datatype": "FP64", "shape": [-1]})
        return out
    if task == "decomposition":
        return [{"name": "transform", "datatype": "FP64", "shape": [-1, n_components or -1]}]
    if task == "density":
        return [{"name": "score_samples", "datatype": "FP64", "shape": [-1]}]
    if task == rl.TASK:
        return caps.get("rl_outputs") or [{"name": "predict", "datatype": "BYTES", "shape": [-1]}]
    return [{"name": "predict", "datatype": "FP64", "shape": [-1]}]


def bundle_capabilities(bundle) -> dict:
    est = bundle.estimator
    caps = {"predict_proba": hasattr(est, "predict_proba"),
            "predict_std": bool(getattr(est, "has_predict_std", False)),
            "score_samples": hasattr(est, "score_samples")}
    if bundle.task == rl.TASK:
        caps["rl_outputs"] = rl.v2_outputs(bundle)
    return caps


def run_inference(bundle, X: np.ndarray, wanted: list[str]) -> dict[str, tuple[str, np.ndarray]]:
    """name -> (datatype, array) for the wanted outputs."""
    if bundle.task == rl.TASK:
        return rl.v2_run(bundle, X, wanted)
    est = bundle.estimator
    out: dict[str, tuple[str, np.ndarray]] = {}
    want = set(wanted)
    if bundle.task == "classification":
        if "predict_proba" in want:
            proba = np.asarray(est.predict_proba(X), dtype=np.float64)
            out["predict_proba"] = ("FP64", proba)
        if "predict" in want:
            labels = est.classes_[np.argmax(proba, axis=1)] if "predict_proba" in want else est.predict(X)
            py = np.asarray(labels).tolist()
            dt = label_datatype(list(bundle.classes or py))
            out["predict"] = (dt, typed(py, dt))
    elif bundle.task == "regression":
        if "predict_std" in want:
            mean, std = est.predict(X, return_std=True)
            out["predict_std"] = ("FP64", np.asarray(std, dtype=np.float64))
            if "predict" in want:
                out["predict"] = ("FP64", np.asarray(mean, dtype=np.float64))
        elif "predict" in want:
            out["predict"] = ("FP64", np.asarray(est.predict(X), dtype=np.float64))
    elif bundle.task == "clustering":
        if "predict" in want:
            out["predict"] = ("INT64", np.asarray(est.predict(X)).astype(np.int64))
        if "predict_proba" in want:
            out["predict_proba"] = ("FP64", np.asarray(est.predict_proba(X), dtype=np.float64))
        if "score_samples" in want:
            out["score_samples"] = ("FP64", np.asarray(est.score_samples(X), dtype=np.float64))
    elif bundle.task == "decomposition":
        out["transform"] = ("FP64", np.asarray(est.transform(X), dtype=np.float64))
    elif bundle.task == "density":
        out["score_samples"] = ("FP64", np.asarray(est.score_samples(X), dtype=np.float64))
    else:
        out["predict"] = ("FP64", np.asarray(est.predict(X), dtype=np.float64))
    return {k: out[k] for k in wanted if k in out}


def encode_response(model_name: str, request_id: str | None, results: dict[str, tuple[str, np.ndarray]],
                    binary: dict[str, bool], extra_params: dict[str, dict]) -> tuple[bytes, int | None]:
    """The response body and, when any output is binary, the JSON header's length."""
    outputs, blobs = [], []
    for name, (datatype, arr) in results.items():
        o = {"name": name, "datatype": datatype, "shape": list(arr.shape)}
        params = dict(extra_params.get(name, {}))
        if binary.get(name):
            if datatype == "BYTES":
                raw = b"".join(struct.pack("<I", len(b)) + b for b in (s.encode() for s in arr.reshape(-1)))
            else:
                raw = np.ascontiguousarray(arr, dtype=DTYPES[datatype]).tobytes()
            params["binary_data_size"] = len(raw)
            blobs.append(raw)
        else:
            o["data"] = arr.reshape(-1).tolist()
        if params:
            o["parameters"] = params
        outputs.append(o)
    head = {"model_name": model_name, "model_version": "1", "outputs": outputs}
    if request_id is not None:
        head["id"] = request_id
    data = orjson.dumps(head, option=orjson.OPT_SERIALIZE_NUMPY)
    if not blobs:
        return data, None
    return data + b"".join(blobs), len(data)


# -- one inference request (DataPlane.infer) ------------------------------------------------------------
_PLANE = {"predict": "predictions", "predict_proba": "probabilities", "predict_std": "std"}
_PREDICT_ONLY = ["predict"]


def _label_datatype(bundle, values: list) -> str:
    dt = bundle.memo.get("v2_label_dt")
    if dt is None:
        dt = bundle.memo["v2_label_dt"] = label_datatype(list(bundle.classes or values))
    return dt


def _as_text(values: list) -> list:
    """Labels as a BYTES output holds them (as ``typed()``): text."""
    return [v if type(v) is str else str(v) for v in values]


def _shared_plane(bundle, X: np.ndarray, wanted: list[str]) -> dict | None:
    """name -> (datatype, shape, flat Python list) through ``ModelBundle.predict_matrix``, the code that answers
    ``/v1`` predict (the same numbers by construction), for classification and regression; None for outputs
    only ``run_inference`` has."""
    if bundle.task not in ("classification", "regression"):
        return None
    if wanted == _PREDICT_ONLY:  # the common request
        out = bundle.predict_matrix(X)
    else:
        if not set(wanted) <= _PLANE.keys():
            return None
        proba, std = "predict_proba" in wanted, "predict_std" in wanted
        if (proba and bundle.task != "classification") or (std and bundle.task != "regression"):
            return None
        out = bundle.predict_matrix(X, return_proba=proba, return_std=std)
    results = {}
    for name in wanted:
        values = out[_PLANE[name]]
        if name == "predict_proba":
            k = len(values[0]) if values else 0
            results[name] = ("FP64", [len(values), k], list(chain.from_iterable(values)))
        elif name == "predict" and bundle.task == "classification":
            dt = _label_datatype(bundle, values)
            if dt == "BYTES":  # as typed(): text
                if len(values) != 1 or type(values[0]) is not str:
                    values = _as_text(values)
            elif dt == "FP64":
                values = [float(v) for v in values]
            results[name] = (dt, [len(values)], values)
        else:  # regression: floats already
            results[name] = ("FP64", [len(values)], values)
    return results


def _encode_json(model_name: str, request_id: str | None, results: dict, extra: dict | None) -> bytes:
    """``encode_response`` of JSON outputs given as flat lists: the same bytes without the arrays. The common
    answer (one output of shape [n], no parameters, no id) is its remembered opening, the row count and the
    values."""
    if not extra and request_id is None and len(results) == 1:
        ((name, (datatype, shape, data)),) = results.items()
        if len(shape) == 1:
            key = (model_name, name, datatype)
            prefix = _OPENINGS.get(key)
            if prefix is None:
                if len(_OPENINGS) >= _OPENINGS_MAX:
                    _OPENINGS.clear()
                prefix = _OPENINGS[key] = b"".join((
                    b'{"model_name":', orjson.dumps(model_name), b',"model_version":"1","outputs":[{"name":',
                    orjson.dumps(name), b',"datatype":', orjson.dumps(datatype), b',"shape":['))
            return b"".join((prefix, b"%d" % shape[0], b'],"data":', orjson.dumps(data), b"}]}"))
    outputs = []
    for name, (datatype, shape, data) in results.items():
        o = {"name": name, "datatype": datatype, "shape": shape, "data": data}
        params = extra.get(name) if extra else None
        if params:
            o["parameters"] = params
        outputs.append(o)
    head = {"model_name": model_name, "model_version": "1", "outputs": outputs}
    if request_id is not None:
        head["id"] = request_id
    return orjson.dumps(head)


_OPENINGS: dict[tuple[str, str, str], bytes] = {}  # (model name, output, datatype) -> the answer's first bytes
_OPENINGS_MAX = 1024


def resolve_model(meta, model_name: str) -> dict:
    """The model record for an id or a unique name."""
    record = meta.get_model(model_name)
    if record is not None:
        return record
    found = meta.find_models_by_name(model_name)
    if not found:
        raise NotFound(f"no model has the id or name {model_name!r}")
    if len(found) > 1:
        ids = ", ".join(sorted(m["id"] for m in found))
        raise V2Error(f"model name {model_name!r} is ambiguous: {len(found)} models share it ({ids}); "
                      "use the model id instead")
    return found[0]


def _outputs_of(bundle) -> list[str]:
    """The names of the outputs a loaded bundle offers (once per bundle: ``bundle.memo``)."""
    available = bundle.memo.get("v2_outputs")
    if available is None:
        caps = bundle_capabilities(bundle)
        available = bundle.memo["v2_outputs"] = [o["name"] for o in available_outputs(bundle.task, caps,
                                                                                       bundle.classes)]
    return available


_TENSOR_FIELDS = frozenset({"name", "shape", "datatype", "data"})
_NAME_ONLY = frozenset({"name"})
_BINARY_TENSOR_FIELDS = frozenset({"name", "shape", "datatype", "parameters"})
_SIZE_ONLY = frozenset({"binary_data_size"})
_LITTLE = sys.byteorder == "little"
_HEADS_MAX = 256  # binary requests' JSON headers remembered per bundle (clients repeat theirs)
_PLAN_BYTES_MAX = 4096  # a request whose bytes around its data exceed this is not remembered (memory per bundle)


def _plain_head(bundle, head: bytes, binary: bool):
    """``(tensor name, shape, data or binary_data_size, wanted outputs, request id)`` of a request the shortcut
    takes, or None: the checks of ``_infer_plain`` that depend only on the JSON (and the bundle)."""
    try:
        req = orjson.loads(head)
    except orjson.JSONDecodeError:
        return None
    if type(req) is not dict or not req.keys() <= _REQUEST_FIELDS or "parameters" in req:
        return None
    inputs, rid = req.get("inputs"), req.get("id")
    if type(inputs) is not list or len(inputs) != 1 or (rid is not None and type(rid) is not str):
        return None
    t = inputs[0]
    if type(t) is not dict or t.get("datatype") != "FP64":
        return None
    if binary:
        params = t.get("parameters")
        if t.keys() != _BINARY_TENSOR_FIELDS or type(params) is not dict or params.keys() != _SIZE_ONLY:
            return None
        data = params["binary_data_size"]
    elif t.keys() != _TENSOR_FIELDS:
        return None
    else:
        data = t["data"]
    shape, name = t["shape"], t["name"]
    k = len(bundle.feature_names)
    if (type(shape) is not list or len(shape) != 2 or type(shape[0]) is not int or shape[1] != k
            or type(shape[1]) is not int or shape[0] <= 0
            or type(name) is not str or not name or name in bundle.feature_index):
        return None
    outputs = req.get("outputs")
    available = _outputs_of(bundle)
    if outputs is None:
        wanted = available
    else:
        if type(outputs) is not list:
            return None
        wanted = []
        for o in outputs:
            if type(o) is not dict or o.keys() != _NAME_ONLY or o["name"] not in available:
                return None
            wanted.append(o["name"])
    if not wanted or not set(wanted) <= _PLANE.keys():  # no output: the general path (which counts no rows)
        return None
    return name, shape, data, wanted, rid


_DATA_KEY = b'"data":'
_SENTINEL = [-0.5]  # a second stand-in for a template's data (see _json_plan)


class _Plan:
    """A request the shortcut answers, remembered per bundle: the bytes that stay the same from one request to
    the next (a JSON document's bytes before and after its ``data`` array, or a binary request's JSON header),
    what they were checked to mean, and the answer's bytes around its values when it has one output of labels
    or numbers (``head`` + the values + ``tail``, as ``_encode_json`` writes them; None otherwise)."""

    __slots__ = ("model_name", "prefix", "start", "suffix", "end", "hlen", "size", "shape", "wanted", "rid",
                 "head", "tail", "text", "floats", "extra", "id_split")

    def __init__(self, bundle, model_name: str, prefix: bytes, suffix: bytes, shape: list[int], wanted: list[str],
                 rid: str | None):
        self.model_name, self.prefix, self.suffix = model_name, prefix, suffix
        self.start, self.end = len(prefix), -len(suffix) if suffix else None
        self.hlen = self.size = None
        self.shape, self.wanted, self.rid = shape, wanted, rid
        self.id_split = None  # an _IdSplit when the request id's value may change from one request to the next
        self.extra = None
        if "predict_proba" in wanted and bundle.classes is not None:
            self.extra = {"predict_proba": {"classes": orjson.dumps(bundle.classes).decode()}}
        self.head = self.tail = None
        self.text = self.floats = False
        dt = None
        if wanted == _PREDICT_ONLY:
            if bundle.task == "regression":
                dt = "FP64"
            elif bundle.classes:  # the datatype _shared_plane gives the labels (bundle.classes decide it)
                dt = _label_datatype(bundle, bundle.classes)
                self.text, self.floats = dt == "BYTES", dt == "FP64"
        if dt is not None:
            self.head = b"".join((b'{"model_name":', orjson.dumps(model_name),
                                  b',"model_version":"1","outputs":[{"name":"predict","datatype":', orjson.dumps(dt),
                                  b',"shape":[%d],"data":' % shape[0]))
            self.tail = b"}]}" if rid is None else b'}],"id":' + orjson.dumps(rid) + b"}"

    def tail_for(self, rid: str | None) -> bytes:
        """The answer's closing bytes for a request of this plan whose id is ``rid``."""
        return self.tail if rid == self.rid else b'}],"id":' + orjson.dumps(rid) + b"}"


def _plain_bundle(bundle) -> bool:
    """The shortcut serves all-numeric classifiers and regressors."""
    return bundle.numeric_only and bundle.task in ("classification", "regression")


class _IdSplit:
    """Where a remembered request's id lies, when clients change it from one request to the next: the bytes the
    plan holds fixed there (the JSON before the data for an id ahead of it, ``where="prefix"``; after the data,
    ``"suffix"``; a binary request's whole header, ``"head"``) are ``before`` + the id as a JSON string +
    ``after``. A request matches when its bytes are the same around a string free of escapes (an id with a
    backslash takes the general path, which decodes it)."""

    __slots__ = ("before", "after", "where")

    def __init__(self, before: bytes, after: bytes, where: str):
        self.before, self.after, self.where = before, after, where


_ID_STAND_INS = ("", "orchard-stand-in")  # two ids a split must carry to be remembered (see _find_id_split)
_ID_PLANS_MAX = 16  # plans with a changing id remembered per bundle and kind (tried in turn on a miss)


def _string_end(body: bytes, i: int) -> int:
    """The index after the JSON string without escapes that starts at ``body[i]``, or -1."""
    if body[i:i + 1] != b'"':
        return -1
    j = body.find(b'"', i + 1)
    if j < 0 or body.find(b"\\", i + 1, j) >= 0:
        return -1
    return j + 1


def _id_value(literal: bytes) -> str | None:
    """The request id a JSON string literal without escapes holds, or None (not UTF-8, a control character:
    the general path words that error)."""
    try:
        return orjson.loads(literal)
    except orjson.JSONDecodeError:
        return None


def _find_id_split(part: bytes, rid: str, where: str, meaning, rebuild) -> _IdSplit | None:
    """The split of ``part`` (bytes of a request the plan holds fixed) around the request id ``rid``, when
    ``rebuild(before + stand-in id + after)`` means ``meaning`` with that id for both stand-ins; else None."""
    literal = orjson.dumps(rid)
    p = part.find(literal)
    while p >= 0:
        before, after = part[:p], part[p + len(literal):]
        if all(rebuild(before + orjson.dumps(s) + after) == (*meaning, s) for s in _ID_STAND_INS):
            return _IdSplit(before, after, where)
        p = part.find(literal, p + 1)
    return None


def _json_match(plan: _Plan, body: bytes) -> tuple[int, int | None, str | None] | None:
    """``(data start, data end, request id)`` of a JSON request made of ``plan``'s bytes, or None."""
    split = plan.id_split
    if split is None:
        if body.startswith(plan.prefix) and body.endswith(plan.suffix):
            return plan.start, plan.end, plan.rid
        return None
    if split.where == "prefix":  # the plan's prefix is before + id + after
        n = len(split.before)
        if not (body.startswith(split.before) and body.endswith(plan.suffix)):
            return None
        e = _string_end(body, n)
        if e < 0 or not body.startswith(split.after, e):
            return None
        start, end, literal = e + len(split.after), plan.end, body[n:e]
    else:  # the plan's suffix is before + id + after
        q = len(body) - len(split.after)  # just after the id's closing quote
        if not (body.startswith(plan.prefix) and body.endswith(split.after)) or body[q - 1:q] != b'"':
            return None
        o = body.rfind(b'"', plan.start, q - 1)  # its opening quote
        end = o - len(split.before)
        if o < 0 or end <= plan.start or body[end:o] != split.before or body.find(b"\\", o, q) >= 0:
            return None
        start, literal = plan.start, body[o:q]
    rid = _id_value(literal)
    return None if rid is None else (start, end, rid)


def _remember(bundle, key: str, table_key, plan: _Plan) -> None:
    """Keep ``plan`` among the bundle's plans of its kind (by its fixed bytes, or in the list of plans with a
    changing id), each kind bounded."""
    if plan.id_split is not None:
        plans = bundle.memo.setdefault(key + "_ids", [])
        if len(plans) >= _ID_PLANS_MAX:
            plans.clear()
        plans.append(plan)
        return
    plans = bundle.memo.setdefault(key, {})
    if len(plans) >= _HEADS_MAX:
        plans.clear()
    plans[table_key] = plan


def _data_end(bundle, body: bytes, prefix: bytes) -> int | None:
    """Where the tensor's data array ends in a JSON document (the index of its ``]``) whose bytes up to the
    array are ``prefix``, or None: a ``]`` near the end (a few tries, then not remembered). A small document is
    decoded whole and the array's bytes compared with its data; a large one is not decoded here: the ``]`` is
    the one after which an empty array in place of the data makes a document the shortcut takes (whether the
    bytes in between are one array of numbers is decided when they are decoded, as for every later request)."""
    i, j = len(prefix), len(body)
    whole = len(body) <= chunked_rows.PIECE_BYTES
    if whole:
        plain = _plain_head(bundle, body, False)
        if plain is None:
            return None
    for _ in range(8):
        j = body.rfind(b"]", i, j)
        if j < 0:
            return None
        if whole:
            try:
                if orjson.loads(body[i:j + 1]) == plain[2]:
                    return j
            except orjson.JSONDecodeError:
                pass
        else:
            stand_in = _plain_head(bundle, prefix + b"[]" + body[j + 1:], False)
            if stand_in is not None and stand_in[2] == []:
                return j
    return None


def _json_plan(bundle, model_name: str, body: bytes):
    """``(plan, data start, data end, request id)`` of a JSON request whose bytes around its tensor's ``data``
    array were seen before (per bundle, by the bytes before ``"data":``, or around a changing id), else made
    from this one; None when the shortcut does not take it.

    Clients send the same document again and again with other numbers in ``data`` (and often another ``id``).
    A document is remembered once it passed ``_plain_head``'s checks and the same bytes around two stand-in
    arrays (``[]`` and ``_SENTINEL``) pass them too with the stand-in as the tensor's data: the split is then
    known to be the tensor's data (not, say, a later duplicate key), and a request made of the same bytes around
    another array only has that array decoded. An id is found the same way (``_find_id_split``)."""
    if not _plain_bundle(bundle):
        return None
    i = body.find(_DATA_KEY) + 7
    if not 6 < i <= _PLAN_BYTES_MAX:
        return None
    prefix = body[:i]
    plan = bundle.memo.get("v2_json", {}).get((model_name, prefix))
    if plan is not None and body.endswith(plan.suffix):
        bundle.memo["v2_json_last"] = plan
        return plan, plan.start, plan.end, plan.rid
    for plan in bundle.memo.get("v2_json_ids", ()):
        if plan.model_name == model_name and (m := _json_match(plan, body)) is not None:
            bundle.memo["v2_json_last"] = plan
            return (plan, *m)
    j = _data_end(bundle, body, prefix)
    if j is None:
        return None
    suffix = body[j + 1:]
    if len(prefix) + len(suffix) > _PLAN_BYTES_MAX:
        return None
    head = _plain_head(bundle, prefix + b"[]" + suffix, False)
    if head is None:
        return None
    name, shape, _, wanted, rid = head
    for stand_in in ([], _SENTINEL):
        if _plain_head(bundle, prefix + orjson.dumps(stand_in) + suffix, False) != (name, shape, stand_in,
                                                                                     wanted, rid):
            return None
    plan = _Plan(bundle, model_name, prefix, suffix, shape, wanted, rid)
    if rid is not None:
        array, meaning = b"[]", (name, shape, [], wanted)
        plan.id_split = (
            _find_id_split(prefix, rid, "prefix", meaning,
                           lambda doc: _plain_head(bundle, doc + array + suffix, False))
            or _find_id_split(suffix, rid, "suffix", meaning,
                              lambda doc: _plain_head(bundle, prefix + array + doc, False)))
    _remember(bundle, "v2_json", (model_name, prefix), plan)
    bundle.memo["v2_json_last"] = plan
    return plan, plan.start, plan.end, rid


def _binary_plan(bundle, model_name: str, body: bytes, header_length: str):
    """``(plan, data start, request id)`` of a binary request's JSON header (checked once per bundle: clients
    send the same header again and again, and only the binary data after it changes, with perhaps the id); None
    when the shortcut does not take it."""
    if not _plain_bundle(bundle):
        return None
    try:
        hlen = int(header_length)
    except ValueError:
        return None
    if not 0 < hlen <= min(len(body), _PLAN_BYTES_MAX):
        return None
    head = body[:hlen]
    plan = bundle.memo.get("v2_heads", {}).get((model_name, head))
    rid = None if plan is None else plan.rid
    if plan is None:
        for known in bundle.memo.get("v2_heads_ids", ()):
            if known.model_name == model_name and (rid := _head_id(known.id_split, head)) is not None:
                plan = known
                break
    if plan is None:
        plain = _plain_head(bundle, head, True)
        if plain is None:
            return None
        name, shape, size, wanted, rid = plain
        if size != shape[0] * shape[1] * 8:
            return None
        plan = _Plan(bundle, model_name, head, b"", shape, wanted, rid)
        plan.size = size
        if rid is not None:
            plan.id_split = _find_id_split(head, rid, "head", (name, shape, size, wanted),
                                           lambda doc: _plain_head(bundle, doc, True))
        _remember(bundle, "v2_heads", (model_name, head), plan)
    plan.hlen = header_length  # the header's text as this client writes it (the next request's first check)
    bundle.memo["v2_binary_last"] = plan
    return plan, hlen, rid


def _head_id(split: _IdSplit, head: bytes) -> str | None:
    """The request id of a binary request's JSON header made of ``split``'s bytes around it, or None."""
    n = len(split.before)
    e = _string_end(head, n) if head.startswith(split.before) else -1
    if e < 0 or len(head) != e + len(split.after) or not head.endswith(split.after):
        return None
    return _id_value(head[n:e])


def _json_rows(bundle, body: bytes, start: int, end: int | None, shape: list[int]) -> np.ndarray | None:
    """The model's input matrix from the JSON numbers ``body[start:end]`` of a large ``shape`` tensor, decoded a
    piece at a time (chunked_rows.flat_numbers) so the GIL changes hands between pieces, or whole when the pieces
    do not cover it; None when they are not exactly that many plain numbers, or all integers (the general path
    decides)."""
    stop = len(body) if end is None else end if end >= 0 else len(body) + end
    A = chunked_rows.flat_numbers(body, start, stop)
    if A is not None:
        return bundle.matrix_from_numbers(A.reshape(shape)) if A.size == shape[0] * shape[1] else None
    try:
        data = orjson.loads(body[start:stop])
    except orjson.JSONDecodeError:
        return None
    X = bundle.matrix_from_flat(data, shape[0]) if type(data) is list and data and type(data[0]) is float else None
    return _rows_of(bundle, data, shape) if X is None else X


def _rows_of(bundle, data, shape: list[int]) -> np.ndarray | None:
    """The model's input matrix from a decoded tensor's ``data`` that is not a flat list of floats: plain JSON
    numbers as /v1 treats them (float64 once converted, exactly ``shape``'s size), else None."""
    if type(data) is not list:
        return None
    A = np.asarray(data)
    if A.dtype is not _F64 or A.size != shape[0] * shape[1]:
        return None
    return bundle.matrix_from_numbers(A.reshape(shape))


def _binary_rows(bundle, blob: memoryview, shape: list[int]) -> np.ndarray | None:
    """The model's input matrix from binary FP64 data (little-endian) of ``shape``; None when it holds an
    infinity (the general path words that error). NaN is a missing value, imputed as the general path does."""
    A = np.ndarray(shape, _F64, bytearray(blob))  # one copy, ours to transform in place
    # a finite sum means no NaN and no infinity (summing the buffer: cheaper than two NumPy calls)
    if _LITTLE and math.isfinite(sum(blob.cast("d"))):
        return bundle.matrix_from_numbers(A)
    if np.isinf(A).any():
        return None
    return bundle.preprocessor.transform_matrix(A, copy=False)  # NaN: missing


def _infer_plain(bundle, model_name: str, body: bytes, header_length: str | None,
                 max_rows: int) -> tuple[bytes, int | None, int] | None:
    """The common request answered without the general decoding: one FP64 tensor of shape [n, k], as JSON numbers
    or as binary tensor data, for an all-numeric classifier or regressor, JSON outputs among ``predict``,
    ``predict_proba`` and ``predict_std``, no other parameters. The same checks and answer as the general path
    (which a request that is not exactly this goes to, and which words the errors); None when it is not such a
    request. What stays the same between a client's requests is checked once (``_Plan``): a repeat compares its
    bytes with the last plan's, decodes only its numbers, and writes its answer around the remembered bytes."""
    if header_length is None:
        plan = bundle.memo.get("v2_json_last")
        if (plan is not None and plan.id_split is None and plan.model_name == model_name
                and body.startswith(plan.prefix) and body.endswith(plan.suffix)):
            start, end, rid = plan.start, plan.end, plan.rid
        else:
            found = _json_plan(bundle, model_name, body)
            if found is None:
                return None
            plan, start, end, rid = found
        shape = plan.shape
        if shape[0] > max_rows:
            return None
        if len(body) <= chunked_rows.PIECE_BYTES:  # the common request: its numbers decoded at once
            try:
                data = orjson.loads(body[start:end])
            except orjson.JSONDecodeError:
                return None
            X = bundle.matrix_from_flat(data, shape[0]) if type(data) is list and data and type(data[0]) is float \
                else None
            if X is None:
                X = _rows_of(bundle, data, shape)
        else:
            X = _json_rows(bundle, body, start, end, shape)
        if X is None:
            return None
    else:
        plan = bundle.memo.get("v2_binary_last")
        if (plan is not None and plan.hlen == header_length and plan.model_name == model_name
                and body.startswith(plan.prefix)):
            start, rid = plan.start, plan.rid
        else:
            found = _binary_plan(bundle, model_name, body, header_length)
            if found is None:
                return None
            plan, start, rid = found
        shape = plan.shape
        if shape[0] > max_rows or len(body) - start != plan.size:
            return None
        X = _binary_rows(bundle, memoryview(body)[start:], shape)
        if X is None:
            return None
    head = plan.head
    if head is not None:  # one output, "predict": the answer's bytes around its values
        values = bundle.predict_matrix(X)["predictions"]
        if plan.text:
            if len(values) != 1 or type(values[0]) is not str:
                values = _as_text(values)
        elif plan.floats:
            values = [float(v) for v in values]
        text = orjson.dumps(values) if shape[0] <= chunked_rows.SLICE else chunked_rows.dumps_list(values)
        return b"".join((head, text, plan.tail if rid is plan.rid else plan.tail_for(rid))), None, shape[0]
    results = _shared_plane(bundle, X, plan.wanted)
    if results is None:
        return None
    return _encode_json(model_name, rid, results, plan.extra), None, shape[0]


def infer(bundle, model_name: str, body: bytes, header_length: str | None,
          max_rows: int) -> tuple[bytes, int | None, int]:
    """Answer one inference request: (body, JSON header length when binary outputs follow, rows predicted)."""
    answer = _infer_plain(bundle, model_name, body, header_length, max_rows)
    if answer is not None:
        return answer
    req = parse_infer_request(body, header_length)
    available = _outputs_of(bundle)
    if req.outputs is None:
        wanted = available
        binary = dict.fromkeys(wanted, req.binary_output) if req.binary_output else None
    else:
        wanted, binary = [], {}
        for o in req.outputs:
            if o["name"] not in available:
                raise V2Error(f"unknown output {o['name']!r}: this model's outputs are {', '.join(available)}")
            wanted.append(o["name"])
            binary[o["name"]] = bool((o.get("parameters") or {}).get("binary_data", req.binary_output))
        if not any(binary.values()):
            binary = None
    X = matrix_from_tensors(bundle, req.inputs, max_rows)
    extra = {}
    if "predict_proba" in wanted and bundle.classes is not None:
        extra["predict_proba"] = {"classes": orjson.dumps(bundle.classes).decode()}
    flat = _shared_plane(bundle, X, wanted)
    if flat is not None:
        n = flat[wanted[0]][1][0] if wanted else 0
        if binary is None:
            return _encode_json(model_name, req.id, flat, extra), None, n
        results = {name: (dt, typed(data, dt).reshape(shape)) for name, (dt, shape, data) in flat.items()}
    else:
        results = run_inference(bundle, X, wanted)
        n = next(iter(results.values()))[1].shape[0] if results else 0
    data, json_len = encode_response(model_name, req.id, results, binary or {}, extra)
    return data, json_len, n


def model_metadata(model_name: str, record: dict, bundle) -> dict:
    """V2 model metadata of a model record (``bundle``: its loaded bundle when it is ready, else None)."""
    from core import registry

    features = record.get("features") or []
    numeric = "FP64"
    if record["task"] == rl.TASK and record["algorithm"] not in rl.MATRIX_INPUT:
        numeric = "INT64"  # states are labels: BYTES, or INT64 when the state column is numeric
    inputs = [{"name": f["name"], "datatype": "BYTES" if f.get("type") == "categorical" else numeric,
               "shape": [-1]} for f in features]
    n_components = None
    if bundle is not None:
        caps = bundle_capabilities(bundle)
        comp = getattr(bundle.estimator, "components_", None)
        n_components = int(comp.shape[0]) if comp is not None and getattr(comp, "ndim", 0) == 2 else None
    else:
        try:
            cls = registry.get(record["algorithm"])
            caps = dict(cls.capabilities(), score_samples=callable(getattr(cls, "score_samples", None)))
        except Exception:  # noqa: BLE001 - an unknown algorithm only loses the optional outputs
            caps = {}
    classes = record.get("classes")
    params = {"id": record["id"], "model_name": record["name"], "algorithm": record["algorithm"],
              "task": record["task"], "status": record["status"],
              "input_matrix": f"alternatively one tensor of shape [-1, {len(features)}] in input order"}
    if classes is not None:
        params["classes"] = orjson.dumps(classes).decode()
    return {"name": model_name, "versions": ["1"], "platform": "orchard", "inputs": inputs,
            "outputs": available_outputs(record["task"], caps, classes, n_components), "parameters": params}
