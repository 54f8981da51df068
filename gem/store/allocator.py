"""How the process's C allocator serves the engine: the engine's threads share few malloc arenas,
and every block malloc hands out is cleared first.

glibc gives each thread that allocates its own arena (up to 8 per core), and a freed chunk goes
back to the arena that made it, never to another thread's: Kuzu's query threads each kept an
arena of up to ~100 MB that the next query only partly reused. Capping the arenas before the
engine starts its threads makes them share: bench/footprint.py at 10k topics on Kuzu, side by
side, thread arenas 181 -> 49 MB, RSS 779 -> 738 MB (664 -> 645 after a malloc_trim), batches
as fast (130 s), retrievals within noise (structured p50 23 -> 26 ms on a loaded 2-core VM).
LadybugDB runs gem's queries on the calling thread (2 MB of thread arenas): nothing changes.
A no-op where the C library is not glibc, and when the environment sets MALLOC_ARENA_MAX (the
user's choice wins; glibc read it at start).

Both engines write blocks they got from malloc to the database file at each checkpoint without
clearing them (the header page after its first bytes, the tails of metadata pages: ~10 kB
a checkpoint, measured with MALLOC_PERTURB_), so whatever the process freed there went to
disk: an erased value a Python string or a query held was once found in memory.db after erase
and compact() (tests/test_erasure_heap.py makes it certain). glibc's M_PERTURB clears each
block malloc hands out (to zero: it fills with the complement of PERTURB) and fills each block
freed with PERTURB. It skips a block a thread's cache hands back to a request of the same size
(up to 1032 bytes): freed blocks of 24 bytes to 128 kB holding a marker left none in the file
with it, ~130-650 copies without. Where the C library is not glibc nothing clears them; the
environment's MALLOC_PERTURB_ wins, as for the arenas. Cost, side by side on the loaded 2-core
VM (3k and 10k topics, 3 fields each): batches, retrievals and compaction within noise; peak
RSS +3 to +14 MB at 3k, 553-561 MB either way at 10k.

After a pass over the whole memory (a forgetting pass, a full audit) `give_back` returns what
malloc holds free to the system (malloc_trim): at 100k topics, 2,171 -> 1,757 MB after a pass
of 2.1M ladder moves and 2,680 -> 2,341 MB after the full audit, 0.03 s a call. Not after
every commit: after large batches it gave back ~20 MB at 10k topics but took 1-2 s a call on
that heap (it walks every free chunk), a quarter more time for batches.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
from typing import Any

# Arenas the process may use: the main one and one the engine's threads share.
ARENA_MAX = 2
_M_ARENA_MAX = -8  # mallopt's parameter numbers (malloc.h)
_M_PERTURB = -6
PERTURB = 0xFF  # blocks handed out are filled with its complement: zeros

_lock = threading.Lock()
_capped = False
_cleared = False


def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    if not (hasattr(libc, "mallopt") and hasattr(libc, "gnu_get_libc_version")):
        return None  # musl and others: no arenas to cap
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


def clear_blocks() -> None:
    """Have malloc clear every block it hands out (M_PERTURB), before the engine writes any:
    what the process freed must not reach the database's files."""
    global _cleared
    with _lock:
        if _cleared or _LIBC is None or "MALLOC_PERTURB_" in os.environ:
            return
        _LIBC.mallopt(_M_PERTURB, PERTURB)
        _cleared = True


def give_back() -> None:
    """Return to the system the memory malloc holds free (glibc's malloc_trim: the tops of its
    heaps and every whole free page in them), after a pass that freed a lot of it."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
