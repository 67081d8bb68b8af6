"""``tests/_compile_lock.py``: a worker that asks for a kernel another worker is compiling waits for
it and loads its machine code from numba's on-disk cache instead of compiling it again."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import _compile_lock

pytestmark = pytest.mark.one_pass   # the test harness itself: no executor or planner involved

KERNEL = """
import numba

@numba.njit(cache=True)
def bump(x):
    return x + 1
"""

CHILD = """
import json, sys
from pathlib import Path
sys.path[:0] = [{tests!r}, {here!r}]
import _compile_lock
if {lock!r}:
    _compile_lock.install(Path({locks!r}))
import kern
print(json.dumps([kern.bump(41), sum(kern.bump._cache_hits.values()), sum(kern.bump._cache_misses.values())]))
"""


def _child(tmp_path: Path, lock: bool) -> subprocess.Popen:
    code = CHILD.format(tests=str(Path(__file__).parent), here=str(tmp_path), lock=lock,
                        locks=str(tmp_path / "locks"))
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


def _result(proc: subprocess.Popen) -> list:
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    return json.loads(out.strip().splitlines()[-1])


def _kernel(tmp_path: Path, monkeypatch):
    (tmp_path / "kern.py").write_text(textwrap.dedent(KERNEL))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("kern", None)
    import kern

    (tmp_path / "locks").mkdir()
    return kern, _compile_lock._lock_path(tmp_path / "locks", kern.bump)


def test_a_worker_waits_for_the_compile_of_the_same_kernel_and_loads_it(tmp_path, monkeypatch):
    """This process holds the kernel's lock and compiles it (into numba's cache) while a child asks
    for it: the child waits, then loads the cached code (a cache hit, no compile)."""
    numba = pytest.importorskip("numba")
    kern, path = _kernel(tmp_path, monkeypatch)
    fd = _compile_lock._acquire(path)
    assert fd is not None
    try:
        child = _child(tmp_path, lock=True)
        kern.bump.compile((numba.int64,))   # written to numba's cache before the lock goes
    finally:
        os.close(fd)
        sys.modules.pop("kern", None)
    assert _result(child) == [42, 1, 0]


def test_without_the_lock_a_worker_compiles_at_once(tmp_path, monkeypatch):
    """The control: with the kernel's lock held and nothing in the cache, a child without the lock
    compiles the kernel itself (a miss) without waiting for the lock."""
    pytest.importorskip("numba")
    _, path = _kernel(tmp_path, monkeypatch)
    fd = _compile_lock._acquire(path)
    try:
        assert _result(_child(tmp_path, lock=False)) == [42, 0, 1]
    finally:
        os.close(fd)
        sys.modules.pop("kern", None)


def test_a_kernel_numba_does_not_cache_takes_no_lock(tmp_path):
    numba = pytest.importorskip("numba")
    fn = numba.njit(lambda x: x)
    cached = numba.njit(cache=True)(_identity)
    assert _compile_lock._lock_path(tmp_path, fn) is None
    assert _compile_lock._lock_path(tmp_path, cached) is not None


def _identity(x):
    return x
