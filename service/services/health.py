"""Readiness: does each store the service needs answer (metadata store, artifact store, queue)?"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..errors import Unavailable

if TYPE_CHECKING:
    from ..runtime import Runtime


def pings(r: Runtime) -> Iterator[tuple[str, Exception | None]]:
    """``(name, error)`` of each store in turn, pinged when the iteration reaches it: the error its ping raised,
    None when it answered."""
    for name, ping in (("metadata", r.meta.ping), ("artifacts", r.art.ping), ("queue", r.queue.ping)):
        error = None
        try:
            ping()
        except Exception as exc:  # noqa: BLE001 - report any failure
            error = exc
        yield name, error


def readiness(r: Runtime) -> dict[str, str]:
    """Every store pinged: name -> "ok" or "failing: <error>"."""
    return {name: "ok" if error is None else f"failing: {error}" for name, error in pings(r)}


def require_ready(r: Runtime) -> None:
    """503 (``Unavailable``) naming the first store that does not answer; the ones after it are not pinged."""
    for name, error in pings(r):
        if error is not None:
            raise Unavailable(f"not ready: {name} not answering ({error})")
