"""A detection head's decoding in one engine (``builder/support.py``: ``cast``, ``int_scalar``,
``expand``, ``stack``): CenterNet's sigmoid heatmap, max-pool NMS, topk over the flattened heatmap,
floor division and remainder into class, row and column, casts, a gather of the offsets and the box
arithmetic stacked, against torch, with its decoding compiled into segments between the convs
(``tactics/segment.py`` compile_runs) and layer by layer; integer floor division and remainder of
negative values by negative divisors (Python's rules, torch's)."""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from srcore.plugin import SrcoreError

torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional
TRT = ("trt_like", "cpu")


class CenterNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.heat = nn.Conv2d(4, 3, 3, padding=1)
        self.reg = nn.Conv2d(4, 4, 1)

    def forward(self, x):
        heat = torch.sigmoid(self.heat(x))
        b, c, h, w = heat.shape
        keep = (F.max_pool2d(heat, 3, stride=1, padding=1) == heat).float()
        scores, inds = torch.topk((heat * keep).view(b, -1), 6)
        cls = torch.div(inds, h * w, rounding_mode="floor")
        pix = inds % (h * w)
        ys, xs = torch.div(pix, w, rounding_mode="floor").float(), (pix % w).float()
        reg = self.reg(x).view(b, 4, -1).permute(0, 2, 1).gather(1, pix.unsqueeze(2).expand(b, 6, 4))
        boxes = torch.stack([xs + reg[..., 0], ys + reg[..., 1], xs + reg[..., 2], ys + reg[..., 3]], dim=2)
        return scores, cls, boxes


def _engines(sm) -> list[str]:
    return [line.strip() for e in sm.partition.engines for line in e.description.splitlines()[1:]]


# compiled: two segments, the first with topk (~15 s of CPU to compile cold); by default the held-out zoo's
# centernet_head (tests/parity/test_heldout2_zoo.py) checks that path against torch
@pytest.mark.parametrize("exclude", [pytest.param((), marks=pytest.mark.full), ("segment",)])
def test_a_centernet_decoding_runs_in_one_engine_and_matches_torch(exclude):
    torch.manual_seed(0)
    m = CenterNet().eval()
    x = torch.randn(2, 4, 7, 9)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={"exclude_tactics": exclude}))
    assert len(sm.partition.engines) == 1 and not sm.partition.refused, sm.partition
    layers = _engines(sm)
    if not exclude:   # the decoding between and after the convs compiled
        assert sum(line.startswith("segment") for line in layers) == 2, layers
    with torch.no_grad():
        want = m(x)
    for _ in range(2):
        got = sm(x.numpy())
        np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-6)
        assert got[1].dtype == np.int64 and np.array_equal(got[1], want[1].numpy())
        np.testing.assert_allclose(got[2], want[2].numpy(), rtol=1e-6, atol=1e-6)


class IntMath(nn.Module):
    def forward(self, x, i):
        q = torch.div(i, 3, rounding_mode="floor")
        r = i % -4
        return x * i.float() + q.float(), torch.div(i, -4, rounding_mode="floor"), r, q % 3


@pytest.mark.parametrize("exclude", [(), ("segment",)])
def test_integer_floor_division_and_remainder_follow_torch_on_negative_values(exclude):
    m = IntMath()
    x = torch.randn(3, 5)
    i = torch.arange(-7, 8).view(3, 5)
    model = srcore.from_torchscript(torch.jit.script(m), (x, i))
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={"exclude_tactics": exclude}))
    assert len(sm.partition.engines) == 1 and not sm.partition.refused, sm.partition
    got, want = sm(x.numpy(), i.numpy()), m(x, i)
    np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-6)
    for g, w in zip(got[1:], want[1:]):
        assert np.array_equal(g, w.numpy()), (g, w)


class ByZero(nn.Module):
    def forward(self, x, i):
        return x * torch.div(i, 0, rounding_mode="floor").float()


def test_an_integer_division_by_zero_is_an_error():
    x, i = torch.randn(2, 3), torch.ones(2, 3, dtype=torch.long)
    with pytest.raises(RuntimeError):
        ByZero()(x, i)   # (torch raises too)
    model = srcore.from_torchscript(torch.jit.script(ByZero()), (x, i))
    # (the engine refuses to build it, the node falls to the cpu plugin, which raises naming it)
    with pytest.raises(SrcoreError, match="ZeroDivision|division by zero"):
        srcore.StaticModule(model, options=srcore.Options(backends=TRT))(x.numpy(), i.numpy())


class YoloLevel(nn.Module):
    """A YOLO head level: a conv tower the NCHW16c layout takes (3x3 + SiLU, 1x1), then the anchors'
    decoding: view, permute, sigmoid, slices, the box arithmetic and a cat."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.pred = nn.Conv2d(16, 2 * 7, 1)

    def forward(self, x):
        p = self.pred(F.silu(self.stem(x)))
        n, _, h, w = p.shape
        p = p.view(n, 2, 7, h, w).permute(0, 1, 3, 4, 2).sigmoid()
        xy = (p[..., 0:2] * 2.0 - 0.5 + 1.0) * 8.0
        wh = (p[..., 2:4] * 2.0) ** 2 * 4.0
        return torch.cat([xy, wh, p[..., 4:]], -1).view(n, -1, 7)


# compiled: one segment beside the NCHW16c run (~3 s of CPU cold); by default the held-out zoo's
# yolo_head (tests/parity/test_heldout_zoo.py) checks that path against torch
@pytest.mark.parametrize("exclude", [pytest.param((), marks=pytest.mark.full), ("segment",)])
def test_a_decoding_beside_an_nchw16c_run_is_compiled_and_matches_torch(exclude):
    torch.manual_seed(1)
    m = YoloLevel().eval()
    x = torch.randn(1, 3, 6, 10)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    opts = srcore.Options(backends=TRT, engine_options={"exclude_tactics": exclude, "timing": False})
    sm = srcore.StaticModule(model, options=opts)
    layers = _engines(sm)
    assert any(line.startswith("NCHW16c run") for line in layers), layers
    assert sum(line.startswith("segment") for line in layers) == (0 if exclude else 1), layers
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=2e-5, atol=2e-5)
