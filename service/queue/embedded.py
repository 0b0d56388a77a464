"""Embedded job queue: a pool of worker processes inside ``orchard serve``.

Workers are started (spawned, not forked: the API process runs threads) when
the server starts and wait on a shared queue, so an idle pool starts a job in
milliseconds.  A monitor thread restarts dead workers and fails the job a dead
worker was running.  ``workers=0`` runs jobs on threads of the API process
(for tests and tiny installs).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import queue as queue_mod
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..settings import Settings
    from ..storage.metadata import MetadataStore

log = logging.getLogger("orchard.queue")
_prestarted: dict | None = None


def prestart(settings: Settings) -> None:
    """Spawn the pool's worker processes now, before the API process's own heavy imports, so that both warm
    up in parallel (cold start to ready). The workers wait, imports done, until ``EmbeddedQueue.start`` says
    the stores exist; ``EmbeddedQueue`` adopts them when its settings are the same. Used by ``orchard serve``.
    """
    global _prestarted
    if settings.queue_url or settings.workers <= 0 or _prestarted is not None:
        return
    ctx = mp.get_context("spawn")
    payload = settings.model_dump_json()
    q, go = ctx.Queue(), ctx.Event()
    procs, ready = [], []
    for _ in range(settings.workers):
        ev = ctx.Event()
        p = ctx.Process(target=_worker_main, args=(q, payload, ev, go), daemon=True)
        p.start()
        procs.append(p)
        ready.append(ev)
    _prestarted = {"payload": payload, "q": q, "go": go, "procs": procs, "ready": ready}


def _worker_main(q, settings_json: str, ready=None, go=None) -> None:
    # BLAS threads: one per worker process, so N workers do not oversubscribe the cores
    import os

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    from ..services.training import execute_job  # heavy imports happen before the first job
    from ..settings import Settings
    from .runtime import open_stores

    settings = Settings.model_validate_json(settings_json)
    from ..observability import configure_logging

    configure_logging(settings.log_level, settings.log_format)  # JSON lines like the API process
    if go is not None:  # prestarted: the API process creates the stores first
        go.wait()
    meta, art = open_stores(settings)
    if ready is not None:
        ready.set()  # imports done: this worker starts a job in milliseconds from now on
    while True:
        job_id = q.get()
        if job_id is None:
            break
        try:
            execute_job(meta, art, job_id, settings.job_poll_interval)
        except Exception:  # noqa: BLE001 - keep the worker alive
            log.exception("job %s: worker error", job_id)


class EmbeddedQueue:
    def __init__(self, settings: Settings, meta: MetadataStore, art):
        self.settings = settings
        self.meta = meta
        self.art = art
        self.n = settings.workers
        self._ctx = mp.get_context("spawn")
        self._procs: list = []
        self._ready: list = []
        self._adopted = None
        global _prestarted
        if self.n > 0 and _prestarted is not None and _prestarted["payload"] == settings.model_dump_json():
            self._adopted, _prestarted = _prestarted, None
        if self._adopted is not None:
            self._q = self._adopted["q"]
        else:
            self._q = self._ctx.Queue() if self.n > 0 else None
        self._threads: ThreadPoolExecutor | None = None
        self._stop = threading.Event()
        self._monitor: threading.Thread | None = None
        self._pending = 0
        self._lock = threading.Lock()

    def start(self) -> None:
        if self.n == 0:
            self._threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="orchard-job")
            return
        payload = self.settings.model_dump_json()
        if self._adopted is not None:
            self._procs, self._ready = self._adopted["procs"], self._adopted["ready"]
            self._adopted["go"].set()  # the stores exist now
        else:
            for _ in range(self.n):
                proc, ev = self._spawn(payload)
                self._procs.append(proc)
                self._ready.append(ev)
        self._monitor = threading.Thread(target=self._watch, args=(payload,), daemon=True,
                                         name="orchard-pool-monitor")
        self._monitor.start()

    def _spawn(self, payload: str):
        ev = self._ctx.Event()
        p = self._ctx.Process(target=_worker_main, args=(self._q, payload, ev), daemon=True)
        p.start()
        return p, ev

    def _watch(self, payload: str) -> None:
        while not self._stop.wait(1.0):
            for i, p in enumerate(list(self._procs)):
                if p.is_alive():
                    continue
                log.warning("worker pid %s exited with code %s; restarting it", p.pid, p.exitcode)
                self._fail_jobs_of(p.pid, p.exitcode)
                self._procs[i], self._ready[i] = self._spawn(payload)

    def _fail_jobs_of(self, pid: int, exitcode) -> None:
        for job in self.meta.jobs_in(["running"]):
            if (job.get("worker") or "").endswith(f":{pid}"):
                msg = f"the worker process running this job died (exit code {exitcode}); submit the job again"
                self.meta.finish_job(job["id"], "failed", error={"type": "WorkerLost", "message": msg},
                                     message=msg, only_from=("running",))
                if job.get("model_id"):
                    self.meta.update_model(job["model_id"], status="failed", metrics={"error": msg})

    def enqueue(self, job_id: str) -> None:
        if self.n == 0:
            from ..services.training import execute_job

            self._threads.submit(execute_job, self.meta, self.art, job_id, self.settings.job_poll_interval)
            return
        self._q.put(job_id)

    def depth(self) -> int:
        return self.meta.count_jobs("queued")

    def ping(self) -> None:
        if self.n and not any(p.is_alive() and ev.is_set() for p, ev in zip(self._procs, self._ready, strict=True)):
            raise RuntimeError("no worker process is ready yet (starting) or alive")

    def shutdown(self) -> None:
        self._stop.set()
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
        for _ in self._procs:
            try:
                self._q.put_nowait(None)
            except (queue_mod.Full, ValueError, OSError):
                pass
        for p in self._procs:
            p.join(timeout=2)
            if p.is_alive():
                p.terminate()
                p.join(timeout=2)
        if self._q is not None:
            self._q.close()
            self._q.join_thread()
        # drop the pool's queue, events and process objects now, so that their semaphores are released by
        # their finalizers: uvicorn re-raises SIGTERM after shutdown, and the exit-time finalizers never run
        self._procs, self._ready, self._q, self._adopted = [], [], None, None
        import gc

        gc.collect()
