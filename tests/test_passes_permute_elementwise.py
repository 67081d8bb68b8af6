"""``f(permute(x)) -> permute(f(x))`` (peephole) through the whole pipeline: a detection-style decode
(view, permute, sigmoid, slices, cat) and an in-place use, values against torch."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402


class Decode(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.head = torch.nn.Conv2d(8, 3 * 7, 1)

    def forward(self, x):
        p = self.head(x)
        b, _, h, w = p.shape
        p = p.view(b, 3, 7, h, w).permute(0, 1, 3, 4, 2).sigmoid()
        q = torch.nn.functional.leaky_relu(p.permute(0, 2, 1, 3, 4), 0.2)
        q.mul_(2.0)    # written to later: its own permute stays where it is
        return torch.cat((p[..., :2] * 2.0 - 0.5, p[..., 4:]), -1).reshape(b, -1, 5), q


def test_a_decode_head_matches_torch():
    m = Decode().eval()
    x = torch.randn(2, 8, 6, 5)
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.trace(m, (x,)), (x,)))
    with torch.no_grad():
        want = m(x)
    got = sm(x.numpy())
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)
    kinds = [pn.node.kind for b in sm.blocks for pn in b.nodes]
    assert kinds.index("aten::sigmoid") < kinds.index("aten::permute")
