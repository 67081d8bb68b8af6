"""The 3-D (video) layers of trt_like engines against torch (``builder/volume.py``,
``tactics/conv3d.py``): 3-D convolutions, folded into 2-D ones where exact (``(kt, 1, 1)``) or on the
``conv3d`` layer's two tactics, and max / average / adaptive average 3-D pools as separable 2-D
pools; each model in one engine. NaN propagates through the max pool as in torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import srcore
from srcore.partition import ENGINE_KIND

pytestmark = pytest.mark.one_pass

TRT = ("trt_like", "cpu")


def _run(module, inputs, exclude=()):
    model = srcore.from_torchscript(torch.jit.script(module.eval()), inputs)
    sm = srcore.StaticModule(model, options=srcore.Options(
        backends=TRT, engine_options={"timing": False, "exclude_tactics": ["segment", *exclude]}))
    with torch.no_grad():
        want = module(*inputs)
    return sm, sm(*[t.numpy() for t in inputs]), want


class Video(torch.nn.Module):
    """R(2+1)D-like: a spatial (1, 3, 3) conv, a temporal (3, 1, 1) one (a 2-D conv on a view), a
    strided, dilated, grouped 3x3x3 one and a 1x1x1 one; 3-D max, average and adaptive pools."""

    def __init__(self):
        super().__init__()
        self.s = torch.nn.Conv3d(3, 8, (1, 3, 3), padding=(0, 1, 1))
        self.t = torch.nn.Conv3d(8, 8, (3, 1, 1), padding=(1, 0, 0), bias=False)
        self.down = torch.nn.Conv3d(8, 6, 3, stride=(1, 2, 2), padding=(2, 1, 1), dilation=(2, 1, 1), groups=2)
        self.point = torch.nn.Conv3d(6, 4, 1)

    def forward(self, v):
        x = torch.relu(self.s(v))
        x = torch.relu(self.t(x) + x)
        x = self.point(F.max_pool3d(self.down(x), (2, 3, 3), stride=(1, 2, 2), padding=(1, 1, 1), ceil_mode=True))
        a = F.avg_pool3d(x, (2, 2, 2), stride=1, padding=(1, 0, 1), count_include_pad=False)
        b = F.avg_pool3d(x, 2, ceil_mode=True)
        return a, b, F.adaptive_avg_pool3d(x, (2, 3, 2)), F.adaptive_avg_pool3d(x, 1)


@pytest.mark.parametrize("tactic", ["vol2col_gemm", "numpy"])
def test_a_video_block_is_one_engine(tactic):
    torch.manual_seed(0)
    v = torch.randn(2, 3, 5, 9, 10)
    v[0, 1, 2, 4, 4] = float("nan")   # reaches a few outputs through the convs and the max pool
    sm, got, want = _run(Video(), (v,), exclude=["numpy" if tactic == "vol2col_gemm" else "vol2col_gemm"])
    assert [n.kind for n in sm.graph.nodes if n.kind != "prim::Constant"] == [ENGINE_KIND], sm.partition.format()
    desc = sm.partition.engines[0].description
    # the temporal and the 1x1x1 convs are 2-D convs on views, the other two conv3d layers
    assert desc.count("conv3d") == 2 and desc.count(f"[{tactic}]") == 2 and desc.count("conv -> ") == 2, desc
    assert "conv3d + relu -> " in desc and "max_pool2d" in desc and "avg_pool2d" in desc, desc   # relu fused
    for g, w in zip(got, want):
        assert np.isnan(w.numpy()).any() == np.isnan(g).any()
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


def test_3d_layers_refuse_what_they_cannot_take_with_the_reason():
    class Odd(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = torch.nn.Conv3d(2, 2, 3, padding=1)

        def forward(self, x, y):
            return torch.relu(self.c(x)), F.avg_pool3d(torch.relu(y) * 2, 2, divisor_override=3)

    torch.manual_seed(1)
    x, y = torch.randn(2, 4, 5, 5), torch.randn(1, 2, 4, 4, 4)   # x unbatched (C, D, H, W)
    sm, got, want = _run(Odd(), (x, y))
    report = sm.partition.format()
    assert "not 5-D" in report and "divisor_override is given" in report, report
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


class Audio(torch.nn.Module):
    """A log-mel front end's glue: reflect / replicate / constant padding of 1-D, 2-D and 3-D
    trailing dims, a constant matrix times a computed one, 1-D linear and nearest resizing."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.conv = torch.nn.Conv1d(1, 6, 8, stride=4)
        self.register_buffer("mel", torch.rand(4, 6))

    def forward(self, wav, img):
        x = self.conv(F.pad(wav.unsqueeze(1), (5, 3), mode="reflect"))
        mel = torch.log(torch.clamp(torch.matmul(self.mel, x * x), min=1e-5))
        up = (F.interpolate(mel, scale_factor=2.0, mode="linear", align_corners=False),
              F.interpolate(mel, scale_factor=1.5, mode="linear", align_corners=True),
              F.interpolate(mel, size=7, mode="linear"), F.interpolate(mel, scale_factor=1.5, mode="nearest"))
        pads = (F.pad(img, (2, 1, 0, 3), mode="reflect"), F.pad(img, (3, 2, 1, 1), mode="replicate"),
                F.pad(img.unsqueeze(0), (1, 2, 2, 0, 1, 1), mode="replicate"), F.pad(img, (1, 1, 2, 0), value=0.5))
        return up + pads


@pytest.mark.parametrize("exclude", [(), ("numba",)], ids=["compiled", "numpy"])
def test_padding_resizing_and_a_constant_left_matmul_stay_in_one_engine(exclude):
    torch.manual_seed(3)
    wav, img = torch.randn(2, 41), torch.randn(2, 3, 4, 5)
    wav[1, 20] = float("inf")   # an infinity through the 1-D resizing: NaN where torch makes one
    sm, got, want = _run(Audio(), (wav, img), exclude)
    assert [n.kind for n in sm.graph.nodes if n.kind != "prim::Constant"] == [ENGINE_KIND], sm.partition.format()
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


class ResizeConv(torch.nn.Module):
    """A style-transfer decoder's resize-convolutions: nearest upsampling, a reflection (then a
    replication) pad, a conv; the second upsampling by a size, to odd planes."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.c1, self.c2 = torch.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(4, 2, 5)

    def forward(self, x):
        y = self.c1(F.pad(F.interpolate(x, scale_factor=2.0, mode="nearest"), (1, 1, 1, 1), mode="reflect"))
        return self.c2(F.pad(F.interpolate(y, size=(13, 9), mode="nearest"), (2, 3, 2, 1), mode="replicate"))


@pytest.mark.parametrize("exclude", [(), ("numba",)], ids=["compiled", "numpy"])
def test_a_nearest_resize_and_the_pad_after_it_are_one_gather(exclude):
    x = torch.randn(2, 3, 5, 4)
    sm, got, want = _run(ResizeConv(), (x,), exclude)
    kinds = [line.strip().split(" ")[0] for line in sm.partition.engines[0].description.splitlines()[1:]]
    assert kinds.count("resize_pad") == 2 and "resize" not in kinds and "pad" not in kinds, kinds
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)


class Fusion(torch.nn.Module):
    """HRNet's exchange: a low-resolution branch upsampled (nearest) and added to the high one,
    then relu; the same sum without relu; and an FPN lateral conv, which takes the upsampled tensor
    as its residual instead."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.hi, self.lo = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.up, self.lat = torch.nn.Conv2d(4, 4, 1), torch.nn.Conv2d(4, 4, 1)

    def forward(self, x):
        h, l = self.hi(x), self.lo(x)
        u = F.interpolate(self.up(l), scale_factor=2.0, mode="nearest")
        return torch.relu(h + u), h + F.interpolate(l, size=(10, 8)), self.lat(h) + F.interpolate(l, scale_factor=2.0)


def test_a_nearest_upsampling_added_to_a_branch_is_one_layer():
    x = torch.randn(2, 3, 10, 8)
    for exclude in ((), ("numba",)):
        sm, got, want = _run(Fusion(), (x,), exclude)
        kinds = [line.strip().split(" ")[0] for line in sm.partition.engines[0].description.splitlines()[1:]]
        assert kinds.count("resize_add") == 2 and kinds.count("resize") == 1, kinds
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)
