"""The C allocator under an open memory: the engine's threads share few malloc arenas.

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


# Frees 200 MB of small blocks that malloc keeps (one block above them holds the heap's top),
# then gives back: prints the process's resident MB before and after.
_GIVE_BACK = """
import ctypes, json
from gem.store import allocator
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
blocks = [libc.malloc(1000) for _ in range(200_000)]
for b in blocks:
    ctypes.memset(b, 7, 1000)
top = libc.malloc(1000)
for b in blocks:
    libc.free(b)
held = rss()
allocator.give_back()
print(json.dumps({"held": held, "after": rss()}))
"""


def test_giving_back_returns_what_malloc_holds_free_to_the_system():
    out = subprocess.run([sys.executable, "-c", _GIVE_BACK], capture_output=True, text=True,
                         check=True)
    mb = json.loads(out.stdout)
    assert mb["held"] - mb["after"] > 100, mb


def test_a_forgetting_pass_and_a_full_audit_give_memory_back(tmp_path, clock, monkeypatch):
    import gem
    calls = []
    monkeypatch.setattr(allocator, "give_back", lambda: calls.append(1))
    with gem.open(str(tmp_path / "m.db"), clock=clock) as mem:
        mem.ingest([gem.Fact(f"Topic {i}", "f", f"value {i}") for i in range(20)])
        mem.audit()
        assert calls == []  # the incremental audit reads little
        mem.audit(full=True)
        assert calls == [1]
        clock.advance(days=90)
        mem.forget()
        assert calls == [1, 1]
