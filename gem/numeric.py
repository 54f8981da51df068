"""Run gem's own numpy math on one BLAS thread.

numpy's multi-threaded BLAS keeps its worker threads spinning after each product; on a small
machine they take the cores the database engine needs, and gem's products are small enough
that one thread computes them as fast (free-text retrieval measured 3.5-5.7x faster pinned to
one thread). The limit is applied around gem's calls only, so a caller's own numpy keeps
whatever threading it chose.

    with single_threaded():
        scores = matrix @ query

The BLAS thread count is one setting for the whole process, so while any thread is inside a
`single_threaded()` block every BLAS call in the process runs on one thread. Blocks nest and
overlap across threads: the limit is applied when the first block opens and the previous
count is restored when the last one closes. (So a caller that changes the BLAS limit from
another thread while a gem call is running gets it reset when gem's last block closes: a
process-wide setting has no better answer.)
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import ContextDecorator
from itertools import product

__all__ = ["single_threaded"]


class _SingleThreaded(ContextDecorator):
    """The one process-wide block counter behind `single_threaded()`.

    threadpoolctl finds the BLAS libraries numpy loaded (on every platform); they are looked up
    once, because `threadpool_limits` rescans every loaded shared library on each call (~200 us
    measured). Opening the outermost block then costs one get and one set per library (~1 us)
    and an inner block only a lock and a counter.

    OpenBLAS with its own pthreads pool (what numpy's wheels ship) is driven through its C
    API directly: threadpoolctl lets only the first thread that ever set its limit change it
    again, so a block closed by another thread than the one that opened it would silently
    fail to restore the caller's setting. The counter here serialises gem's threads instead.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._saved: list[tuple[Callable[[int], object], int]] = []
        # (get, set) per BLAS library, found on first use (numpy loads BLAS when imported).
        self._blas: list[tuple[Callable[[], int], Callable[[int], object]]] | None = None

    def _controllers(self) -> list[tuple[Callable[[], int], Callable[[int], object]]]:
        if self._blas is None:
            import numpy  # noqa: F401  (BLAS must be loaded before it can be found)
            from threadpoolctl import ThreadpoolController

            libs = ThreadpoolController().select(user_api="blas").lib_controllers
            self._blas = [_get_and_set(lib) for lib in libs]
        return self._blas

    def __enter__(self) -> _SingleThreaded:
        with self._lock:
            if self._depth == 0:
                saved = []
                for get, set_ in self._controllers():
                    n = get()
                    if n is not None and n != 1:
                        set_(1)
                        saved.append((set_, n))
                self._saved = saved
            self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                for set_, n in self._saved:
                    set_(n)
                self._saved = []

    @property
    def active(self) -> bool:
        """Whether some thread is inside a block (for tests and diagnostics)."""
        return self._depth > 0


def _get_and_set(lib) -> tuple[Callable[[], int], Callable[[int], object]]:
    if lib.internal_api == "openblas" and getattr(lib, "threading_layer", None) != "openmp":
        # The symbol names scipy-openblas and the usual builds export (ILP64 ones carry a
        # suffix); `dynlib` is threadpoolctl's documented handle on the loaded library.
        for prefix, suffix in product(("", "scipy_"), ("", "64_", "_64")):
            get = getattr(lib.dynlib, f"{prefix}openblas_get_num_threads{suffix}", None)
            set_ = getattr(lib.dynlib, f"{prefix}openblas_set_num_threads{suffix}", None)
            if get is not None and set_ is not None:
                return get, set_
    return lib.get_num_threads, lib.set_num_threads


_SINGLE_THREADED = _SingleThreaded()


def single_threaded() -> _SingleThreaded:
    """A context manager (also usable as a decorator) that runs BLAS on one thread inside it.

    Cheap enough to wrap every search: ~1 us for the outermost block, less when nested.
    """
    return _SINGLE_THREADED
