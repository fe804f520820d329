"""Whole ``slimvec`` commands as subprocesses, timed: the CLI and a bounded ``slimvec serve``.

Measurements that compare whole commands (Python start-up and model loading included) or load a
real server run them here. The server binds 127.0.0.1 on a free port and is always stopped.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from slimvec.errors import SlimvecError

__all__ = ["run_cli", "ServeProcess", "rss_mib"]


def _env(threads: int | None = None, drop_threads: bool = False) -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if drop_threads:
        env.pop("OMP_NUM_THREADS", None)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def run_cli(args: list[str], *, threads: int | None = None, drop_threads: bool = False,
            timeout: float = 7200.0) -> tuple[float, dict[str, Any]]:
    """Run ``python -m slimvec ARGS`` and return (wall seconds, its ``--json`` summary or ``{}``).

    Raises
    ------
    SlimvecError
        When the command fails: its exit code and the end of its stderr.
    """
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "slimvec", *args], capture_output=True, text=True,
                          env=_env(threads, drop_threads), timeout=timeout, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SlimvecError(f"`slimvec {' '.join(args)}` failed with exit code {proc.returncode} while "
                           f"measuring:\n{proc.stderr[-3000:]}")
    out = proc.stdout.strip()
    return wall, (json.loads(out) if out.startswith("{") else {})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mib(pid: int) -> float:
    """Resident set size of a process in MiB, from ``/proc/PID/status``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


class ServeProcess:
    """``python -m slimvec serve --root ROOT ARGS`` on a free loopback port until the block ends.

    Parameters
    ----------
    root : Path
        The service root.
    *args : str
        More ``slimvec serve`` options.
    ready_timeout : float
        Seconds to wait for ``/readyz``; the process is killed and an error raised after them.
    """

    def __init__(self, root: Path, *args: str, ready_timeout: float = 600.0) -> None:
        self.root, self.args, self.ready_timeout = Path(root), list(args), ready_timeout
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log = self.root.parent / f"serve-{os.getpid()}-{time.monotonic_ns()}.log"

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """Process id of the server."""
        assert self.proc is not None
        return self.proc.pid

    def __enter__(self) -> ServeProcess:
        import httpx

        self.port = _free_port()
        cmd = [sys.executable, "-m", "slimvec", "serve", "--root", str(self.root), "--host", "127.0.0.1",
               "--port", str(self.port), *self.args]
        self._fh = open(self.log, "wb")
        self.proc = subprocess.Popen(cmd, env=_env(threads=1), stdout=self._fh, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._fh.close()
                raise SlimvecError(f"slimvec serve exited with {self.proc.returncode}: {self._tail()}")
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.__exit__()
        raise SlimvecError(f"slimvec serve was not ready in {self.ready_timeout:.0f} s: {self._tail()}")

    def _tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self._fh.close()
