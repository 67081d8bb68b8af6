"""The SGEMM-tile conv tactics split over the OpenMP team (``conv/tile_split.py``): ``pointwise_sgemm_omp``
by pixel panels and ``dense_tile_nchw16c_omp`` by output rows give the one-thread tactic's bits on teams
of 1-3 (real threads) and torch's conv; both one-thread tactics and their twins are offered at more than
one intra-op thread, whatever the layer's size."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from srcore_trt_like.conv import ConvSpec
from srcore_trt_like.conv.dense_tile import DenseTileTactic
from srcore_trt_like.conv.nchwc import nchwc_tactic_builders
from srcore_trt_like.conv.pointwise_sgemm import PointwiseSgemmTactic
from srcore_trt_like.conv.tile_split import DenseTileOmpTactic, PointwiseSgemmOmpTactic, tile_omp_builders
from srcore_trt_like.kernels import threads as parallel
from srcore_trt_like.options import tactic_names

pytestmark = pytest.mark.one_pass

_ACT = {"relu": torch.relu, "relu6": lambda t: torch.clamp(t, 0, 6), "hardswish": torch.nn.functional.hardswish,
        "leaky_relu": lambda t: torch.nn.functional.leaky_relu(t, 0.1)}


def _spec(n, c, o, h, w, k, stride, pad, dil, act):
    return ConvSpec((n, c, h, w), o, kernel=k, stride=stride, padding=pad, dilation=dil, relu=act == "relu",
                    activation=act if act not in ("none", "relu") else "none", negative_slope=0.1)


def _blocked(x):
    n, c, h, w = x.shape
    cb = -(-c // 16)
    xb = np.zeros((n, cb * 16, h, w), np.float32)
    xb[:, :c] = x
    return np.ascontiguousarray(xb.reshape(n, cb, 16, h, w).transpose(0, 1, 3, 4, 2))


def _each_team(split, xin, want, monkeypatch, teams=(1, 2, 3, 2, 1)):
    """``split`` run with its governor picking each team size in turn: every run the bits ``want``."""
    for size in teams:
        monkeypatch.setattr(parallel.Governor, "team", lambda self, size=size: size)
        out = np.full(want.shape, np.nan, np.float32)
        split._run(xin, out, None)
        np.testing.assert_array_equal(out, want)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 2), c=st.integers(1, 40), o=st.integers(1, 30), h=st.integers(1, 11), w=st.integers(1, 13),
       blocked=st.booleans(), act=st.sampled_from(["none", "relu", "relu6", "hardswish"]), nt=st.integers(2, 3),
       seed=st.integers(0, 2**31 - 1))
def test_pointwise_sgemm_split_gives_the_one_thread_bits(n, c, o, h, w, blocked, act, nt, seed):
    """Pixel counts that are not whole panels (the last part's partial panel), fewer panels than threads
    (an empty part), NCHW16c input with channels not a multiple of 8 (the scalar tail of the transposes)."""
    from _pytest.monkeypatch import MonkeyPatch

    rng = np.random.default_rng(seed)
    spec = _spec(n, c, o, h, w, 1, 1, 0, 1, act)
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((o, c, 1, 1), dtype=np.float32)
    b = rng.standard_normal(o, dtype=np.float32)
    xin = _blocked(x) if blocked else x
    want = np.empty(spec.out_shape, np.float32)
    PointwiseSgemmTactic(spec, wt, b, blocked)._run(xin, want, None)
    with MonkeyPatch.context() as mp:
        _each_team(PointwiseSgemmOmpTactic(spec, wt, b, blocked, threads=nt), xin, want, mp)
    ref = _ACT.get(act, lambda t: t)(torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(wt),
                                                                 torch.from_numpy(b))).numpy()
    np.testing.assert_allclose(want, ref, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(ref).max()))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 2), c=st.integers(1, 5), o=st.integers(1, 36), h=st.integers(1, 17), w=st.integers(1, 17),
       k=st.sampled_from([1, 3, 5]), stride=st.integers(1, 3), pad=st.integers(0, 2), dil=st.integers(1, 2),
       act=st.sampled_from(["none", "relu", "relu6", "leaky_relu", "hardswish"]), nt=st.integers(2, 3),
       seed=st.integers(0, 2**31 - 1))
def test_dense_tile_split_gives_the_one_thread_bits(n, c, o, h, w, k, stride, pad, dil, act, nt, seed):
    """Each part pads only the input rows its output rows read (a tap's reach with dilation and stride,
    the zero rows above and below): any miss would read the other part's unwritten rows (NaN here)."""
    from _pytest.monkeypatch import MonkeyPatch

    if (h + 2 * pad - dil * (k - 1) - 1) < 0 or (w + 2 * pad - dil * (k - 1) - 1) < 0:
        return                                     # (no output pixel)
    rng = np.random.default_rng(seed)
    spec = _spec(n, c, o, h, w, k, stride, pad, dil, act)
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((o, c, k, k), dtype=np.float32)
    b = rng.standard_normal(o, dtype=np.float32)
    one = DenseTileTactic(spec, wt, b)
    want = np.empty(one.out_shape, np.float32)
    one._run(x, want, None)
    split = DenseTileOmpTactic(spec, wt, b, threads=nt)
    split.bufs[:] = np.nan      # (a padded row a part did not write would poison its outputs)
    with MonkeyPatch.context() as mp:
        _each_team(split, x, want, mp)
    ref = _ACT.get(act, lambda t: t)(torch.nn.functional.conv2d(
        torch.from_numpy(x), torch.from_numpy(wt), torch.from_numpy(b), stride=stride, padding=pad,
        dilation=dil)).numpy()
    planes = want.transpose(0, 1, 4, 2, 3).reshape(n, -1, *want.shape[2:4])
    np.testing.assert_allclose(planes[:, :o], ref, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(ref).max()))


def test_offered_at_two_threads_beside_the_one_thread_tactics(monkeypatch):
    head = ConvSpec((1, 64, 8, 8), 75, 1, 1, 0)          # a detection head: 1x1 writing NCHW
    stem = ConvSpec((1, 3, 32, 32), 16, 3, 2, 1, activation="leaky_relu", negative_slope=0.1)
    ones = lambda spec: np.ones(spec.weight_shape, np.float32)
    names = lambda spec, blocked: ([n for n, _ in nchwc_tactic_builders(spec, ones(spec), None, blocked)],
                                   [n for n, _ in tile_omp_builders(spec, ones(spec), None, blocked)])
    monkeypatch.setattr(parallel, "count", lambda: 1)
    assert names(head, (True, False)) == (["pointwise_nchw16c", "pointwise_nchw16c_h8", "pointwise_sgemm"], [])
    assert "dense_tile_nchw16c" in names(stem, (False, True))[0] and names(stem, (False, True))[1] == []
    monkeypatch.setattr(parallel, "count", lambda: 2)
    assert head.macs < parallel.PARALLEL_MIN_WORK
    assert names(head, (True, False)) == (["pointwise_nchw16c", "pointwise_nchw16c_h8", "pointwise_sgemm"],
                                          ["pointwise_sgemm_omp"])
    assert "dense_tile_nchw16c" in names(stem, (False, True))[0]
    assert names(stem, (False, True))[1] == ["dense_tile_nchw16c_omp"]
    assert names(head, (True, True))[1] == []         # (NCHW16c out: not the tile's layout)
    assert names(ConvSpec((1, 64, 3, 5), 75, 1, 1, 0), (True, False))[1] == []   # one panel: nothing to split
    assert {"pointwise_sgemm_omp", "dense_tile_nchw16c_omp"} <= set(tactic_names())


def test_a_stem_and_a_head_split_over_the_team_in_an_engine():
    """A detection head's stem (3 -> 16, 3x3/2, leaky relu) and 1x1 head writing NCHW, forced onto the twins
    through ``exclude_tactics`` at 2 intra-op threads: the one-thread tactics' bits on every call (the
    governor's first calls alone, then on the team) and torch's result."""
    from threadpoolctl import threadpool_limits

    import srcore
    from srcore_trt_like.options import CONV_TACTICS

    nn = torch.nn
    torch.manual_seed(7)
    m = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.LeakyReLU(0.1), nn.Conv2d(16, 75, 1)).eval()
    x = torch.randn(1, 3, 38, 30)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))

    def engine(keep):
        opts = srcore.Options(backends=("trt_like", "cpu"), engine_options={
            "nchwc": True, "timing": False, "exclude_tactics": [t for t in CONV_TACTICS if t not in keep]})
        sm = srcore.StaticModule(model, options=opts)
        return sm, "\n".join(e.description for e in sm.partition.engines)

    with threadpool_limits(2):
        if parallel.count() < 2:
            pytest.skip("one intra-op thread here")
        one, one_desc = engine({"dense_tile_nchw16c", "pointwise_sgemm"})
        sm, desc = engine({"dense_tile_nchw16c_omp", "pointwise_sgemm_omp"})
        assert "[dense_tile_nchw16c]" in one_desc and "[pointwise_sgemm]" in one_desc, one_desc
        assert "[dense_tile_nchw16c_omp]" in desc and "[pointwise_sgemm_omp]" in desc, desc
        want = one(x.numpy())
        assert all(np.array_equal(sm(x.numpy()), want) for _ in range(4))
    with torch.no_grad():
        ref = m(x).numpy()
    np.testing.assert_allclose(want, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
