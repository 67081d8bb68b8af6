"""Lists built by ``append`` (F.interpolate's scale factors, a loop's ``outs.append``) become plain
lists before partitioning, so that the op reading them may go into an engine; lists read before
their last append see the list as it stood then; lists written otherwise stay as they are."""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from srcore.partition import ENGINE_KIND
from srcore.partition.lists import freeze_appended_lists

pytestmark = pytest.mark.one_pass   # graph rewrites and partitions: no executor or planner involved

UPSAMPLE = """graph(%x : Float(1, 2, 3, 4)):
  %two : float = prim::Constant[value=2.0]()
  %none : NoneType = prim::Constant()
  %f : bool = prim::Constant[value=0]()
  %a : Tensor = aten::relu(%x)
  %s : float[] = prim::ListConstruct()
  %s1 : float[] = aten::append(%s, %two)
  %s2 : float[] = aten::append(%s, %two)
  %u : Tensor = aten::upsample_bilinear2d(%a, %none, %f, %s)
  %t : Tensor = aten::tanh(%u)
  return (%t)
"""


def kinds(g):
    return [n.kind for n in g.nodes if n.kind != "prim::Constant"]


def test_an_appended_list_of_constants_becomes_a_constant():
    g = srcore.parse_graph(UPSAMPLE)
    assert freeze_appended_lists(g) == 1
    assert kinds(g) == ["aten::relu", "aten::upsample_bilinear2d", "aten::tanh"]
    up = next(n for n in g.nodes if n.kind == "aten::upsample_bilinear2d")
    assert up.inputs[3].node.attrs["value"] == [2.0, 2.0]


def test_the_upsample_goes_into_the_engine_and_matches_torch():
    import torch

    sm = srcore.StaticModule(srcore.parse_graph(UPSAMPLE), backends=("trt_like", "cpu"))
    assert kinds(sm.graph) == [ENGINE_KIND], sm.partition.format()
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 4)).astype(np.float32)
    want = torch.tanh(torch.nn.functional.interpolate(torch.relu(torch.from_numpy(x)), scale_factor=2.0,
                                                      mode="bilinear", align_corners=False))
    np.testing.assert_allclose(sm(x), want.numpy(), rtol=1e-5, atol=1e-6)


def test_appended_tensors_become_a_list_construct_after_the_last_append():
    g = srcore.parse_graph("""graph(%x : Float(2, 3)):
  %one : int = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct(%x)
  %a : Tensor = aten::relu(%x)
  %l1 : Tensor[] = aten::append(%l, %a)
  %b : Tensor = aten::tanh(%a)
  %l2 : Tensor[] = aten::append(%l, %b)
  %c : Tensor = aten::cat(%l, %one)
  return (%c)
""")
    assert freeze_appended_lists(g) == 1
    assert kinds(g) == ["aten::relu", "aten::tanh", "prim::ListConstruct", "aten::cat"]
    lst = next(n for n in g.nodes if n.kind == "prim::ListConstruct")
    assert [v.name for v in lst.inputs] == ["x", "a", "b"]
    sm = srcore.StaticModule(g, backends=("trt_like", "cpu"))
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(sm(x), np.concatenate([x, np.maximum(x, 0), np.tanh(np.maximum(x, 0))], 1), rtol=1e-6)


def test_each_reader_between_appends_gets_the_list_so_far_and_the_cats_go_into_one_engine():
    # DenseNet's loop, unrolled: each layer reads the cat of every feature before it
    g = srcore.parse_graph("""graph(%x : Float(1, 2, 3, 3)):
  %one : int = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct(%x)
  %c : Tensor = aten::cat(%l, %one)
  %r : Tensor = aten::relu(%c)
  %l1 : Tensor[] = aten::append(%l, %r)
  %d : Tensor = aten::cat(%l, %one)
  %t : Tensor = aten::tanh(%d)
  %l2 : Tensor[] = aten::append(%l, %t)
  %e : Tensor = aten::cat(%l, %one)
  return (%e)
""")
    assert freeze_appended_lists(g) == 1
    assert kinds(g) == ["prim::ListConstruct", "aten::cat", "aten::relu", "prim::ListConstruct", "aten::cat",
                        "aten::tanh", "prim::ListConstruct", "aten::cat"]
    assert [[v.name for v in n.inputs] for n in g.nodes if n.kind == "prim::ListConstruct"] == [
        ["x"], ["x", "r"], ["x", "r", "t"]]
    # (no tactic timing, no whole-network compile: the partition is the point, and cheap)
    sm = srcore.StaticModule(g, options=srcore.Options(backends=("trt_like", "cpu"), engine_options={
        "timing": False, "exclude_tactics": ["segment"]}))
    assert kinds(sm.graph) == [ENGINE_KIND], sm.partition.format()
    x = np.random.default_rng(2).standard_normal((1, 2, 3, 3)).astype(np.float32)
    r = np.maximum(x, 0)
    t = np.tanh(np.concatenate([x, r], 1))
    np.testing.assert_allclose(sm(x), np.concatenate([x, r, t], 1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("text", [
    # written in place after the appends by something else than append
    """graph(%x : Float(2, 3)):
  %one : int = prim::Constant[value=1]()
  %zero : int = prim::Constant[value=0]()
  %l : Tensor[] = prim::ListConstruct()
  %l1 : Tensor[] = aten::append(%l, %x)
  %p : Tensor = aten::pop(%l, %zero)
  %c : Tensor = aten::cat(%l, %one)
  return (%c)
""",
    # the list escapes into a tuple (a write through it would change the frozen list)
    """graph(%x : Float(2, 3)):
  %one : int = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct()
  %l1 : Tensor[] = aten::append(%l, %x)
  %c : Tensor = aten::cat(%l, %one)
  %t : (Tensor[], Tensor) = prim::TupleConstruct(%l, %c)
  return (%t)
"""], ids=["popped", "escapes-in-a-tuple"])
def test_lists_whose_value_changes_after_a_read_are_kept(text):
    g = srcore.parse_graph(text)
    before = kinds(g)
    assert freeze_appended_lists(g) == 0
    assert kinds(g) == before
