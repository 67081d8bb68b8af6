"""The NCHW16c 1x1, depthwise and dense conv tactics split over the OpenMP team by output channel blocks
or by bands of rows (``conv/nchwc_split.py``): the bits of the one-thread tactic on a team of 1 or 2 (real
threads), torch's conv, offered at more than one intra-op thread only, whatever the layer's size."""
from __future__ import annotations

import numpy as np
import pytest

from srcore.conv.nchwc import from_blocked, to_blocked
from srcore_trt_like.conv import ConvSpec
from srcore_trt_like.conv import nchwc_split as _split
from srcore_trt_like.conv.nchwc import (LANES, ConvNchwcHalvesTactic, ConvNchwcTactic, DenseNchwcHalvesTactic,
                                        DenseNchwcTactic, DepthwiseNchwcHalvesTactic, DepthwiseNchwcTactic,
                                        PointwiseNchwcHalvesTactic, PointwiseNchwcTactic)
from srcore_trt_like.conv.nchwc_split import (ConvNchwcOmpTactic, ConvNchwcRowsTactic, DenseNchwcOmpTactic,
                                              DepthwiseNchwcOmpTactic, DepthwiseNchwcRowsTactic,
                                              PointwiseNchwcOmpTactic, PointwiseNchwcRowsTactic, nchwc_omp_builders)
from srcore_trt_like.kernels import threads as parallel
from srcore_trt_like.options import tactic_names
from _shared import conv_case, conv_reference

pytestmark = pytest.mark.one_pass

CASES = [  # (spec, (input blocked, output blocked))
    (ConvSpec((1, 24, 7, 9), 72, 1, 1, 0, relu=True), (True, True)),          # 5 output blocks, odd split
    (ConvSpec((2, 40, 6, 5), 36, 1, 1, 0, residual=True), (True, True)),        # 2 images, residual, 3 blocks
    (ConvSpec((1, 20, 5, 6), 40, 1, 1, 0, activation="hardswish"), (False, True)),
    (ConvSpec((1, 48, 6, 7), 33, 1, 1, 0), (True, False)),                      # NCHW out: the tile per part
    (ConvSpec((2, 40, 13, 11), 40, 5, 2, 2, groups=40, activation="hardswish"), (True, True)),
    (ConvSpec((1, 36, 9, 9), 36, 3, 1, 1, groups=36, relu=True, residual=True), (True, True)),
    (ConvSpec((1, 48, 10, 8), 48, 3, 1, 1, groups=48), (False, True)),
    (ConvSpec((1, 32, 8, 8), 32, 3, 2, 1, groups=32, activation="relu6"), (True, False)),
    # dense convs: 3 block groups (4 + 2 + 1 blocks), a plane of one band cut in rows, a residual
    (ConvSpec((1, 40, 7, 9), 112, 3, 1, 1, relu=True, residual=True), (True, True)),
    (ConvSpec((2, 20, 13, 11), 72, 3, 2, 1, activation="hardswish"), (False, True)),   # NCHW in, 2 images
    (ConvSpec((1, 48, 30, 30), 80, 3, 1, 1), (True, False)),                           # many bands, NCHW out
    (ConvSpec((1, 24, 5, 6), 36, 5, 1, 2, activation="leaky_relu", negative_slope=0.2), (True, True)),
    # a stem (dense_nchw16c's kernel: NCHW in on 3 channels, no residual): by output blocks only
    (ConvSpec((2, 3, 21, 19), 40, 3, 2, 1, activation="hardswish"), (False, True)),
]


# (a depthwise layer is split by rows only with an NCHW16c input; a stem is the dense kernel's case
# split by blocks, and the few-channel kernel's, "stem")
SPLITS = [(spec, blocked, rows) for spec, blocked in CASES for rows in (False, True, "stem")
          if not (rows and spec.groups > 1 and not blocked[0])
          and (rows != "stem" or spec.x_shape[1] <= 4) and not (spec.x_shape[1] <= 4 and rows is True)]


# the 8-lane kernels' twins (``..._h8_omp``, ``..._h8_rows_omp``): the 8-lane depthwise kernel takes
# NCHW16c on both sides only
SPLITS_H8 = [(spec, blocked, rows) for spec, blocked, rows in SPLITS if spec.groups == 1 or tuple(blocked) == (True, True)]

_HALVES = {DepthwiseNchwcTactic: DepthwiseNchwcHalvesTactic, PointwiseNchwcTactic: PointwiseNchwcHalvesTactic,
           DenseNchwcTactic: DenseNchwcHalvesTactic, ConvNchwcTactic: ConvNchwcHalvesTactic}


def _twin(cls):
    """The ``_h8`` twin of split tactic ``cls`` (same driver and parts, the 8-lane kernel in each)."""
    return next(c for c in vars(_split).values() if isinstance(c, type) and c.__bases__ == (cls,)
                and getattr(c, "halves", False))


@pytest.mark.parametrize("h8", [False, True], ids=["16", "h8"])
@pytest.mark.parametrize("spec,blocked,rows", SPLITS)
def test_split_gives_the_one_thread_bits_on_any_team(spec, blocked, rows, h8, monkeypatch):
    """By blocks on 2 threads; by rows on 3 (uneven bands; a depthwise band's first and last rows read
    the halo of the neighbouring bands and the zero rows; a 6-wide plane's slots spill past a row).
    The 8-lane twins give the bits of the one-thread 8-lane tactic, which are the 16-lane one's."""
    if h8 and (spec, blocked, rows) not in SPLITS_H8:
        pytest.skip("the 8-lane depthwise kernel takes NCHW16c on both sides")
    if spec.groups > 1:
        one_cls, split_cls = DepthwiseNchwcTactic, DepthwiseNchwcRowsTactic if rows else DepthwiseNchwcOmpTactic
    elif spec.kernel == (1, 1):
        one_cls, split_cls = PointwiseNchwcTactic, PointwiseNchwcRowsTactic if rows else PointwiseNchwcOmpTactic
    elif rows == "stem":
        one_cls, split_cls = DenseNchwcTactic, DenseNchwcOmpTactic
    else:
        one_cls, split_cls = ConvNchwcTactic, ConvNchwcRowsTactic if rows else ConvNchwcOmpTactic
    x, w, b, res = conv_case(spec)
    xin = to_blocked(x, LANES) if blocked[0] else x
    rin = res if res is None or not blocked[1] else to_blocked(res, LANES)
    one = one_cls(spec, w, b, blocked)
    want = np.empty(one.out_shape, np.float32)
    one._run(xin, want, rin)
    if h8:
        one_cls, split_cls = _HALVES[one_cls], _twin(split_cls)
        one = one_cls(spec, w, b, blocked)
        got = np.full(one.out_shape, np.nan, np.float32)
        one._run(xin, got, rin)
        np.testing.assert_array_equal(got, want)
    nt = 3 if rows is True else 2
    split = split_cls(spec, w, b, blocked, threads=nt)
    for size in (1, nt, nt, 1, nt):   # the region on the calling thread alone or on the team
        monkeypatch.setattr(parallel.Governor, "team", lambda self, size=size: size)
        out = np.full(one.out_shape, np.nan, np.float32)
        split._run(xin, out, rin)
        np.testing.assert_array_equal(out, want)
    got = from_blocked(want, spec.out_channels) if blocked[1] else want
    ref = conv_reference(spec, x, w, b, res)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_offered_at_two_threads_on_small_layers_beside_the_one_thread_tactic(monkeypatch):
    small_pw, small_dw = ConvSpec((1, 16, 7, 7), 48, 1, 1, 0), ConvSpec((1, 48, 7, 7), 48, 3, 1, 1, groups=48)
    one_block = ConvSpec((1, 16, 7, 7), 16, 1, 1, 0)
    names = lambda spec: [n for n, _ in nchwc_omp_builders(spec, np.ones(spec.weight_shape, np.float32), None,
                                                           (True, True))]
    monkeypatch.setattr(parallel, "count", lambda: 1)
    assert names(small_pw) == names(small_dw) == []
    monkeypatch.setattr(parallel, "count", lambda: 2)
    assert small_pw.macs < parallel.PARALLEL_MIN_WORK
    # (each 16-lane twin with its 8-lane one)
    assert names(small_pw) == ["pointwise_nchw16c_omp", "pointwise_nchw16c_rows_omp", "pointwise_nchw16c_h8_omp",
                               "pointwise_nchw16c_h8_rows_omp"]
    assert names(small_dw) == ["depthwise_nchw16c_omp", "depthwise_nchw16c_rows_omp", "depthwise_nchw16c_h8_omp",
                               "depthwise_nchw16c_h8_rows_omp"]
    assert names(one_block) == ["pointwise_nchw16c_rows_omp", "pointwise_nchw16c_h8_rows_omp"]   # one block: by rows
    assert names(ConvSpec((1, 16, 1, 7), 48, 1, 1, 0)) == ["pointwise_nchw16c_omp", "pointwise_nchw16c_h8_omp"]
    nchw_in = [n for n, _ in nchwc_omp_builders(small_dw, np.ones(small_dw.weight_shape, np.float32), None,
                                                (False, True))]
    # (each band would transpose the whole NCHW plane; the 8-lane kernel takes NCHW16c on both sides)
    assert nchw_in == ["depthwise_nchw16c_omp"]
    dense = lambda O, H: names(ConvSpec((1, 16, H, H), O, 3, 1, 1))
    assert dense(64, 7) == ["conv_nchw16c_rows_omp", "conv_nchw16c_h8_rows_omp"]   # one block group: only by rows
    assert dense(96, 7) == ["conv_nchw16c_omp", "conv_nchw16c_rows_omp", "conv_nchw16c_h8_omp",
                            "conv_nchw16c_h8_rows_omp"]       # groups of 4 and 2 blocks
    assert dense(96, 1) == ["conv_nchw16c_omp", "conv_nchw16c_h8_omp"]
    stem = [n for n, _ in nchwc_omp_builders(ConvSpec((1, 3, 9, 9), 32, 3, 2, 1), np.ones((32, 3, 3, 3), np.float32),
                                             None, (False, True))]
    assert stem == ["conv_nchw16c_rows_omp", "dense_nchw16c_omp", "conv_nchw16c_h8_rows_omp",
                    "dense_nchw16c_h8_omp"]   # (2 blocks: one block group)
    assert {"pointwise_nchw16c_omp", "depthwise_nchw16c_omp", "pointwise_nchw16c_rows_omp",
            "depthwise_nchw16c_rows_omp", "conv_nchw16c_omp", "conv_nchw16c_rows_omp", "dense_nchw16c_omp",
            "dense_nchw16c_omp+max_pool", "pointwise_nchw16c_h8_omp", "depthwise_nchw16c_h8_rows_omp",
            "conv_nchw16c_h8_omp", "conv_nchw16c_h8_rows_omp+max_pool", "dense_nchw16c_h8_omp+max_pool",
            "conv_nchwc_planes_h8_omp", "conv_nchwc_planes_h8_rows_omp"} <= set(tactic_names())


def test_left_out_of_the_choice_unless_the_engine_option_asks_for_them():
    """The builder offers the splits, but the choice leaves them out unless ``nchwc_split=True`` (they lost
    in a model's sequence of layers); the option is a checked boolean like ``nchwc``."""
    from srcore.plugin import EngineOptionError
    from srcore_trt_like.options import check_options
    from srcore_trt_like.tactics.choose import excluded

    for name in ("pointwise_nchw16c_omp", "depthwise_nchw16c_omp", "pointwise_nchw16c_h8_omp", "depthwise_nchw16c_h8_omp"):
        assert excluded(name, {}) and excluded(name, {"nchwc_split": False})
        assert not excluded(name, {"nchwc_split": True})
        assert excluded(name, {"nchwc_split": True, "exclude_tactics": [name]})
    for name in ("pointwise_nchw16c_rows_omp", "depthwise_nchw16c_rows_omp", "pointwise_nchw16c_h8_rows_omp",
                 "depthwise_nchw16c_h8_rows_omp"):   # their own option
        assert excluded(name, {}) and excluded(name, {"nchwc_split": True})
        assert not excluded(name, {"nchwc_rows": True})
    assert not excluded("pointwise_nchw16c", {})
    for name in ("conv_nchw16c_omp", "conv_nchw16c_rows_omp", "dense_nchw16c_omp+max_pool", "conv_nchw16c+max_pool",
                 "pointwise_nchw16c_h8", "conv_nchw16c_h8+max_pool", "conv_nchw16c_h8_omp", "conv_nchw16c_h8_rows_omp",
                 "dense_nchw16c_h8_omp+max_pool"):
        # the dense conv's (and a conv + max pool layer's named after them): offered unless nchwc=False
        assert not excluded(name, {}) and excluded(name, {"nchwc": False}) and excluded(name, {"exclude_tactics": [name]})
    check_options({"nchwc_split": True, "nchwc_rows": False})
    with pytest.raises(EngineOptionError, match="nchwc_split"):
        check_options({"nchwc_split": "yes"})


@pytest.mark.parametrize("split", ["dense_nchw16c_omp", "conv_nchw16c_omp", "conv_nchw16c_rows_omp",
                                   "dense_nchw16c_h8_omp", "conv_nchw16c_h8_rows_omp", "dense_tile_nchw16c_omp"])
def test_a_stem_with_its_max_pool_split_over_the_team_in_an_engine(split):
    """A stem conv + max pool layer (NCHW in, NCHW16c between) on each OpenMP twin, forced through
    ``exclude_tactics`` at 2 intra-op threads: the one-thread tactic's bits and torch's result."""
    torch = pytest.importorskip("torch")
    from threadpoolctl import threadpool_limits

    import srcore

    nn = torch.nn
    torch.manual_seed(5)
    m = nn.Sequential(nn.Conv2d(3, 40, 3, 2, 1), nn.ReLU(), nn.MaxPool2d(3, 2, 1), nn.Conv2d(40, 24, 1)).eval()
    x = torch.randn(1, 3, 30, 26)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    pool_tactics = [f"{n}+max_pool" for n in ("conv_nchw16c", "dense_nchw16c", "conv_nchw16c_omp",
                                              "conv_nchw16c_rows_omp", "dense_nchw16c_omp", "conv_nchw16c_h8",
                                              "dense_nchw16c_h8", "conv_nchw16c_h8_omp", "conv_nchw16c_h8_rows_omp",
                                              "dense_nchw16c_h8_omp", "dense_tile_nchw16c", "dense_tile_nchw16c_omp")]

    def engine(keep):
        opts = srcore.Options(backends=("trt_like", "cpu"), engine_options={
            "nchwc": True, "timing": False, "exclude_tactics": [t for t in pool_tactics if t != keep]})
        sm = srcore.StaticModule(model, options=opts)
        return sm, "\n".join(e.description for e in sm.partition.engines)

    with threadpool_limits(2):
        if parallel.count() < 2:
            pytest.skip("one intra-op thread here")
        one, _ = engine(f"{split.removesuffix('_omp').removesuffix('_rows')}+max_pool")
        sm, desc = engine(f"{split}+max_pool")
        assert f"[{split}+max_pool]" in desc, desc
        want = one(x.numpy())
        assert all(np.array_equal(sm(x.numpy()), want) for _ in range(3))
    with torch.no_grad():
        np.testing.assert_allclose(want, m(x).numpy(), rtol=1e-4, atol=1e-4)


def _h8_cases():
    """Random layers for the 8-lane twins: a 1x1, a depthwise (both sides NCHW16c) or a dense conv, any
    layouts the kernels take, a residual or an activation, 1-2 images."""
    from hypothesis import strategies as st

    @st.composite
    def case(draw):
        kind = draw(st.sampled_from(["pointwise", "depthwise", "dense"]))
        n, C = draw(st.integers(1, 2)), draw(st.integers(1, 40))
        H, W = draw(st.integers(1, 12)), draw(st.integers(1, 12))
        act = draw(st.sampled_from(["none", "relu", "hardswish", "relu6"]))
        relu, act = act == "relu", ("none" if act == "relu" else act)
        residual = draw(st.booleans())
        if kind == "pointwise":
            spec = ConvSpec((n, C, H, W), draw(st.integers(1, 72)), 1, 1, 0, relu=relu, residual=residual,
                            activation=act)
            blocked = (draw(st.booleans()), draw(st.booleans()))
        elif kind == "depthwise":
            k, s = draw(st.sampled_from([3, 5])), draw(st.integers(1, 2))
            spec = ConvSpec((n, C, H, W), C, k, s, k // 2, groups=C, relu=relu, residual=residual, activation=act)
            blocked = (True, True)
        else:
            k, s = draw(st.sampled_from([1, 3])), draw(st.integers(1, 2))
            spec = ConvSpec((n, C, H, W), draw(st.integers(1, 100)), k, s, k // 2, relu=relu,
                            residual=residual and not (k == 1 and s == 1), activation=act)
            blocked = (draw(st.booleans()), draw(st.booleans()))
            if (k, s) == (1, 1):   # (a 1x1 stride-1 unpadded layer is the pointwise kind's)
                spec = ConvSpec((n, C, H, W), spec.out_channels, 3, 1, 1, relu=relu, residual=residual, activation=act)
        return spec, blocked, draw(st.booleans()), draw(st.integers(0, 2**16))
    return case()


def _given_h8():
    from hypothesis import given, settings

    return lambda f: settings(max_examples=30, deadline=None)(given(case=_h8_cases())(f))


@_given_h8()
def test_the_8_lane_twins_give_the_16_lane_one_thread_bits_and_torchs_result(case):
    """Every ``_h8`` split twin the builder offers for a random layer, on a team of 2 (forced: the
    governor's choice never changes the parts), gives the 16-lane one-thread tactic's bits, and
    torch's conv."""
    spec, blocked, rows, seed = case
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(parallel, "count", lambda: 2)
        mp.setattr(parallel.Governor, "team", lambda self: 2)
        builders = [(name, build) for name, build in nchwc_omp_builders(spec, *conv_case(spec, seed)[1:3], blocked)
                    if "_h8_" in name and name.endswith("_rows_omp") == rows]
        x, w, b, res = conv_case(spec, seed)
        xin = to_blocked(x, LANES) if blocked[0] else x
        rin = res if res is None or not blocked[1] else to_blocked(res, LANES)
        ref = conv_reference(spec, x, w, b, res)
        for name, build in builders:
            # (the stem's twin runs the few-channel kernel: dense_nchw16c's bits, not conv_nchw16c's)
            one_cls = (DepthwiseNchwcTactic if spec.groups > 1 else PointwiseNchwcTactic if name.startswith("pointwise_")
                       else DenseNchwcTactic if name.startswith("dense_") else ConvNchwcTactic)
            one = one_cls(spec, w, b, blocked)
            want = np.empty(one.out_shape, np.float32)
            one._run(xin, want, rin)
            split = build()
            out = np.full(one.out_shape, np.nan, np.float32)
            split._run(xin, out, rin)
            np.testing.assert_array_equal(out, want, err_msg=name)
            got = from_blocked(want, spec.out_channels) if blocked[1] else want
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(ref).max()), err_msg=name)
