"""A real ``slimvec serve`` in a subprocess on a free loopback port (no mocked app)."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

__all__ = ["Server", "free_port"]


def free_port() -> int:
    """A free loopback port no other pytest-xdist worker can be handed.

    Between this probe and the server's bind another worker could pick the same port, and a
    readiness probe would then be answered by the other worker's server. Each worker tries only
    ports ``p % workers == its index``, so two workers never race for one. Ports are drawn below
    Linux's ephemeral range (32768+), where outgoing connections take theirs; ``bind(0)`` cannot
    be used, as Linux hands it even ports only.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    count = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    index = (int(worker[2:]) if worker[2:].isdigit() else 0) % count
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000 + index, 32000, count)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free loopback port in 20000-32000 for xdist worker {worker} of {count}")


class Server:
    """``python -m slimvec serve --root ROOT ...`` until stopped; ``url`` once ready."""

    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None,
                 ready_timeout: float = 90.0, port: int = 0) -> None:
        self.root, self.args, self.ready_timeout = root, list(args), ready_timeout
        self.env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
                    "TRANSFORMERS_OFFLINE": "1", **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.port, self._fixed_port = port, port  # 0: a free port of this worker at each start
        self.log = root.parent / f"server-{os.getpid()}-{time.monotonic_ns()}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        self.port = self._fixed_port or free_port()
        cmd = [sys.executable, "-m", "slimvec", "serve", "--root", str(self.root), "--port",
               str(self.port), *self.args]
        self._fh = open(self.log, "wb")
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=self._fh, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.output()}")
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"server not ready in {self.ready_timeout}s: {self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM; returns the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._fh.close()

    def kill(self) -> None:
        """SIGKILL (kill -9)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
        self._fh.close()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.terminate()
