"""The fused conv + max pool layer (``conv_max_pool``) against torch: the tactic on hypothesis shapes,
its unfused alternatives, threads, and the network rewrite inside engines."""
from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import srcore
from srcore_trt_like.tactics import conv_pool
from srcore_trt_like.conv import ConvSpec
from srcore_trt_like.conv import conv_pool as conv_conv_pool
from srcore_trt_like.conv.conv_pool import PackedConvMaxPool
from srcore_trt_like.conv.pool import MaxPool2d

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _case(spec, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(spec.x_shape, np.float32)
    w = (rng.standard_normal(spec.weight_shape) / np.sqrt(np.prod(spec.weight_shape[1:]))).astype(np.float32)
    return x, w, rng.standard_normal(spec.out_channels).astype(np.float32)


def _reference(spec, pool, x, w, b):
    t = lambda a: torch.from_numpy(np.asarray(a, np.float64))  # noqa: E731
    y = F.conv2d(t(x), t(w), t(b), spec.stride, spec.padding, spec.dilation)
    y = torch.relu(y) if spec.relu else y
    return F.max_pool2d(y, pool.kernel, pool.stride, pool.padding, 1, pool.ceil_mode).numpy()


@st.composite
def cases(draw):
    k, s, p = draw(st.integers(1, 5)), draw(st.integers(1, 2)), draw(st.integers(0, 2))
    H, W = draw(st.integers(k + 6, 26)), draw(st.integers(k + 6, 26))     # conv output >= 3 wide
    spec = ConvSpec((draw(st.integers(1, 2)), draw(st.integers(1, 6)), H, W), draw(st.integers(1, 70)), k, s, p,
                    relu=draw(st.booleans()))
    pk = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    pp = (draw(st.integers(0, pk[0] // 2)), draw(st.integers(0, pk[1] // 2)))
    ps = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    return spec, MaxPool2d(spec.out_shape, pk, ps, pp, 1, draw(st.booleans()))


@settings(max_examples=60, deadline=None)
@given(case=cases(), seed=st.integers(0, 2**16), rows=st.sampled_from([1, 1 << 20]))
def test_fused_conv_max_pool_matches_torch_at_one_and_two_threads(case, seed, rows):
    spec, pool = case
    x, w, b = _case(spec, seed)
    want = _reference(spec, pool, x, w, b)
    got = []
    for nt in (1, 2):
        with mock.patch.object(conv_conv_pool, "ROWS_BYTES", rows):      # one conv row per GEMM, or many
            t = PackedConvMaxPool(spec, w, b, pool, threads=nt)
        out = np.full(pool.out_shape, np.nan, np.float32)
        t(x, out)
        got.append(out)
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[0], got[1])


def test_resnet_stem_fused_and_unfused_candidates_agree():
    spec = ConvSpec((1, 3, 64, 64), 64, 7, 2, 3, relu=True)
    pool = MaxPool2d(spec.out_shape, 3, 2, 1)
    x, w, b = _case(spec, 1)
    x[0, 1, 10, 10] = np.nan
    want = _reference(spec, pool, x, w, b)
    from srcore_trt_like.builder.network import Layer, Network
    net = Network()
    xi, yi = net.new_tensor(spec.x_shape), net.new_tensor(pool.out_shape)
    layer = Layer("conv_max_pool", [xi], [yi], dict(weight=w, bias=b, stride=spec.stride, padding=spec.padding,
                                                      dilation=(1, 1), groups=1, relu=True, residual=False,
                                                      pool=dict(kernel=(3, 3), stride=(2, 2), padding=(1, 1),
                                                                ceil_mode=False), conv_shape=spec.out_shape))
    names = []
    for cand in conv_pool.candidates(layer, net):
        name = cand.name
        out = np.full(pool.out_shape, 7, np.float32)
        cand.build().fn(x, out)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5, err_msg=name)
        assert np.array_equal(np.isnan(out), np.isnan(want)), name
        names.append(name)
    assert names[0] == "packed_gemm_max_pool" and "im2col_gemm+max_pool" in names


class Stem(torch.nn.Module):
    def __init__(self, share: bool):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 5, 2, 2)
        self.c2 = torch.nn.Conv2d(16, 8, 3, padding=1)
        self.share = share

    def forward(self, x):
        y = torch.relu(self.c1(x))
        z = F.max_pool2d(y, 3, 2, 1)
        z = self.c2(z)
        return z, (y if self.share else z).mean()


@pytest.mark.parametrize("share", [False, True])
def test_engines_fuse_a_conv_into_the_max_pool_that_alone_reads_it(share):
    torch.manual_seed(0)
    m = Stem(share).eval()
    x = torch.randn(1, 3, 30, 30)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    for fusion in (True, False):
        sm = srcore.StaticModule(model, options=srcore.Options(backends=("trt_like", "cpu"),
                                                               engine_options={"fusion": fusion}))
        desc = "\n".join(s.description for s in sm.partition.engines)
        assert ("conv_max_pool" in desc) == (fusion and not share)
        with torch.no_grad():
            want = m(x)
        for g, wt in zip(sm(x.numpy()), want):
            np.testing.assert_allclose(g, wt.numpy(), rtol=1e-4, atol=1e-5)
