"""Concat elision (``builder/plan.py``): the pieces of a ``cat`` whose output is contiguous per piece
written by their kernels straight into their slices, DenseNet's growing feature list one buffer
(every cat in place), and the cats that must still copy (batch 2, an engine input, a returned
piece, a piece twice, a cat returned as a view), against torch, twice on the same arena and
through a saved plan."""
from __future__ import annotations

from typing import List

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")
nn = torch.nn
TRT = ("trt_like", "cpu")


class Dense(nn.Module):
    """Two dense layers over a growing list, then a transition; a side cat with a returned piece."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.layers = nn.ModuleList([nn.Conv2d(4 + 2 * i, 2, 3, padding=1) for i in range(2)])
        self.trans = nn.Conv2d(8, 4, 1)
        self.side, self.twice = nn.Conv2d(4, 2, 1), nn.Conv2d(4, 2, 1)

    def forward(self, x):
        feats: List[torch.Tensor] = [self.stem(x)]
        for layer in self.layers:
            feats.append(torch.relu(layer(torch.cat(feats, 1))))
        y = self.trans(torch.cat(feats, 1))
        side, z = self.side(y), self.twice(y)   # (convs: no small compiled segment takes them)
        # y written in its slice; the input and the returned piece copied; z twice: copied
        return torch.cat([y, x, side], 1), side, torch.cat([z, z], 1)


def _plan_lines(sm, batch: int) -> list[str]:
    """The layers of the plan for this batch (an engine from the cache may hold the other's too)."""
    lines, keep = [], False
    for line in sm.partition.engines[0].description.splitlines():
        if line.startswith("plan for inputs"):
            keep = line.startswith(f"plan for inputs ({batch},")
        elif keep:
            lines.append(line.strip())
    return lines


@pytest.mark.parametrize("batch", [1, pytest.param(2, marks=pytest.mark.full)])
def test_cats_write_in_place_at_batch_1_and_match_torch(tmp_path, batch):
    torch.manual_seed(0)
    m = Dense().eval()
    xs = (torch.randn(batch, 3, 5, 6),)
    # (the first tactic of each layer, no timing: the placement is the point, and cheap)
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(m), xs), options=srcore.Options(
        backends=TRT, engine_options={"timing": False}))
    lines = _plan_lines(sm, batch)
    # batch 1: the feature list's three cats in place, the other two copy (unless the small tail is
    # compiled: a segment layer); batch 2: no piece is contiguous, every cat copies
    assert sum("[in place]" in line for line in lines) == (3 if batch == 1 else 0), lines
    assert [line.split(" [")[0] for line in lines[:6]] == [
        "conv -> %dx4x5x6" % batch, "cat -> %dx4x5x6" % batch, "conv -> %dx2x5x6" % batch, "cat -> %dx6x5x6" % batch,
        "conv -> %dx2x5x6" % batch, "cat -> %dx8x5x6" % batch], lines
    with torch.no_grad():
        want = m(*xs)
    for _ in range(2):
        got = sm(*(x.numpy() for x in xs))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)
    assert not np.shares_memory(got[0], sm(*(x.numpy() for x in xs))[0])   # results are the caller's
    path = tmp_path / "dense.srm"
    sm.save(path)
    again = srcore.StaticModule(srcore.load(path), options=srcore.Options(backends=TRT,
                                                                         engine_options={"timing": False}))
    for g, w in zip(again(*(x.numpy() for x in xs)), want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)
