"""F.interpolate on 3-D, 4-D (bicubic) and 5-D inputs through every frontend, with and without
``Options(optimize=False)``.

TorchScript compiles F.interpolate to a ``prim::If`` chain on ``input.dim()`` whose branches call
the classic overloads (``upsample_nearest1d`` / ``2d`` / ``3d`` ...): without the load-time passes
the untaken branches stay, so every one of those ops must dispatch. Tracing records only the taken
classic overload; torch.export emits the ``.vec`` overloads.
"""
from __future__ import annotations

import collections

import pytest
import torch

import srcore
from _harness import assert_close, round_trip, run, torch_outputs
from parity_models import ZOO

CASES = ("interp_1d_3d", "pad_bicubic")


def _convert(name, frontend):
    m, inputs, others = ZOO[name].build()
    if frontend == "export":
        model = srcore.from_torch(m, inputs)
    else:
        src = torch.jit.script(m) if frontend == "script" else torch.jit.trace(m, inputs)
        model = srcore.from_torchscript(src, inputs)
    return m, inputs, others, round_trip(model)


def _upsample_kinds(graph) -> collections.Counter:
    seen = collections.Counter()

    def walk(nodes):
        for n in nodes:
            if "upsample" in n.kind:
                seen[n.kind] += 1
            for b in n.blocks:
                walk(b.nodes)
    walk(graph.nodes)
    return seen


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("frontend", ["script", "trace", "export"])
@pytest.mark.parametrize("name", CASES)
def test_interpolate_matches_torch(name, frontend, optimize):
    m, inputs, others, model = _convert(name, frontend)
    sm = srcore.StaticModule(model, options=srcore.Options(optimize=optimize))
    what = f"{name} via {frontend} (optimize={optimize})"
    for i, inp in enumerate([inputs, *others]):
        assert_close(run(sm, inp), torch_outputs(m, inp), f"{what} input set {i + 1}")


def test_scripted_interpolate_keeps_every_rank_branch():
    """The claim above: a scripted 3-D nearest interpolate still holds the 2-d and 3-d calls."""
    *_, model = _convert("interp_1d_3d", "script")
    kinds = _upsample_kinds(model.graph)
    assert {"aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d"} <= set(kinds)
    *_, traced = _convert("interp_1d_3d", "trace")
    assert "aten::upsample_nearest2d" not in _upsample_kinds(traced.graph)
