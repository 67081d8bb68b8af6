"""The SIMD direct conv split over the part pool with each part copying the input rows its band of
output rows reads (``parallel.run_bound``, ``DirectRun.task_rows`` / ``fill_rows``): on real 2- and
3-thread runs, over random layers (kernel, stride, dilation, padding, both copy layouts, row tiles,
residual and relu), the bits of one thread and torch's values, with the phase buffer poisoned before
each split call (a row no part copied would show as NaN); groups and output channels in the lanes keep
the caller's whole copy; ``split_fill=False`` gives the same bits."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from srcore.plugin import simd_conv
from srcore_cpu.kernels import parallel as par

pytestmark = pytest.mark.one_pass   # kernel calls only


@st.composite
def layer(draw):
    nd = draw(st.sampled_from([1, 2]))
    k = tuple(draw(st.integers(1, 4)) for _ in range(nd))
    s = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    d = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    p = tuple(draw(st.integers(0, 2)) for _ in range(nd))
    size = tuple(draw(st.integers(max(1, dd * (kk - 1) + 1 - 2 * pp), 40 if nd == 2 else 300))
                 for kk, dd, pp in zip(k, d, p))
    return dict(nd=nd, k=k, s=s, d=d, p=p, size=size, n=draw(st.integers(1, 2)), c=draw(st.integers(1, 9)),
                o=draw(st.integers(1, 20)), rows=draw(st.booleans()), tile=draw(st.sampled_from([0, 16, 32])),
                res=draw(st.booleans()), relu=draw(st.booleans()), threads=draw(st.sampled_from([2, 3])))


def _conv(L, rng):
    w = rng.standard_normal((L["o"], L["c"]) + L["k"]).astype(np.float32)
    b = rng.standard_normal(L["o"]).astype(np.float32)
    x = rng.standard_normal((L["n"], L["c"]) + L["size"]).astype(np.float32)
    conv = simd_conv.SimdDirectConv(w, b, L["s"], [(q, q) for q in L["p"]], L["d"], lo=0.0 if L["relu"] else -math.inf)
    conv.rows_interleaved, conv.row_tile = L["rows"], L["tile"]
    return conv, w, b, x


@settings(max_examples=60, deadline=None)
@given(L=layer())
def test_parts_copying_their_own_rows_give_one_threads_bits_and_torchs_values(L):
    rng = np.random.default_rng(sum(L["size"]) + L["c"])
    conv, w, b, x = _conv(L, rng)
    oshape = conv.out_shape(x.shape)
    if 0 in oshape:
        return
    res = rng.standard_normal(oshape).astype(np.float32) if L["res"] else None
    one = np.empty(oshape, np.float32)
    conv(x, one, res)
    tw, tx = torch.from_numpy(w), torch.from_numpy(x)
    fn = F.conv1d if L["nd"] == 1 else F.conv2d
    want = fn(tx, tw, torch.from_numpy(b), L["s"], L["p"], L["d"]).numpy() + (0 if res is None else res)
    if L["relu"]:
        want = np.maximum(want, 0)
    np.testing.assert_allclose(one, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))
    for split_fill in (True, False):
        out = np.full(oshape, np.nan, np.float32)
        run = conv.bind(x, out, res)
        run._xq[...] = np.nan          # a row no part copies would poison its outputs
        par.run_bound(run, L["threads"], split_fill)
        assert np.array_equal(out, one), ("split_fill", split_fill, run.task_units)


def test_band_rows_cover_what_each_part_reads_and_split_the_copy():
    """A 3x3 stride-2 layer of detection_head: each part's rows are about its share plus the halo, and
    together they cover the copy; a grouped conv and output channels in the lanes have no bands."""
    conv = simd_conv.SimdDirectConv(np.ones((32, 16, 3, 3), np.float32), None, 2, 1, 1)
    x = np.ones((1, 16, 128, 128), np.float32)
    run = conv.bind(x, np.empty(conv.out_shape(x.shape), np.float32))
    per = run.task_units
    assert per > 0 and run.tasks % per == 0
    half = run.tasks // per // 2 * per
    (a0, a1), (b0, b1) = run.task_rows(0, half), run.task_rows(half, run.tasks)
    assert a0 == 0 and b0 < a1 <= b0 + 2 and b1 >= a1
    assert a1 - a0 < 0.6 * b1 and b1 - b0 < 0.6 * b1
    grouped = simd_conv.SimdDirectConv(np.ones((32, 8, 3, 3), np.float32), None, 1, 1, 1, groups=2)
    assert grouped.bind(x, np.empty(grouped.out_shape(x.shape), np.float32)).task_units == 0


@pytest.mark.parametrize("threads", [2, 3])
def test_weights_inner_parts_copy_the_whole_input_per_thread_and_keep_the_bits(monkeypatch, threads):
    """Large weights on a small plane: every task reads every row, so each thread running a part makes
    its own whole copy (once a call) and reads that; the bits of one thread and torch's values, also
    with the caller's buffer poisoned and over a second call into a fresh output."""
    from srcore.conv.direct import DirectRun

    rng = np.random.default_rng(7)
    w = rng.standard_normal((96, 64, 3, 3)).astype(np.float32)
    x = rng.standard_normal((2, 64, 9, 9)).astype(np.float32)
    conv = simd_conv.SimdDirectConv(w, None, 1, 1, 1)
    one = np.empty(conv.out_shape(x.shape), np.float32)
    conv(x, one)
    np.testing.assert_allclose(one, F.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy(),
                               rtol=1e-4, atol=1e-3)
    copies = []
    real = DirectRun.own_copy
    monkeypatch.setattr(DirectRun, "own_copy", lambda self, n: (copies.append(n), real(self, n))[1])
    for _ in range(2):
        out = np.full_like(one, np.nan)
        run = conv.bind(x, out)
        assert run.task_units == 0
        run._xq[...] = np.nan
        copies.clear()
        par.run_bound(run, threads)
        assert np.array_equal(out, one)
        # each image copied once by each thread that ran a part of it (1 to `threads` of them)
        assert sorted(set(copies)) == [0, 1] and 2 <= len(copies) <= 2 * threads
