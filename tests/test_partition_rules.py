"""The seed's partitioning rules (../shared/seeds/trtorch-automatic-fallback.txt), on a toy engine
backend that runs its segments on a nested cpu module: dependency resolution of non-tensor chains,
forced fallback by module scope, reasons from supports(), and the validity of the mini-graphs
(every segment node is a node of the global graph, and engines plus the rest cover it exactly)."""
from __future__ import annotations

import time
from collections import Counter

import numpy as np
import pytest

import srcore
from srcore.ir.parser import parse_graph
from srcore.ir.printer import print_graph
from srcore.partition import ENGINE_KIND
from srcore.plugin import Backend, EngineBuilder, hookimpl
from srcore.plugin.manager import PluginManager


class Toy:
    """Backend ``te``: takes the ops in ``ops``; ``why`` (op -> reason) refuses with a reason."""

    def __init__(self, ops):
        self.ops, self.why, self.built = set(ops), {}, []

    @hookimpl
    def srcore_backends(self):
        yield Backend("te", "toy engines")

    @hookimpl
    def srcore_engine_builders(self):
        yield EngineBuilder("te", supports=self.supports, build=self.build)

    def supports(self, node):
        if node.op in self.why:
            return self.why[node.op]
        return node.op in self.ops

    def build(self, segment):
        self.built.append(segment)
        sm = srcore.StaticModule(segment.graph, backends=("cpu",), plugin_manager=self.pm)
        n = len(segment.graph.outputs)

        def engine(*xs):
            out = sm.runtime()(*xs)
            return tuple(o.copy() for o in out) if n > 1 else out.copy()
        return engine


def toy_with(*ops):
    pm = PluginManager().load()
    t = Toy(ops)
    t.pm = pm
    pm.register(t, "toy", dist="srcore-toy", version="0.1")
    return t


def load(toy, text, **options):
    return srcore.StaticModule(parse_graph(text), options=srcore.Options(backends=("te", "cpu"), **options),
                               plugin_manager=toy.pm)


def compute_kinds(graph):
    return [n.kind for n in graph.nodes if n.kind != "prim::Constant"]


RESHAPE = """graph(%x : Float(batch, 4, 3)):
  %zero : int = prim::Constant[value=0]()
  %m1 : int = prim::Constant[value=-1]()
  %a : Tensor = aten::relu(%x)
  %n : int = aten::size(%a, %zero)
  %shape : int[] = prim::ListConstruct(%n, %m1)
  %r : Tensor = aten::reshape(%a, %shape)
  %t : Tensor = aten::tanh(%r)
  return (%t)
"""


def reshape_ref(x):
    return np.tanh(np.maximum(x, 0).reshape(x.shape[0], -1))


def test_a_size_chain_is_copied_into_the_segment_instead_of_splitting_it():
    toy = toy_with("aten::relu", "aten::reshape", "aten::tanh")
    sm = load(toy, RESHAPE)
    assert compute_kinds(sm.graph) == [ENGINE_KIND]            # size and ListConstruct went with it
    (seg,) = toy.built
    assert compute_kinds(seg.graph) == ["aten::relu", "aten::size", "prim::ListConstruct", "aten::reshape",
                                        "aten::tanh"]
    assert not sm.partition.refused and sm.partition.segments[0].ops == ("aten::relu", "aten::reshape",
                                                                        "aten::tanh")
    for batch in (2, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 4, 3)).astype(np.float32)
        np.testing.assert_allclose(sm(x), reshape_ref(x), rtol=1e-6)
    # for concrete shapes the chain folds into a constant shape
    g = seg.specialize([(5, 4, 3)])
    assert compute_kinds(g) == ["aten::relu", "aten::reshape", "aten::tanh"]
    shape = [n for n in g.nodes if n.kind == "aten::reshape"][0].inputs[1]
    assert shape.node.kind == "prim::Constant" and shape.node.attrs["value"] == [5, -1]
    assert str(g.outputs[0].type) == "Float(5, 12)"


def test_supports_sees_the_derived_argument():
    toy = toy_with("aten::relu", "aten::tanh")
    seen = []
    toy.supports = lambda node: seen.append(node) or node.op in ("aten::relu", "aten::tanh", "aten::reshape")
    load(toy, RESHAPE)
    (info,) = [n for n in seen if n.op == "aten::reshape"]
    assert info.arg("shape").derived and not info.arg("shape").is_constant and not info.arg("self").derived


def test_a_chain_read_outside_stays_there_and_the_engine_keeps_its_copy():
    toy = toy_with("aten::relu", "aten::reshape", "aten::tanh")
    text = RESHAPE.replace("return (%t)", "%n2 : int = aten::mul(%n, %n)\n  return (%t, %n2)")
    sm = load(toy, text)
    kinds = compute_kinds(sm.graph)
    assert kinds[0] == ENGINE_KIND and "aten::size" in kinds and "prim::ListConstruct" not in kinds
    x = np.random.default_rng(0).standard_normal((3, 4, 3)).astype(np.float32)
    t, n2 = sm(x)
    np.testing.assert_allclose(t, reshape_ref(x), rtol=1e-6)
    assert n2 == 9


APPENDED_IN_A_LOOP = """graph(%x : Float(2, 3), %k : int):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %true : bool = prim::Constant[value=1]()
  %l : int[] = prim::ListConstruct(%one)
  %n1 : int = aten::len(%l)
   = prim::Loop(%k, %true)
    block0(%i : int):
      %l2 : int[] = aten::append(%l, %zero)
      -> (%true)
  %n : int = aten::len(%l)
  %a : Tensor = aten::relu(%x)
  %y : Tensor = aten::mul(%a, %n)
  %z : Tensor = aten::sigmoid(%y)
  return (%z, %n1)
"""


def test_a_list_written_in_place_is_not_copied_into_a_segment():
    """The list's length is known only once the loop has run: a segment that copied the list's
    construction (and the len reading it) would see one element instead of 1 + k."""
    toy = toy_with("aten::relu", "aten::mul.Scalar", "aten::sigmoid")
    sm = load(toy, APPENDED_IN_A_LOOP, engine_min_block_size=1)
    (seg,) = toy.built
    assert [n.kind for n in seg.graph.nodes if n.kind != "prim::Constant"] == ["aten::relu", "aten::mul",
                                                                               "aten::sigmoid"]
    assert [v.name for v in seg.graph.inputs] == ["x", "n"]
    x = np.random.default_rng(5).standard_normal((2, 3)).astype(np.float32)
    for k in (0, 3):
        z, n1 = sm(x, k)
        np.testing.assert_allclose(z, 1 / (1 + np.exp(-np.maximum(x, 0) * (1 + k))), rtol=1e-6)
        assert n1 == 1


def test_a_value_read_from_tensor_data_is_not_derived():
    toy = toy_with("aten::relu", "aten::sum", "aten::tanh")

    def supports(node):
        if node.op == "aten::reshape":
            shape = node.arg("shape")
            return True if shape.is_constant or shape.derived else "argument 'shape' is neither constant nor derived"
        return node.op in toy.ops
    toy.supports = supports
    text = RESHAPE.replace("%n : int = aten::size(%a, %zero)",
                           "%s : Tensor = aten::sum(%a)\n  %n : int = aten::Int(%s)")
    sm = load(toy, text, engine_min_block_size=1)
    reasons = {r.node.split(" = ")[1]: r.reason for r in sm.partition.refused}
    assert reasons["aten::reshape"] == "not supported by te: argument 'shape' is neither constant nor derived"
    x = np.ones((2, 4, 3), np.float32) / 12     # sum 2: reshape to (2, -1)
    np.testing.assert_allclose(sm(x), reshape_ref(x), rtol=1e-6)


def test_reasons_from_supports_reach_the_report():
    toy = toy_with("aten::relu", "aten::tanh")
    toy.why["aten::reshape"] = "argument 'shape' is odd (test)"
    sm = load(toy, RESHAPE, engine_min_block_size=1)
    (r,) = sm.partition.refused
    assert r.reason == "not supported by te: argument 'shape' is odd (test)"


SCOPED = """graph(%x : Float(2, 8)):
  %one : int = prim::Constant[value=1]()
  %a : Tensor = aten::relu(%x), scope: stem(Stem)
  %b : Tensor = aten::sigmoid(%a), scope: stem(Stem).act(Sigmoid)
  %c : Tensor = aten::tanh(%b), scope: blocks(Sequential).0(Block)
  %d : Tensor = aten::add(%c, %a, %one), scope: blocks(Sequential).0(Block)
  %e : Tensor = aten::relu(%d), scope: head(Head)
  return (%e)
"""


# the passes fuse the add and the head's relu into srcore::add_relu, which keeps both scopes
@pytest.mark.parametrize("entry,kept_out", [
    ("blocks", ["aten::tanh", "srcore::add_relu"]),                  # a module path, and all under it
    ("blocks.0", ["aten::tanh", "srcore::add_relu"]),
    ("Block", ["aten::tanh", "srcore::add_relu"]),                   # a class name
    ("mylib.models.Block", ["aten::tanh", "srcore::add_relu"]),      # qualified: its last component
    ("stem.act", ["aten::sigmoid"]),
    ("Stem", ["aten::relu", "aten::sigmoid"]),
    ("head", ["srcore::add_relu"]),
    ("bl", []),                                                      # whole path components only
])
def test_forced_fallback_by_module_scope(entry, kept_out):
    toy = toy_with("aten::relu", "aten::sigmoid", "aten::tanh", "srcore::add_relu")
    sm = load(toy, SCOPED, engine_min_block_size=1, engine_fallback_modules=(entry,))
    refused = [r for r in sm.partition.refused]
    assert sorted(r.node.split(" = ")[1] for r in refused) == sorted(kept_out)
    assert all(r.reason == f"in module {entry}, listed in Options.engine_fallback_modules" for r in refused)
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    a = np.maximum(x, 0)
    np.testing.assert_allclose(sm(x), np.maximum(np.tanh(1 / (1 + np.exp(-a))) + a, 0), rtol=1e-6)


def test_scopes_survive_fusion_and_the_ir_text():
    text = """graph(%x : Float(1, 3, 8, 8), %w : Float(4, 3, 3, 3)):
  %none : NoneType = prim::Constant()
  %s : int[] = prim::Constant[value=[1, 1]]()
  %p : int[] = prim::Constant[value=[0, 0]]()
  %one : int = prim::Constant[value=1]()
  %y : Tensor = aten::conv2d(%x, %w, %none, %s, %p, %s, %one), scope: body(Body).conv(Conv2d)
  %z : Tensor = aten::relu(%y), scope: body(Body).act(ReLU)
  return (%z)
"""
    g = srcore.passes.prepare_for_static_runtime(parse_graph(text))
    (fused,) = [n for n in g.nodes if n.kind != "prim::Constant"]
    assert fused.kind == "srcore::conv2d_relu"
    assert fused.meta["scope"] == "body(Body).conv(Conv2d)|body(Body).act(ReLU)"
    again = parse_graph(print_graph(g))
    (n,) = [n for n in again.nodes if n.kind != "prim::Constant"]
    assert n.meta["scope"] == fused.meta["scope"]


def _signature(node):
    return node.kind, tuple(o.name for o in node.outputs)


@pytest.mark.parametrize("min_block", [1, 2, 3])
def test_mini_graphs_are_valid_and_cover_the_graph_exactly(min_block):
    """Seed item 2: every node of every segment exists in the global graph, and the engines and
    the nodes left outside them cover it exactly once (constants and copied chains aside)."""
    chain = """graph(%x : Float(batch, 16)):
  %one : int = prim::Constant[value=1]()
  %zero : int = prim::Constant[value=0]()
  %m1 : int = prim::Constant[value=-1]()
  %a : Tensor = aten::relu(%x)
  %b : Tensor = aten::sigmoid(%a)
  %c : Tensor = aten::cumsum(%b, %one)
  %n : int = aten::size(%c, %zero)
  %l : int[] = prim::ListConstruct(%n, %m1)
  %d : Tensor = aten::reshape(%c, %l)
  %e : Tensor = aten::tanh(%d)
  %f : Tensor = aten::add(%e, %a, %one)
  %g : Tensor = aten::mul(%f, %b)
  return (%g)
"""
    toy = toy_with("aten::relu", "aten::sigmoid", "aten::reshape", "aten::tanh", "aten::add.Tensor",
                   "aten::mul.Tensor")
    plain = srcore.StaticModule(parse_graph(chain), backends=("cpu",), plugin_manager=toy.pm)
    sm = load(toy, chain, engine_min_block_size=min_block)
    chains = {"aten::size", "prim::ListConstruct"}
    want = Counter(_signature(n) for n in plain.graph.nodes if n.kind != "prim::Constant" and n.kind not in chains)
    global_nodes = {_signature(n) for n in plain.graph.nodes}
    got = Counter()
    for n in sm.graph.nodes:
        if n.kind == ENGINE_KIND:
            for m in n.attrs["subgraph"].nodes:
                if m.kind != "prim::Constant":
                    assert _signature(m) in global_nodes, m           # the mini-graph's nodes exist globally
                    if m.kind not in chains:
                        got[_signature(m)] += 1
        elif n.kind != "prim::Constant" and n.kind not in chains:
            got[_signature(n)] += 1
    assert got == want
    assert len(toy.built) == {1: 2, 2: 2, 3: 1}[min_block]
    x = np.random.default_rng(4).standard_normal((3, 16)).astype(np.float32)
    np.testing.assert_allclose(sm(x), plain(x), rtol=1e-6, atol=1e-6)


# -- short tails (srcore/partition/short.py) ------------------------------------------------------
TAIL = """graph(%x : Float(4, 8)):
  %one : int = prim::Constant[value=1]()
  %c : Tensor = aten::cumsum(%x, %one)
  %a : Tensor = aten::relu(%c)
  %t : Tensor = aten::tanh(%a)
  return (%t)
"""


def _busy(seconds):
    t0 = time.process_time()
    while time.process_time() - t0 < seconds:
        pass


def _tail_toy(slow_engine):
    """Toy engines computing ``tanh(relu(x))`` straight in numpy, ``slow_engine``: 1 ms of CPU a call."""
    toy = toy_with("aten::relu", "aten::tanh")

    def build(segment):
        toy.built.append(segment)

        def engine(x):
            if slow_engine:
                _busy(1e-3)
            return np.tanh(np.maximum(x, 0))
        return engine
    toy.build = build
    return toy


@pytest.mark.one_pass   # load-time partitioning
@pytest.mark.parametrize("engine_faster", [True, False])
def test_a_short_tail_is_an_engine_when_the_build_timing_says_it_pays(engine_faster, monkeypatch):
    """A 2-node run under the size rule (3) that ends the graph, fed by a node no engine took (the
    cumsum), is built and timed against the run node by node on cpu: kept when the engine's best
    call is the faster (the fallback made 1 ms slower), refused as "too small" with the timing
    when it is the slower (the engine made 1 ms slower); the answer is numpy's either way."""
    from srcore.partition.fallback import SegmentFallback

    toy = _tail_toy(slow_engine=not engine_faster)
    if engine_faster:
        real = SegmentFallback.__call__
        monkeypatch.setattr(SegmentFallback, "__call__", lambda self, *xs: (_busy(1e-3), real(self, *xs))[1])
    sm = load(toy, TAIL)
    assert len(toy.built) == 1
    (seg,) = sm.partition.segments
    assert seg.ops == ("aten::relu", "aten::tanh")
    if engine_faster:
        assert seg.status == "engine"
        assert compute_kinds(sm.graph) == ["aten::cumsum", ENGINE_KIND]
    else:
        assert seg.status == "too small" and "timed at build" in seg.reason, seg.reason
        assert compute_kinds(sm.graph) == ["aten::cumsum", "aten::relu", "aten::tanh"]
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(sm(x), np.tanh(np.maximum(np.cumsum(x, 1), 0)), rtol=1e-6)


@pytest.mark.one_pass   # load-time partitioning
def test_a_short_run_that_is_not_a_tail_is_not_built():
    """The same 2-node run with a node after it (nothing about the graph's end) keeps the size rule
    without a build: the segment may not merge with anything, but a run mid-graph is not timed."""
    toy = _tail_toy(slow_engine=False)
    text = TAIL.replace("  return (%t)", "  %s : Tensor = aten::cumsum(%t, %one)\n  return (%s)")
    sm = load(toy, text)
    assert toy.built == []
    (seg,) = sm.partition.segments
    assert seg.status == "too small" and "timed" not in seg.reason
