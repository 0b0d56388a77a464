"""How a running job enqueues jobs of its own (the trials of a model-selection job).

Each worker sets the enqueue function of its queue backend once (the embedded pool: the pool's queue; RQ: an
RQ queue on the same Redis). A parent job creates child job rows and enqueues them here; whatever no other
worker has claimed when the parent is free, the parent claims and runs itself (the claim is the same
conditional update every worker uses), so a child never runs twice and a lone worker still makes progress.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger("orchard.queue")
_enqueue: Callable[[str], None] | None = None


def set_enqueue(fn: Callable[[str], None] | None) -> None:
    global _enqueue
    _enqueue = fn


def has_enqueue() -> bool:
    """Whether this process has set an enqueue function."""
    return _enqueue is not None


def enqueue(job_id: str) -> bool:
    """Hand ``job_id`` to the other workers; False when this process has no queue (the parent runs it)."""
    if _enqueue is None:
        return False
    try:
        _enqueue(job_id)
        return True
    except Exception:  # noqa: BLE001 - the parent runs what it could not hand out
        log.warning("could not enqueue child job %s; its parent will run it", job_id, exc_info=True)
        return False
