"""The SIMD direct conv split over numba's OpenMP team (``simd_direct_omp``, ``simd_direct_rows_omp``;
``conv/simd_split.py``, ``kernels/direct_split.py``): the bits of the one-thread tactic on a team of 1,
2 or 3 (real threads) from its first call, torch's conv, the one-thread tactic's stored layout, offered
at more than one intra-op thread only, and a whole engine at 2 threads against torch."""
from __future__ import annotations

import numpy as np
import pytest

from srcore_trt_like.conv import ConvSpec, conv_tactic_builders
from srcore_trt_like.conv.simd_direct import SimdDirectRowsTactic, SimdDirectTactic
from srcore_trt_like.conv.simd_split import SimdDirectOmpTactic, SimdDirectRowsOmpTactic
from srcore_trt_like.kernels import threads as parallel
from srcore_trt_like.options import tactic_names
from _shared import conv_case, conv_reference

pytestmark = pytest.mark.one_pass

CASES = [
    ConvSpec((1, 3, 40, 38), 20, 7, 2, 3, relu=True),                          # a stem: 3 channels, stride 2
    ConvSpec((2, 16, 13, 11), 20, 3, 1, 1, relu=True, residual=True),           # 2 images, residual
    ConvSpec((1, 12, 9, 17), 18, 3, 2, 1, groups=3, activation="hardswish"),    # groups, a pass after
    ConvSpec((1, 24, 6, 6), 30, 1, 1, 0),                                       # row pairs (narrow plane)
    ConvSpec((1, 16, 32, 32), 16, 3, 1, 1),                                     # unet_small's 16-channel convs
    ConvSpec((1, 48, 20, 24), 16, 3, 1, 1),                                     # ... after its upsample + cat
    ConvSpec((2, 10, 11, 13), 14, 3, 2, 1, residual=True, activation="leaky_relu", negative_slope=0.1),
]
SPLITS = [(spec, rows, nt) for spec in CASES for rows in (False, True) for nt in (2, 3)]


def _same_bits_on_teams(split, spec, x, res, want, sizes, monkeypatch):
    """``split`` writes ``want``'s bits with the governor's team at each of ``sizes`` in turn."""
    for size in sizes:
        monkeypatch.setattr(parallel.Governor, "team", lambda self, size=size: size)
        out = np.full(spec.out_shape, np.nan, np.float32)
        split(x, out, res)
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("spec,rows,nt", SPLITS)
def test_split_gives_the_one_thread_bits_on_any_team(spec, rows, nt, monkeypatch):
    """Every call from the first (a fresh tactic: its phase buffer still zeros) on the calling thread
    alone or on the team: numba fused the copy and the tasks into one loop once, each part's tasks
    then read the other part's channels before they were copied."""
    one_cls, split_cls = (SimdDirectRowsTactic, SimdDirectRowsOmpTactic) if rows else \
        (SimdDirectTactic, SimdDirectOmpTactic)
    x, w, b, res = conv_case(spec)
    want = np.empty(spec.out_shape, np.float32)
    one_cls(spec, w, b)(x, want, res)
    for first in (1, nt):
        split = split_cls(spec, w, b, threads=nt)
        _same_bits_on_teams(split, spec, x, res, want, (first, nt, 1, nt), monkeypatch)
    ref = conv_reference(spec, x, w, b, res)
    np.testing.assert_allclose(want, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_split_runs_on_the_layout_of_the_one_thread_tactic():
    """A serialized plan stores the one-thread tactic's packed weights: the split takes them back."""
    spec = CASES[1]
    x, w, b, res = conv_case(spec, 1)
    one = SimdDirectTactic(spec, w, b)
    want = np.empty(spec.out_shape, np.float32)
    one(x, want, res)
    out = np.empty(spec.out_shape, np.float32)
    SimdDirectOmpTactic(spec, np.zeros_like(w), b, layout=one.layout(), threads=2)(x, out, res)
    np.testing.assert_array_equal(out, want)


def test_offered_at_two_threads_whatever_the_size(monkeypatch):
    spec = ConvSpec((1, 3, 8, 8), 16, 3, 1, 1)   # ~28 K multiply-adds: far under PARALLEL_MIN_WORK
    names = lambda: [n for n, _ in conv_tactic_builders(spec, np.ones(spec.weight_shape, np.float32), None)]
    monkeypatch.setattr(parallel, "count", lambda: 1)
    assert not any(n.endswith("_omp") for n in names())
    monkeypatch.setattr(parallel, "count", lambda: 2)
    assert {"simd_direct_omp", "simd_direct_rows_omp"} <= set(names())
    assert "simd_direct_split" not in names()   # (that one only from PARALLEL_MIN_WORK)
    assert set(names()) <= set(tactic_names())   # each can be named in exclude_tactics (the A/B)


def _engine(m, x, keep: str):
    """``m`` through trt_like with every conv tactic but ``keep`` excluded, and its engines' description."""
    import srcore
    import torch

    from srcore_trt_like.options import CONV_TACTICS

    model = srcore.from_torchscript(torch.jit.trace(m, (x,)), (x,))
    exclude = [n for n in CONV_TACTICS if n != keep]
    opts = srcore.Options(backends=("trt_like", "cpu"), engine_options={"exclude_tactics": exclude, "timing": False})
    sm = srcore.StaticModule(model, options=opts)
    return sm, "\n".join(e.description for e in sm.partition.engines)


@pytest.mark.parametrize("tactic", ["simd_direct_omp", "simd_direct_rows_omp"])
def test_engine_at_two_threads_matches_torch(tactic):
    """unet_small's first block (conv, group norm, SiLU, conv) in a trt_like engine at 2 intra-op
    threads, every conv on the split: the bits of the same engine on the one-thread tactic, torch's
    output."""
    torch = pytest.importorskip("torch")
    from threadpoolctl import threadpool_limits

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.GroupNorm(4, 16), torch.nn.SiLU(),
                            torch.nn.Conv2d(16, 16, 3, padding=1)).eval()
    x = torch.randn(1, 3, 40, 40)
    with threadpool_limits(2):
        if parallel.count() < 2:
            pytest.skip("one intra-op thread here")
        split, desc = _engine(m, x, tactic)
        one, _ = _engine(m, x, tactic.replace("_omp", ""))
    assert desc.count(f"[{tactic}]") == 2, desc
    want = one(x.numpy())
    assert all(np.array_equal(split(x.numpy()), want) for _ in range(3))
    with torch.no_grad():
        np.testing.assert_allclose(want, m(x).numpy(), rtol=1e-4, atol=1e-4)


PLANES = [
    ConvSpec((1, 48, 20, 24), 16, 3, 1, 1),                          # unet_small's conv after upsample + cat
    ConvSpec((2, 16, 13, 11), 40, 3, 2, 1, relu=True, residual=True),  # 3 output blocks, 2 images
]


@pytest.mark.parametrize("spec", PLANES)
@pytest.mark.parametrize("rows", [False, True])
def test_planes_split_gives_the_one_thread_bits_on_any_team(spec, rows, monkeypatch):
    from srcore_trt_like.conv.nchwc import ConvNchwcPlanesTactic
    from srcore_trt_like.conv.planes_split import ConvNchwcPlanesOmpTactic, ConvNchwcPlanesRowsTactic

    x, w, b, res = conv_case(spec)
    one = ConvNchwcPlanesTactic(spec, w, b)
    want = np.empty(spec.out_shape, np.float32)
    one(x, want, res)
    for nt in (2, 3):
        split = (ConvNchwcPlanesRowsTactic if rows else ConvNchwcPlanesOmpTactic)(
            spec, np.zeros_like(w), b, layout=one.layout(), threads=nt)   # (the stored layout computes)
        _same_bits_on_teams(split, spec, x, res, want, (1, nt, nt, 1), monkeypatch)
    ref = conv_reference(spec, x, w, b, res)
    np.testing.assert_allclose(want, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_one_team_on_the_openmp_engine(monkeypatch):
    """At 2 threads a large NCHW conv's candidates on the OpenMP pool's engine split only on numba's
    team: the NCHW16c dense kernel runs on one thread beside its OpenMP twins, the SIMD splits on the
    Python team are the team engine's (labelled so) and not the OpenMP engine's."""
    from srcore_trt_like.builder.network import Layer, Network
    from srcore_trt_like.tactics import choose
    from srcore_trt_like.tactics.blas_team import BLAS_TEAM
    from srcore_trt_like.tactics.conv import conv_pool_of

    monkeypatch.setattr(parallel, "count", lambda: 2)
    spec = ConvSpec((1, 48, 32, 32), 96, 3, 1, 1)   # 42 M multiply-adds (over PARALLEL_MIN_WORK), 2 block groups
    x, w, b, _ = conv_case(spec)
    builders = dict(conv_tactic_builders(spec, w, b))
    assert {"conv_nchwc_planes_omp", "conv_nchwc_planes_rows_omp", "simd_direct_omp", "simd_direct_split"} \
        <= set(builders)
    assert builders["conv_nchwc_planes"]().threads == 1
    assert conv_pool_of("simd_direct_split") == conv_pool_of("depthwise_simd_split") == BLAS_TEAM
    assert conv_pool_of("conv_nchwc_planes_omp") == conv_pool_of("simd_direct_omp") == "omp"
    net = Network()
    tx, ty = net.new_tensor(spec.x_shape), net.new_tensor(spec.out_shape)
    net.inputs, net.outputs = [tx], [ty]
    layer = Layer("conv", [tx], [ty], dict(weight=w, bias=b, stride=(1, 1), padding=(1, 1), dilation=(1, 1),
                                           groups=1, relu=False, residual=False))
    net.layers.append(layer)
    pools = choose._Pools(net, {})
    on_pool = {c.name for c in pools.candidates(layer, choose.POOL)}
    assert {"simd_direct_omp", "conv_nchwc_planes_omp"} <= on_pool and "simd_direct_split" not in on_pool
    on_team = {c.name for c in pools.candidates(layer, choose.BLAS)}
    assert "simd_direct_split" in on_team and not any(n.endswith("_omp") for n in on_team)
