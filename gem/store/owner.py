"""`<db>.gem-head`: the owner lock of an embedded database and the head it acknowledged.

The lock. The engines lock their database file with a POSIX (fcntl) lock, which belongs to
the process: closing ANY descriptor of that file in the process drops it (a copy, a read, a
size check through open()), and then a second process opens the database and both write it
(issue 25: acknowledged commits silently lost). gem's own lock is a `flock` on this file,
taken before the engine opens the database and kept until the last handle in the process
closes it (compaction's close, swap and reopen included). A flock belongs to the open file
description: closing other descriptors of any file does not release it, only this object's
release or the process's death does. The file is never removed (removing a lock file lets
two processes lock two different files of one name).

The head. After each commit the engine writes the log head it acknowledged (seq, hash) into
the file, in place, as one fixed-size record (`pwrite`, no fsync: it is written after the
engine's commit returned, so the file never names a commit the engine had not made
durable; after a power loss it may lag, which is safe). On open the log must hold that
record with that hash, or the open fails with `LostCommits` (gem/engine.py).
"""
from __future__ import annotations

import fcntl
import os
import re

from ..errors import StoreLocked

HEAD_SUFFIX = ".gem-head"
RECORD_SIZE = 128
_RECORD = re.compile(rb"gem-head 1 seq=(\d+) hash=([0-9a-f]+)\n")


def head_file(db_path: str) -> str:
    return db_path + HEAD_SUFFIX


class OwnerFile:
    """The exclusive, non-blocking ownership of one database path by this process."""

    def __init__(self, db_path: str) -> None:
        self.path = head_file(db_path)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by children
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreLocked(db_path, f"another process owns it (flock on {self.path})") from None
        self._fd: int | None = fd

    def read(self) -> tuple[int, str] | None:
        """The acknowledged head, or None if none was written yet (a new database, or one
        copied or imported here). Raises ValueError on a record that is not one."""
        assert self._fd is not None
        data = os.pread(self._fd, RECORD_SIZE, 0)
        if not data.strip(b"\0"):
            return None
        match = _RECORD.match(data)
        if match is None:
            raise ValueError(f"{self.path} does not hold a head record")
        return int(match.group(1)), match.group(2).decode("ascii")

    def write(self, seq: int, hash: str) -> None:
        assert self._fd is not None
        record = f"gem-head 1 seq={seq} hash={hash}\n".encode("ascii")
        os.pwrite(self._fd, record.ljust(RECORD_SIZE, b"\0"), 0)

    def clear(self) -> None:
        """Forget the head: the database at the path is a new one (the old was deleted)."""
        assert self._fd is not None
        os.pwrite(self._fd, b"\0" * RECORD_SIZE, 0)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # the flock goes with the last descriptor of its description
            self._fd = None
