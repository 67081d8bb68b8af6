"""A 1x1 conv that only a k x k / k average pool with whole windows reads, merged into one k x k / k
conv (``builder/fusion.py`` fuse_conv_avg_pool: DenseNet's transition), against torch; the pools it
must leave (partial windows under ``ceil_mode``, padding, a pool before the conv, a conv with an
activation)."""
from __future__ import annotations

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
nn = torch.nn
TRT = ("trt_like", "cpu")


class Transitions(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Conv2d(5, 6, 1), nn.Conv2d(6, 4, 1, bias=False), nn.Conv2d(6, 3, 1)

    def forward(self, x):
        y = torch.relu(nn.functional.avg_pool2d(self.a(x), 2))             # merged; the relu joins it
        # 5x5 by 3: partial windows
        z = nn.functional.avg_pool2d(self.b(y), 3, ceil_mode=True, count_include_pad=False)
        w = nn.functional.avg_pool2d(torch.relu(self.c(y)), 2, ceil_mode=True)                # relu between: kept
        return z, w


def _layers(sm) -> list[str]:
    return [line.strip().split(" [")[0] for line in sm.partition.engines[0].description.splitlines()[1:]]


def test_a_1x1_conv_and_its_average_pool_are_one_conv_and_match_torch():
    torch.manual_seed(0)
    m = Transitions().eval()
    x = torch.randn(1, 5, 10, 10)
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(m), (x,)), options=srcore.Options(
        backends=TRT, engine_options={"timing": False}))
    layers = [line for line in _layers(sm) if not line.startswith("NCHW16c run")]
    # the first conv writes the pooled 5x5 (the merged 2x2 / 2 conv; NCHW or NCHW16c, timing picks),
    # nothing the 10x10; the other two pools stay
    assert layers[0] in ("conv -> 1x6x5x5", "conv -> 1x1x5x5x16"), layers   # (its relu: attrs["relu"])
    assert not any("10x10" in line for line in layers), layers
    assert [line for line in layers if line.startswith("avg_pool2d")] == [
        "avg_pool2d -> 1x4x2x2", "avg_pool2d -> 1x3x3x3"], layers
    with torch.no_grad():
        want = m(x)
    for g, w in zip(sm(x.numpy()), want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)
