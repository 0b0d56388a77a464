"""Resource guards of training: the memory estimate checked before a job is queued, and the address-space cap
every worker process runs under (docs/decisions/resource-guards.md)."""

from __future__ import annotations

import logging
import os

log = logging.getLogger("orchard.resources")


def machine_memory_bytes() -> int:
    """Memory this process may use: physical RAM, or the cgroup's limit when lower (a container's)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not Linux
        total = 8 << 30
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as fh:
                raw = fh.read().strip()
        except OSError:
            continue
        if raw.isdigit() and 0 < int(raw) < total:
            total = int(raw)
    return int(total)


def default_max_train_bytes() -> int:
    return machine_memory_bytes() // 2


def default_worker_memory_bytes() -> int:
    # a fit estimated within ORCHARD_MAX_TRAIN_BYTES (half the memory) plus the interpreter, libraries and the
    # loaded dataset fits; a runaway one is stopped while a quarter of the machine is left to the rest
    return max(1 << 30, machine_memory_bytes() * 3 // 4)


def apply_worker_memory_limit(limit: int) -> None:
    """Cap this process's address space (``RLIMIT_AS``) at ``limit`` bytes (0: no cap): an allocation past it
    raises MemoryError, which fails the job, instead of growing the process until the host or the OOM killer
    gives way. Never raises the hard limit."""
    if not limit:
        return
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    target = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    if soft != target:
        resource.setrlimit(resource.RLIMIT_AS, (target, hard))


def memory_error_message() -> str:
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        unlimited = resource.RLIM_INFINITY
    except (ImportError, OSError):  # pragma: no cover
        soft = unlimited = -1
    if soft != unlimited:
        return (f"training exceeded the worker memory limit of {soft} bytes (ORCHARD_WORKER_MEMORY_BYTES); "
                "train on fewer rows or with smaller parameters")
    return "training ran out of memory; train on fewer rows or with smaller parameters"


def human_bytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def fit_memory_estimate(cls, params: dict, n_rows: int, features: list[dict], target: dict | None):
    """(total bytes, FitMemory of the estimator) for training ``cls`` on a dataset's rows and chosen columns
    (column records as stored: type and summary), including the loaded columns themselves."""
    width = 0
    for f in features:
        cats = int((f.get("summary") or {}).get("n_categories") or 0)
        width += cats if f.get("type") == "categorical" and cats > 1 and not cls.native_categorical else 1
    n_outputs = 1
    if target is not None and cls.task == "classification":
        s = target.get("summary") or {}
        n_outputs = max(2, int(s.get("n_categories") or 2)) if target.get("type") == "categorical" else 2
    est = cls.fit_memory(int(n_rows), max(1, width), params, n_outputs)
    columns = 8 * int(n_rows) * (len(features) + (target is not None)) * 2  # loaded columns + model inputs
    return est.bytes + columns, est
