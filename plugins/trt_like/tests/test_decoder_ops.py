"""A decoder's ops in trt_like engines, against torch: grouped-query attention's key and value heads
repeated by ``repeat_interleave`` (a view, an ``expand`` copy and a view), and ``logsumexp`` over the
logits (a ``reduce`` layer: numpy, or compiled in a segment) with torch's infinities and NaN."""
from __future__ import annotations

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
nn = torch.nn


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.kv = nn.Linear(8, 16)

    def forward(self, x, logits):
        k = self.kv(x).view(2, 5, 2, 8).transpose(1, 2)           # (B, kv heads, T, D)
        k = k.repeat_interleave(3, dim=1)                          # (B, 6 heads, T, D)
        return k * 2.0, torch.logsumexp(logits * 1.0, -1), torch.logsumexp(logits + 1.0, (0, 2), keepdim=True)


@pytest.mark.parametrize("segment", [False, pytest.param(True, marks=pytest.mark.full)])
def test_repeat_interleave_and_logsumexp_match_torch(segment):
    g = torch.Generator().manual_seed(6)
    x, logits = torch.randn(2, 5, 8, generator=g), torch.randn(2, 4, 7, generator=g)
    logits[0, 1] = float("-inf")                                   # every logit -inf: -inf, not NaN
    logits[0, 2, 3], logits[1, 0, 0], logits[1, 3, 6] = float("inf"), float("nan"), float("-inf")
    m = Decoder().eval()
    opts = {"timing": False, "exclude_tactics": [] if segment else ["segment"]}
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(m), (x, logits)), options=srcore.Options(
        backends=("trt_like", "cpu"), engine_options=opts))
    assert not sm.partition.refused and len(sm.partition.engines) == 1, sm.partition.format()
    assert ("segment ->" in sm.partition.format()) == segment
    with torch.no_grad():
        want = [t.numpy() for t in m(x, logits)]
    assert np.isneginf(want[1][0, 1]) and np.isposinf(want[1][0, 2]) and np.isnan(want[1][1, 0])
    for got, w in zip(sm(x.numpy(), logits.numpy()), want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
