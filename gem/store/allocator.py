"""How the process's C allocator serves the engine: few malloc arenas, freed memory given back.

glibc gives each thread that allocates its own arena (up to 8 per core), and a freed chunk goes
back to the arena that made it, not to the system: the engine's worker threads each kept an
arena of tens of MB that the next query only partly reused (bench/footprint.py). Capping the
arenas before the engine starts its threads makes them share the main heap, and `trim()` after
large work (a bulk ingest, a rebuild, an audit) returns the free pages in every arena.
Both are no-ops where the C library is not glibc, and the cap is not applied when the
environment sets MALLOC_ARENA_MAX (the user's choice wins, glibc read it at start).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
from typing import Any

# Arenas the process may use: 2 measured as RSS as 1 with no slower queries (bench/footprint.py)
ARENA_MAX = 2
_M_ARENA_MAX = -8  # mallopt's parameter number (malloc.h)

# Rows a transition writes past which its commit trims (a single write stays cheap).
TRIM_AFTER_ROWS = 2000

_lock = threading.Lock()
_capped = False


def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        if not (hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim")
                and hasattr(libc, "gnu_get_libc_version")):
            return None  # musl and others: no arenas to cap
    except OSError:
        return None
    return libc


_LIBC = _libc()


def cap_arenas() -> None:
    """Cap malloc's arenas at ARENA_MAX, once per process, before the engine makes its threads
    (a thread keeps the arena it first allocated from)."""
    global _capped
    with _lock:
        if _capped or _LIBC is None or ARENA_MAX <= 0 or "MALLOC_ARENA_MAX" in os.environ:
            return
        _LIBC.mallopt(_M_ARENA_MAX, ARENA_MAX)
        _capped = True


def trim() -> None:
    """Give the free pages of every malloc arena back to the system."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
