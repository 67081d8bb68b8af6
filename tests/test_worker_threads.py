"""conftest.py's share of the cores per pytest-xdist worker: cores // workers intra-op threads, unless the
user chose a thread count."""
from __future__ import annotations

import os

import pytest

import _worker_threads as W

pytestmark = pytest.mark.one_pass


@pytest.fixture
def clean_env(monkeypatch):
    for v in W.THREAD_VARIABLES:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(5)))
    limits = []
    monkeypatch.setattr("threadpoolctl.threadpool_limits", lambda n: limits.append(n))
    return limits


@pytest.mark.parametrize("workers,share", [(1, "5"), (2, "2"), (4, "1"), (8, "1")])
def test_each_worker_gets_its_share_of_the_cores(clean_env, workers, share):
    W.share_cores({"workercount": workers})
    assert [os.environ[v] for v in W.THREAD_VARIABLES] == [share] * 3
    assert clean_env == [int(share)]


def test_a_thread_count_the_user_set_is_kept(clean_env, monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    W.share_cores({"workercount": 2})
    assert "OMP_NUM_THREADS" not in os.environ and os.environ["OPENBLAS_NUM_THREADS"] == "3"
    assert clean_env == []
