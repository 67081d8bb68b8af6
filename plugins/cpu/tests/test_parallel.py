"""parallel.run/split: every part runs exactly once, on the requested number of threads."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from srcore_cpu.kernels import parallel


@given(st.integers(0, 50), st.integers(1, 8))
def test_split_covers_the_range_in_order(n_items, n):
    parts = parallel.split(n_items, n)
    assert [i for p in parts for i in range(n_items)[p]] == list(range(n_items))
    assert len(parts) == max(1, min(n, n_items))
    sizes = [p.stop - p.start for p in parts]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("n", [1, 2, 3])
def test_run_calls_every_part_once_and_nested_calls_run_inline(n):
    seen, names, inner = [], set(), []

    def work(p):
        seen.append(p)
        name = threading.current_thread().name
        names.add(name)
        if name.startswith("srcore-cpu"):
            inner.append(parallel.threads())  # 1 inside a pool worker: no nested fan-out

    parallel.run(work, list(range(7)), n)
    assert sorted(seen) == list(range(7))
    if n == 1:
        assert names == {threading.current_thread().name}
    else:
        assert any(x.startswith("srcore-cpu") for x in names) or len(names) == 1
    assert all(t == 1 for t in inner)
    assert parallel.threads() >= 1


def test_threads_follow_threadpool_limits_and_gelu_agrees_across_thread_counts():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from srcore_cpu.kernels import activation_fast as AF

    x = np.random.default_rng(0).standard_normal(5 * AF.BLOCK + 3).astype(np.float32)
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        assert parallel.threads() == 1
        one = AF.gelu(x)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        two = AF.gelu(x)
    np.testing.assert_array_equal(one, two)
