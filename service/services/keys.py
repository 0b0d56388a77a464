"""API keys: creation (random, shown once, stored as a SHA-256), the principal a key stands for, and the
in-process key ring every request is checked against (no database round trip per request).

A key is ``orch_`` + 43 URL-safe characters (32 random bytes). Only its SHA-256 is stored: a fast hash is the
right one for a random 256-bit token (nothing to brute-force, unlike a password; see
docs/decisions/api-keys.md). The ring holds every key row in memory, keyed by hash; it is reloaded when a
key changes anywhere (``key_sync.py``: a stamp file in embedded mode, Redis pub/sub with acknowledgements in the
scaled-out mode), so revocation and expiry hold from the next request on, on every replica.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import re
import secrets
import time
import uuid
from dataclasses import dataclass

from ..errors import ProblemError, invalid
from ..storage.metadata import MetadataStore, utcnow

log = logging.getLogger("orchard.auth")

SCOPES = ("read", "predict", "train", "admin")
DEFAULT_PROJECT = "default"
PROJECT_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
_PROJECT = re.compile(PROJECT_PATTERN)
KEY_PREFIX = "orch_"
MIN_ADMIN_KEY_CHARS = 32


class Unauthorized(ProblemError):
    status, title = 401, "Unauthorized"

    def __init__(self, detail: str):
        super().__init__(detail, headers={"WWW-Authenticate": 'Bearer realm="orchard"'})


class Forbidden(ProblemError):
    status, title = 403, "Forbidden"


class TooManyRequests(ProblemError):
    status, title = 429, "Too Many Requests"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who makes a request: a key (its id, name, scopes, project) or the anonymous user of an open server."""

    key_id: str | None
    name: str
    scopes: frozenset
    project: str
    expires_at: float | None = None  # Unix time
    revoked: bool = False
    admin: bool = False  # holds the admin scope (which implies every other)

    def allows(self, scope: str) -> bool:
        """admin implies every scope."""
        return scope in self.scopes or "admin" in self.scopes


ANONYMOUS = Principal(None, "anonymous", frozenset(SCOPES), DEFAULT_PROJECT, admin=True)


def hash_key(token: str | bytes) -> str:
    return hashlib.sha256(token.encode() if isinstance(token, str) else token).hexdigest()


def new_token() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def check_project(project: str, loc: list) -> str:
    if not _PROJECT.match(project):
        raise invalid(loc, f"{project!r} is not a project name: lower-case letters, digits, '-' and '_', "
                           "starting with a letter or digit, at most 63 characters")
    return project


def check_scopes(scopes: list[str], loc: list) -> list[str]:
    if not scopes:
        raise invalid(loc, f"give at least one scope ({', '.join(SCOPES)})")
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown:
        raise invalid(loc, f"unknown scope {unknown[0]!r}; scopes are {', '.join(SCOPES)}")
    return sorted(set(scopes), key=SCOPES.index)


def create_key(meta: MetadataStore, name: str, scopes: list[str], project: str | None = None,
               expires_at: dt.datetime | None = None, token: str | None = None) -> tuple[dict, str]:
    """Store a new key; returns (its row, the key itself: shown once, never stored)."""
    scopes = check_scopes(scopes, ["body", "scopes"])
    project = check_project(project or DEFAULT_PROJECT, ["body", "project"])
    now = utcnow()
    if expires_at is not None:
        if expires_at.tzinfo is None:
            raise invalid(["body", "expires_at"], "give a time zone (e.g. 2030-01-01T00:00:00Z)")
        if expires_at <= now:
            raise invalid(["body", "expires_at"], f"{expires_at.isoformat()} is in the past")
    token = token or new_token()
    row = {"id": f"key_{uuid.uuid4().hex[:20]}", "name": name, "key_hash": hash_key(token),
           "prefix": token[:9], "scopes": scopes, "project": project, "created_at": now,
           "expires_at": expires_at, "revoked_at": None}
    meta.insert_key(row)
    return row, token


def key_view(row: dict) -> dict:
    return {k: row.get(k) for k in ("id", "name", "prefix", "scopes", "project", "created_at", "expires_at",
                                    "revoked_at")}


def _principal(row: dict) -> Principal:
    exp = row.get("expires_at")
    return Principal(row["id"], row["name"], frozenset(row["scopes"]), row["project"],
                     exp.timestamp() if exp is not None else None, row.get("revoked_at") is not None,
                     "admin" in row["scopes"])


class KeyRing:
    """Every key in memory, by hash. ``sync`` tells when another process changed the keys (``key_sync.py``):
    ``changed()`` is called before each lookup and is cheap (a stat, or a flag set by a subscriber thread);
    while ``sync.live`` is false (Redis unreachable) lookups read the database instead of the stale copy."""

    def __init__(self, meta: MetadataStore, sync, mode: str = "auto"):
        self.meta = meta
        self.sync = sync
        self.mode = mode  # auto | on | off (ORCHARD_AUTH)
        self.by_hash: dict[bytes, Principal] = {}  # SHA-256 digest -> principal
        self.any = False
        self.enforced = mode == "on"
        self.reload()

    def reload(self) -> None:
        rows = self.meta.all_keys()
        self.by_hash = {bytes.fromhex(r["key_hash"]): _principal(r) for r in rows}
        self.any = bool(rows)
        self.enforced = self.mode == "on" or (self.mode == "auto" and self.any)

    def required(self) -> bool:
        """Are keys required now? (reloads first if another process changed them)"""
        if self.sync.changed():
            self.reload()
        return self.enforced

    def authenticate(self, authorization: bytes | None) -> Principal:
        """The principal of an ``Authorization`` header value; Unauthorized (401) otherwise. Call after
        ``required()`` returned True."""
        if authorization is None:
            raise Unauthorized("this server requires an API key: send Authorization: Bearer <key>")
        token = authorization[7:].strip()
        if authorization[:7].lower() != b"bearer " or not token:
            raise Unauthorized("the Authorization header must be 'Bearer <key>'")
        h = hashlib.sha256(token).digest()
        if self.sync.live:
            p = self.by_hash.get(h)
        else:  # the change feed is down: the database is the truth, per request, until it is back
            row = self.meta.key_by_hash(h.hex())
            p = _principal(row) if row is not None else None
        if p is None:
            raise Unauthorized("unknown API key")
        if p.revoked:
            raise Unauthorized(f"API key {p.key_id} was revoked")
        if p.expires_at is not None and time.time() >= p.expires_at:
            raise Unauthorized(f"API key {p.key_id} expired at "
                               f"{dt.datetime.fromtimestamp(p.expires_at, dt.UTC).isoformat()}")
        return p

    def changed_here(self) -> None:
        """This process changed a key: reload now and tell the other processes (waits for their reload)."""
        self.reload()
        self.sync.notify()


def ensure_admin_key(meta: MetadataStore, token: str) -> str:
    """ORCHARD_ADMIN_KEY: create it as an admin key of the default project unless it exists. Returns its id."""
    if len(token) < MIN_ADMIN_KEY_CHARS:
        raise ValueError(f"ORCHARD_ADMIN_KEY must be at least {MIN_ADMIN_KEY_CHARS} characters long (e.g. "
                         "`openssl rand -base64 32`)")
    row = meta.key_by_hash(hash_key(token))
    if row is not None:
        if row["revoked_at"] is not None:
            log.warning("ORCHARD_ADMIN_KEY is the revoked key %s: it is not accepted", row["id"])
        return row["id"]
    try:
        row, _ = create_key(meta, "admin (ORCHARD_ADMIN_KEY)", ["admin"], DEFAULT_PROJECT, token=token)
    except Exception:  # noqa: BLE001 - another replica created it at the same moment (unique hash)
        row = meta.key_by_hash(hash_key(token))
        if row is None:
            raise
    log.info("ORCHARD_ADMIN_KEY accepted as admin key %s", row["id"])
    return row["id"]
