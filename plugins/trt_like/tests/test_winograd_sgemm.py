"""Winograd on the packed-panel SGEMM's tiles (``conv/winograd_sgemm.py``): torch's conv on odd sizes, every
padding, residuals and activations, row and panel tails and more than one k block; the split on numba's
OpenMP team gives the one-thread tactic's bits on any team; offered (the split at more than one intra-op
thread only) and chosen by name in an engine at 2 threads."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from srcore_trt_like.conv import ConvSpec, conv_tactics
from srcore_trt_like.conv.winograd_sgemm import WinogradSgemmTactic
from srcore_trt_like.errors import TacticSpecError
from srcore_trt_like.kernels import threads as parallel
from srcore_trt_like.options import tactic_names
from _shared import conv_case, conv_reference


def _run(t, x, res):
    out = np.full(t.out_shape, np.nan, np.float32)    # every element must be written
    t(x, out, res)
    return out


def _check(got, spec, x, w, b, res):
    ref = conv_reference(spec, x, w, b, res)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(ref).max()))


@st.composite
def specs(draw):
    """3x3 stride-1 convs: partial tiles, outputs smaller than a tile, 1-13 output channels (the 6, 4, 2 and
    1-row tiles), 1-2 images, an activation the tactic leaves to its in-place pass."""
    p = draw(st.integers(0, 2))
    H, W = draw(st.integers(max(1, 3 - 2 * p), 13)), draw(st.integers(max(1, 3 - 2 * p), 13))
    act = draw(st.sampled_from(["none", "hardswish", "leaky_relu"]))
    return ConvSpec((draw(st.integers(1, 2)), draw(st.integers(1, 9)), H, W), draw(st.integers(1, 13)), 3, 1, p,
                    relu=act == "none" and draw(st.booleans()), residual=draw(st.booleans()), activation=act,
                    negative_slope=0.1)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@settings(max_examples=60, deadline=None)
@given(spec=specs(), seed=st.integers(0, 2**16), m=st.sampled_from([2, 4]), nt=st.sampled_from([1, 2, 3]))
def test_matches_torch_and_the_split_gives_the_one_thread_bits(spec, seed, m, nt):
    x, w, b, res = conv_case(spec, seed)
    one = _run(WinogradSgemmTactic(spec, w, b, m=m), x, res)
    _check(one, spec, x, w, b, res)
    if nt > 1:
        np.testing.assert_array_equal(_run(WinogradSgemmTactic(spec, w, b, m=m, threads=nt), x, res), one)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("spec", [
    ConvSpec((1, 300, 9, 11), 13, 3, 1, 1, relu=True, residual=True),   # two k blocks (KC = 256); 13 = 6 + 6 + 1 rows
    ConvSpec((1, 16, 70, 70), 20, 3, 1, 1),                            # F(4x4): 324 tiles, 21 panels (> NCP = 16)
    ConvSpec((2, 8, 5, 33), 6, 3, 1, 0, relu=True),                     # two images' tiles in one row of V
])
@pytest.mark.parametrize("m", [2, 4])
def test_k_blocks_panel_blocks_and_images_on_a_team(spec, m, monkeypatch):
    x, w, b, res = conv_case(spec, 3)
    one = _run(WinogradSgemmTactic(spec, w, b, m=m), x, res)
    _check(one, spec, x, w, b, res)
    split = WinogradSgemmTactic(spec, w, b, m=m, threads=2)
    for size in (1, 2, 2, 1):   # the regions on the calling thread alone or on the team
        monkeypatch.setattr(parallel.Governor, "team", lambda self, size=size: size)
        np.testing.assert_array_equal(_run(split, x, res), one)
    again = WinogradSgemmTactic(spec, w, b, m=m, layout=split.layout())   # a stored plan's packed weights
    np.testing.assert_array_equal(_run(again, x, res), one)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_non_finite_inputs_take_the_direct_path():
    spec = ConvSpec((1, 4, 9, 9), 5, 3, 1, 1)
    x, w, b, res = conv_case(spec, 1)
    x[0, 2, 4, 4] = np.inf
    got = _run(WinogradSgemmTactic(spec, w, b, m=4, threads=2), x, res)
    ref = conv_reference(spec, x, w, b, res)
    # the infinity reaches the outputs whose window holds it, not its whole tile
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(ref))


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_refuses_what_winograd_does_not_compute():
    w = np.zeros((4, 4, 3, 3), np.float32)
    with pytest.raises(TacticSpecError, match="winograd_f4x4_sgemm: needs a 3x3 kernel, stride 1"):
        WinogradSgemmTactic(ConvSpec((1, 4, 8, 8), 4, 3, 2, 1), w, None)
    with pytest.raises(TacticSpecError, match="must be 2 or 4"):
        WinogradSgemmTactic(ConvSpec((1, 4, 8, 8), 4, 3, 1, 1), w, None, m=3)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_the_split_is_offered_at_more_than_one_thread(monkeypatch):
    spec = ConvSpec((1, 8, 10, 10), 8, 3, 1, 1)
    names = lambda: [t.name for t in conv_tactics(spec, np.ones(spec.weight_shape, np.float32), None)]  # noqa: E731
    monkeypatch.setattr(parallel, "count", lambda: 1)
    assert {"winograd_f4x4_sgemm", "winograd_f2x2_sgemm"} <= set(names())
    assert not any(n.endswith("_sgemm_omp") for n in names())
    monkeypatch.setattr(parallel, "count", lambda: 2)
    assert {"winograd_f4x4_sgemm", "winograd_f2x2_sgemm", "winograd_f4x4_sgemm_omp",
            "winograd_f2x2_sgemm_omp"} <= set(names())
    assert {"winograd_f4x4_sgemm", "winograd_f4x4_sgemm_omp"} <= set(tactic_names())


@pytest.mark.parametrize("tactic", ["winograd_f4x4_sgemm_omp", "winograd_f2x2_sgemm_omp"])
def test_in_an_engine_at_two_threads(tactic):
    """A 3x3 conv forced onto the split by ``exclude_tactics`` at 2 intra-op threads: the one-thread
    tactic's bits, call after call, and torch's result."""
    torch = pytest.importorskip("torch")
    from threadpoolctl import threadpool_limits

    import srcore
    from srcore_trt_like.conv import conv_tactic_builders

    nn = torch.nn
    torch.manual_seed(3)
    m = nn.Sequential(nn.Conv2d(3, 24, 3, 1, 1), nn.ReLU(), nn.Conv2d(24, 24, 3, 1, 1), nn.ReLU()).eval()
    x = torch.randn(1, 3, 22, 18)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    with threadpool_limits(2):
        if parallel.count() < 2:
            pytest.skip("one intra-op thread here")
        spec = ConvSpec((1, 24, 22, 18), 24, 3, 1, 1)
        every = [n for n, _ in conv_tactic_builders(spec, np.ones(spec.weight_shape, np.float32), None)]

        def engine(keep):
            opts = srcore.Options(backends=("trt_like", "cpu"), engine_options={
                "nchwc": False, "timing": False, "exclude_tactics": [n for n in every if n != keep]})
            sm = srcore.StaticModule(model, options=opts)
            return sm, "\n".join(e.description for e in sm.partition.engines)

        one, desc_one = engine(tactic.removesuffix("_omp"))
        sm, desc = engine(tactic)
        assert f"[{tactic}]" in desc, desc
        want = one(x.numpy())
        assert all(np.array_equal(sm(x.numpy()), want) for _ in range(3))
    with torch.no_grad():
        ref = m(x).numpy()
    np.testing.assert_allclose(want, ref, rtol=1e-4, atol=1e-4)
