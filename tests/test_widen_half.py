"""Half-precision nodes without a half kernel compute in float32 (srcore.passes.widen_half), against torch eager."""
from __future__ import annotations

import numpy as np
import pytest

import srcore

torch = pytest.importorskip("torch")

NET = """graph(%x : {T}(3, 8)):
  %w : {T}(6, 8) = prim::Constant[param="w"]()
  %b : {T}(6) = prim::Constant[param="b"]()
  %l : Tensor = aten::linear(%x, %w, %b)
  %r : Tensor = aten::relu(%l)
  %vs : int[] = prim::Constant[value=[3, 6]]()
  %h : Tensor = aten::view(%r, %vs)
  %shape : int[] = prim::Constant[value=[6]]()
  %eps : float = prim::Constant[value=1e-05]()
  %on : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %n : Tensor = aten::layer_norm(%h, %shape, %none, %none, %eps, %on)
  %approx : str = prim::Constant[value="none"]()
  %g : Tensor = aten::gelu(%n, %approx)
  %dim : int = prim::Constant[value=-1]()
  %s : Tensor = aten::softmax(%g, %dim, %none)
  return (%g, %s)
"""


def _load(text, params, backends):
    return srcore.StaticModule(srcore.parse_graph(text, params=params), options=srcore.Options(backends=backends))


@pytest.mark.parametrize("name, rtol", [("float16", 4e-3), ("bfloat16", 3e-2)])   # a few units in the last place
@pytest.mark.parametrize("backends", [("cpu",), ("trt_like", "cpu")])
def test_half_nodes_run_on_float32_kernels_rounded_at_the_boundary(name, rtol, backends):
    import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy)

    tdt = getattr(torch, name)
    rng = np.random.default_rng(11)
    w, b, x = (torch.from_numpy(rng.standard_normal(s).astype(np.float32)).to(tdt) for s in ((6, 8), (6,), (3, 8)))
    as_np = (lambda t: t.view(torch.int16).numpy().view(np.dtype("bfloat16"))) if name == "bfloat16" else (
        lambda t: t.numpy())
    text = NET.replace("{T}", "Half" if name == "float16" else "BFloat16")
    sm = _load(text, {"w": as_np(w), "b": as_np(b)}, backends)
    assert sm.load_report.fallbacks == []
    if backends == ("cpu",):
        kinds = {n.kind: r.kernel for n, r in sm.resolved_kernels.items()}
        for op in ("aten::linear", "aten::layer_norm", "aten::gelu", "aten::softmax"):
            assert kinds[op].kind == "out" and name not in kinds[op].dtypes
    else:   # one engine (the view too), the half input and outputs cast at its boundary
        assert [seg.status for seg in sm.partition.segments] == ["engine"]
        assert sm.partition.segments[0].ops.count("aten::to") == 3   # float32 between the boundary casts
    consts = [n for n in sm.graph.all_nodes() if n.kind == "prim::Constant" and n.attrs.get("param")]
    assert {n.output.type.dtype for n in consts} == {"float32"}   # the weights converted once, at load
    g, s = sm(as_np(x))
    with torch.inference_mode():
        tg = torch.nn.functional.gelu(torch.nn.functional.layer_norm(torch.relu(torch.nn.functional.linear(x, w, b)),
                                                                     (6,)))
        ts = torch.softmax(tg, -1)
    for got, want in ((g, tg), (s, ts)):
        assert got.dtype.name == name
        np.testing.assert_allclose(np.asarray(got, np.float32), want.float().numpy(), rtol=rtol, atol=rtol)


def test_an_op_given_a_half_dtype_argument_is_not_widened():
    text = ("graph(%x : Half(4)):\n  %d : int = prim::Constant[value=0]()\n  %h : int = prim::Constant[value=5]()\n"
            "  %s : Tensor = aten::softmax(%x, %d, %h)\n  return (%s)\n")
    sm = srcore.StaticModule(srcore.parse_graph(text), options=srcore.Options(backends=("cpu",)))
    assert [f.op for f in sm.load_report.fallbacks] == ["aten::softmax.int"]   # the dtype is the op's subject
    x = np.array([1, 2, 3, 0.5], np.float16)
    np.testing.assert_allclose(sm(x), torch.softmax(torch.from_numpy(x), 0, dtype=torch.float16).numpy(), rtol=1e-3)
