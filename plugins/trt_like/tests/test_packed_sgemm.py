"""The packed-panel SGEMM (kernels/sgemm.py, tactic ``packed_sgemm``): results against numpy in float64
over odd sizes (every row tile, partial panels, several k, row and column blocks), calls from threads,
a stored packed weight, and engines whose GEMM layers use it against torch, built and from the cache."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import srcore
from srcore.ir.parser import parse_graph
from srcore_trt_like.errors import TacticSpecError
from srcore_trt_like.kernels import sgemm
from _shared import run_in_threads


def _check(m, n, k, lanes, seed, lead=()):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n, k), dtype=np.float32)
    x = rng.standard_normal((*lead, m, k), dtype=np.float32)
    out = np.full((*lead, m, n), np.nan, np.float32)
    sgemm.PackedSgemm(w, lanes)(x, out)
    want = x.astype(np.float64) @ w.T.astype(np.float64)
    # float32 accumulation over k terms
    np.testing.assert_allclose(out, want, rtol=0, atol=4 * k * np.finfo(np.float32).eps * np.abs(want).max() + 1e-6)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 80), k=st.integers(1, 600), lanes=st.sampled_from([8, 16]),
       seed=st.integers(0, 2**31 - 1))
def test_matches_float64(m, n, k, lanes, seed):
    _check(m, n, k, lanes, seed)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("m,n,k", [(250, 530, 700), (241, 257, 256), (64, 4096 // 8, 513), (7, 33, 1)])
@pytest.mark.parametrize("lanes", [8, 16])
def test_row_column_and_k_blocks(m, n, k, lanes):
    """Past one block of rows (MC), panels (NCP) and k (KC), with the edges just over each."""
    assert m > sgemm.MC or n > sgemm.NCP * 2 * lanes or k > sgemm.KC or k == 1
    _check(m, n, k, lanes, 3)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_leading_dims_and_no_write_outside_the_output():
    _check(5, 19, 70, 8, 4, lead=(2, 3))
    rng = np.random.default_rng(5)
    w = rng.standard_normal((21, 30), dtype=np.float32)
    x = rng.standard_normal((7, 30), dtype=np.float32)
    buf = np.full(7 * 21 + 64, 7.0, np.float32)
    sgemm.PackedSgemm(w)(x, buf[:7 * 21].reshape(7, 21))
    assert (buf[7 * 21:] == 7.0).all()     # (the last panel's masked stores)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_calls_from_threads_agree():
    """Each thread packs its rows into its own scratch."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((100, 300), dtype=np.float32)
    gemm = sgemm.PackedSgemm(w)
    w[:] = 0                                    # packing copied the weight
    xs = [rng.standard_normal((m, 300), dtype=np.float32) for m in (33, 7, 64, 1, 90, 12)]
    first = []
    for x in xs:
        o = np.empty((len(x), 100), np.float32)
        gemm(x, o)
        first.append(o)

    def work(t):
        for i in range(30):
            j = (t + i) % len(xs)
            o = np.empty((len(xs[j]), 100), np.float32)
            gemm(xs[j], o)
            np.testing.assert_array_equal(o, first[j])
    run_in_threads(work, 4)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_a_stored_packed_weight():
    rng = np.random.default_rng(6)
    w = rng.standard_normal((37, 300), dtype=np.float32)
    x = rng.standard_normal((9, 300), dtype=np.float32)
    a, b = np.empty((9, 37), np.float32), np.empty((9, 37), np.float32)
    first = sgemm.PackedSgemm(w)
    first(x, a)
    sgemm.PackedSgemm(None, 8, packed=(first.wp.copy(), 37, 300))(x, b)
    np.testing.assert_array_equal(a, b)
    with pytest.raises(srcore.SrcoreError, match=r"not a packed \(37, 299\) weight"):
        sgemm.PackedSgemm(None, 8, packed=(first.wp, 37, 299))


MLP = """graph(%x : Float(50, 200)):
  %w1 : Float(300, 200) = prim::Constant[param="w1"]()
  %b1 : Float(300) = prim::Constant[param="b1"]()
  %w2 : Float(45, 300) = prim::Constant[param="w2"]()
  %h : Tensor = aten::linear(%x, %w1, %b1)
  %r : Tensor = aten::gelu(%h)
  %y : Tensor = aten::linear(%r, %w2)
  return (%y)
"""

_OTHERS = ["numpy", "mkl_packed", "mkl_split", "numpy_split"]


def _mlp():
    rng = np.random.default_rng(1)
    g = parse_graph(MLP)
    params = {"w1": rng.standard_normal((300, 200), dtype=np.float32) / 14,
              "b1": rng.standard_normal(300, dtype=np.float32),
              "w2": rng.standard_normal((45, 300), dtype=np.float32) / 17}
    for node in g.nodes:
        if node.kind == "prim::Constant" and node.attrs.get("param") in params:
            node.attrs["value"] = params[node.attrs["param"]]
    x = rng.standard_normal((50, 200), dtype=np.float32)
    t = {k: torch.from_numpy(v) for k, v in params.items()}
    F = torch.nn.functional
    want = F.linear(F.gelu(F.linear(torch.from_numpy(x), t["w1"], t["b1"])), t["w2"])
    return g, x, want.numpy()


def test_engine_gemm_layers_on_it_built_and_from_the_engine_cache(tmp_path):
    from threadpoolctl import threadpool_limits

    g, x, want = _mlp()
    opts = srcore.Options(backends=("trt_like", "cpu"), engine_options={
        "exclude_tactics": _OTHERS, "timing_cache": False, "engine_cache": str(tmp_path)})
    with threadpool_limits(1):      # (a candidate at one intra-op thread)
        first = srcore.StaticModule(g, options=opts)
        desc = first.partition.engines[0].description
        assert desc.count("gemm -> ") == 2 and desc.count("[packed_sgemm") == 2, desc
        np.testing.assert_allclose(first(x), want, rtol=1e-4, atol=1e-4)
        again = srcore.StaticModule(g, options=opts)
        desc = again.partition.engines[0].description
        assert "loaded from the engine cache" in desc and desc.count("[packed_sgemm") == 2, desc
        np.testing.assert_array_equal(again(x), first(x))


def test_the_option_turns_it_off():
    from threadpoolctl import threadpool_limits

    g, x, want = _mlp()
    with threadpool_limits(1):
        sm = srcore.StaticModule(g, options=srcore.Options(backends=("trt_like", "cpu"), engine_options={
            "exclude_tactics": ["packed_sgemm", "packed_sgemm16"], "timing_cache": False}))
        assert "packed_sgemm" not in sm.partition.engines[0].description
        np.testing.assert_allclose(sm(x), want, rtol=1e-4, atol=1e-4)


def _blocked_input(x):
    n, c, h, w = x.shape
    cb = -(-c // 16)
    xb = np.zeros((n, cb * 16, h, w), np.float32)
    xb[:, :c] = x
    return np.ascontiguousarray(xb.reshape(n, cb, 16, h, w).transpose(0, 1, 3, 4, 2))


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 2), c=st.integers(1, 70), o=st.integers(1, 40), h=st.integers(1, 12), w=st.integers(1, 12),
       blocked=st.booleans(), act=st.sampled_from(["none", "relu", "relu6", "leaky_relu"]),
       seed=st.integers(0, 2**31 - 1))
def test_pointwise_sgemm_conv_matches_torch(n, c, o, h, w, blocked, act, seed):
    """The 1x1 conv on the SGEMM's tiles (NCHW out; NCHW or NCHW16c in, odd channel and pixel counts:
    partial panels, channel blocks and row tiles), bias and each activation, against torch."""
    from srcore_trt_like.conv import ConvSpec
    from srcore_trt_like.conv.pointwise_sgemm import PointwiseSgemmTactic

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((o, c, 1, 1), dtype=np.float32)
    b = rng.standard_normal(o, dtype=np.float32)
    spec = ConvSpec((n, c, h, w), o, kernel=1, relu=act == "relu",
                    activation={"relu6": "relu6", "leaky_relu": "leaky_relu"}.get(act, "none"), negative_slope=0.1)
    tactic = PointwiseSgemmTactic(spec, wt, b, blocked)
    y = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(wt), torch.from_numpy(b))
    y = {"relu": torch.relu, "relu6": lambda t: torch.clamp(t, 0, 6),
         "leaky_relu": lambda t: torch.nn.functional.leaky_relu(t, 0.1)}.get(act, lambda t: t)(y).numpy()
    out = np.full(y.shape, np.nan, np.float32)
    tactic._run(_blocked_input(x) if blocked else x, out, None)
    np.testing.assert_allclose(out, y, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(y).max()))
    again = PointwiseSgemmTactic(spec, wt, b, blocked, layout=tactic.layout())   # (a stored plan's weight)
    out2 = np.empty_like(out)
    again._run(_blocked_input(x) if blocked else x, out2, None)
    np.testing.assert_array_equal(out2, out)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_pointwise_sgemm_needs_a_plain_1x1():
    from srcore_trt_like.conv import ConvSpec
    from srcore_trt_like.conv.pointwise_sgemm import PointwiseSgemmTactic

    spec = ConvSpec((1, 8, 5, 5), 4, kernel=1, residual=True)
    with pytest.raises(TacticSpecError, match="pointwise_sgemm: needs .* residual True"):
        PointwiseSgemmTactic(spec, np.ones((4, 8, 1, 1), np.float32), None, False)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 2), c=st.integers(1, 6), o=st.integers(1, 40), h=st.integers(1, 19), w=st.integers(1, 19),
       k=st.sampled_from([1, 2, 3, 5]), stride=st.integers(1, 3), pad=st.integers(0, 2), dil=st.integers(1, 2),
       act=st.sampled_from(["none", "relu", "relu6", "leaky_relu", "hardswish"]), seed=st.integers(0, 2**31 - 1))
def test_dense_tile_conv_matches_torch(n, c, o, h, w, k, stride, pad, dil, act, seed):
    """The dense conv NCHW -> NCHW16c on the 6 x 16 tile (row tails of every tile size, padding, stride,
    dilation, output channels not a multiple of 16: zero padding lanes), each activation, against torch."""
    from srcore_trt_like.conv import ConvSpec
    from srcore_trt_like.conv.dense_tile import DenseTileTactic

    if (h + 2 * pad - dil * (k - 1) - 1) < 0 or (w + 2 * pad - dil * (k - 1) - 1) < 0:
        return                                     # (no output pixel)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((o, c, k, k), dtype=np.float32)
    b = rng.standard_normal(o, dtype=np.float32)
    spec = ConvSpec((n, c, h, w), o, kernel=k, stride=stride, padding=pad, dilation=dil, relu=act == "relu",
                    activation=act if act not in ("none", "relu") else "none", negative_slope=0.1)
    tactic = DenseTileTactic(spec, wt, b)
    y = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(wt), torch.from_numpy(b), stride=stride,
                                   padding=pad, dilation=dil)
    y = {"relu": torch.relu, "relu6": lambda t: torch.clamp(t, 0, 6), "hardswish": torch.nn.functional.hardswish,
         "leaky_relu": lambda t: torch.nn.functional.leaky_relu(t, 0.1)}.get(act, lambda t: t)(y).numpy()
    out = np.full(tactic.out_shape, np.nan, np.float32)
    tactic._run(x, out, None)
    planes = out.transpose(0, 1, 4, 2, 3).reshape(n, -1, *out.shape[2:4])
    np.testing.assert_allclose(planes[:, :o], y, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(y).max()))
    assert (planes[:, o:] == 0).all()
    again = DenseTileTactic(spec, wt, b, layout=tactic.layout())
    out2 = np.empty_like(out)
    again._run(x, out2, None)
    np.testing.assert_array_equal(out2, out)
