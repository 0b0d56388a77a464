"""The data plane: inference for both protocols, over the model cache (as MLServer's ``handlers/dataplane.py``).

``/v1/models/{id}/predict``, ``/v2/models/{name}/infer`` (the front door, api/fastpath.py, and the FastAPI routes
that document them) and the V2 model metadata and readiness routes all go through one ``DataPlane``: it finds the
model (a cached bundle inline, a cold one loaded on a worker thread), decodes the request, runs the model through
``ModelBundle.predict_matrix`` (so /v1 and /v2 give the same numbers by construction) and encodes the answer.
The protocol codecs are elsewhere: the V1 body checks here (``predict_payload``), the V2 tensors in oip.py.

A V2 model name (rather than an id) is resolved in the metadata store once, and the model id it gave is remembered
(``peek_named``): a repeat for a cached model then costs no I/O, as a request by id does. The memory is forgotten
whenever a model row is written through this process's metadata store (``MetadataStore.model_writes``: a model
created, updated or deleted, by any project's plane), and each name is resolved again ``RECHECK_SECONDS`` after it
was, so that models created or deleted by other processes (worker processes, other replicas) show within that
bound. A deleted model also leaves the cache (at once in this process, within the same bound elsewhere), which
sends its name back to the general path. See docs/decisions/v2-model-names.md.

Bodies up to ``INLINE_BODY_BYTES`` are decoded and predicted by the caller (inline on the event loop: a single row
costs tens of microseconds); larger ones on a worker thread, with their rows decoded in bounded pieces
(chunked_rows.py) so that the event loop is never kept waiting for the GIL for long.
"""

from __future__ import annotations

import time

import orjson
from starlette.concurrency import run_in_threadpool

from core.validation import DataError

from ..errors import Conflict, invalid
from . import chunked_rows, oip, rl
from .inference import INLINE_BODY_BYTES, RECHECK_SECONDS, ModelCache, run_sized

_PREDICT_FIELDS = frozenset({"instances", "rows", "return_proba", "return_std"})


def _rows(out: dict) -> int:
    return len(out.get("predictions") or out.get("components") or out.get("log_density") or ())


def decode_json(raw: bytes) -> object:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise invalid(["body"], f"the body is not valid JSON: {exc}") from None


def _too_many(field: str, max_rows: int):
    return invalid(["body", field], f"at most {max_rows} rows per request (ORCHARD_MAX_PREDICT_ROWS)")


def predict_payload(bundle, body: object, max_rows: int) -> dict:
    """Validate a decoded ``/v1`` predict body (orjson's: its numbers are finite) against the bundle and run the
    model."""
    if type(body) is not dict:
        raise invalid(["body"], "the body must be a JSON object with 'instances' or 'rows'")
    if len(body) == 1:  # the common body, {"rows": [...]}: its checks in a few operations
        data = body.get("rows")
        if type(data) is list and data and len(data) <= max_rows and bundle.task != rl.TASK:
            X = None
            if len(data) == 1 and type(data[0]) is list:  # one row
                X = bundle.matrix_from_flat(data[0], 1)
            if X is None:
                X = bundle.matrix_from_payload(data, "rows", json_numbers=True)
            try:
                return bundle.predict_matrix(X)
            except DataError as exc:
                raise invalid(["body", "rows"], f"the model cannot use these values: {exc}") from None
    if not body.keys() <= _PREDICT_FIELDS:
        key = next(k for k in body if k not in _PREDICT_FIELDS)
        raise invalid(["body", key], "unknown field (allowed: instances, rows, return_proba, return_std)")
    instances, rows = body.get("instances"), body.get("rows")
    if (instances is None) == (rows is None):
        raise invalid(["body", "instances"], "give exactly one of 'instances' or 'rows'")
    if len(body) > 1:
        _check_flags(body)
    data = instances if instances is not None else rows
    field = "instances" if instances is not None else "rows"
    if not isinstance(data, list) or not data:
        raise invalid(["body", field], "must be a non-empty list")
    if len(data) > max_rows:
        raise _too_many(field, max_rows)
    if bundle.task == rl.TASK:
        return rl.predict(bundle, data, field)
    return _predict(bundle, bundle.matrix_from_payload(data, field, json_numbers=True), body, field)


def _check_flags(body: dict) -> None:
    for flag in ("return_proba", "return_std"):
        if flag in body and not isinstance(body[flag], bool):
            raise invalid(["body", flag], "must be true or false")


def _predict(bundle, X, flags: dict, field: str) -> dict:
    try:
        return bundle.predict_matrix(X, return_proba=bool(flags.get("return_proba")),
                                     return_std=bool(flags.get("return_std")))
    except DataError as exc:  # the estimator's own input check (e.g. a value that overflows when standardised)
        raise invalid(["body", field], f"the model cannot use these values: {exc}") from None


def _predict_in_pieces(bundle, raw: bytes, max_rows: int) -> dict | None:
    """A large body of plain numeric rows for an all-numeric model, decoded a piece at a time (chunked_rows.py);
    None when it is not such a body (the caller decodes it whole)."""
    if not bundle.numeric_only or bundle.task == rl.TASK:
        return None
    parts = chunked_rows.split(raw)
    if parts is None:
        return None
    field, flags, pieces = parts
    _check_flags(flags)
    try:
        A = chunked_rows.matrix(pieces, field, bundle.feature_names, max_rows)
    except chunked_rows.TooMany:
        raise _too_many(field, max_rows) from None
    if A is None:
        return None
    return _predict(bundle, bundle.matrix_from_numbers(A), flags, field)


class DataPlane:
    """Inference over the model cache for every protocol and route (see the module docstring)."""

    def __init__(self, cache: ModelCache, meta, max_rows: int):
        self.cache = cache  # ``cache.peek(id)``: a loaded bundle or None, no I/O (the front door's first call)
        self.meta = meta
        self.max_rows = max_rows
        self._store = getattr(meta, "store", meta)  # a project's view (ProjectMeta) or the store itself
        self._names: dict[str, tuple[str, float]] = {}  # V2 model name -> (model id, when it was resolved)
        self._names_writes = self._store.model_writes  # the store's model writes when _names was last valid

    # -- models -------------------------------------------------------------------------------------
    def model(self, model_id: str):
        """The bundle of a ready model (blocking: loads a cold one)."""
        return self.cache.get(model_id)

    def resolve(self, name: str) -> dict:
        """The model record of a V2 model name: an id or a unique name."""
        return oip.resolve_model(self.meta, name)

    def peek_named(self, name: str):
        """The cached bundle of a V2 model name with no I/O, or None: a model id, or a name resolved within the last
        ``RECHECK_SECONDS`` with no model row written in this process since (module docstring)."""
        bundle = self.cache.peek(name)
        if bundle is not None:
            return bundle
        ref = self._names.get(name)
        if ref is None:
            return None
        if self._store.model_writes != self._names_writes:  # a model created, updated or deleted here
            self._names.clear()
            return None
        if time.monotonic() - ref[1] >= RECHECK_SECONDS:  # others' changes: resolved again by the caller
            return None
        return self.cache.peek(ref[0])  # None once the model was deleted (evicted) or evicted by the LRU

    def model_named(self, name: str):
        """The bundle of a V2 model name (blocking): resolved in the metadata store unless ``peek_named`` has it."""
        bundle = self.peek_named(name)
        if bundle is not None:
            return bundle
        writes, at = self._store.model_writes, time.monotonic()  # read before the queries: a write during them
        model_id = self.resolve(name)["id"]                        # leaves what they found unused
        bundle = self.cache.get(model_id)  # 404 / 409 / 500 as by id: nothing remembered
        if model_id != name:
            if writes != self._names_writes:
                self._names.clear()
                self._names_writes = writes
            self._names[name] = (model_id, at)
        return bundle

    async def amodel(self, model_id: str):
        bundle = self.cache.peek(model_id)
        return bundle if bundle is not None else await run_in_threadpool(self.cache.get, model_id)

    async def amodel_named(self, name: str):
        bundle = self.peek_named(name)
        return bundle if bundle is not None else await run_in_threadpool(self.model_named, name)

    # -- /v1 predict --------------------------------------------------------------------------------
    def predict(self, bundle, raw: bytes) -> tuple[bytes, int]:
        """Decode and answer a ``/v1`` predict body: (the JSON answer, rows predicted). Blocking for a large body
        (see ``apredict``)."""
        if len(raw) > INLINE_BODY_BYTES:
            out = _predict_in_pieces(bundle, raw, self.max_rows)
            if out is None:
                out = predict_payload(bundle, decode_json(raw), self.max_rows)
            return chunked_rows.dumps(out), _rows(out)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise invalid(["body"], f"the body is not valid JSON: {exc}") from None
        out = predict_payload(bundle, body, self.max_rows)
        rows = out.get("predictions")  # the common answer: its rows without another call
        return orjson.dumps(out), len(rows) if rows is not None else _rows(out)

    async def apredict(self, model_id: str, raw: bytes) -> tuple[bytes, int]:
        bundle = await self.amodel(model_id)
        return await run_sized(len(raw), self.predict, bundle, raw)

    # -- /v2 infer ----------------------------------------------------------------------------------
    def infer(self, bundle, name: str, body: bytes, header_length: str | None) -> tuple[bytes, int | None, int]:
        """Answer a V2 inference request: (body, JSON header length when binary outputs follow, rows)."""
        return oip.infer(bundle, name, body, header_length, self.max_rows)

    async def ainfer(self, name: str, body: bytes, header_length: str | None) -> tuple[bytes, int | None, int]:
        bundle = await self.amodel_named(name)
        return await run_sized(len(body), self.infer, bundle, name, body, header_length)

    # -- /v2 model metadata and readiness ---------------------------------------------------------
    def metadata(self, name: str) -> dict:
        """V2 model metadata: inputs (one per feature, or one [n, n_features] tensor) and outputs."""
        record = self.resolve(name)
        bundle = self.cache.get(record["id"]) if record["status"] == "ready" else None
        return oip.model_metadata(name, record, bundle)

    def ready(self, name: str) -> dict:
        """200 when the model can serve now (its bundle loaded and verified); 409 while it trains or if it failed."""
        record = self.resolve(name)
        if record["status"] != "ready":
            raise Conflict(f"model {name!r} is not ready (status {record['status']})")
        self.cache.get(record["id"])
        return {"name": name, "ready": True}
