"""A tensor stored into a loop-carried list outlives the loop body (a silent wrong answer found by
mutation testing, docs/testing.md#mutation-testing).

``keep = []; acc = keep; for i in range(n): acc.append(x * x); acc = []; s = (x + x).sum()``: at the
first iteration the carried ``acc`` is ``keep``, so ``x * x`` must not live in a buffer the body
reuses (here for ``x + x``). Reference: the value written by hand, ``x * x``.
"""
from __future__ import annotations

import numpy as np
import pytest

import srcore

TEXT = """graph(%x : Float(64), %n : int):
  %t : bool = prim::Constant[value=1]()
  %one : int = prim::Constant[value=1]()
  %zero : int = prim::Constant[value=0]()
  %none : NoneType = prim::Constant()
  %keep : Tensor[] = prim::ListConstruct()
  %acc.out : Tensor[], %s.out : Tensor = prim::Loop(%n, %t, %keep, %x)
    block0(%i : int, %acc : Tensor[], %s : Tensor):
      %h : Tensor = aten::mul(%x, %x)
      %r : Tensor[] = aten::append(%acc, %h)
      %new : Tensor[] = prim::ListConstruct()
      %a : Tensor = aten::add(%x, %x, %one)
      %e : Tensor = aten::sum(%a, %none)
      -> (%t, %new, %e)
  %cat : Tensor = aten::cat(%keep, %zero)
  return (%cat, %s.out)
"""


@pytest.mark.parametrize("planner", ["standard_resizing", "precomputed_offsets"])
def test_a_tensor_appended_to_a_loop_carried_list_keeps_its_value(planner):
    sm = srcore.StaticModule(srcore.parse_graph(TEXT), options=srcore.Options(memory_planner_algorithm=planner))
    x = np.arange(64, dtype=np.float32)
    for _ in range(2):   # the second run plans with the sizes the first one recorded
        cat, s = sm(x, 1)
        np.testing.assert_array_equal(cat, x * x)
        assert s == pytest.approx(float((x + x).sum()))
    cat, _ = sm(x, 3)    # later iterations append to the lists made by the earlier ones, not to keep
    np.testing.assert_array_equal(cat, x * x)
