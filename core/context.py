"""Progress reporting and cooperative cancellation for long fits.

A fit calls ``ctx.step(done, total, **metrics)`` once per iteration, epoch,
tree or EM step.  The context forwards progress to a callback (throttled) and
raises :class:`FitCancelled` as soon as ``is_cancelled()`` says the job was
cancelled.  Nested fits take ``ctx.child(start, stop)`` so that their steps map
onto a slice of the parent's progress and stay cancellable.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["FitCancelled", "FitContext", "NULL_CONTEXT"]


class FitCancelled(Exception):
    """Raised inside ``fit`` when the job that runs it was cancelled."""


class FitContext:
    """Progress sink and cancellation source for one fit.

    Parameters
    ----------
    on_progress:
        ``callback(fraction, metrics)`` with ``fraction`` in [0, 1]; called at
        most once per ``min_interval`` seconds, plus once at completion.
    is_cancelled:
        returns True when the fit must stop; checked at every step (cheaply:
        it is called at most every ``cancel_interval`` seconds).
    """

    def __init__(
        self,
        on_progress: Callable[[float, dict], None] | None = None,
        is_cancelled: Callable[[], bool] | None = None,
        *,
        min_interval: float = 0.25,
        cancel_interval: float = 0.05,
        _start: float = 0.0,
        _stop: float = 1.0,
        _root: FitContext | None = None,
    ):
        self._on_progress = on_progress
        self._is_cancelled = is_cancelled
        self.min_interval = min_interval
        self.cancel_interval = cancel_interval
        self._start = _start
        self._stop = _stop
        self._root = _root if _root is not None else self
        self._last_report = -1e18
        self._last_cancel_check = -1e18
        self._cancelled = False
        self.last_fraction = 0.0

    # -- public ----------------------------------------------------------------
    def step(self, done: float, total: float | None = None, **metrics) -> None:
        """Record that ``done`` of ``total`` units are finished; maybe raise FitCancelled."""
        root = self._root
        now = time.monotonic()
        if root._is_cancelled is not None and (
            root._cancelled or now - root._last_cancel_check >= root.cancel_interval
        ):
            root._last_cancel_check = now
            if root._cancelled or root._is_cancelled():
                root._cancelled = True
                raise FitCancelled("fit cancelled")
        if total:
            frac = min(max(done / total, 0.0), 1.0)
        else:
            frac = 0.0
        absolute = self._start + (self._stop - self._start) * frac
        root.last_fraction = max(root.last_fraction, absolute)
        if root._on_progress is not None and (
            now - root._last_report >= root.min_interval or absolute >= 1.0
        ):
            root._last_report = now
            root._on_progress(root.last_fraction, metrics)

    def check_cancelled(self) -> None:
        """Raise FitCancelled if the job was cancelled (no progress recorded)."""
        root = self._root
        if root._is_cancelled is not None and (root._cancelled or root._is_cancelled()):
            root._cancelled = True
            raise FitCancelled("fit cancelled")

    def child(self, start: float, stop: float) -> FitContext:
        """A context whose progress 0..1 maps to ``start..stop`` of this one's."""
        span = self._stop - self._start
        return FitContext(
            _start=self._start + span * start,
            _stop=self._start + span * stop,
            _root=self._root,
        )

    # a context is picklable only without its callbacks (worker processes get a fresh one)
    def __reduce__(self):
        return (FitContext, ())


NULL_CONTEXT = FitContext()
