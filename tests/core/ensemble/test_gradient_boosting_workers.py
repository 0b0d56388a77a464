"""Histogram gradient boosting on two processes (``n_jobs=2``: ``_hist_gradient_boosting.worker``): the same
models as on one, and clean ends when the worker, the fit or the fitting process stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import core.ensemble._hist_gradient_boosting.histogram as tree_mod
import core.ensemble._hist_gradient_boosting.worker as worker_mod
from core.context import FitCancelled, FitContext
from core.ensemble.gradient_boosting_classifier import GradientBoostingClassifier
from core.ensemble.gradient_boosting_regressor import GradientBoostingRegressor

pytestmark = pytest.mark.skipif(not tree_mod.CAN_FORK, reason="the worker process needs os.fork (Linux)")

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def forks(monkeypatch):
    """Pids of the workers forked while the test runs."""
    pids = []
    init = worker_mod.RowWorker.__init__

    def counting_init(self, hb):
        init(self, hb)
        pids.append(self.pid)

    monkeypatch.setattr(worker_mod.RowWorker, "__init__", counting_init)
    return pids


def _gone(pid):
    """The process ended and was reaped (by us: waitpid has nothing left to wait for)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def _data(n=10_000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    X[rng.random(n) < 0.05, 1] = np.nan
    X[:, 5] = rng.integers(0, 7, n)  # a categorical feature
    return X, rng


CASES = {
    "binary": lambda X, rng: (GradientBoostingClassifier(max_iter=25, early_stopping=False, random_state=0),
                              (X[:, 0] + X[:, 2] * X[:, 3] > 0).astype(int), {}),
    "multiclass, categorical, early stopping": lambda X, rng: (
        GradientBoostingClassifier(max_iter=25, early_stopping=True, n_iter_no_change=3, random_state=0),
        np.digitize(X[:, 0] + (X[:, 5] % 3), [0.0, 1.5]), {"categorical_features": [5]}),
    "regression, sample weights, unlimited leaves": lambda X, rng: (
        GradientBoostingRegressor(max_iter=25, max_leaf_nodes=None, max_depth=5, early_stopping=False,
                                  l2_regularization=1.0, random_state=0),
        X[:, 0] * 2 + np.sin(X[:, 2]), {"sample_weight": rng.uniform(0.5, 2.0, len(X))}),
    "regression, constant hessian": lambda X, rng: (
        GradientBoostingRegressor(max_iter=25, early_stopping=False, random_state=0), X[:, 0] - X[:, 3], {}),
    "absolute error": lambda X, rng: (
        GradientBoostingRegressor(loss="absolute_error", max_iter=25, early_stopping=False, random_state=0),
        X[:, 0] + rng.standard_cauchy(len(X)), {}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_or_two_workers_give_the_same_model(monkeypatch, forks, case):
    X, _ = _data()
    outputs = []
    for n_workers in (2, 1):
        model, y, kw = CASES[case](X, np.random.default_rng(1))  # the same targets and weights each time
        model.set_params(n_jobs=n_workers)
        model.fit(X, y, **kw)
        out = model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)
        outputs.append((out, model.n_iter_))
        if n_workers == 2:
            assert len(forks) == 1, "the fit did not use the worker process"
    assert forks and _gone(forks[0])
    np.testing.assert_array_equal(outputs[0][0], outputs[1][0])
    assert outputs[0][1] == outputs[1][1]


def test_small_fits_stay_in_one_process(monkeypatch, forks):
    X, _ = _data(n=2_000)
    GradientBoostingClassifier(max_iter=200, early_stopping=False, n_jobs=2).fit(X, X[:, 0] > 0)  # one row part
    X, _ = _data(n=9_000)
    GradientBoostingClassifier(max_iter=5, early_stopping=False, n_jobs=2).fit(X, X[:, 0] > 0)  # too little work
    assert forks == []


def test_a_killed_worker_fails_the_fit_clearly_and_leaves_the_model_unfitted(monkeypatch, forks):
    X, _ = _data()
    y = (X[:, 0] > 0).astype(int)

    def kill_worker(fraction, metrics):
        if metrics.get("iteration") == 3:
            os.kill(forks[0], signal.SIGKILL)

    est = GradientBoostingClassifier(max_iter=25, early_stopping=False, n_jobs=2)
    with pytest.raises(worker_mod.WorkerError, match="histogram worker process ended"):
        est.fit(X, y, ctx=FitContext(on_progress=kill_worker, min_interval=0.0))
    assert not hasattr(est, "n_iter_")
    assert _gone(forks[0])


def test_a_cancelled_fit_stops_its_worker(monkeypatch, forks):
    X, _ = _data()
    calls = [0]

    def cancelled():
        calls[0] += 1
        return calls[0] > 4

    est = GradientBoostingClassifier(max_iter=25, early_stopping=False, n_jobs=2)
    with pytest.raises(FitCancelled):
        est.fit(X, X[:, 0] > 0, ctx=FitContext(is_cancelled=cancelled, cancel_interval=0.0))
    assert len(forks) == 1 and _gone(forks[0])
    # the next fit forks its own worker and succeeds
    assert est.fit(X, X[:, 0] > 0).n_iter_ == 25 and len(forks) == 2 and _gone(forks[1])


def test_the_worker_ends_when_the_fitting_process_is_killed(tmp_path):
    """SIGKILL of the fitting process closes the worker's command pipe: the worker exits by itself."""
    script = textwrap.dedent(
        f"""
        import os, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        import numpy as np
        import core.ensemble._hist_gradient_boosting.worker as W
        from core.ensemble.gradient_boosting_classifier import GradientBoostingClassifier
        init = W.RowWorker.__init__
        def announce(self, hb):
            init(self, hb)
            print(self.pid, flush=True)
            time.sleep(60)  # killed here, with the worker waiting for its first command
        W.RowWorker.__init__ = announce
        X = np.random.default_rng(0).normal(size=(9000, 4))
        GradientBoostingClassifier(max_iter=50, early_stopping=False, n_jobs=2).fit(X, X[:, 0] > 0)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="2"))
    try:
        worker = int(proc.stdout.readline())
        os.kill(worker, 0)  # alive while its parent is
        proc.kill()
        proc.wait(timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{worker}/stat") as f:
                    if f.read().split(") ")[1].startswith("Z"):
                        break  # ended; a zombie until its new parent reaps it
            except FileNotFoundError:
                break
            time.sleep(0.05)
        else:
            os.kill(worker, signal.SIGKILL)
            pytest.fail("the worker outlived its parent by 20 s")
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    ("n_jobs", "cpus", "expected"),
    [(None, 2, 1), (1, 2, 1), (2, 2, 2), (2, 1, 1), (-1, 8, 2), (-1, 1, 1), (8, 2, 2)],
)
def test_number_of_workers_from_n_jobs(monkeypatch, n_jobs, cpus, expected):
    """n_jobs (set by the service from ORCHARD_HIST_WORKERS) picks the processes: at most 2, and the CPUs."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)))
    assert tree_mod.max_workers(n_jobs) == expected


def test_the_environment_does_not_choose_the_workers(monkeypatch, forks):
    """core/ reads no environment variable: ORCHARD_HIST_WORKERS set in the fitting process changes nothing."""
    monkeypatch.setenv("ORCHARD_HIST_WORKERS", "2")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    X, _ = _data()
    GradientBoostingClassifier(max_iter=25, early_stopping=False).fit(X, X[:, 0] > 0)
    assert forks == []


def test_n_jobs_zero_is_refused():
    from core.params import ParamError

    X, _ = _data(n=200)
    with pytest.raises(ParamError, match="n_jobs"):
        GradientBoostingClassifier(max_iter=2, n_jobs=0).fit(X, X[:, 0] > 0)


def test_a_refused_fork_leaves_the_fit_on_one_process_with_the_same_model(monkeypatch):
    X, _ = _data()
    y = (X[:, 0] > 0).astype(int)
    expected = GradientBoostingClassifier(max_iter=25, early_stopping=False, n_jobs=1).fit(X, y).predict_proba(X)
    fds = len(os.listdir("/proc/self/fd"))

    def refuse():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(worker_mod.os, "fork", refuse)
    for _ in range(3):
        got = GradientBoostingClassifier(max_iter=25, early_stopping=False, n_jobs=2).fit(X, y).predict_proba(X)
        np.testing.assert_array_equal(got, expected)
    assert len(os.listdir("/proc/self/fd")) == fds  # the pipes made for the worker were closed


def test_the_worker_s_failure_reason_reaches_the_fit(monkeypatch):
    parent = os.getpid()
    partition = tree_mod.HistogramBuilder.partition

    def failing(self, rows, part, *args):
        if os.getpid() != parent and rows is not None:  # in the worker, below the root
            raise MemoryError("no room for the partition")
        return partition(self, rows, part, *args)

    monkeypatch.setattr(tree_mod.HistogramBuilder, "partition", failing)
    X, _ = _data()
    with pytest.raises(worker_mod.WorkerError, match="MemoryError: no room for the partition"):
        GradientBoostingClassifier(max_iter=25, early_stopping=False, n_jobs=2).fit(X, X[:, 0] > 0)


@pytest.mark.parametrize("where", ["gradients", "leaf values"])
def test_a_failure_in_the_worker_s_gradients_or_leaf_values_reaches_the_fit(monkeypatch, forks, where):
    """The worker computes its rows' gradients and adds its rows' leaf values: an exception there fails the
    fit with its text, and the worker is reaped."""
    from core.ensemble._hist_gradient_boosting import loss as loss_mod

    parent = os.getpid()
    if where == "gradients":
        grad_hess = loss_mod.BinaryLogLoss.grad_hess

        def failing(y, raw, w, g, h):
            if os.getpid() != parent:
                raise FloatingPointError("overflow in the gradients")
            return grad_hess(y, raw, w, g, h)

        monkeypatch.setattr(loss_mod.BinaryLogLoss, "grad_hess", staticmethod(failing))
        message = "FloatingPointError: overflow in the gradients"
    else:  # the fitting process names a leaf the worker does not hold
        add = tree_mod.HistogramBuilder.add_leaf_values

        def wrong_leaf(self, leaves, values, k):
            return add(self, [(10**6, parts, count) for _, parts, count in leaves], {10**6: 0.0}, k)

        monkeypatch.setattr(tree_mod.HistogramBuilder, "add_leaf_values", wrong_leaf)
        message = "KeyError: 1000000"
    X, _ = _data()
    est = GradientBoostingClassifier(max_iter=25, early_stopping=False, n_jobs=2)
    with pytest.raises(worker_mod.WorkerError, match=message):
        est.fit(X, (X[:, 0] > 0).astype(int))
    assert not hasattr(est, "n_iter_")
    assert len(forks) == 1 and _gone(forks[0])


def _mapping_starts(pid):
    with open(f"/proc/{pid}/maps") as f:
        return {int(line.split("-", 1)[0], 16) for line in f}


def test_fits_on_two_threads_do_not_hold_each_other_s_worker(monkeypatch):
    """A worker forked while another fit runs in the same process holds neither that fit's pipes nor its
    shared mapping: the other fit, cancelled, ends its own worker at once (it exits on EOF, status 0;
    before, it was SIGKILLed after a 10 s wait) and the newer worker does not map the older fit's memory."""
    import threading

    workers = {}
    init = worker_mod.RowWorker.__init__

    def recording_init(self, hb):
        init(self, hb)
        start = hb.shared.arrays["W"].__array_interface__["data"][0]
        workers[threading.current_thread().name] = (self.pid, start)

    monkeypatch.setattr(worker_mod.RowWorker, "__init__", recording_init)
    statuses = {}
    waitpid = os.waitpid

    def recording_waitpid(pid, options):
        got = waitpid(pid, options)
        if got[0]:
            statuses[got[0]] = got[1]
        return got

    monkeypatch.setattr(os, "waitpid", recording_waitpid)
    X, _ = _data()
    y = (X[:, 0] > 0).astype(int)
    b_running, a_done = threading.Event(), threading.Event()

    def hold(fraction, metrics):
        if metrics.get("iteration") == 2:
            b_running.set()
            a_done.wait(60)

    b = threading.Thread(name="B", target=lambda: GradientBoostingClassifier(
        max_iter=25, early_stopping=False, n_jobs=2).fit(X, y, ctx=FitContext(on_progress=hold, min_interval=0.0)))
    b.start()
    seen = {}
    try:
        assert b_running.wait(60)

        def look(fraction, metrics):
            if metrics.get("iteration") == 1:
                seen["A's worker"] = _mapping_starts(workers["A"][0])

        calls = [0]

        def cancelled():
            calls[0] += 1
            return calls[0] > 2

        threading.current_thread().name = "A"
        with pytest.raises(FitCancelled):
            GradientBoostingClassifier(max_iter=25, early_stopping=False, n_jobs=2).fit(
                X, y, ctx=FitContext(on_progress=look, is_cancelled=cancelled, cancel_interval=0.0,
                                     min_interval=0.0))
    finally:
        threading.current_thread().name = "MainThread"
        a_done.set()
        b.join(60)
    a_pid, a_start = workers["A"]
    b_pid, b_start = workers["B"]
    assert os.WIFEXITED(statuses[a_pid]) and os.WEXITSTATUS(statuses[a_pid]) == 0
    assert a_start in seen["A's worker"] and b_start not in seen["A's worker"]
    assert not b.is_alive() and _gone(a_pid) and _gone(b_pid)


def test_an_ignored_sigchld_does_not_fail_the_fit(monkeypatch):
    """With SIGCHLD ignored the kernel reaps the worker itself: waitpid then finds no child."""
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        X, _ = _data()
        assert GradientBoostingClassifier(max_iter=25, early_stopping=False, n_jobs=2).fit(X, X[:, 0] > 0).n_iter_ == 25
    finally:
        signal.signal(signal.SIGCHLD, previous)
