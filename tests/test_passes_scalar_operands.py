"""``scalar_operands``: traced Python numbers (0-d constant tensors) become numbers where torch
would not let them promote; the values stay torch's (a traced model through the pipeline)."""
from __future__ import annotations

import numpy as np
import pytest

from srcore.ir import parse_graph
from srcore.passes import scalar_operands

pytestmark = pytest.mark.one_pass

GRAPH = """graph(%x : Float(2, 3), %s : Float(), %i : Long(2, 3)):
  %c : Double() = prim::Constant[value=<Tensor>]()
  %k : Long() = prim::Constant[value=<Tensor>]()
  %one : int = prim::Constant[value=1]()
  %mode : str = prim::Constant[value="floor"]()
  %a : Float(2, 3) = aten::mul(%x, %c)
  %b : Float(2, 3) = aten::sub(%a, %k, %one)
  %d : Float() = aten::mul(%s, %c)
  %e : Float(2, 3) = aten::mul(%i, %c)
  %f : Float(2, 3) = aten::div(%x, %c, %mode)
  return (%b, %d, %e, %f)
"""


def test_only_operands_that_cannot_promote_become_numbers():
    g = parse_graph(GRAPH)
    for n in g.all_nodes():
        if n.kind == "prim::Constant" and n.output.name in ("c", "k"):
            n.attrs["value"] = np.array(0.5) if n.output.name == "c" else np.array(3, np.int64)
    assert scalar_operands(g)
    second = {n.output.name: n.inputs[1] for n in g.all_nodes() if n.kind.startswith("aten::")}
    assert second["a"].node.attrs["value"] == 0.5 and isinstance(second["a"].node.attrs["value"], float)
    assert second["b"].node.attrs["value"] == 3 and isinstance(second["b"].node.attrs["value"], int)
    # a 0-d self (float64 result in torch), an int self (promotes to float), a rounding mode: unchanged
    assert [second[k].name for k in ("d", "e", "f")] == ["c", "c", "c"]
    assert not scalar_operands(g)


def test_a_traced_model_keeps_torch_values_and_becomes_one_engine():
    torch = pytest.importorskip("torch")
    import srcore

    class Head(torch.nn.Module):
        def forward(self, p, grid):
            y = p.sigmoid()
            return (y * 2.0 - 0.5 + grid) * 8, torch.exp(p) * 0.1 / 3 + 1 - y

    p, grid = torch.randn(1, 2, 4, 5, 2), torch.arange(40.0).view(1, 1, 4, 5, 2)
    model = srcore.from_torchscript(torch.jit.trace(Head(), (p, grid)), (p, grid))
    with torch.no_grad():
        want = Head()(p, grid)
    for backends in (("cpu",), ("trt_like", "cpu")):
        sm = srcore.StaticModule(model, options=srcore.Options(backends=backends, engine_min_block_size=1))
        for got, w in zip(sm(p.numpy(), grid.numpy()), want):
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, w.numpy(), rtol=1e-6, atol=1e-6)
    assert len(sm.partition.engines) == 1 and not sm.partition.refused, sm.partition.format()
