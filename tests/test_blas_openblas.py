"""srcore.blas.openblas: the one process-wide hold of numpy's OpenBLAS at one thread that the backends'
regions share (the cpu plugin's part runs, trt_like's OpenMP tactics)."""
from __future__ import annotations

import threading

import numpy as np
import pytest
import threadpoolctl

from srcore.blas import openblas as O
from srcore import plugin

#: the BLAS hold alone, no model run: the second pass (test.sh) deselects it
pytestmark = pytest.mark.one_pass


class _ProcessWide:
    """A BLAS controller with one count for the whole process (numpy's pthreads OpenBLAS)."""

    def __init__(self, n):
        self.num_threads = n

    def set_num_threads(self, n):
        self.num_threads = n


def test_exposed_to_plugins():
    assert plugin.openblas is O


def test_overlapping_regions_of_two_threads_share_one_hold():
    """The bug of one hold per plugin: the second in saved the first one's 1, the first out put the
    user's count back under the second's region, and the second out left the process on 1."""
    ctl = _ProcessWide(2)
    a_in, a_out, b_in, b_out = (threading.Event() for _ in range(4))
    seen = []

    def region(entered, release):
        token = O.enter(ctl)
        entered.set()
        release.wait(10)
        seen.append(ctl.num_threads)
        O.leave(token, ctl)

    ta = threading.Thread(target=region, args=(a_in, a_out))
    tb = threading.Thread(target=region, args=(b_in, b_out))
    ta.start()
    assert a_in.wait(10)
    tb.start()
    assert b_in.wait(10)
    assert ctl.num_threads == 1 and O.user_threads(ctl) == 2 and O.held_count() == 2
    a_out.set()                     # the first in leaves first
    ta.join(10)
    assert ctl.num_threads == 1     # b's region still runs on one thread
    b_out.set()
    tb.join(10)
    assert seen == [1, 1]
    assert ctl.num_threads == 2 and O.held_count() is None and O.user_threads(ctl) == 2


def test_one_thread_and_on_caller_nest_restore_on_errors_and_keep_attributes():
    ctl = _ProcessWide(3)
    seen = []

    def kernel(x, out=None):
        seen.append((ctl.num_threads, O.user_threads(ctl)))
        return x + 1
    kernel.weight_bytes = 7
    held = O.on_caller(kernel, ctl)
    assert held.weight_bytes == 7 and held.__wrapped__ is kernel
    with O.one_thread(ctl):
        assert held(1) == 2 and ctl.num_threads == 1
    assert held(2, out=None) == 3
    assert seen == [(1, 3), (1, 3)] and ctl.num_threads == 3
    with pytest.raises(ZeroDivisionError):
        O.on_caller(lambda: 1 / 0, ctl)()
    with pytest.raises(ValueError), O.one_thread(ctl):
        raise ValueError
    assert ctl.num_threads == 3 and O.held_count() is None


def test_a_per_thread_count_is_set_and_restored_by_each_thread(monkeypatch):
    """OpenBLAS's OpenMP builds: each region sets its own thread's count, no process hold."""
    counts = threading.local()

    def local(n):
        prev = getattr(counts, "n", 4)
        counts.n = n
        return prev

    class Count:
        get, set = (lambda: 4), (lambda n: None)
    Count.local = staticmethod(local)
    ctl = _ProcessWide(4)
    monkeypatch.setitem(O._fns, ctl, Count())
    token = O.enter(ctl)
    other = []
    t = threading.Thread(target=lambda: other.append(local(4)))
    t.start()
    t.join(10)
    assert counts.n == 1 and other == [4] and O.held_count() is None
    O.leave(token, ctl)
    assert counts.n == 4


def test_numpys_openblas_runs_on_one_thread_inside_and_gets_the_users_count_back():
    ctl = O.controller()
    if ctl is None:
        pytest.skip("numpy's BLAS not controllable here")
    get = O._count(ctl).get
    a = np.ones((64, 64), np.float32)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        outer = O.enter()
        inner = O.enter()
        assert get() == 1 and O.user_threads() == 2
        np.testing.assert_array_equal(a @ a, np.full((64, 64), 64, np.float32))
        O.leave(outer)              # the first in leaves first: still held
        assert get() == 1
        O.leave(inner)
        assert get() == 2 and O.user_threads() == 2


# started_on_one_thread: a fresh process (threadpoolctl not imported), its answer against the count
# threadpoolctl then reads from numpy's OpenBLAS itself (the reference)
_PROBE = """
import os, sys, numpy
{before}
from srcore.blas import openblas as O
fast = O.started_on_one_thread()
{after}
import threadpoolctl
counts = [c.num_threads for c in threadpoolctl.ThreadpoolController().select(user_api="blas").lib_controllers
          if "numpy" in (c.filepath or "")]
print(fast, counts)
"""


@pytest.mark.parametrize("env, before, expect_fast", [
    ({"OPENBLAS_NUM_THREADS": "1"}, "", True),
    ({"OMP_NUM_THREADS": "1"}, "", True),
    ({"GOTO_NUM_THREADS": "1"}, "", True),
    ({"OPENBLAS_NUM_THREADS": "0", "OMP_NUM_THREADS": "1"}, "", True),   # 0: OpenBLAS reads the next
    ({"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "1"}, "", False),  # OPENBLAS_NUM_THREADS wins
    ({}, "", False),                                                      # no variable: all the cores
    ({"OMP_NUM_THREADS": "1"}, "os.environ['OMP_NUM_THREADS'] = '2'", False),  # changed after numpy's start
    ({}, "os.environ['OMP_NUM_THREADS'] = '1'", False),                   # ... the other way round
    ({"OMP_NUM_THREADS": "1x"}, "", False),                              # odd values: threadpoolctl decides
])
def test_started_on_one_thread_only_when_numpys_openblas_has_one(env, before, expect_fast):
    import os
    import subprocess
    import sys

    if "openblas" not in str(np.__config__.CONFIG["Build Dependencies"]["blas"]["name"]).lower():
        pytest.skip("numpy is not built on OpenBLAS")
    base = {k: v for k, v in os.environ.items()
            if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", _PROBE.format(before=before, after="")], env={**base, **env},
                         capture_output=True, text=True, check=True).stdout.split(None, 1)
    fast, counts = out[0] == "True", eval(out[1])
    assert fast is expect_fast
    if fast:
        assert counts == [1]
    if not env and not before and (os.cpu_count() or 1) > 1:
        assert counts and counts[0] > 1   # the case the fast path must not answer 1 for


def test_started_on_one_thread_reads_the_start_environment_once():
    # a load asks once per kernel (four times for digits): /proc/self/environ is read and parsed once
    import os
    import subprocess
    import sys

    if "openblas" not in str(np.__config__.CONFIG["Build Dependencies"]["blas"]["name"]).lower():
        pytest.skip("numpy is not built on OpenBLAS")
    probe = """
import builtins, numpy
opened = []
_open = builtins.open
def counting(f, *a, **k):
    opened.append(str(f))
    return _open(f, *a, **k)
builtins.open = counting
from srcore.blas import openblas as O
print([O.started_on_one_thread() for _ in range(4)], opened.count("/proc/self/environ"))
"""
    base = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", probe], env={**base, "OMP_NUM_THREADS": "1"},
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[True,", "True,", "True,", "True]", "1"]


def test_started_on_one_thread_is_off_once_threadpoolctl_or_a_region_has_been_used(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert not O.started_on_one_thread()   # threadpoolctl is imported in this process (above)
    monkeypatch.delitem(__import__("sys").modules, "threadpoolctl")
    monkeypatch.setattr(O, "_looked", [])
    monkeypatch.setattr(O, "_fns", {})
    monkeypatch.setattr(O, "_hold", {"depth": 1, "saved": 2})   # a region of another thread holds it
    assert not O.started_on_one_thread()
    monkeypatch.setattr(O, "_fns", {object(): None})           # a region has run (a controller used)
    monkeypatch.setattr(O, "_hold", {"depth": 0, "saved": 1})
    assert not O.started_on_one_thread()


def _bundled_or_skip():
    ours = O.bundled_openblas()
    if ours is None:
        pytest.skip("numpy's BLAS is not its bundled OpenBLAS (or no /proc): threadpoolctl is used")
    return ours


def test_bundled_openblas_is_the_library_threadpoolctl_controls_and_shares_its_count():
    ours = _bundled_or_skip()
    theirs = [c for c in threadpoolctl.ThreadpoolController().select(user_api="blas").lib_controllers
              if "numpy" in (c.filepath or "")]
    assert len(theirs) == 1
    ctl = theirs[0]
    assert (ours.filepath, ours.threading_layer) == (ctl.filepath, ctl.threading_layer)
    before = ctl.num_threads
    assert ours.num_threads == before
    try:
        ours.set_num_threads(1)
        assert ctl.num_threads == 1
        ctl.set_num_threads(3)
        assert ours.num_threads == 3
    finally:
        ctl.set_num_threads(before)
    # the hold works through it as through threadpoolctl's controller
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        token = O.enter(ours)
        assert ours.num_threads == 1 and O.user_threads(ours) == 2
        O.leave(token, ours)
        assert ours.num_threads == 2


def test_controller_finds_numpys_bundled_openblas_without_importing_threadpoolctl():
    import subprocess
    import sys

    _bundled_or_skip()
    code = ("import sys, numpy\nfrom srcore.blas import openblas as O\nc = O.controller()\n"
            "print(type(c).__name__, 'threadpoolctl' in sys.modules, c.num_threads)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[:2] == ["BundledOpenBLAS", "False"] and int(out[2]) >= 1


def test_bundled_openblas_is_none_when_numpy_maps_no_openblas(monkeypatch, tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 00000000 00:00 0  /usr/lib/libm.so.6\n")
    real_open = open
    monkeypatch.setattr("builtins.open", lambda f, *a, **k: real_open(maps if f == "/proc/self/maps" else f, *a, **k))
    assert O.bundled_openblas() is None
