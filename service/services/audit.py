"""The audit log: one row per mutating call (who, project, what, target, status, request id, when), written
by the security gate (service/security.py) and by ``orchard keys``; read by admins through ``GET /v1/audit``."""

from __future__ import annotations

import datetime as dt

from ..storage.metadata import MetadataStore, audit_log, utcnow

FIELDS = ("id", "at", "key_id", "key_name", "project", "method", "route", "action", "target_id", "status",
          "request_id", "client")


class AuditLog:
    def __init__(self, meta: MetadataStore):
        self.meta = meta

    def write(self, row: dict) -> None:
        self.meta.insert_audit({**row, "at": utcnow()})

    def query(self, limit: int, offset: int, *, key_id: str | None = None, action: str | None = None,
              status: str | None = None, project: str | None = None, since: dt.datetime | None = None,
              until: dt.datetime | None = None) -> tuple[list[dict], int]:
        """Newest first. ``status``: a code (``403``) or a class (``4xx``)."""
        c = audit_log.c
        conds = []
        if key_id is not None:
            conds.append(c.key_id == key_id)
        if action is not None:
            conds.append(c.action == action)
        if project is not None:
            conds.append(c.project == project)
        if status is not None:
            if status.endswith("xx"):
                base = int(status[0]) * 100
                conds += [c.status >= base, c.status < base + 100]
            else:
                conds.append(c.status == int(status))
        if since is not None:
            conds.append(c.at >= since)
        if until is not None:
            conds.append(c.at < until)
        rows, total = self.meta.list_audit(limit, offset, conds)
        return [{k: r.get(k) for k in FIELDS} for r in rows], total
