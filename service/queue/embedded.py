"""Embedded job queue: a pool of worker processes inside ``orchard serve``.

Workers are forked by a multiprocessing *forkserver* (never by the API process
itself, which runs threads): a fresh process that limits BLAS to one thread and
imports the training stack once (``worker_preload``), so each worker, and each
worker restarted after a crash, starts warm in milliseconds.  Workers are
started when the server starts and wait on a shared queue, so an idle pool
starts a job in milliseconds.  A monitor thread restarts dead workers and fails
the job a dead worker was running.  ``workers=0`` runs jobs on threads of the
API process (for tests and tiny installs).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue as queue_mod
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import wait as _wait_ready
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..settings import Settings
    from ..storage.metadata import MetadataStore

log = logging.getLogger("orchard.queue")
_prestarted: dict | None = None
PRELOAD = ["service.queue.worker_preload"]


def pool_context():
    """The pool's multiprocessing context: a forkserver preloaded with the training stack (``spawn`` where
    there is no forkserver). ``set_forkserver_preload`` applies when the forkserver starts (first worker)."""
    if "forkserver" not in mp.get_all_start_methods():  # pragma: no cover - Windows
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def _start_all(procs: list) -> None:
    """Start the worker processes (from a thread: with a forkserver, ``Process.start`` returns only when the
    child is forked, i.e. after the forkserver's preload, and the API's own imports must go on meanwhile)."""
    for p in procs:
        try:
            p.start()
        except Exception:  # noqa: BLE001 - the monitor restarts what did not start
            log.exception("could not start a worker process")


def _running(p) -> bool:
    """Started and not ended. Looks at the process's sentinel without reaping it: the monitor thread alone
    reads the exit code (two threads polling one forkserver child would race for it)."""
    try:
        return not _wait_ready([p.sentinel], 0)
    except ValueError:  # not started yet
        return False


def prestart(settings: Settings) -> None:
    """Start the forkserver and the pool's workers now, before the API process's own heavy imports, so that
    the forkserver's imports (the training stack, once for all workers) run in parallel with the API's (cold
    start to ready). The workers wait, warm, until ``EmbeddedQueue.start`` says the stores exist;
    ``EmbeddedQueue`` adopts them when its settings are the same. Used by ``orchard serve``.
    """
    global _prestarted
    if settings.queue_url or settings.workers <= 0 or _prestarted is not None:
        return
    ctx = pool_context()
    payload = settings.model_dump_json()
    q, go = ctx.Queue(), ctx.Event()
    ready = [ctx.Event() for _ in range(settings.workers)]
    procs = [ctx.Process(target=_worker_main, args=(q, payload, ev, go, os.getpid()), daemon=True) for ev in ready]
    starter = threading.Thread(target=_start_all, args=(procs,), daemon=True, name="orchard-pool-start")
    starter.start()
    _prestarted = {"payload": payload, "q": q, "go": go, "procs": procs, "ready": ready, "starter": starter}


def _exit_with_api(api_pid: int | None) -> None:
    """End this worker when the API process that owns the pool is gone. A shutdown sends every worker a stop
    message, but a SIGKILL (or the OOM killer) gives the API no time to, and a forkserver's child is not the
    API's child, so it would wait on the queue forever. A daemon thread waits on a pidfd of the API process
    (Linux >= 5.3: no polling, immune to pid reuse) or else checks the pid every second. A job this worker was
    running stays ``running`` in the store; the API's next start fails it with an explaining message."""
    if not api_pid:
        return
    import select

    try:
        fd = os.pidfd_open(api_pid)
    except ProcessLookupError:
        os._exit(0)
    except (AttributeError, OSError):
        fd = None

    def watch():
        if fd is not None:
            select.select([fd], [], [])  # readable when the process has ended
            os._exit(0)
        while True:
            time.sleep(1.0)
            try:
                os.kill(api_pid, 0)
            except ProcessLookupError:
                os._exit(0)
            except OSError:
                pass

    threading.Thread(target=watch, daemon=True, name="orchard-api-watch").start()


def _worker_main(q, settings_json: str, ready=None, go=None, api_pid: int | None = None) -> None:
    _exit_with_api(api_pid)
    # BLAS threads: one per worker process, so N workers do not oversubscribe the cores (already set, before
    # NumPy loaded, by the forkserver's preload; here for the spawn fallback)

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    from ..services.resources import apply_worker_memory_limit
    from ..services.training import execute_job  # preloaded by the forkserver: no import cost here
    from ..settings import Settings
    from .runtime import open_stores

    settings = Settings.model_validate_json(settings_json)
    apply_worker_memory_limit(settings.worker_memory_bytes)  # a runaway fit fails its job, not the host
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
        self._ctx = pool_context() if self.n > 0 else None
        self._procs: list = []
        self._ready: list = []
        self._starter: threading.Thread | None = None
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
            self._starter = self._adopted["starter"]
            self._adopted["go"].set()  # the stores exist now
        else:
            self._ready = [self._ctx.Event() for _ in range(self.n)]
            self._procs = [self._process(payload, ev) for ev in self._ready]
            self._starter = threading.Thread(target=_start_all, args=(self._procs,), daemon=True,
                                             name="orchard-pool-start")
            self._starter.start()
        self._monitor = threading.Thread(target=self._watch, args=(payload,), daemon=True,
                                         name="orchard-pool-monitor")
        self._monitor.start()

    def _process(self, payload: str, ev):
        return self._ctx.Process(target=_worker_main, args=(self._q, payload, ev, None, os.getpid()), daemon=True)

    def _spawn(self, payload: str):
        ev = self._ctx.Event()
        p = self._process(payload, ev)
        p.start()  # a fork of the warm forkserver: milliseconds
        return p, ev

    def _watch(self, payload: str) -> None:
        self._starter.join()  # every worker of the first batch started (or failed to)
        while not self._stop.wait(1.0):
            for i, p in enumerate(list(self._procs)):
                if p._popen is not None and p.is_alive():
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
        if self.n and not any(_running(p) and ev.is_set() for p, ev in zip(self._procs, self._ready, strict=True)):
            raise RuntimeError("no worker process is ready yet (starting) or alive")

    def shutdown(self) -> None:
        self._stop.set()
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
        if self._starter is not None:
            self._starter.join(timeout=60)  # workers still being forked (shutdown during start-up)
        for _ in self._procs:
            try:
                self._q.put_nowait(None)
            except (queue_mod.Full, ValueError, OSError):
                pass
        for p in self._procs:
            if p._popen is None:  # never started
                continue
            p.join(timeout=2)
            if p.is_alive():
                p.terminate()
                p.join(timeout=2)
        if self._q is not None:
            self._q.close()
            self._q.join_thread()
        # drop the pool's queue, events and process objects now, so that their semaphores are released by
        # their finalizers: uvicorn re-raises SIGTERM after shutdown, and the exit-time finalizers never run
        self._procs, self._ready, self._q, self._adopted, self._starter = [], [], None, None, None
        import gc

        gc.collect()
