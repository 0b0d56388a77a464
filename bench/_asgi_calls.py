"""Harness for ``bench/service.py --callgrind``: N single-row predict calls straight into an ASGI app, no HTTP.

    python bench/_asgi_calls.py orchard|orchard-v2|orchard-stdlib|bare N DATA_DIR MODEL_ID BODY_FILE [HEADER_LENGTH]

``orchard``: ``/v1/models/{id}/predict``; ``orchard-stdlib``: the same, its requests recorded by
bench/_stdlib_recorder.py (the standard library's path) instead of ``RequestRecorder``; ``orchard-v2``: ``/v2/models/{id}/infer`` (with HEADER_LENGTH: the
binary tensor extension's ``Inference-Header-Content-Length``).

Run under ``valgrind --tool=callgrind --collect-atstart=no --toggle-collect=functools_reduce``: only the N calls
(driven by ``functools.reduce``, after 50 warm-up calls and ``gc.freeze()``, as ``orchard serve`` freezes its
start-up heap) are counted, so instructions / N is the app's own cost per request without start-up, uvicorn
or the kernel. The last call ends with ``flush_logs()``, so work Orchard defers (metrics and access lines, made
in batches) is counted too. ``receive`` and ``send`` never suspend, so each call completes in one ``coroutine.send``.
Orchard settings come from the environment (``ORCHARD_ACCESS_LOG=false`` etc.). The job sweep's interval
(``ORCHARD_JOB_SWEEP_INTERVAL``) defaults here to an hour: the reconciler's pass every 10 s, several million
instructions on its own thread, otherwise falls inside the counted calls at random (valgrind slows the wall
clock, not the interval) and moved the same build's counts by up to 6% between runs. For the same reason the
log flusher's tick (every 0.5 s, on its own thread, which callgrind does not count: collection is toggled per
thread) is moved to an hour: it drained the requests queued since the last tick outside the count, so the share
of the access-log and metrics work counted depended on valgrind's speed (and the machine's load); now every
batch is drained by the calls (at ``RequestRecorder.BATCH`` requests, and by the last call's ``flush_logs()``),
as a busy server drains them.
"""

import asyncio
import functools
import gc
import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    which, n, data_dir, model_id, body_file = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]
    hlen = sys.argv[6] if len(sys.argv) > 6 else None
    body = Path(body_file).read_bytes()
    extra = [(b"inference-header-content-length", hlen.encode())] if hlen else []

    def scope(path: str) -> dict:
        return {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b"",
                "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                            (b"content-length", b"%d" % len(body)), *extra],
                "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 8000), "scheme": "http",
                "http_version": "1.1", "root_path": "", "asgi": {"version": "3.0"}, "state": {}}

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        pass

    def calls(app, path: str, finish=None):
        def one(done: int, i: int) -> int:
            coro = app(scope(path), receive, send)
            try:
                coro.send(None)
            except StopIteration:
                if i == n - 1 and finish is not None:
                    finish()  # still counted: work the app deferred (Orchard's queued metrics and access lines)
                return done + 1
            raise RuntimeError("the app suspended: the harness needs calls that complete at once")

        for i in range(50):  # warm-up calls (negative indices: never the last measured call)
            one(0, -1 - i)
        if finish is not None:
            finish()
        gc.collect()
        gc.freeze()
        assert functools.reduce(one, range(n), 0) == n

    if which == "bare":
        from bench._bare_asgi import app

        calls(app, "/")
        return
    os.environ.update(ORCHARD_DATA_DIR=data_dir, ORCHARD_WORKERS="0")
    os.environ.setdefault("ORCHARD_JOB_SWEEP_INTERVAL", "3600")  # no reconciler pass among the counted calls
    from service.app import create_app
    from service.observability import configure_logging, flush_logs

    configure_logging()
    for handler in logging.getLogger().handlers:  # no flusher tick among the counted calls (see above)
        if hasattr(handler, "interval"):
            handler.interval = 3600.0
    app = create_app()
    if which == "orchard-stdlib":  # the standard library's recording path instead (bench/_stdlib_recorder.py)
        from bench._stdlib_recorder import StdlibRecorder

        stdlib = StdlibRecorder()
        app.predict_front_door.record = stdlib.record
        flush_logs = stdlib.flush  # noqa: F811 - what the last call must finish is the listener's queue

    async def run():
        async with app.router.lifespan_context(app):
            app.state.runtime.plane.model(model_id)  # loaded before the calls (a cold load would suspend)
            path = f"/v2/models/{model_id}/infer" if which == "orchard-v2" else f"/v1/models/{model_id}/predict"
            calls(app, path, flush_logs)

    asyncio.run(run())


if __name__ == "__main__":
    main()
