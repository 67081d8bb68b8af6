"""srcore.conv.omp_team: a split call's Python parts claimed by numba's OpenMP team."""
from __future__ import annotations

import threading

import numpy as np
import pytest

#: kernels called directly, no executor or planner: the second pass (test.sh) deselects it
pytestmark = pytest.mark.one_pass

omp_team = pytest.importorskip("srcore.conv.omp_team")

needs_omp = pytest.mark.skipif(not omp_team.available(), reason="numba's parallel layer is not GNU OpenMP here")


@needs_omp
def test_every_part_runs_once_and_gives_the_one_thread_bits():
    """Each part index runs exactly once, on the caller or an OpenMP worker (a thread Python did not
    start); numpy products run in parts give the bits of the same products run one after the other."""
    team = omp_team.team(2)
    seen: dict[int, list[int]] = {}
    lock = threading.Lock()

    def note(i):
        with lock:
            seen.setdefault(i, []).append(threading.get_native_id())
    team.run(note, 257)
    assert sorted(seen) == list(range(257)) and all(len(v) == 1 for v in seen.values())

    rng = np.random.default_rng(3)
    a = rng.standard_normal((8, 64, 96), dtype=np.float32)
    b = rng.standard_normal((8, 96, 48), dtype=np.float32)
    one = np.stack([a[i] @ b[i] for i in range(8)])
    split = np.empty_like(one)
    for _ in range(20):   # (some of them on the worker: the parts release the GIL in BLAS)
        team.run(lambda i: np.matmul(a[i], b[i], out=split[i]), 8)
        np.testing.assert_array_equal(split, one)


@needs_omp
def test_a_part_error_is_raised_on_the_caller_after_every_part_ended():
    team = omp_team.team(2)
    ended = []

    def part(i):
        if i == 3:
            raise ValueError("part 3")
        ended.append(i)
    with pytest.raises(ValueError, match="part 3"):
        team.run(part, 8)
    assert sorted(ended) == [0, 1, 2, 4, 5, 6, 7]
    team.run(lambda i: None, 4)   # the team is usable after an error


@needs_omp
def test_one_thread_or_one_part_runs_on_the_caller():
    me = threading.get_native_id()
    for size, count in ((1, 5), (2, 1)):
        who = []
        omp_team.team(size).run(lambda i: who.append((i, threading.get_native_id())), count)
        assert who == [(i, me) for i in range(count)]


@needs_omp
def test_the_cpu_plugins_part_pool_runs_on_the_omp_team_unless_turned_off(monkeypatch):
    """``SRCORE_CPU_OMP_TEAM=1``: the part pool's team is the OpenMP one; unset or ``0``:
    srcore.conv's Python team."""
    from srcore.conv import team as py_team
    from srcore_cpu.kernels import parallel

    monkeypatch.setenv("SRCORE_CPU_OMP_TEAM", "1")
    assert isinstance(parallel._team(2), omp_team.OmpTeam)
    monkeypatch.setenv("SRCORE_CPU_OMP_TEAM", "0")
    assert isinstance(parallel._team(2), py_team.Team)
    monkeypatch.delenv("SRCORE_CPU_OMP_TEAM")
    assert isinstance(parallel._team(2), py_team.Team)
