"""Embedded job queue: a pool of worker processes inside ``orchard serve``.

Workers are forked by a multiprocessing *forkserver* (never by the API process
itself, which runs threads): a fresh process that limits BLAS to one thread and
imports the training stack once (``worker_preload``), so each worker, and each
worker restarted after a crash, starts warm in milliseconds.

**One pipe per worker, no shared lock.** A dispatcher thread in the API process
owns the backlog (job ids in submission order; the jobs themselves are rows in
the metadata store) and hands one job at a time to an idle worker over that
worker's own pipe; the worker answers ``done`` on it. Nothing is shared between
workers, so a worker killed at any moment (idle or busy, even mid-message)
breaks only its own pipe: the dispatcher sees its sentinel, declares its job's
attempt lost (``services/jobs.lose``: re-queued or failed), and forks a
replacement. (A shared ``multiprocessing.Queue`` wedged the pool for good when
an idle worker died holding its read lock.) ``workers=0`` runs jobs on threads
of the API process (for tests and tiny installs).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import socket
import threading
import time
from collections import deque
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


class _Slot:
    """One worker process and the API's end of its pipe (only the dispatcher thread reads or writes it)."""

    def __init__(self, ctx, payload: str):
        self.conn, child = ctx.Pipe(duplex=True)
        self._child = child
        self.process = ctx.Process(target=_worker_main, args=(child, payload, os.getpid()), daemon=True)
        self.started = False
        self.ready = False      # connected to the stores, waiting for work
        self.job: str | None = None  # the job id handed to it, until it answers done
        self.stale_since: float | None = None

    def start(self) -> None:
        try:
            self.process.start()  # a fork of the warm forkserver: milliseconds (after its preload)
            self.started = True
        finally:
            self._child.close()  # the worker holds its end now

    @property
    def pid(self):
        return self.process.pid

    def alive(self) -> bool:
        """Started and not ended. Looks at the sentinel without reaping: only the dispatcher reads exit codes."""
        try:
            return self.started and not _wait_ready([self.process.sentinel], 0)
        except ValueError:
            return False


def _start_all(slots: list) -> None:
    """Start the worker processes (from a thread: with a forkserver, ``Process.start`` returns only when the
    child is forked, i.e. after the forkserver's preload, and the API's own imports must go on meanwhile)."""
    for slot in slots:
        try:
            slot.start()
        except Exception:  # noqa: BLE001 - the dispatcher replaces what did not start
            log.exception("could not start a worker process")


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
    slots = [_Slot(ctx, payload) for _ in range(settings.workers)]
    starter = threading.Thread(target=_start_all, args=(slots,), daemon=True, name="orchard-pool-start")
    starter.start()
    _prestarted = {"payload": payload, "slots": slots, "starter": starter}


def _exit_with_api(api_pid: int | None) -> None:
    """End this worker when the API process that owns the pool is gone. A shutdown sends every worker a stop
    message, but a SIGKILL (or the OOM killer) gives the API no time to, and a forkserver's child is not the
    API's child: an idle worker sees its pipe end, a busy one would fit on. A daemon thread waits on a pidfd of
    the API process (Linux >= 5.3: no polling, immune to pid reuse) or else checks the pid every second. A job
    this worker was running stays ``running`` in the store until its lease expires; a reconciler (the API's
    next start, or another replica) then re-queues or fails it."""
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


def _worker_main(conn, settings_json: str, api_pid: int | None = None) -> None:
    """A worker: waits for ``go`` (the stores exist), says ``ready``, then runs the job ids it receives one at a
    time, answering ``done`` after each. Ends on ``None``, on its pipe's end (the API is gone), or with the API."""
    _exit_with_api(api_pid)
    # BLAS threads: one per worker process, so N workers do not oversubscribe the cores (already set, before
    # NumPy loaded, by the forkserver's preload; here for the spawn fallback)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    from ..services.jobs import execute_job  # preloaded by the forkserver: no import cost here
    from ..services.resources import apply_worker_memory_limit
    from ..settings import Settings
    from ..storage.stores import open_stores
    from . import fanout

    settings = Settings.model_validate_json(settings_json)
    apply_worker_memory_limit(settings.worker_memory_bytes)  # a runaway fit fails its job, not the host
    from ..observability import configure_logging

    configure_logging(settings.log_level, settings.log_format)  # JSON lines like the API process
    try:
        if conn.recv() != "go":
            return
        meta, art = open_stores(settings)
        # model-selection jobs hand their trials to the other workers through the dispatcher
        fanout.set_enqueue(lambda job_id: conn.send(("enqueue", job_id)))
        conn.send("ready")  # imports done: this worker starts a job in milliseconds from now on
        while True:
            job_id = conn.recv()
            if job_id is None:
                return
            try:
                execute_job(meta, art, job_id, settings)
            except Exception:  # noqa: BLE001 - keep the worker alive
                log.exception("job %s: worker error", job_id)
            conn.send("done")
    except (EOFError, OSError):  # the API process closed the pipe
        return


class EmbeddedQueue:
    def __init__(self, settings: Settings, meta: MetadataStore, art):
        self.settings = settings
        self.meta = meta
        self.art = art
        self.n = settings.workers
        self._ctx = pool_context() if self.n > 0 else None
        self._payload = settings.model_dump_json()
        self._slots: list[_Slot] = []
        self._starter: threading.Thread | None = None
        self._adopted = None
        global _prestarted
        if self.n > 0 and _prestarted is not None and _prestarted["payload"] == self._payload:
            self._adopted, _prestarted = _prestarted, None
        self._threads: ThreadPoolExecutor | None = None
        self._stop = threading.Event()
        self._dispatcher: threading.Thread | None = None
        self._lock = threading.Lock()
        self._backlog: deque[str] = deque()
        self._inflight: set[str] = set()  # thread mode: submitted and not finished
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._host = socket.gethostname()

    def start(self) -> None:
        if self.n == 0:
            self._threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="orchard-job")
            from . import fanout

            fanout.set_enqueue(self.enqueue)
            return
        if self._adopted is not None:
            self._slots, self._starter = self._adopted["slots"], self._adopted["starter"]
        else:
            self._slots = [_Slot(self._ctx, self._payload) for _ in range(self.n)]
            self._starter = threading.Thread(target=_start_all, args=(self._slots,), daemon=True,
                                             name="orchard-pool-start")
            self._starter.start()
        self._dispatcher = threading.Thread(target=self._dispatch_loop, daemon=True, name="orchard-pool-dispatch")
        self._dispatcher.start()

    # -- the dispatcher thread: the only reader/writer of the pipes and reaper of the workers ------------------
    def _dispatch_loop(self) -> None:
        self._starter.join()  # every worker of the first batch started (or failed to)
        for slot in self._slots:
            self._go(slot)
        last_check = time.monotonic()
        while not self._stop.is_set():
            watched = {}
            for slot in self._slots:
                if slot.started:
                    watched[slot.conn] = slot
                    watched[slot.process.sentinel] = slot
            for obj in _wait_ready([*watched, self._wake_r], timeout=1.0):
                if obj == self._wake_r:
                    try:
                        os.read(self._wake_r, 4096)
                    except BlockingIOError:
                        pass
                    continue
                slot = watched[obj]
                if obj is slot.conn:
                    try:
                        msg = slot.conn.recv()
                    except (EOFError, OSError):
                        continue  # its sentinel tells the rest
                    if msg == "ready":
                        slot.ready = True
                    elif msg == "done":
                        slot.job, slot.stale_since = None, None
                    elif type(msg) is tuple and msg[0] == "enqueue":  # a running job's child (a trial)
                        self._push(msg[1])
            if self._stop.is_set():
                return
            for i, slot in enumerate(self._slots):
                if not slot.alive():
                    self._slots[i] = self._replace(slot)
            if time.monotonic() - last_check > min(1.0, self.settings.job_lease_timeout / 3):
                last_check = time.monotonic()
                self._stop_stale_workers()
            self._hand_out()

    def _go(self, slot: _Slot) -> None:
        if slot.started:
            try:
                slot.conn.send("go")
            except OSError:
                pass  # dead already: replaced by the loop

    def _hand_out(self) -> None:
        for slot in self._slots:
            if not (slot.ready and slot.job is None and slot.alive()):
                continue
            with self._lock:
                if not self._backlog:
                    return
                job_id = self._backlog.popleft()
            try:
                slot.conn.send(job_id)
                slot.job = job_id
            except OSError:
                with self._lock:
                    self._backlog.appendleft(job_id)  # the worker just died: the loop replaces it

    def _replace(self, slot: _Slot) -> _Slot:
        if slot.started:
            slot.process.join(timeout=1)  # reap it (this thread alone reads exit codes)
        code = slot.process.exitcode
        log.warning("worker pid %s exited with code %s%s; starting a new one", slot.pid, code,
                    f" while running job {slot.job}" if slot.job else "")
        if slot.job is not None:
            self._lost(slot.job, f"{self._host}:{slot.pid}", code)
        slot.conn.close()
        new = _Slot(self._ctx, self._payload)
        try:
            new.start()
            self._go(new)
        except Exception:  # noqa: BLE001 - the next round tries again; readiness reports the pool meanwhile
            log.exception("could not start a worker process")
        return new

    def _lost(self, job_id: str, worker: str, code) -> None:
        from ..services.jobs import lose

        try:
            job = self.meta.get_job(job_id)
            if job is None:
                return
            if job["status"] == "queued":  # died before it claimed the job: hand it to another worker
                self._push(job_id, front=True)
            elif job["status"] == "running" and job.get("worker") == worker:
                action = lose(self.meta, job, f"the worker process running this job died (exit code {code})",
                              self.settings.job_max_attempts)
                if action == "requeued":
                    self._push(job_id, front=True)
        except Exception:  # noqa: BLE001 - the reconciler catches up once the lease runs out
            log.exception("job %s: could not record its lost worker", job_id)

    def _stop_stale_workers(self) -> None:
        """A worker still busy with a job that has ended under it (timed out, failed by the reconciler after its
        lease expired) stops at its next progress step; one that does not within a lease is killed (and
        replaced)."""
        now = time.monotonic()
        for slot in self._slots:
            if slot.job is None or not slot.alive():
                continue
            job = self.meta.get_job(slot.job)
            mine = job is not None and job["status"] in ("queued", "running") and (
                job["status"] == "queued" or job.get("worker") == f"{self._host}:{slot.pid}")
            if mine:
                slot.stale_since = None
            elif slot.stale_since is None:
                slot.stale_since = now
            elif now - slot.stale_since > self.settings.job_lease_timeout:
                log.warning("worker pid %s still runs job %s, which ended under it; killing it", slot.pid, slot.job)
                slot.job = None
                slot.process.kill()

    # -- the JobQueue interface ----------------------------------------------------------------------------
    def _push(self, job_id: str, front: bool = False) -> None:
        with self._lock:
            if job_id in self._backlog:
                return
            if front:
                self._backlog.appendleft(job_id)
            else:
                self._backlog.append(job_id)
        try:
            os.write(self._wake_w, b"x")
        except (BlockingIOError, OSError):
            pass  # the pipe is full: the dispatcher is awake anyway

    def enqueue(self, job_id: str) -> None:
        if self.n == 0:
            from ..services.jobs import execute_job

            with self._lock:
                if job_id in self._inflight:
                    return
                self._inflight.add(job_id)
            self._threads.submit(self._run_thread, execute_job, job_id)
            return
        self._push(job_id)

    def _run_thread(self, execute_job, job_id: str) -> None:
        try:
            execute_job(self.meta, self.art, job_id, self.settings)
        finally:
            with self._lock:
                self._inflight.discard(job_id)

    def holds(self, job_id: str) -> bool:
        """Whether the pool has the job (in its backlog, or handed to a worker)."""
        with self._lock:
            if job_id in self._inflight or job_id in self._backlog:
                return True
        return any(slot.job == job_id for slot in list(self._slots))

    def depth(self) -> int:
        return self.meta.count_jobs("queued")

    def ping(self) -> None:
        if not self.n:
            return
        if self._dispatcher is None or not self._dispatcher.is_alive():
            raise RuntimeError("the pool's dispatcher is not running")
        if not any(slot.ready and slot.alive() for slot in list(self._slots)):
            raise RuntimeError("no worker process is ready (starting, or every worker died and none could be "
                               "started)")

    def shutdown(self) -> None:
        self._stop.set()
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
        if self._starter is not None:
            self._starter.join(timeout=60)  # workers still being forked (shutdown during start-up)
        if self._dispatcher is not None:
            self._dispatcher.join(timeout=5)
        for slot in self._slots:
            if slot.started:
                try:
                    slot.conn.send(None)
                except OSError:
                    pass
        for slot in self._slots:
            if not slot.started:
                continue
            slot.process.join(timeout=2)
            if slot.process.is_alive():
                slot.process.terminate()
                slot.process.join(timeout=2)
            slot.conn.close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._slots, self._adopted, self._starter = [], None, None
        import gc

        gc.collect()
