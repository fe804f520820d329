"""A real three-node Ray cluster on one machine: network namespaces joined by a bridge.

Four namespaces: ``<p>sw`` holds only a Linux bridge; ``<p>h`` (the head, no CPUs, where the
drivers run), ``<p>w1`` and ``<p>w2`` (one CPU each, pinned to their own core with ``taskset``)
each hold one end of a veth pair whose other end is on the bridge, with ``SUBNET.1..3/24``. The
addresses exist only inside the namespaces, nothing routes out, and the root namespace gets no
interface. Every Ray process runs inside them (``ip netns exec NS ray start --block``, a process
group of its own), with token authentication (a random ``RAY_AUTH_TOKEN`` of this cluster, not the
user's ``~/.ray/auth_token``) and a temp dir of its own. :meth:`NetnsCluster.close` kills every
process left in the namespaces by PID (``ip netns pids``), then deletes them.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUBNET = "10.233.50"
HOSTS = {"h": 1, "w1": 2, "w2": 3}
PORTS = ["--node-manager-port", "6380", "--object-manager-port", "6381",
         "--min-worker-port", "10002", "--max-worker-port", "10200",
         "--object-store-memory", str(100 * 2**20), "--disable-usage-stats"]


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


def why_not() -> str | None:
    """Why this machine cannot host the cluster (``None``: it can)."""
    if os.geteuid() != 0:
        return f"creating network namespaces needs root (running as uid {os.geteuid()})"
    if shutil.which("ip") is None:
        return "no 'ip' command (iproute2) to create network namespaces"
    probe = f"svprobe{os.getpid() % 100000}"
    made = _ip("netns", "add", probe)
    if made.returncode != 0:
        return f"'ip netns add' failed: {made.stderr.strip()}"
    _ip("netns", "del", probe)
    return None


class NetnsCluster:
    """The namespaces, the Ray head and worker nodes, and drivers started in the head's."""

    def __init__(self) -> None:
        self.prefix = f"svm{os.getpid() % 100000}"
        self.base = Path(tempfile.mkdtemp(prefix="svmn", dir="/tmp"))  # short: Ray's sockets
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "token",
                    "RAY_AUTH_TOKEN": secrets.token_hex(16), "RAY_USAGE_STATS_ENABLED": "0",
                    "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        self.nodes: dict[str, subprocess.Popen[bytes]] = {}
        self.made: list[str] = []

    def ns(self, host: str) -> str:
        return self.prefix + host

    def ip(self, host: str) -> str:
        return f"{SUBNET}.{HOSTS[host]}"

    @property
    def address(self) -> str:
        return f"{self.ip('h')}:6379"

    def make_network(self) -> None:
        sw = self.ns("sw")
        steps = [["netns", "add", sw], ["-n", sw, "link", "add", "br0", "type", "bridge"],
                 ["-n", sw, "link", "set", "br0", "up"], ["-n", sw, "link", "set", "lo", "up"]]
        self._run(steps, made=sw)
        for host in HOSTS:
            ns, a, b = self.ns(host), f"{self.prefix}{host}a", f"{self.prefix}{host}b"
            self._run([["netns", "add", ns]], made=ns)
            self._run([["link", "add", a, "type", "veth", "peer", "name", b],
                       ["link", "set", a, "netns", sw], ["link", "set", b, "netns", ns],
                       ["-n", sw, "link", "set", a, "master", "br0", "up"],
                       ["-n", ns, "link", "set", b, "name", "eth0"],
                       ["-n", ns, "addr", "add", f"{self.ip(host)}/24", "dev", "eth0"],
                       ["-n", ns, "link", "set", "eth0", "up"], ["-n", ns, "link", "set", "lo", "up"]])

    def _run(self, steps: list[list[str]], made: str | None = None) -> None:
        for step in steps:
            done = _ip(*step)
            if done.returncode != 0:
                raise RuntimeError(f"ip {' '.join(step)}: {done.stderr.strip()}")
            if made is not None and step[:2] == ["netns", "add"]:
                self.made.append(made)

    def start_node(self, host: str, cpus: int, hide: Path | None = None) -> None:
        """``ray start --block`` in ``host``'s namespace (the head for ``h``); ``hide``: a folder
        this node sees empty (a tmpfs mounted over it in the node's own mount namespace)."""
        ray = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block",
               "--node-ip-address", self.ip(host), "--num-cpus", str(cpus),
               "--temp-dir", str(self.base / f"ray-{host}"), *PORTS]
        ray += (["--head", "--port", "6379", "--include-dashboard=false"] if host == "h"
                else ["--address", self.address])
        inner = ray if hide is None else ["sh", "-c", 'mount -t tmpfs tmpfs "$0" && exec "$@"',
                                          str(hide), *ray]
        pin = ["taskset", "-c", str(HOSTS[host] - 2)] if host != "h" and shutil.which("taskset") \
            and (os.cpu_count() or 1) >= 2 else []
        log = open(self.base / f"{host}.log", "wb")
        self.nodes[host] = subprocess.Popen([*pin, "ip", "netns", "exec", self.ns(host), *inner],
                                            env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def wait_started(self, *hosts: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        for host in hosts:
            while "Ray runtime started" not in self.log(host):
                if self.nodes[host].poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Ray node {host} did not start:\n{self.log(host)[-3000:]}")
                time.sleep(0.2)

    def log(self, host: str) -> str:
        return (self.base / f"{host}.log").read_text(errors="replace")

    def kill_node(self, host: str) -> None:
        """kill -9 of the node's process group: ``ray start``, its raylet and its workers."""
        os.killpg(self.nodes[host].pid, signal.SIGKILL)
        self.nodes[host].wait(timeout=30)

    def pids(self, host: str) -> list[int]:
        out = _ip("netns", "pids", self.ns(host)).stdout.split()
        return [int(p) for p in out if p.isdigit()]

    def driver(self, args: list[str], out: Path, env: dict[str, str] | None = None
               ) -> subprocess.Popen[bytes]:
        """``python -m slimvec ARGS`` in the head's namespace; stdout in ``out``, stderr beside."""
        cmd = ["ip", "netns", "exec", self.ns("h"), sys.executable, "-m", "slimvec", *args]
        return subprocess.Popen(cmd, env={**self.env, **(env or {})}, cwd=self.base,
                                stdout=open(out, "wb"), stderr=open(f"{out}.err", "wb"))

    def close(self) -> None:
        """Kill every process in the namespaces by PID, delete them and the temp dir."""
        for proc in self.nodes.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 20
        for ns in self.made:
            host = ns[len(self.prefix):]
            while time.monotonic() < deadline:
                left = self.pids(host) if host in HOSTS else []
                if not left:
                    break
                for pid in left:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.2)
        for proc in self.nodes.values():
            proc.wait(timeout=10)
        for ns in reversed(self.made):
            _ip("netns", "del", ns)
        shutil.rmtree(self.base, ignore_errors=True)
