"""How gem processes find the server that owns a database.

A running `gem serve PATH` holds an exclusive lock on `PATH.gem-endpoint.lock` for its
whole life (the OS drops it when the process dies, however it dies) and writes
`PATH.gem-endpoint.json` (pid, host, port, url, started_at) once it listens; a clean
exit removes the JSON. A JSON file whose pid is dead, or that answers nothing, is stale:
it is ignored and the next server replaces it.
"""
from __future__ import annotations

import fcntl
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

ENDPOINT_SUFFIX = ".gem-endpoint.json"
LOCK_SUFFIX = ".gem-endpoint.lock"


def endpoint_file(db_path: str | os.PathLike[str]) -> Path:
    return Path(os.path.abspath(os.fspath(db_path)) + ENDPOINT_SUFFIX)


def lock_file(db_path: str | os.PathLike[str]) -> Path:
    return Path(os.path.abspath(os.fspath(db_path)) + LOCK_SUFFIX)


@dataclass(frozen=True)
class Endpoint:
    pid: int
    host: str
    port: int
    path: str
    engine: str
    started_at: str
    version: str
    idle_exit: float | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def mcp_url(self) -> str:
        return self.url + "/mcp"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def read_endpoint(db_path: str | os.PathLike[str]) -> Endpoint | None:
    """The endpoint written for this database, if its process is alive."""
    try:
        data = json.loads(endpoint_file(db_path).read_text(encoding="utf-8"))
        endpoint = Endpoint(**{k: v for k, v in data.items() if k != "url"})
    except (OSError, ValueError, TypeError):
        return None
    return endpoint if pid_alive(endpoint.pid) else None


def write_endpoint(db_path: str | os.PathLike[str], endpoint: Endpoint) -> None:
    """Atomically (write then rename), so a reader never sees half a file."""
    target = endpoint_file(db_path)
    scratch = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    scratch.write_text(json.dumps({**asdict(endpoint), "url": endpoint.url}, indent=1) + "\n",
                       encoding="utf-8")
    os.replace(scratch, target)


def remove_endpoint(db_path: str | os.PathLike[str], pid: int) -> None:
    """Remove the endpoint file if it is this process's (never another server's)."""
    target = endpoint_file(db_path)
    try:
        if json.loads(target.read_text(encoding="utf-8")).get("pid") == pid:
            target.unlink()
    except (OSError, ValueError):
        pass


class ServerLock:
    """The exclusive right to serve one database, held for the life of the server."""

    def __init__(self, db_path: str | os.PathLike[str]) -> None:
        self.path = lock_file(db_path)
        self._handle: IO[str] | None = None

    def acquire(self) -> bool:
        """True if acquired; False if another live process serves this database."""
        handle = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        self._handle = handle
        return True

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None
