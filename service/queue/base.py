"""The JobQueue interface: the API enqueues job ids; workers run them to a terminal state."""

from __future__ import annotations

from typing import Protocol


class JobQueue(Protocol):
    def start(self) -> None: ...

    def enqueue(self, job_id: str) -> None: ...

    def depth(self) -> int: ...

    def ping(self) -> None: ...

    def shutdown(self) -> None: ...
