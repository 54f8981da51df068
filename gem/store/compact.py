"""Physical purge: the live data of a database rewritten into a fresh one, swapped in.

An engine keeps deleted values in its files (pages are reused, not zeroed: after an erasure
and a CHECKPOINT, kuzu still held 3 copies of an erased value, LadybugDB 2). `compact` exports
the live data (EXPORT DATABASE, parquet), imports it into a new database beside the old one
and swaps the files:

    <db>.compact-export/   the exported live data (removed when the swap is done)
    <db>.compact-new       the new database, complete once <db>.compact-ready exists
    <db>.compact-old       the old database, during the swap

A crash at any point leaves either the old or the new database: `recover` (run before a
database is opened) finishes a swap whose new database was complete, or discards one that
was not. Both databases hold the same state, so either outcome audits clean.
"""
from __future__ import annotations

import os
import shutil
from typing import Any, Callable

# A database's files: kuzu's and LadybugDB's, with the log and locks LadybugDB checkpoints
# through (a kill during a checkpoint leaves them; they belong to that database and must move
# or go with it: a stale `.wal.checkpoint` beside another database is not its log).
DB_SUFFIXES = ("", ".wal", ".shadow", ".wal.checkpoint", ".checkpoint.intent.lock",
               ".checkpoint.apply.lock")
EXPORT, NEW, READY, OLD = ".compact-export", ".compact-new", ".compact-ready", ".compact-old"

# A test may replace this to stop the process at a named step (crash-safety tests).
crash_point: Callable[[str], None] = lambda step: None


def _files(path: str) -> list[str]:
    return [path + s for s in DB_SUFFIXES if os.path.exists(path + s)]


def _move(src: str, dst: str) -> None:
    for suffix in DB_SUFFIXES:
        if os.path.exists(src + suffix):
            os.replace(src + suffix, dst + suffix)


def _remove(path: str) -> None:
    for name in [path + s for s in DB_SUFFIXES]:
        if os.path.isdir(name):
            shutil.rmtree(name, ignore_errors=True)
        elif os.path.exists(name):
            os.remove(name)


def sync_dir(path: str) -> None:
    """fsync the directory holding `path`: what makes a new name in it durable."""
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def recover(path: str) -> None:
    """Finish or undo a compaction a crash interrupted (before the database is opened)."""
    ready = os.path.exists(path + READY)
    if ready and os.path.exists(path + NEW):
        if os.path.exists(path):
            _move(path, path + OLD)
        _move(path + NEW, path)
        sync_dir(path)
    elif not os.path.exists(path) and os.path.exists(path + OLD):
        _move(path + OLD, path)  # the new one was not complete: the old one comes back
        sync_dir(path)
    for leftover in (path + NEW, path + OLD):
        _remove(leftover)
    shutil.rmtree(path + EXPORT, ignore_errors=True)
    if os.path.exists(path + READY):
        os.remove(path + READY)


def build(module: Any, path: str, export: Callable[[str], None],
          options: dict[str, int] | None = None) -> None:
    """Export the live data of the open database at `path` and import it into `path`+NEW,
    opened with `options` (the open database's: without them the engine's buffer pool would
    be 80% of the RAM)."""
    recover_leftovers(path)
    export(path + EXPORT)
    crash_point("exported")
    database = module.Database(path + NEW, **(options or {}))
    try:
        conn = module.Connection(database)
        conn.execute(f"IMPORT DATABASE '{path + EXPORT}'")
        conn.execute("CHECKPOINT")
        conn.close()
    finally:
        database.close()
    crash_point("imported")
    for name in _files(path + NEW):
        with open(name, "rb") as f:
            os.fsync(f.fileno())
    with open(path + READY, "w") as f:
        f.flush()
        os.fsync(f.fileno())
    sync_dir(path)
    crash_point("ready")


def swap(path: str) -> None:
    """Put the new database in place of the old (the old database is closed)."""
    _move(path, path + OLD)
    crash_point("moved old")
    _move(path + NEW, path)
    sync_dir(path)
    crash_point("moved new")
    os.remove(path + READY)
    _remove(path + OLD)
    shutil.rmtree(path + EXPORT, ignore_errors=True)


def recover_leftovers(path: str) -> None:
    """Leftovers of an earlier, unfinished attempt on a database that is open now."""
    for leftover in (path + NEW, path + OLD):
        _remove(leftover)
    shutil.rmtree(path + EXPORT, ignore_errors=True)
    if os.path.exists(path + READY):
        os.remove(path + READY)
