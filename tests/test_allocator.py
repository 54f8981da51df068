"""The C allocator under an open memory: few malloc arenas, freed pages given back.

Each check runs in a fresh interpreter: an arena cap applies to threads not yet allocating,
and a process that already loaded the engine has its threads."""
import json
import os
import subprocess
import sys

import pytest

from gem.store import allocator

pytestmark = pytest.mark.skipif(allocator._LIBC is None, reason="glibc only")

# Opens a memory, runs writes and reads on the engine's threads, and prints how many arenas
# malloc made (malloc_info's <heap> elements) and what gem capped them at.
_ARENAS = """
import ctypes, json, os, sys
import gem
from gem.store import allocator
mem = gem.open(os.path.join(sys.argv[1], "m.db"), engine=sys.argv[2])
mem.ingest([gem.Fact(f"Topic {i}", "status", f"value {i}") for i in range(300)])
mem.retrieve("value 7")
libc = ctypes.CDLL("libc.so.6")
libc.fopen.restype = ctypes.c_void_p
fp = libc.fopen(os.path.join(sys.argv[1], "info.xml").encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(fp))
libc.fclose(ctypes.c_void_p(fp))
xml = open(os.path.join(sys.argv[1], "info.xml")).read()
mem.close()
print(json.dumps({"arenas": xml.count("<heap nr="), "cap": allocator.ARENA_MAX}))
"""


def arenas(tmp_path, engine: str, arena_max: str | None) -> dict[str, int]:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    if arena_max is not None:
        env["MALLOC_ARENA_MAX"] = arena_max
    done = subprocess.run([sys.executable, "-c", _ARENAS, str(tmp_path), engine],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("engine", ["kuzu", "ladybug"])
def test_the_engine_threads_share_the_capped_arenas(tmp_path, engine):
    pytest.importorskip(engine)
    got = arenas(tmp_path, engine, None)
    assert 1 <= got["arenas"] <= got["cap"]


def test_the_environment_setting_wins(tmp_path):
    got = arenas(tmp_path, "kuzu", "1")
    assert got["arenas"] == 1


def test_trim_gives_freed_pages_back_to_the_system():
    import ctypes
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    chunks = [libc.malloc(2048) for _ in range(40_000)]  # ~80 MB, below the mmap threshold
    for c in chunks:
        ctypes.memset(c, 1, 2048)
    keep = chunks.pop()  # the top chunk stays in use: free() alone cannot shrink the heap
    for c in chunks:
        libc.free(c)
    before = rss_mb()
    allocator.trim()
    after = rss_mb()
    libc.free(keep)
    assert before - after > 40


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
