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
