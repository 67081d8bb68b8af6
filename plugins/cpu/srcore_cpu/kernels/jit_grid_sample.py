"""``aten::grid_sampler`` (bilinear / nearest, every padding mode) as one compiled kernel: srcore's
shared one (``srcore.plugin.grid_sample``, which trt_like's ``grid_sample`` layer runs too)."""
from __future__ import annotations

from srcore.plugin import grid_sample

GridSampler = grid_sample.GridSampler
