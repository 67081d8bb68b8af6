"""Regression tests of trt_like engine bugs the conformance sweep (test_conformance.py) found:
each graph here once crashed, fell back for no reason, or gave a wrong answer."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import srcore
from srcore.ir.parser import parse_graph

TRT = ("trt_like", "cpu")


def module(text: str, params=None, **options) -> srcore.StaticModule:
    opts = srcore.Options(backends=TRT, engine_min_block_size=1, optimize=False, **options)
    return srcore.StaticModule(parse_graph(text, params=params), options=opts)


def engine_ops(sm) -> list[str]:
    return [op for s in sm.partition.engines for op in s.ops]


def test_add_without_alpha_falls_back_to_the_per_node_kernel():
    """``aten::add(%x, %y)`` leaves ``alpha`` out; trt_like's per-node add matcher asked for it and
    the node info raised KeyError (a matcher sees an omitted argument's schema default now)."""
    sm = module("""graph(%x : Float(2, 3), %y : Float(3)):
  %r : Tensor = aten::add(%x, %y)
  return (%r)
""", engine_fallback_ops=("aten::add",))
    x, y = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(3, np.float32)
    np.testing.assert_array_equal(sm(x, y), x + y)


@pytest.mark.parametrize("text, shapes", [
    # a broadcast add with a zero-size dim: the generated kernel had an empty loop body (IndentationError)
    ("""graph(%x : Float(2, 0), %y : Float(1, 0)):
  %r : Tensor = aten::mul(%x, %y)
  return (%r)
""", [(2, 0), (1, 0)]),
    # softmax over rows of nothing / of no rows: the compiled and numpy kernels raised at run time
    ("""graph(%x : Float(3, 0)):
  %d : int = prim::Constant[value=1]()
  %n : NoneType = prim::Constant()
  %r : Tensor = aten::softmax(%x, %d, %n)
  return (%r)
""", [(3, 0)]),
    ("""graph(%x : Float(0, 3)):
  %d : int = prim::Constant[value=0]()
  %n : NoneType = prim::Constant()
  %r : Tensor = aten::log_softmax(%x, %d, %n)
  return (%r)
""", [(0, 3)]),
    # an empty batch through a conv (its tactics refuse empty shapes)
    ("""graph(%x : Float(0, 2, 4, 4)):
  %w : Float(3, 2, 3, 3) = prim::Constant[param="w"]()
  %n : NoneType = prim::Constant()
  %s : int[] = prim::Constant[value=[1, 1]]()
  %g : int = prim::Constant[value=1]()
  %r : Tensor = aten::conv2d(%x, %w, %n, %s, %s, %s, %g)
  return (%r)
""", [(0, 2, 4, 4)]),
])
def test_layers_with_empty_outputs_run(text, shapes):
    sm = module(text, params={"w": np.ones((3, 2, 3, 3), np.float32)})
    assert engine_ops(sm), sm.partition.format()
    out = sm(*[np.ones(s, np.float32) for s in shapes])
    assert out.size == 0


def test_a_gemm_over_an_empty_sum_is_zero():
    """``(3, 0) @ (0, 5)`` by a constant: the builder divided by K = 0; the result is zeros."""
    sm = module("""graph(%x : Float(3, 0)):
  %w : Float(0, 5) = prim::Constant[param="w"]()
  %r : Tensor = aten::matmul(%x, %w)
  return (%r)
""", params={"w": np.ones((0, 5), np.float32)})
    assert engine_ops(sm) == ["aten::matmul"], sm.partition.format()
    np.testing.assert_array_equal(sm(np.ones((3, 0), np.float32)), np.zeros((3, 5), np.float32))
