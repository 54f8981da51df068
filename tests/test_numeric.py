import threading

import numpy as np
import pytest
from threadpoolctl import ThreadpoolController, threadpool_limits

from gem.numeric import single_threaded

_BLAS = ThreadpoolController().select(user_api="blas")
pytestmark = pytest.mark.skipif(
    not _BLAS.lib_controllers, reason="numpy's BLAS cannot be controlled on this platform"
)


def blas_threads() -> set[int]:
    # A fresh controller reads the libraries' own state, not anything gem cached.
    return {lib["num_threads"] for lib in ThreadpoolController().select(user_api="blas").info()}


def test_one_thread_inside_and_callers_setting_restored():
    with threadpool_limits(2, user_api="blas"):
        assert blas_threads() == {2}
        with single_threaded():
            assert blas_threads() == {1}
            m = np.ones((64, 64))
            assert float((m @ m)[0, 0]) == 64.0
        assert blas_threads() == {2}
        assert not single_threaded().active


def test_nested_blocks_restore_only_at_the_outermost_exit():
    with threadpool_limits(2, user_api="blas"):
        with single_threaded():
            with single_threaded():
                assert blas_threads() == {1}
            assert blas_threads() == {1} and single_threaded().active
        assert blas_threads() == {2}


def test_restored_after_an_exception():
    with threadpool_limits(2, user_api="blas"):
        with pytest.raises(ZeroDivisionError):
            with single_threaded():
                1 / 0
        assert blas_threads() == {2} and not single_threaded().active


def test_a_caller_already_on_one_thread_stays_there():
    with threadpool_limits(1, user_api="blas"):
        with single_threaded():
            assert blas_threads() == {1}
        assert blas_threads() == {1}


def test_as_decorator():
    @single_threaded()
    def inside() -> set[int]:
        return blas_threads()

    with threadpool_limits(2, user_api="blas"):
        assert inside() == {1}
        assert blas_threads() == {2}


def test_overlapping_blocks_in_two_threads():
    # Thread A opens first and closes first; the limit must hold until B closes too.
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, set[int]] = {}

    def a():
        with single_threaded():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def b():
        a_in.wait(5)
        with single_threaded():
            b_in.set()
            a_out.wait(5)
            seen["b after a left"] = blas_threads()

    with threadpool_limits(2, user_api="blas"):
        ts = [threading.Thread(target=a), threading.Thread(target=b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(10)
        assert seen["b after a left"] == {1}
        assert blas_threads() == {2} and not single_threaded().active
