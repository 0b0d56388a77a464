"""The janitor: collects what a crash can leave behind in the artifact store.

* orphan artifacts: a dataset directory or model file with no metadata row (e.g. a crash between the artifact's
  rename and the metadata insert, or a model deleted while its job was saving), and temp files of an
  interrupted ``atomic_write`` in ``models/``;
* the temporary directories of ended processes (``ArtifactStore.sweep_tmp``);
* with artifacts on S3, this process's local copies of datasets whose row is gone (deleted, maybe through
  another replica; the bucket's objects go with the delete, the copies in other data directories stay): a copy
  is removed once not read for ``grace_s`` seconds (a read moves its directory's mtime, at most once a minute),
  so the data directory (an emptyDir with a size limit on Kubernetes) does not fill up. An RQ worker runs no
  janitor: it runs this step alone (``collect_local_copies``) before each job;
* metadata rows whose artifact is missing are reported (logged at warning), never changed.

Only what has not changed for ``grace_s`` seconds is collected, so an artifact whose save is in flight (written,
its row not yet inserted) is never touched. Every step tolerates another replica's janitor running at the same
time (removals ignore what is already gone). The API process runs it at start and every
``ORCHARD_JANITOR_INTERVAL_S`` seconds.
"""

from __future__ import annotations

import logging
import threading
import time

from ..storage.artifacts import ArtifactStore
from ..storage.metadata import MetadataStore

log = logging.getLogger("orchard.janitor")

BUNDLE_SUFFIX = ".joblib"


def collect(meta: MetadataStore, art: ArtifactStore, grace_s: float, now: float | None = None) -> dict:
    """One pass. Returns what it did: ``{"tmp": [...], "datasets": [...], "local_copies": [...], "models": [...],
    "missing_datasets": [...], "missing_models": [...]}`` (ids or file names)."""
    now = time.time() if now is None else now
    report: dict[str, list[str]] = {"tmp": art.sweep_tmp(grace_s, now=now)}
    # the files first, then the rows: a row inserted between the two reads is seen, so its artifact is kept
    ds_files = art.list_dataset_artifacts()
    model_files = art.list_model_artifacts()
    local_copies = art.list_local_dataset_copies()
    ds_rows = meta.dataset_ids()
    model_rows = meta.model_statuses()
    report["datasets"] = []
    for ds_id, mtime in sorted(ds_files.items()):
        if ds_id not in ds_rows and now - mtime >= grace_s:
            art.delete_dataset(ds_id)
            report["datasets"].append(ds_id)
    report["local_copies"] = _remove_local_copies(art, local_copies, ds_rows, grace_s, now)
    report["models"] = []
    for name, mtime in sorted(model_files.items()):
        model_id = name[: -len(BUNDLE_SUFFIX)] if name.endswith(BUNDLE_SUFFIX) else None
        if model_id is not None and model_id in model_rows:
            continue
        if now - mtime >= grace_s:  # no row, or a temp file of an interrupted write
            art.remove_model_file(name)
            report["models"].append(name)
    # rows whose artifact is missing: reported only (a dataset/model row is written after its artifact, so
    # this means the files were lost or deleted by hand)
    report["missing_datasets"] = sorted(i for i in ds_rows if i not in ds_files)
    report["missing_models"] = sorted(i for i, status in model_rows.items()
                                      if status == "ready" and f"{i}{BUNDLE_SUFFIX}" not in model_files)
    for kind in ("tmp", "datasets", "models", "local_copies"):
        if report[kind]:
            what = {"tmp": "orphan temporary directories", "local_copies": "local copies of deleted datasets"}
            log.info("janitor removed %d %s: %s", len(report[kind]), what.get(kind, f"orphan {kind}"),
                     ", ".join(report[kind][:20]))
    for kind in ("missing_datasets", "missing_models"):
        if report[kind]:
            log.warning("janitor: %d %s rows have no artifact (files lost or removed by hand): %s",
                        len(report[kind]), kind.split("_")[1][:-1], ", ".join(report[kind][:20]))
    return report


def _remove_local_copies(art: ArtifactStore, copies: dict[str, float], ds_rows, grace_s: float,
                         now: float) -> list[str]:
    removed = []
    for ds_id, used in sorted(copies.items()):
        if ds_id not in ds_rows and now - used >= grace_s:  # its dataset deleted (maybe through another replica)
            art.remove_local_dataset_copy(ds_id)
            removed.append(ds_id)
    return removed


def collect_local_copies(meta: MetadataStore, art: ArtifactStore, grace_s: float,
                         now: float | None = None) -> list[str]:
    """The local-copies step of ``collect`` alone, for a process that runs no janitor (an RQ worker, before each
    job). Returns the dataset ids whose copies it removed."""
    now = time.time() if now is None else now
    copies = art.list_local_dataset_copies()  # the copies first, then the rows (as in collect)
    if not copies:
        return []
    removed = _remove_local_copies(art, copies, meta.dataset_ids(), grace_s, now)
    if removed:
        log.info("removed %d local copies of deleted datasets: %s", len(removed), ", ".join(removed[:20]))
    return removed


class Janitor:
    """Runs ``collect`` at start and then every ``interval_s`` seconds on a daemon thread."""

    def __init__(self, meta: MetadataStore, art: ArtifactStore, grace_s: float, interval_s: float):
        self.meta, self.art, self.grace_s, self.interval_s = meta, art, grace_s, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="orchard-janitor", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            try:
                collect(self.meta, self.art, self.grace_s)
            except Exception:  # noqa: BLE001 - a database or file system blink must not stop the janitor
                log.exception("janitor pass failed; trying again later")
            if self._stop.wait(self.interval_s):
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
