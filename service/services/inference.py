"""Loading models for prediction: a bounded in-memory LRU cache of verified bundles.

Loading a bundle (read, verify, unpickle) can take seconds for a large forest, so it never runs on the event
loop: ``aget`` answers from the cache inline and otherwise loads on a worker thread. Concurrent first requests
for one cold model load it once (one lock per model being loaded).

Budget rule (``ORCHARD_MODEL_CACHE_BYTES``): a model is charged its measured in-memory size (the bytes of every
NumPy array it holds plus the Python objects around them, walked once at load), and the least recently used
models are evicted until the others fit. A model larger than the whole budget is served from a slot of its own
(one such model at a time): it evicts nothing, and another oversize model replaces it. Memory held by the cache
is thus bounded by the budget plus the largest model in use. See docs/decisions/model-cache.md.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from starlette.concurrency import run_in_threadpool

from ..errors import ArtifactIntegrityError, Conflict, NotFound
from ..storage.artifacts import ArtifactError, ArtifactStore
from ..storage.metadata import MetadataStore

_ATOMS = (str, bytes, bytearray, int, float, complex, bool, type(None))
# Bodies up to this size are decoded and predicted on the event loop (a single-row predict costs tens of
# microseconds and a thread hop would double it); larger ones on a worker thread (anyio's bounded pool).
INLINE_BODY_BYTES = 64 * 1024
# How stale a cached answer about other replicas' changes may be: a cached model's artifact is re-checked (deleted
# by another replica?) at most this often, and a V2 model name is resolved again after this long (dataplane.py).
RECHECK_SECONDS = 1.0


async def run_sized(nbytes: int, fn, *args):
    """``fn(*args)`` inline for a small request, on a worker thread for a large one."""
    if nbytes <= INLINE_BODY_BYTES:
        return fn(*args)
    return await run_in_threadpool(fn, *args)


def measured_nbytes(obj, limit: int = 2_000_000) -> int:
    """Bytes an object graph holds in memory: NumPy buffers (each counted once, views through their base) plus
    ``sys.getsizeof`` of the Python objects around them. Walks at most ``limit`` objects."""
    seen: set[int] = set()
    stack = [obj]
    total = 0
    while stack and len(seen) < limit:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, np.ndarray):
            if o.base is not None and isinstance(o.base, np.ndarray):
                stack.append(o.base)
                continue
            total += o.nbytes
            if o.dtype == object:
                stack.extend(o.ravel().tolist())
            continue
        if isinstance(o, _ATOMS) or isinstance(o, type):
            total += sys.getsizeof(o)
            continue
        total += sys.getsizeof(o, 64)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
        else:
            d = getattr(o, "__dict__", None)
            if d is not None:
                stack.append(d)
            for name in getattr(type(o), "__slots__", ()):
                if hasattr(o, name):
                    stack.append(getattr(o, name))
    return total


class _Entry:
    __slots__ = ("bundle", "cost", "checked_at")

    def __init__(self, bundle, cost: int):
        self.bundle, self.cost, self.checked_at = bundle, cost, time.monotonic()


class ModelCache:
    """model id -> ModelBundle, evicted least-recently-used beyond ``max_bytes`` (rule in the module docstring)."""

    def __init__(self, meta: MetadataStore, art: ArtifactStore, max_bytes: int):
        self.meta = meta
        self.art = art
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, _Entry] = OrderedDict()
        self._oversize: tuple[str, _Entry] | None = None
        self._bytes = 0
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}
        self._checker = ThreadPoolExecutor(1, thread_name_prefix="orchard-cache-check")
        self.hits = 0
        self.misses = 0
        self.loads = 0
        self.evictions = 0
        self.load_seconds = 0.0

    def __len__(self) -> int:
        return len(self._items) + (self._oversize is not None)

    def __contains__(self, model_id: str) -> bool:
        return model_id in self._items or (self._oversize is not None and self._oversize[0] == model_id)

    @property
    def size_bytes(self) -> int:
        return self._bytes + (self._oversize[1].cost if self._oversize is not None else 0)

    def peek(self, model_id: str):
        """The cached bundle, or None (no I/O but a stat of its artifact at most every ``RECHECK_SECONDS``)."""
        entry = self._items.get(model_id)
        if entry is None:
            over = self._oversize
            if over is None or over[0] != model_id:
                return None
            entry = over[1]
        now = time.monotonic()
        if now - entry.checked_at >= RECHECK_SECONDS:  # deleted by another replica? re-checked now and then
            entry.checked_at = now
            if self.art.local:  # a stat: inline
                if not self.art.model_exists(model_id):
                    self.evict(model_id)
                    return None
            else:  # a request to the object store: off the event loop, this request served meanwhile
                self._checker.submit(self._check, model_id)
        if model_id in self._items:
            try:
                self._items.move_to_end(model_id)
            except KeyError:  # evicted by another thread meanwhile: this request still has its bundle
                pass
        self.hits += 1
        return entry.bundle

    def get(self, model_id: str):
        """The bundle of a ready model, loading it if needed (blocking: call from a worker thread, or use aget)."""
        bundle = self.peek(model_id)
        if bundle is not None:
            return bundle
        with self._lock:
            gate = self._loading.setdefault(model_id, threading.Lock())
        with gate:  # one load per model: the others wait for it and then find it cached
            try:
                bundle = self.peek(model_id)
                if bundle is not None:
                    return bundle
                self.misses += 1
                record = self.meta.get_model(model_id)
                if record is None:
                    raise NotFound(f"model {model_id!r} does not exist")
                return self.load(record)
            finally:
                with self._lock:
                    self._loading.pop(model_id, None)

    async def aget(self, model_id: str):
        """``get`` for the event loop: a cached model inline, a cold one loaded on a worker thread."""
        bundle = self.peek(model_id)
        if bundle is not None:
            return bundle
        return await run_in_threadpool(self.get, model_id)

    def load(self, record: dict):
        model_id = record["id"]
        if record["status"] == "training":
            raise Conflict(f"model {model_id!r} is still training (job {record['job_id']}); wait until its job "
                           "has succeeded")
        if record["status"] != "ready":
            why = (record.get("metrics") or {}).get("error", "its training job did not succeed")
            raise Conflict(f"model {model_id!r} is not usable: {why}")
        start = time.perf_counter()
        try:
            bundle = self.art.load_bundle(model_id)
        except ArtifactError as exc:
            if self.meta.get_model(model_id) is None:  # deleted while this request was on its way
                raise NotFound(f"model {model_id!r} does not exist") from None
            raise ArtifactIntegrityError(str(exc)) from None
        cost = measured_nbytes(bundle)
        bundle.project = record.get("project") or "default"  # what ProjectCache checks (services/projects.py)
        self.loads += 1
        self.load_seconds += time.perf_counter() - start
        entry = _Entry(bundle, cost)
        with self._lock:
            if model_id in self:
                return bundle
            if cost > self.max_bytes:
                if self._oversize is not None:
                    self.evictions += 1
                self._oversize = (model_id, entry)
                return bundle
            self._items[model_id] = entry
            self._bytes += cost
            while self._bytes > self.max_bytes and self._items:
                _, old = self._items.popitem(last=False)
                self._bytes -= old.cost
                self.evictions += 1
        return bundle

    def _check(self, model_id: str) -> None:
        try:
            if not self.art.model_exists(model_id):
                self.evict(model_id)
        except Exception:  # noqa: BLE001 - the store unreachable: keep serving, check again later
            pass

    def evict(self, model_id: str) -> None:
        with self._lock:
            entry = self._items.pop(model_id, None)
            if entry is not None:
                self._bytes -= entry.cost
            if self._oversize is not None and self._oversize[0] == model_id:
                self._oversize = None
