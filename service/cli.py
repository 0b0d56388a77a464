"""The ``orchard`` command: serve, worker, migrate, keys, export-openapi."""

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


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


REFUSAL = """orchard: refusing to serve on {host}:{port} without an API key: anyone who reaches this address could
read, train, predict and delete everything. Do one of:
  * create the first admin key (printed once; keep it) and start again:
        orchard keys create --name admin --scopes admin
    in a container, on its data volume:
        docker run --rm -v orchard-data:/data <image> keys create --name admin --scopes admin
  * or give one: ORCHARD_ADMIN_KEY=<32 or more random characters, e.g. `openssl rand -base64 32`>
  * or serve without keys on a network you trust: ORCHARD_AUTH=off
  * or bind to loopback: --host 127.0.0.1
See docs/security.md."""


def check_bind(settings) -> str | None:
    """The reason `orchard serve` must not start (a non-loopback bind with no key and auth not off), or None."""
    if is_loopback(settings.host) or settings.auth == "off" or settings.admin_key is not None:
        return None
    from .storage.metadata import MetadataStore

    if settings.resolved_database_url().startswith("sqlite"):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    meta = MetadataStore(settings.resolved_database_url())
    try:
        meta.upgrade_schema()
        if meta.any_key():
            return None
    finally:
        meta.dispose()
    return REFUSAL.format(host=settings.host, port=settings.port)


def cmd_serve(args) -> int:
    settings = _settings(host=args.host, port=args.port, data_dir=args.data_dir, workers=args.workers,
                         access_log=args.access_log)
    refused = _check_data_dir(settings)  # first: the files check_bind's database opening creates are private
    if refused:
        return refused
    refusal = check_bind(settings)
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
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

    # header and body read timeouts and the send timeout at the protocol level (service/server.py): they hold for
    # every route
    # no `server: uvicorn` header on every answer: it names the software to anyone probing, and costs a header
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level.lower(),
                log_config=None, access_log=False, server_header=False,
                http=timed_protocol(settings.header_timeout_s, settings.body_timeout_s, settings.send_timeout_s))
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


def _key_store(args):
    from .services.audit import AuditLog
    from .services.key_sync import FileStamp, RedisKeySync
    from .storage.metadata import MetadataStore

    settings = _settings(data_dir=args.data_dir)
    if settings.resolved_database_url().startswith("sqlite"):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    meta = MetadataStore(settings.resolved_database_url())
    meta.upgrade_schema()
    if settings.queue_url:
        sync = RedisKeySync(settings.queue_url, settings.queue_name, lambda: None)
    else:
        sync = FileStamp(settings.data_dir)
    return meta, sync, AuditLog(meta)


def _audit_cli(audit, action: str, target: str | None, project: str | None, status: int) -> None:
    import getpass

    audit.write({"key_id": None, "key_name": f"cli:{getpass.getuser()}", "project": project, "method": "CLI",
                 "route": f"orchard keys {action}", "action": f"{action}_key", "target_id": target, "status": status,
                 "request_id": None, "client": None})


def cmd_keys(args) -> int:
    """Create, list and revoke API keys in the metadata store (the running servers learn it before their next
    request: services/key_sync.py)."""
    import datetime as dt

    from .errors import ProblemError
    from .services.keys import create_key, key_view
    from .storage.metadata import utcnow

    meta, sync, audit = _key_store(args)

    def out(obj) -> None:
        print(json.dumps(obj, default=lambda v: v.isoformat() if isinstance(v, dt.datetime) else str(v), indent=2))

    try:
        if args.keys_command == "create":
            expires = None
            if args.expires_at:
                expires = dt.datetime.fromisoformat(args.expires_at)
                if expires.tzinfo is None:
                    expires = expires.replace(tzinfo=dt.UTC)
            elif args.expires_in_days:
                expires = utcnow() + dt.timedelta(days=args.expires_in_days)
            try:
                row, token = create_key(meta, args.name, [s.strip() for s in args.scopes.split(",") if s.strip()],
                                        args.project, expires)
            except ProblemError as exc:
                print(f"orchard keys create: {exc.detail}", file=sys.stderr)
                return 2
            sync.notify()
            _audit_cli(audit, "create", row["id"], row["project"], 201)
            out({**key_view(row), "key": token})
            print("store the key now: it is shown only this once", file=sys.stderr)
        elif args.keys_command == "list":
            rows, _ = meta.list_keys(10_000, 0, project=args.project)
            out([key_view(r) for r in rows])
        else:
            if not meta.revoke_key(args.key_id, utcnow()):
                print(f"orchard keys revoke: no key {args.key_id!r}", file=sys.stderr)
                return 1
            sync.notify()
            _audit_cli(audit, "revoke", args.key_id, None, 204)
            print(f"revoked {args.key_id}", file=sys.stderr)
    finally:
        sync.close()
        meta.dispose()
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
    k = sub.add_parser("keys", help="create, list or revoke API keys (docs/security.md)")
    k.add_argument("--data-dir", type=Path, default=None, help="data directory (default ./orchard-data)")
    ks = k.add_subparsers(dest="keys_command", required=True)
    kc = ks.add_parser("create", help="create a key and print it (once)")
    kc.add_argument("--name", required=True)
    kc.add_argument("--scopes", required=True, help="comma-separated: read, predict, train, admin")
    kc.add_argument("--project", default=None, help="the key's project (default: default)")
    kc.add_argument("--expires-at", default=None, help="RFC 3339 time the key stops working (UTC if no zone)")
    kc.add_argument("--expires-in-days", type=float, default=None, help="or: days from now")
    kl = ks.add_parser("list", help="list keys (never the keys themselves)")
    kl.add_argument("--project", default=None)
    kr = ks.add_parser("revoke", help="revoke a key (refused from the next request on)")
    kr.add_argument("key_id")
    k.set_defaults(func=cmd_keys)
    e = sub.add_parser("export-openapi", help="write the OpenAPI document")
    e.add_argument("--output", "-o", default="openapi/openapi.json")
    e.set_defaults(func=cmd_export_openapi)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
