"""Loading models for prediction: a bounded in-memory LRU cache of verified bundles."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict

from ..errors import Conflict, NotFound, ProblemError
from ..storage.artifacts import ArtifactError, ArtifactStore
from ..storage.metadata import MetadataStore


class ArtifactIntegrityError(ProblemError):
    status, title = 500, "Artifact Integrity Error"
    type_ = "urn:orchard:problem:artifact-integrity"


class ModelCache:
    """model id -> ModelBundle, evicted least-recently-used beyond ``max_bytes``.

    A bundle's cost is estimated as 4x its compressed artifact size.
    """

    def __init__(self, meta: MetadataStore, art: ArtifactStore, max_bytes: int):
        self.meta = meta
        self.art = art
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, list] = OrderedDict()  # id -> [bundle, cost, path, verified_at]
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def get(self, model_id: str):
        item = self._items.get(model_id)
        if item is not None:
            now = time.monotonic()
            # deleted by another replica? the artifact's existence is re-checked at most once a second
            if now - item[3] < 1.0 or os.path.exists(item[2]):
                if now - item[3] >= 1.0:
                    item[3] = now
                self._items.move_to_end(model_id)
                self.hits += 1
                return item[0]
            self.evict(model_id)
        self.misses += 1
        record = self.meta.get_model(model_id)
        if record is None:
            raise NotFound(f"model {model_id!r} does not exist")
        return self.load(record)

    def load(self, record: dict):
        model_id = record["id"]
        if record["status"] == "training":
            raise Conflict(f"model {model_id!r} is still training (job {record['job_id']}); wait until its job "
                           "has succeeded")
        if record["status"] != "ready":
            why = (record.get("metrics") or {}).get("error", "its training job did not succeed")
            raise Conflict(f"model {model_id!r} is not usable: {why}")
        try:
            bundle = self.art.load_bundle(model_id)
        except ArtifactError as exc:
            raise ArtifactIntegrityError(str(exc)) from None
        cost = 4 * int(record.get("size_bytes") or 0)
        with self._lock:
            if model_id not in self._items:
                self._items[model_id] = [bundle, cost, str(self.art.model_path(model_id)), time.monotonic()]
                self._bytes += cost
            while self._bytes > self.max_bytes and len(self._items) > 1:
                _, (_, c, _, _) = self._items.popitem(last=False)
                self._bytes -= c
            if self._bytes > self.max_bytes and len(self._items) == 1 and self.max_bytes == 0:
                self._items.clear()
                self._bytes = 0
        return bundle

    def evict(self, model_id: str) -> None:
        with self._lock:
            item = self._items.pop(model_id, None)
            if item is not None:
                self._bytes -= item[1]
