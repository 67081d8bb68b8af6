"""Direct grouped convs (numba, channels last) vs torch: depthwise with and without a channel
multiplier, small groups, 1-D and 2-D, strides, dilations, asymmetric padding, batches; the split
over threads; and make_conv's choice (depthwise always direct, small groups by timing)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore_cpu.kernels import conv as K  # noqa: E402
from srcore_cpu.kernels.conv_direct import DirectConv  # noqa: E402
from srcore_cpu.kernels.conv_im2col import SHARED_WS  # noqa: E402

# kernel calls, no StaticModule: independent of the executor and the memory planner
pytestmark = pytest.mark.one_pass

F = torch.nn.functional
RNG = np.random.default_rng(7)

CASES = [  # x shape, out channels, kernel, stride, padding, dilation, groups
    ((1, 16, 13, 11), 16, (3, 3), (2, 2), (1, 1), (1, 1), 16),      # depthwise, stride 2, odd sizes
    ((2, 8, 9, 9), 8, (5, 5), (1, 1), (2, 2), (1, 1), 8),           # batch 2, 5x5
    ((1, 6, 10, 12), 12, (3, 3), (1, 2), (0, 1), (2, 1), 6),        # multiplier 2, mixed stride/dilation
    ((1, 12, 8, 8), 24, (3, 3), (1, 1), (1, 1), (1, 1), 4),         # 3 channels per group, 6 outputs each
    ((1, 8, 7, 7), 8, (1, 1), (1, 1), (0, 0), (1, 1), 8),           # 1x1 depthwise (a per-channel scale)
    ((1, 4, 1, 9), 4, (3, 3), (1, 1), (1, 1), (1, 1), 4),           # padding taller than the input
]


def _torch(x, w, b, stride, padding, dilation, groups):
    f = F.conv2d if x.ndim == 4 else F.conv1d
    return f(torch.from_numpy(x), torch.from_numpy(w), None if b is None else torch.from_numpy(b),
             stride, padding, dilation, groups).numpy()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("xs,o,k,s,p,d,g", CASES)
def test_direct_conv_2d_matches_torch(xs, o, k, s, p, d, g, threads):
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal((o, xs[1] // g) + k).astype(np.float32)
    b = RNG.standard_normal(o).astype(np.float32)
    conv = DirectConv(w, b, s, [(pi, pi) for pi in p], d, g, SHARED_WS, threads=threads)
    want = _torch(x, w, b, s, p, d, g)
    assert conv.out_shape(x.shape) == want.shape
    out = np.full(want.shape, np.nan, np.float32)
    assert conv(x, out) is out
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_direct_conv_1d_no_bias_asymmetric_padding_strided_input():
    x = RNG.standard_normal((2, 6, 40)).astype(np.float32)[:, :, ::2]     # a strided view
    w = RNG.standard_normal((6, 1, 4)).astype(np.float32)
    conv = DirectConv(w, None, (3,), [(2, 1)], (1,), 6, SHARED_WS)
    want = F.conv1d(F.pad(torch.from_numpy(x.copy()), (2, 1)), torch.from_numpy(w), None, 3, 0, 1, 6).numpy()
    out = np.empty(conv.out_shape(x.shape), np.float32)
    np.testing.assert_allclose(conv(x, out), want, rtol=1e-5, atol=1e-5)


def test_make_conv_takes_the_direct_path_for_depthwise_and_keeps_float64_on_numpy():
    x = RNG.standard_normal((1, 32, 20, 20)).astype(np.float32)
    w = RNG.standard_normal((32, 1, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(32).astype(np.float32)
    fn = K.make_conv(2, w, b, [1, 1], [1, 1], [1, 1], 32, input_shape=x.shape)
    np.testing.assert_allclose(fn(x), _torch(x, w, b, 1, 1, 1, 32), rtol=1e-5, atol=1e-5)
    x64 = x.astype(np.float64)    # another dtype at run time: the numpy paths
    np.testing.assert_allclose(fn(x64), _torch(x64, w.astype(np.float64), b.astype(np.float64), 1, 1, 1, 32),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("input_shape", [(1, 64, 12, 12), None])
def test_make_conv_small_groups_chosen_by_timing_either_way_correct(input_shape):
    x = RNG.standard_normal((1, 64, 12, 12)).astype(np.float32)
    w = RNG.standard_normal((64, 8, 3, 3)).astype(np.float32)
    fn = K.make_conv(2, w, None, [1, 1], [1, 1], [1, 1], 8, input_shape=input_shape)
    want = _torch(x, w, None, 1, 1, 1, 8)
    np.testing.assert_allclose(fn(x), want, rtol=1e-4, atol=1e-4)
    out = np.empty(want.shape, np.float32)
    assert fn(x, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_tactic_fastest_times_every_candidate_and_skips_failing_ones():
    import time

    from srcore_cpu.kernels.tactic import fastest

    calls = {"slow": 0, "fast": 0}

    def slow():
        calls["slow"] += 1
        time.sleep(0.002)

    def fast():
        calls["fast"] += 1

    def broken():
        raise ValueError("cannot run this shape")

    assert fastest({"slow": slow, "broken": broken, "fast": fast}, ()) == "fast"
    assert calls["slow"] >= 2 and calls["fast"] >= 2
    assert fastest({"broken": broken, "fast": fast}, ()) == "fast"
    assert fastest({"broken": broken}, ()) is None


@pytest.mark.parametrize("winner", ["one", "split"])
def test_depthwise_split_over_two_intra_op_threads_where_it_times_faster(monkeypatch, winner):
    """At 2 intra-op threads a depthwise conv of static shape is timed on one thread against split
    by output rows on the part pool; the winner runs (parts seen or not), torch's result either way."""
    monkeypatch.delenv("SRCORE_CPU_THREADS", raising=False)
    monkeypatch.setattr(K._par, "intra_op_threads", lambda: 2)
    seen = []

    def fastest(cands, args, **kw):
        seen.append(set(cands))
        return winner
    monkeypatch.setattr(K._tactic, "fastest", fastest)
    parts = []
    real = K._par.run_parts
    monkeypatch.setattr(K._par, "run_parts", lambda fn, n, t: parts.append(n) or real(fn, n, t))
    x = RNG.standard_normal((1, 16, 14, 13)).astype(np.float32)
    w = RNG.standard_normal((16, 1, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(16).astype(np.float32)
    fn = K.make_conv(2, w, b, [2, 2], [1, 1], [1, 1], 16, input_shape=x.shape)
    assert {"one", "split"} in seen
    parts.clear()
    np.testing.assert_allclose(fn(x), _torch(x, w, b, 2, 1, 1, 16), rtol=1e-5, atol=1e-5)
    assert parts == ([2] if winner == "split" else [])
