"""A transposed conv as one stride-1 conv and a pixel shuffle (``conv/transpose_phase.py``, the
``phase_<conv tactic>`` candidates of ``tactics/transposed.py``) against torch's
``conv_transpose2d``: the weight transform over random hyper-parameters, and an engine forced onto
the phase candidates (a fused activation, a U-Net's up-path)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import srcore
from srcore_trt_like.conv.transpose_phase import phase_conv
from srcore_trt_like.tactics import choose

torch = pytest.importorskip("torch")
F = torch.nn.functional


@st.composite
def transposed(draw):
    g = draw(st.sampled_from([1, 2]))
    k = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = tuple(draw(st.integers(0, (kk - 1) * dd)) for kk, dd in zip(k, d))
    op = tuple(draw(st.integers(0, max(ss, dd) - 1)) for ss, dd in zip(s, d))
    hw = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    cig, og, n = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    return n, g, cig, og, k, s, d, p, op, hw


@settings(max_examples=150, deadline=None)
@given(transposed(), st.booleans())
def test_phase_conv_is_the_transposed_conv(params, with_bias):
    n, g, cig, og, k, s, d, p, op, (H, W) = params
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, g * cig, H, W)).astype(np.float32)
    w = rng.standard_normal((g * cig, og) + k).astype(np.float32)
    b = rng.standard_normal(g * og).astype(np.float32) if with_bias else None
    T = torch.from_numpy
    try:
        want = F.conv_transpose2d(T(x), T(w), None if b is None else T(b), s, p, op, g, d).numpy()
    except RuntimeError:   # an empty output (padding over the kernel's reach): no layer to build
        assume(False)
    assume(min(want.shape[2:]) >= 1)
    pc = phase_conv(w, b, x.shape, want.shape, s, p, d, g, max_window=99)
    if want.shape[2] % s[0] or want.shape[3] % s[1]:
        assert pc is None   # phases of unequal sizes: no single conv
        return
    assert pc is not None and pc.phase_shape == (want.shape[2] // s[0], want.shape[3] // s[1])
    y = F.conv2d(T(x), T(pc.weight), None if pc.bias is None else T(pc.bias), 1, pc.padding, 1, g)
    assert tuple(y.shape[2:]) == pc.phase_shape
    got = F.pixel_shuffle(y, s[0]).numpy() if s[0] == s[1] else _shuffle(y.numpy(), s)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _shuffle(y, s):
    N, OS, qh, qw = y.shape
    O = OS // (s[0] * s[1])
    return y.reshape(N, O, s[0], s[1], qh, qw).transpose(0, 1, 4, 2, 5, 3).reshape(N, O, qh * s[0], qw * s[1])


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_window_limit_declines():
    w = np.ones((2, 2, 9, 9), np.float32)   # 9x9 stride 1: a 9-tap window
    assert phase_conv(w, None, (1, 2, 4, 4), (1, 2, 12, 12), (1, 1), (0, 0), (1, 1), 1) is None
    assert phase_conv(w, None, (1, 2, 4, 4), (1, 2, 12, 12), (1, 1), (0, 0), (1, 1), 1, max_window=9) is not None


class UpPath(torch.nn.Module):
    """pix2pix's up path in small: 4x4 stride-2 up-convs, a leaky relu fused into one, a skip cat."""

    def __init__(self):
        super().__init__()
        self.u1 = torch.nn.ConvTranspose2d(8, 8, 4, 2, 1, bias=False)
        self.u2 = torch.nn.ConvTranspose2d(12, 3, 4, 2, 1)
        self.u3 = torch.nn.ConvTranspose2d(3, 4, 2, 2)            # a U-Net's 2x2 one: a 1x1 conv

    def forward(self, x, skip):
        y = F.leaky_relu(self.u1(x), 0.2)
        return self.u3(torch.tanh(self.u2(torch.cat([y, skip], 1))))


def test_engine_on_phase_candidates_matches_torch(monkeypatch):
    orig, used = choose.candidates, []

    def phase_only(layer, net):   # every conv_transpose layer on a phase candidate (no timing involved)
        every = orig(layer, net)
        if layer.kind != "conv_transpose":
            return every
        phase = [c for c in every if c.name.startswith("phase_")]
        used.extend(c.name for c in phase[:1])
        return phase[:1] or every
    monkeypatch.setattr(choose, "candidates", phase_only)
    torch.manual_seed(0)
    m = UpPath().eval()
    x, skip = torch.randn(2, 8, 3, 3), torch.randn(2, 4, 6, 6)
    opts = srcore.Options(backends=("trt_like", "cpu"), engine_options={"timing": False})
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(m), (x, skip)), options=opts)
    assert len(used) >= 3 and "phase_" in "\n".join(e.description for e in sm.partition.engines)
    with torch.no_grad():
        want = m(x, skip).numpy()
    for _ in range(3):   # the conv's bound fast path from the second call on
        np.testing.assert_allclose(sm(x.numpy(), skip.numpy()), want, rtol=1e-4, atol=1e-4)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("x_shape, k, s, p, op, g, act", [
    ((2, 16, 2, 2), 4, 2, 1, 0, 1, "leaky_relu"),   # pix2pix's up-conv with its fused activation
    ((1, 6, 3, 4), 3, 2, 1, 1, 2, "relu"),          # grouped, output padding: an asymmetric window
    ((2, 4, 5, 5), 3, 1, 1, 0, 1, "none"),          # stride 1: the conv alone, no shuffle
])
def test_every_phase_candidate_and_its_restored_layout(x_shape, k, s, p, op, g, act):
    from srcore_trt_like.builder.network import Layer, Network
    from srcore_trt_like.tactics import transposed

    rng = np.random.default_rng(1)
    C = x_shape[1]
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((C, 3, k, k)).astype(np.float32)
    b = rng.standard_normal(3 * g).astype(np.float32)
    T = torch.from_numpy
    want = F.conv_transpose2d(T(x), T(w), T(b), s, p, op, g)
    want = {"none": want, "relu": F.relu(want), "leaky_relu": F.leaky_relu(want, 0.2)}[act].numpy()
    net = Network()
    layer = Layer("conv_transpose", [net.new_tensor(x_shape)], [net.new_tensor(want.shape)],
                  dict(weight=w, bias=b, stride=(s, s), padding=(p, p), output_padding=(op, op), dilation=(1, 1),
                       groups=g, activation=act, negative_slope=0.2))
    cands = transposed.phase_candidates(layer, net)
    assert cands and all(c.name.startswith("phase_") for c in cands)
    for c in cands:
        kern = c.build()
        y = np.empty(want.shape, np.float32)
        for _ in range(3):   # the same arrays again: the conv's bound fast path
            y.fill(np.nan)
            kern.fn(x, y)
            np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4, err_msg=c.name)
        if kern.layout:
            y2 = np.empty_like(y)
            c.restore(kern.layout).fn(x, y2)   # a serialized plan's weights
            np.testing.assert_array_equal(y2, y)
