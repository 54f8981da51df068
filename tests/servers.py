"""Real `gem serve` processes for tests, and stopping them for sure.

Every process is started in its own session (process group) and stopped by its pid:
the whole group is killed in teardown and the test asserts it is gone.

Waits are on conditions. The only time limit is HANG, a guard against a process or request
that hangs for good: a loaded machine (2 cores at load 30) must never reach it, so no test
fails because the machine is slow.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import httpx

from gem.server.endpoint import Endpoint, pid_alive, read_endpoint


@dataclass
class Served:
    process: subprocess.Popen
    endpoint: Endpoint
    log: str

    @property
    def url(self) -> str:
        return self.endpoint.url


HANG = 1800.0  # seconds


def get(url: str, **kw) -> httpx.Response:
    return httpx.get(url, timeout=HANG, **kw)


def post(url: str, **kw) -> httpx.Response:
    return httpx.post(url, timeout=HANG, **kw)


def client(base_url: str, **kw) -> httpx.Client:
    """An HTTP client whose requests wait as long as the server takes (up to HANG)."""
    return httpx.Client(base_url=base_url, timeout=HANG, **kw)


def wait_for(predicate, timeout: float = HANG, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def start(path: str, *args: str, ready: bool = True, log_dir: str | None = None) -> Served:
    log = os.path.join(log_dir or os.path.dirname(path), f"serve-{time.monotonic_ns()}.log")
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "gem", "serve", path, "--port", "0", *args],
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                   start_new_session=True)

    def up() -> Endpoint | None:
        if process.poll() is not None:
            raise AssertionError(f"gem serve exited {process.returncode}: {open(log).read()}")
        endpoint = read_endpoint(path)
        if endpoint is None or endpoint.pid != process.pid:
            return None
        if not ready:
            return endpoint
        try:
            return endpoint if get(endpoint.url + "/v1/health").status_code == 200 else None
        except httpx.HTTPError:
            return None
    return Served(process, wait_for(up, what="gem serve to be ready"), log)


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_group(pid: int) -> None:
    """Kill the process group of a process that is not our child (a server `gem mcp`
    started) and wait until it is gone (its parent or init reaps it)."""
    _killpg(pid)
    wait_for(lambda: not pid_alive(pid), what=f"pid {pid} to end")


def stop(served: Served) -> None:
    """Kill our child's process group (whatever state it is in) and check it is gone."""
    _killpg(served.process.pid)
    served.process.wait(timeout=HANG)
    assert not pid_alive(served.process.pid)
