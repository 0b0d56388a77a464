"""`orchard serve` as its own process group, for the tests that kill, stop and restart a real server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`orchard serve` on ``port`` (a free one by default) over ``data_dir``, with the environment's ORCHARD_
    variables replaced by ``env``; its output goes to ``server-<port>.log`` beside the data directory."""

    workers = 1
    options: tuple[str, ...] = ()
    ready_timeout = 60.0

    def __init__(self, data_dir: Path, port: int | None = None, **env):
        self.data_dir, self.port = data_dir, port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHARD_")}
        self.env.update({"PYTHONPATH": str(ROOT), **env})
        self.proc = None

    def command(self) -> list[str]:
        return [sys.executable, "-m", "service.cli", "serve", "--port", str(self.port), "--data-dir",
                str(self.data_dir), "--workers", str(self.workers), *self.options]

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"server-{self.port}.log"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def start(self):
        """Start it and wait until /health/ready answers 200 (an assertion with its log when it exits first)."""
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), cwd=ROOT, env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + self.ready_timeout
        while True:
            assert self.proc.poll() is None, f"server exited during start-up:\n{self.log_text()}"
            assert time.monotonic() < deadline, "server did not become ready"
            try:
                if httpx.get(self.url + "/health/ready", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)

    def stop(self, sig=signal.SIGTERM) -> None:
        """Send ``sig`` to its process group (unless it has ended) and wait for it."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)
        self.log.close()

    def kill(self) -> None:
        self.stop(signal.SIGKILL)
