"""The ``orchard`` command: serve, worker, migrate, export-openapi."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _settings(**overrides):
    from .settings import Settings

    clean = {k: v for k, v in overrides.items() if v is not None}
    return Settings(**clean)


def cmd_serve(args) -> int:
    settings = _settings(host=args.host, port=args.port, data_dir=args.data_dir, workers=args.workers,
                         access_log=args.access_log)
    refused = _check_data_dir(settings)
    if refused:
        return refused
    from .queue.embedded import prestart

    prestart(settings)  # the training workers import in parallel with the API's imports below
    from .app import create_app
    from .observability import configure_logging

    configure_logging(settings.log_level, settings.log_format)
    app = create_app(settings, freeze_gc=True)
    import uvicorn

    _flush_logs_on_signals()
    # A worker thread busy in Python (a large predict, a cold load) keeps the GIL until the interpreter asks it
    # to switch; the event loop needs it back after every wait, so each of its steps could wait that long. 1 ms
    # instead of 5 keeps /health/live and small predicts prompt meanwhile (docs/decisions/model-cache.md).
    sys.setswitchinterval(0.001)
    # uvicorn logs through the root logger (JSON lines); the access log is Orchard's own (with request ids)
    from .server import timed_protocol

    # header and body read timeouts at the protocol level (service/server.py): they hold for every route
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level.lower(),
                log_config=None, access_log=False,
                http=timed_protocol(settings.header_timeout_s, settings.body_timeout_s))
    return 0


def _check_data_dir(settings) -> int:
    """The data directory made private (before any process starts, so that the training workers inherit the
    umask) and the signing key read or created: 2 with the reason on stderr when the key is refused."""
    from .storage.files import SecretKeyError, private_data_dir

    private_data_dir(settings.data_dir)
    try:
        settings.resolved_secret()
    except SecretKeyError as exc:
        print(f"orchard: refusing to start: {exc}", file=sys.stderr)
        return 2
    return 0


def _flush_logs_on_signals() -> None:
    """uvicorn shuts down on SIGTERM/SIGINT, restores the handlers it found and raises the signal again: these
    handlers write out the buffered log lines (the shutdown messages) before the default action ends the process."""
    import signal

    from .observability import flush_logs

    def handler(signum, frame):
        flush_logs()
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)


def cmd_worker(args) -> int:
    from .queue.rq_backend import run_worker

    settings = _settings(data_dir=args.data_dir)
    if not settings.queue_url:
        print("orchard worker needs ORCHARD_QUEUE_URL=redis://... (the embedded queue runs inside `orchard serve`)",
              file=sys.stderr)
        return 2
    refused = _check_data_dir(settings)
    if refused:
        return refused
    from .observability import configure_logging

    configure_logging(settings.log_level, settings.log_format)
    run_worker(settings, burst=args.burst)
    return 0


def cmd_migrate(args) -> int:
    """Create or upgrade the metadata schema (also done automatically, under a lock, by serve and worker)."""
    from .storage.metadata import MetadataStore
    from .storage.schema import current_revision, head_revision

    settings = _settings(data_dir=args.data_dir, database_url=args.database_url)
    if settings.resolved_database_url().startswith("sqlite"):
        from .storage.files import private_data_dir

        private_data_dir(settings.data_dir)
    meta = MetadataStore(settings.resolved_database_url())
    try:
        if args.check:
            with meta.engine.connect() as conn:
                current = current_revision(conn)
            head = head_revision()
            print(f"schema at revision {current or 'none'}; newest {head}")
            return 0 if current == head else 1
        revision = meta.upgrade_schema()
    finally:
        meta.dispose()
    print(f"schema at revision {revision}")
    return 0


def openapi_document() -> dict:
    from .app import create_app
    from .settings import Settings

    return create_app(Settings(workers=0)).openapi()


def cmd_export_openapi(args) -> int:
    text = json.dumps(openapi_document(), indent=2, sort_keys=False) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="orchard", description="Orchard: classical ML models over REST")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the API server with the embedded job queue")
    s.add_argument("--host", default=None, help="bind address (default 127.0.0.1, ORCHARD_HOST)")
    s.add_argument("--port", type=int, default=None, help="port (default 8000, ORCHARD_PORT)")
    s.add_argument("--data-dir", type=Path, default=None, help="data directory (default ./orchard-data)")
    s.add_argument("--workers", type=int, default=None, help=f"training worker processes (default {os.cpu_count()})")
    s.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=None,
                   help="log every request (default on, ORCHARD_ACCESS_LOG)")
    s.set_defaults(func=cmd_serve)
    w = sub.add_parser("worker", help="run an RQ worker (scaled-out mode, needs ORCHARD_QUEUE_URL)")
    w.add_argument("--data-dir", type=Path, default=None)
    w.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    w.set_defaults(func=cmd_worker)
    m = sub.add_parser("migrate", help="create or upgrade the metadata database schema (Alembic)")
    m.add_argument("--data-dir", type=Path, default=None, help="data directory (default ./orchard-data)")
    m.add_argument("--database-url", default=None, help="SQLAlchemy URL (default ORCHARD_DATABASE_URL, else SQLite)")
    m.add_argument("--check", action="store_true", help="only report the revision; exit 1 if not the newest")
    m.set_defaults(func=cmd_migrate)
    e = sub.add_parser("export-openapi", help="write the OpenAPI document")
    e.add_argument("--output", "-o", default="openapi/openapi.json")
    e.set_defaults(func=cmd_export_openapi)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
