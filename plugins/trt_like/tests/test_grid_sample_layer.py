"""trt_like's ``grid_sample`` layer (srcore's compiled sampler) against torch: a spatial
transformer (a constant base grid times a regressed affine: a constant left ``bmm``; and
``F.affine_grid``) and a flow warp, bilinear and nearest, every padding mode, grids reaching
outside [-1, 1]; one engine."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import srcore
from srcore.partition import ENGINE_KIND

pytestmark = pytest.mark.one_pass


class Warp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.loc = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, 2), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                       torch.nn.Flatten(), torch.nn.Linear(4, 6))
        self.flow = torch.nn.Conv2d(3, 2, 3, padding=1)

    def forward(self, x):
        n, _, h, w = x.shape
        theta = self.loc(x).view(-1, 2, 3)
        ys, xs = torch.meshgrid(torch.linspace(-1.5, 1.5, h), torch.linspace(-1.5, 1.5, w), indexing="ij")
        base = torch.stack([xs, ys, torch.ones_like(xs)], -1).reshape(1, h * w, 3)
        grid = torch.bmm(base.expand(n, h * w, 3), theta.transpose(1, 2)).view(n, h, w, 2)
        flowed = grid + self.flow(x).permute(0, 2, 3, 1)
        return (F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False),
                F.grid_sample(x, grid, mode="nearest", padding_mode="border", align_corners=True),
                F.grid_sample(x, flowed, mode="bilinear", padding_mode="reflection", align_corners=True),
                F.grid_sample(x, flowed, mode="nearest", padding_mode="reflection", align_corners=False),
                F.grid_sample(x, F.affine_grid(theta, [n, 3, 5, 6], align_corners=False), align_corners=False),
                F.affine_grid(theta, [n, 1, 4, 3], align_corners=True))


def test_a_spatial_transformer_samples_in_one_engine():
    torch.manual_seed(4)
    x = torch.randn(2, 3, 7, 9)
    m = Warp().eval()
    with torch.no_grad():   # a wide affine: grid points well outside [-1, 1]
        m.loc[-1].bias.copy_(torch.tensor([1.4, 0.3, 0.1, -0.2, 1.2, 0.05]))
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(m), (x,)),
                             options=srcore.Options(backends=("trt_like", "cpu"),
                                                    engine_options={"timing": False, "exclude_tactics": ["segment"]}))
    assert [n.kind for n in sm.graph.nodes if n.kind != "prim::Constant"] == [ENGINE_KIND], sm.partition.format()
    assert sm.partition.engines[0].description.count("grid_sample -> ") == 5
    with torch.no_grad():
        want = m(x)
    for g, w in zip(sm(x.numpy()), want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)
