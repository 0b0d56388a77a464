"""A second process for the row work of one histogram gradient boosting fit.

The training rows are cut in two parts at ``n1``: the fitting process owns rows
``[0, n1)``, a forked worker rows ``[n1, n)``.  For every split both processes
partition their own rows of the node and histogram their own rows of the child
that gets a histogram; the fitting process then adds the worker's histogram to
its own.  Cumulative sums, split scoring and all decisions stay in the fitting
process, so the worker only needs the node ids and the split rule.  Each process
also computes its rows' gradients every iteration and adds the leaf values to
its rows' raw predictions at the end of a tree (the fitting process sends the
leaf ids and values).

Why a process and not a thread: the per-node work is a few hundred NumPy calls
of 5-100 us each, and two Python threads hand the GIL over at every call (two
threads on two nodes at once ran at 0.55-1.41x the speed of one, by node size;
``bench/boosting_workers.py threads``).

The worker is forked once per fit: the binned codes are shared copy-on-write
(never written), the raw predictions, gradients/hessians and the worker's
histogram and leaf rows live in an anonymous shared mapping.  Commands and
replies are fixed-size messages on two pipes (atomic below ``PIPE_BUF``; the
leaf values follow their command); each side polls its pipe for
``_SPIN`` seconds before it blocks, so a round trip costs microseconds when both
processes have a core and no CPU when one waits long.  The worker ends when its
command pipe closes (the fitting process stopped or died) and the fitting
process fails the fit when the worker's reply pipe closes.  The child closes
the descriptors it inherited (another fit's pipes, a server's sockets), and
the shared mapping is not inherited by later forks (docs/decisions/
gradient-boosting.md, "Faults").
"""

from __future__ import annotations

import gc
import mmap
import os
import select
import signal
import struct
import time
import traceback
import tracemalloc
import warnings

import numpy as np

__all__ = ["SharedArrays", "RowWorker", "WorkerError"]

_SPIN = 2e-4  # seconds a side polls its pipe before it blocks (a split's serial part is ~0.1 ms)

ROOT, SPLIT, LEAVES, EXIT, GRADIENTS, LEAF_VALUES = 1, 2, 3, 4, 5, 6
# cmd, node (LEAF_VALUES: the number of leaves), left, right, feature, bin, missing_left, side, output, has_cat;
# then n_bins bytes (a categorical split's left bins); LEAF_VALUES then carries that many int64 leaf ids and
# float64 values
_HEAD = struct.Struct("<10q")
_REPLY = struct.Struct("<2q")  # status (0 ok), value


class WorkerError(RuntimeError):
    """The worker process failed or ended during a fit."""


class SharedArrays:
    """NumPy arrays carved out of one anonymous shared mapping, shared with the processes forked after it
    (until ``dont_fork``)."""

    def __init__(self, specs):
        """``specs``: ``{name: (shape, dtype)}``; each array starts on a 64-byte boundary."""
        offsets, size = {}, 0
        for name, (shape, dtype) in specs.items():
            offsets[name] = size
            size += -(-int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize // 64) * 64
        self.nbytes = size
        self._map = mmap.mmap(-1, max(size, 1))  # MAP_SHARED | MAP_ANONYMOUS
        self.arrays = {}
        for name, (shape, dtype) in specs.items():
            count = int(np.prod(shape, dtype=np.int64))
            self.arrays[name] = np.frombuffer(self._map, dtype, count, offsets[name]).reshape(shape)

    def dont_fork(self):
        """Processes forked from now on do not inherit the mapping (Linux; elsewhere a no-op)."""
        advice = getattr(mmap, "MADV_DONTFORK", None)
        if advice is not None:
            try:
                self._map.madvise(advice)
            except OSError:  # pragma: no cover
                pass


def _close_other_fds(keep):  # pragma: no cover - runs in the child
    """Close every inherited descriptor above stderr but ``keep``: a worker must not hold another fit's pipes
    (nor the server's sockets), or that fit's worker would not see its end."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        fds = range(3, 1024)
    for fd in fds:
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _recv(fd, size):
    """Read one message of ``size`` bytes: poll for ``_SPIN`` s, then block. EOFError when the pipe closed."""
    buf = b""
    deadline = None
    while True:
        try:
            chunk = os.read(fd, size - len(buf))
        except BlockingIOError:
            now = time.perf_counter()
            if deadline is None:
                deadline = now + _SPIN
            elif now > deadline:
                poller = select.poll()  # not select.select: descriptors may exceed FD_SETSIZE in a server
                poller.register(fd, select.POLLIN)
                poller.poll()
            continue
        if not chunk:
            raise EOFError
        buf += chunk
        if len(buf) == size:
            return buf


def _send(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class RowWorker:
    """The fitting process's end of a worker forked for ``HistogramBuilder`` ``hb`` (rows ``hb.n1:``)."""

    def __init__(self, hb):
        """Fork the worker (OSError if the system refuses: no process is left behind, no descriptor open)."""
        self.n_cat = hb.n_bins
        self._msg = _HEAD.size + self.n_cat
        self._no_cat = b"\0" * self.n_cat
        self._error = hb.shared.arrays["error"]
        cmd_r, cmd_w = os.pipe()
        try:
            rep_r, rep_w = os.pipe()
        except OSError:
            os.close(cmd_r)
            os.close(cmd_w)
            raise
        # the parent's objects at the fork are left out of its garbage collections until the worker ends:
        # a collection would write to their pages and copy them (copy-on-write) for nothing
        gc.freeze()
        try:
            with warnings.catch_warnings():  # Python >= 3.12 warns of forks beside other threads; the child
                warnings.simplefilter("ignore", DeprecationWarning)  # only runs _serve (module docstring)
                pid = os.fork()
        except OSError:
            gc.unfreeze()
            for fd in (cmd_r, cmd_w, rep_r, rep_w):
                os.close(fd)
            raise
        if pid == 0:  # pragma: no cover - runs in the child (covered through the fits it serves)
            code = 0
            try:
                _close_other_fds({cmd_r, rep_w})
                _serve(hb, cmd_r, rep_w, self._msg)
            except BaseException as e:  # noqa: BLE001 - the parent sees the closed pipe and fails the fit
                reason = "".join(traceback.format_exception_only(type(e), e)).strip().encode()[: len(self._error)]
                self._error[: len(reason)] = np.frombuffer(reason, dtype=np.uint8)
                code = 1
            os._exit(code)
        os.close(cmd_r)
        os.close(rep_w)
        os.set_blocking(rep_r, False)
        # a worker forked later for another fit in this process must not keep this fit's mapping alive
        hb.shared.dont_fork()
        self.pid = pid
        self._cmd = cmd_w
        self._rep = rep_r
        self.peak_traced = 0  # the worker's own tracemalloc peak (bytes) when the parent was tracing at the fork

    def _ended(self):
        reason = bytes(self._error).rstrip(b"\0").decode(errors="replace")
        return WorkerError("the histogram worker process ended during the fit" + (f": {reason}" if reason else ""))

    def send(self, cmd, node=0, left=0, right=0, f=0, b=0, missing_left=False, side=-1, output=0,
             cat_set=None, payload=b""):
        cat = self._no_cat if cat_set is None else np.ascontiguousarray(cat_set, dtype=bool).tobytes()
        head = _HEAD.pack(cmd, node, left, right, f, b, int(missing_left), side, output, cat_set is not None)
        try:
            _send(self._cmd, head + cat + payload)
        except OSError:  # BrokenPipeError: the worker is gone
            raise self._ended() from None

    # -- the commands (each answered by ``wait``) ---------------------------------------------------------------
    def start_root(self, output):
        """A new tree: the worker sums the histogram of all its rows for output ``output`` into ``Y``."""
        self.send(ROOT, output=output)

    def start_split(self, ids, f, b, missing_left, side, output, cat_set):
        """Partition the worker's rows of node ``ids[0]`` into children ``ids[1:]`` and histogram child ``side``
        (0 left, 1 right, -1 none) into ``Y``; ``wait`` answers the worker's left row count."""
        self.send(SPLIT, *ids, f, b, missing_left, side, output, cat_set)

    def start_gradients(self):
        """The loss's gradients and hessians of the worker's rows."""
        self.send(GRADIENTS)

    def start_leaf_values(self, ids, values, output):
        """Add leaf ``ids[i]``'s ``values[i]`` to the worker's rows of it (output ``output``); ends the tree."""
        payload = np.array(ids, dtype=np.int64).tobytes() + np.array(values).tobytes()
        self.send(LEAF_VALUES, len(ids), output=output, payload=payload)

    def start_leaves(self):
        """Write the worker's rows of every leaf, by ascending leaf id, into ``rows``; ends the tree."""
        self.send(LEAVES)

    def wait(self):
        """The worker's reply value to the last command."""
        try:
            status, value = _REPLY.unpack(_recv(self._rep, _REPLY.size))
        except EOFError:
            raise self._ended() from None
        if status:
            raise WorkerError("the histogram worker process failed")
        return value

    def close(self, graceful=True):
        """Stop the worker (``graceful``: ask it and read its memory peak) and reap it."""
        if self._cmd is None:
            return
        try:
            if graceful:
                self.send(EXIT)
                self.peak_traced = self.wait()
        except WorkerError:
            pass
        finally:
            os.close(self._cmd)  # EOF: a worker still running ends
            os.close(self._rep)
            self._cmd = self._rep = None
            gc.unfreeze()
            deadline = time.monotonic() + 10.0
            try:
                while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
                    if time.monotonic() > deadline:  # pragma: no cover - a worker never ignores EOF this long
                        os.kill(self.pid, signal.SIGKILL)
                        os.waitpid(self.pid, 0)
                        break
                    time.sleep(0.001)
            except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored, or a handler that reaps)
                pass


def _serve(hb, cmd_r, rep_w, size):  # pragma: no cover - runs in the child
    """The worker's loop: holds its part of every leaf's rows (node id -> rows; 0 = the root, all rows), computes
    its rows' gradients and adds its rows' leaf values to the raw predictions (both in the shared mapping)."""
    gc.disable()  # never run finalizers of the parent's objects here
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    os.set_blocking(cmd_r, False)
    tracing = tracemalloc.is_tracing()
    if tracing:  # the parent's blocks at the fork are traced here too: report the peak above them
        tracemalloc.reset_peak()
        inherited = tracemalloc.get_traced_memory()[0]
    rows = {0: None}
    Y = hb.shared.arrays["Y"]
    out = hb.shared.arrays["rows"]
    mine = slice(hb.n1, hb.n)
    while True:
        try:
            msg = _recv(cmd_r, size)
        except EOFError:
            os._exit(0)
        cmd, node, left, right, f, b, mleft, side, k, has_cat = _HEAD.unpack_from(msg)
        value = 0
        if cmd == SPLIT:
            cat_set = np.frombuffer(msg, dtype=bool, offset=_HEAD.size) if has_cat else None
            hb.use_output(k)
            part = rows.pop(node)
            idx_l, idx_r = hb.partition(part, 1, f, b, bool(mleft), cat_set)
            rows[left], rows[right] = idx_l, idx_r
            if side >= 0:
                Y.fill(0.0)
                hb.accumulate((idx_l, idx_r)[side], Y)
            value = len(idx_l)
        elif cmd == ROOT:  # a new tree
            rows = {0: None}
            hb.use_output(k)
            hb.root_part(1, Y)
        elif cmd == GRADIENTS:
            hb.gradient_fn(hb.n1, hb.n)
        elif cmd == LEAF_VALUES:  # every node held is a leaf: add its value to its rows, then a new tree
            payload = _recv(cmd_r, 16 * node)
            ids = np.frombuffer(payload, np.int64, node).tolist()
            values = np.frombuffer(payload, np.float64, node, 8 * node).tolist()
            col = hb.raw[:, k]
            for i, v in zip(ids, values, strict=True):
                part = rows[i]
                col[mine if part is None else part] += v
            rows = {0: None}
        elif cmd == LEAVES:  # every node held is a leaf: their rows in ascending id order, then a new tree
            pos = 0
            for key in sorted(rows):
                part = rows[key]
                if part is None:
                    part = np.arange(hb.n1, hb.n)
                out[pos : pos + len(part)] = part
                pos += len(part)
            rows = {0: None}
            value = pos
        elif cmd == EXIT:
            value = tracemalloc.get_traced_memory()[1] - inherited if tracing else 0
            _send(rep_w, _REPLY.pack(0, value))
            os._exit(0)
        _send(rep_w, _REPLY.pack(0, value))
