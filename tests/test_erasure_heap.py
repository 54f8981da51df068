"""Erasure and the process's freed memory: at every checkpoint both embedded engines write
buffers they got from malloc into the database file without clearing them first (the header
page after its first bytes, the tails of metadata pages), so whatever the process had freed
there goes to disk. A process that erased a value held it (a Python string, a query's buffer):
once in a while (how the engine's threads and the caller take blocks from the heap) a copy of
it landed in memory.db after erase and compact() (a flaky test_erasure_property run). The test
puts the erased value in freed memory on purpose, so that what is rare becomes certain."""
from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading

import pytest

import gem
from conftest import ENGINE, files_hold, memory_location
from gem.store import compact

MARKER = "zqheapleft73"

pytestmark = [
    pytest.mark.skipif(ENGINE == "falkordb", reason="a FalkorDB server owns its files"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc"),
]

SIZES = (24, 64, 200, 512, 1024, 2000, 4096, 4104, 8192, 16384, 32768, 65536, 131072)


def _leave_in_freed_memory(text: bytes) -> None:
    """Blocks of many sizes filled with `text` and freed, on this thread and on others (the
    engine's threads share an arena): what a process that held `text` may leave in the memory
    malloc hands out next."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]

    def fill_and_free() -> None:
        blocks = []
        for size in SIZES:
            for _ in range(40):
                block = libc.malloc(size)
                ctypes.memmove(block, (text * (size // len(text) + 1))[:size], size)
                blocks.append(block)
        for block in blocks:
            libc.free(block)

    fill_and_free()
    others = [threading.Thread(target=fill_and_free) for _ in range(4)]
    for t in others:
        t.start()
    for t in others:
        t.join()


def test_an_erased_value_the_process_freed_is_not_written_to_the_database_file(
        tmp_path, clock, monkeypatch):
    # compaction imports the live data into a fresh database in this process: the value is
    # in freed memory just before (without the fix, kuzu wrote ~130 copies of it, 5 runs of 5)
    monkeypatch.setattr(compact, "crash_point", lambda step: _leave_in_freed_memory(
        MARKER.encode() + b" ") if step == "exported" else None)
    with gem.open(memory_location(tmp_path), clock=clock, engine=ENGINE) as mem:
        mem.ingest([gem.Fact("Bob", "ssn", MARKER, source="hr"), gem.Fact("Alice", "team", "red")])
        mem.erase("Bob", reason="privacy")
        mem.compact()
    assert files_hold(str(tmp_path), MARKER.encode()) == []
