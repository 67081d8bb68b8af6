"""The partitioner: segments, engine nodes, automatic fallback, the report.

A toy engine backend ``te`` compiles a segment by loading its subgraph into a nested
cpu StaticModule, so every model must give the same answer as plain cpu execution
(the independent reference is numpy written by hand).
"""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from srcore.errors import EngineBuildError
from srcore.ir.parser import parse_graph
from srcore.partition import ENGINE_KIND
from srcore.plugin import Backend, EngineBuilder, hookimpl
from srcore.plugin.manager import PluginManager

from _shared import pointwise_chain, pointwise_chain_ref

COMBOS = [(e, p) for e in ("codegen", "interpreter") for p in ("standard_resizing", "precomputed_offsets")]


class ToyEngines:
    """Backend ``te``: supports the ops in ``ops``; ``refuse``/``crash`` make build fail."""

    def __init__(self, ops=("aten::add.Tensor", "aten::mul.Scalar", "aten::mul.Tensor", "aten::sigmoid",
                            "aten::tanh", "aten::relu", "aten::sub.Tensor")):
        self.ops = set(ops)
        self.built = []
        self.refuse = None
        self.crash = None

    @hookimpl
    def srcore_backends(self):
        yield Backend("te", "toy engines")

    @hookimpl
    def srcore_engine_builders(self):
        yield EngineBuilder("te", supports=self.supports, build=self.build)

    def supports(self, node):
        return node.op in self.ops

    def build(self, segment):
        self.built.append(segment)
        if self.refuse:
            raise EngineBuildError(self.refuse)
        if self.crash:
            raise self.crash
        sm = srcore.StaticModule(segment.graph, backends=("cpu",), plugin_manager=self.pm)
        n = len(segment.graph.outputs)

        def engine(*xs):
            out = sm.runtime().clone()(*xs)
            return tuple(o.copy() for o in out) if n > 1 else out.copy()
        engine.describe = lambda: f"toy engine of {len(list(segment.graph.nodes))} nodes"
        return engine


@pytest.fixture
def toy():
    pm = PluginManager().load()
    t = ToyEngines()
    t.pm = pm
    pm.register(t, "toy", dist="srcore-toy", version="0.1")
    return t


@pytest.fixture(params=COMBOS, ids=[f"{e}-{p}" for e, p in COMBOS])
def options(request):
    executor, planner = request.param
    return srcore.Options(executor=executor, memory_planner_algorithm=planner, backends=("te", "cpu"))


CHAIN = pointwise_chain(16)
chain_ref = pointwise_chain_ref


def engine_nodes(sm):
    return [n for n in sm.graph.all_nodes() if n.kind == ENGINE_KIND]


def load(toy, text, options, **kw):
    import attrs
    return srcore.StaticModule(parse_graph(text), options=attrs.evolve(options, **kw), plugin_manager=toy.pm)


def test_whole_chain_becomes_one_engine(toy, options):
    sm = load(toy, CHAIN, options)
    (eng,) = engine_nodes(sm)
    assert eng.attrs["backend"] == "te" and eng.attrs["name"] == "te_engine_0"
    assert [n.kind for n in sm.graph.nodes if n.kind != "prim::Constant"] == [ENGINE_KIND]
    (seg,) = sm.partition.segments
    assert seg.status == "engine" and len(seg.ops) == 7 and "toy engine of" in seg.description
    # the segment's graph: the chain's nodes and the constants they read, inputs typed
    (built,) = toy.built
    assert str(built.graph.inputs[0].type) == "Float(batch, 16)"
    for batch in (1, 3, 5):  # symbolic batch: engine outputs propagate per signature
        x = np.random.default_rng(batch).standard_normal((batch, 16)).astype(np.float32)
        np.testing.assert_allclose(sm(x), chain_ref(x), rtol=1e-6, atol=1e-6)


def test_unsupported_node_splits_the_chain_and_runs_on_cpu(toy, options):
    toy.ops.discard("aten::tanh")
    sm = load(toy, CHAIN, options, engine_min_block_size=1)
    kinds = [n.kind for n in sm.graph.nodes if n.kind != "prim::Constant"]
    assert kinds == [ENGINE_KIND, "aten::tanh", ENGINE_KIND]
    assert [len(s.ops) for s in sm.partition.segments] == [4, 2]
    (r,) = sm.partition.refused
    assert r.node.endswith("aten::tanh") and "not supported by te" in r.reason
    # the engine's outputs feed a cpu node and a later engine (%a crosses the cpu node)
    assert len(engine_nodes(sm)[0].outputs) == 2
    x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    np.testing.assert_allclose(sm(x), chain_ref(x), rtol=1e-6, atol=1e-6)


def test_segments_below_min_block_size_stay_node_by_node(toy, options):
    toy.ops.discard("aten::tanh")
    sm = load(toy, CHAIN, options, engine_min_block_size=3)
    assert [s.status for s in sm.partition.segments] == ["engine", "too small"]
    assert "engine_min_block_size=3" in sm.partition.segments[1].reason
    assert len(engine_nodes(sm)) == 1
    x = np.ones((1, 16), np.float32)
    np.testing.assert_allclose(sm(x), chain_ref(x), rtol=1e-6)


def test_refused_segment_falls_back_and_full_compilation_says_why(toy, options):
    toy.refuse = "te cannot do this segment (test)"
    sm = load(toy, CHAIN, options)
    (seg,) = sm.partition.segments
    assert seg.status == "fallback" and seg.reason == "te cannot do this segment (test)"
    assert not engine_nodes(sm)
    x = np.full((2, 16), 0.3, np.float32)
    np.testing.assert_allclose(sm(x), chain_ref(x), rtol=1e-6)
    with pytest.raises(EngineBuildError, match="(?s)not every node is in an engine.*te_engine_0 \\(7 nodes from <graph>:4:3\\): fallback: te cannot do this"):
        load(toy, CHAIN, options, require_full_compilation=True)


def test_segment_fallback_runs_the_segment_on_the_next_backends(toy, options):
    sm = load(toy, CHAIN, options)
    (seg,) = toy.built
    assert seg.fallback is not None and seg.fallback.backends == ("cpu",)
    x = np.random.default_rng(3).standard_normal((4, 16)).astype(np.float32)
    got = seg.fallback(x)
    np.testing.assert_allclose(got, chain_ref(x), rtol=1e-6, atol=1e-6)
    assert isinstance(got, np.ndarray) and not np.may_share_memory(got, x)
    # one runtime per thread: concurrent callers get their own answers
    from concurrent.futures import ThreadPoolExecutor
    xs = [np.full((b, 16), 0.1 * b, np.float32) for b in range(1, 9)]
    with ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(seg.fallback, xs))
    for xi, o in zip(xs, outs):
        np.testing.assert_allclose(o, chain_ref(xi), rtol=1e-6, atol=1e-6)
    assert sm(x).shape == (4, 16)


def test_no_segment_fallback_under_full_compilation_or_without_a_next_backend(toy, options):
    load(toy, CHAIN, options, require_full_compilation=True)
    load(toy, CHAIN, options, backends=("te",))
    assert [s.fallback for s in toy.built] == [None, None]


def test_segment_fallback_copies_a_result_that_views_an_input(toy, options):
    toy.ops.add("aten::reshape")
    text = """graph(%x : Float(batch, 16)):
  %one : int = prim::Constant[value=1]()
  %shape : int[] = prim::Constant[value=[-1, 4, 4]]()
  %a : Tensor = aten::add(%x, %x, %one)
  %v : Tensor = aten::reshape(%x, %shape)
  return (%a, %v)
"""
    load(toy, text, options, engine_min_block_size=1)
    (seg,) = toy.built
    x = np.arange(32, dtype=np.float32).reshape(2, 16)
    a, v = seg.fallback(x)
    np.testing.assert_array_equal(v, x.reshape(2, 4, 4))
    assert not np.may_share_memory(v, x) and not np.may_share_memory(a, x)


def test_a_crashing_builder_does_not_take_the_model_down(toy, options):
    toy.crash = ZeroDivisionError("bug in the builder")
    sm = load(toy, CHAIN, options)
    (seg,) = sm.partition.segments
    assert seg.status == "fallback" and "the builder failed: ZeroDivisionError: bug in the builder" in seg.reason
    x = np.ones((1, 16), np.float32)
    np.testing.assert_allclose(sm(x), chain_ref(x), rtol=1e-6)


def test_engine_fallback_ops_keep_ops_out_of_engines(toy, options):
    sm = load(toy, CHAIN, options, engine_fallback_ops=("aten::sigmoid", "aten::relu"), engine_min_block_size=1)
    refused = {r.node.rsplit(" ", 1)[-1]: r.reason for r in sm.partition.refused}
    assert refused == {"aten::sigmoid": "listed in Options.engine_fallback_ops",
                       "aten::relu": "listed in Options.engine_fallback_ops"}
    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(2, 16)
    np.testing.assert_allclose(sm(x), chain_ref(x), rtol=1e-6, atol=1e-6)


INPLACE = """graph(%x : Float(2, 8)):
  %one : int = prim::Constant[value=1]()
  %a : Tensor = aten::add(%x, %x, %one)
  %v : Tensor = aten::relu(%a)
  %s : Tensor = aten::sigmoid(%x)
  %t : Tensor = aten::tanh(%s)
  %w : Tensor = aten::add_(%a, %t, %one)
  %y : Tensor = aten::mul(%v, %a)
  %z : Tensor = aten::mul(%y, %t)
  return (%z)
"""


def test_values_written_in_place_stay_out_of_engines(toy, options):
    sm = load(toy, INPLACE, options, engine_min_block_size=1)
    refused = {r.node: r.reason for r in sm.partition.refused}
    assert any("aten::add_" in k and "writes in place" in v for k, v in refused.items())
    # %a is written by add_: the nodes that read or make it run on cpu, in program order
    assert any("%a = aten::add" in k and "shares memory" in v for k, v in refused.items())
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    a = x + x
    v = np.maximum(a, 0)
    t = np.tanh(1 / (1 + np.exp(-x)))
    a = a + t
    np.testing.assert_allclose(sm(x), v * a * t, rtol=1e-6, atol=1e-6)


LOOP = """graph(%x : Float(1, 8), %n : int):
  %true : bool = prim::Constant[value=1]()
  %one : int = prim::Constant[value=1]()
  %half : float = prim::Constant[value=0.5]()
  %y : Tensor = prim::Loop(%n, %true, %x)
    block0(%i : int, %h : Tensor):
      %a : Tensor = aten::mul(%h, %half)
      %b : Tensor = aten::tanh(%a)
      %c : Tensor = aten::add(%b, %x, %one)
      -> (%true, %c)
  return (%y)
"""


def test_engines_inside_loop_bodies(toy, options):
    sm = load(toy, LOOP, options)
    (eng,) = engine_nodes(sm)
    assert eng.owning_block.owning_node.kind == "prim::Loop"
    refused = [r for r in sm.partition.refused]
    assert [r.reason for r in refused] == ["control flow runs outside engines"]
    x = np.random.default_rng(2).standard_normal((1, 8)).astype(np.float32)
    h = x
    for _ in range(4):
        h = np.tanh(h * 0.5) + x
    np.testing.assert_allclose(sm(x, 4), h, rtol=1e-6, atol=1e-6)


def test_engine_options_reach_the_builder(toy, options):
    load(toy, CHAIN, options, engine_options={"precision": "float32", "workspace": 1 << 20})
    (seg,) = toy.built
    assert seg.option("precision") == "float32" and seg.option("workspace") == 1 << 20
    assert seg.option("missing", 7) == 7


def test_no_engine_backend_means_no_partition(toy):
    sm = srcore.StaticModule(parse_graph(CHAIN), backends=("cpu",), plugin_manager=toy.pm)
    assert sm.partition is None and not engine_nodes(sm) and not toy.built


def test_inspect_partition_shows_engines_layers_and_fallback(tmp_path, capsys):
    from srcore.cli.main import main

    path = tmp_path / "chain.ir"
    path.write_text(CHAIN.replace("%x : Float(batch, 16)", "%x : Float(2, 16)")
                    .replace("aten::tanh(%d)", "aten::logcumsumexp(%d, %one)"))
    assert main(["inspect", str(path), "--partition", "trt_like"]) == 0
    out = capsys.readouterr().out
    assert "== partition (backends: trt_like, quantized_cpu, cpu;" in out   # the engine, then the default list
    assert "trt_like_engine_0 [trt_like] 4 node(s): engine" in out
    assert "fused_pointwise (4 ops: add, mul, sigmoid, mul)" in out          # the engine's layers
    assert "aten::logcumsumexp: not supported by trt_like: aten::logcumsumexp is not in the engine's op table" in out
    assert main(["inspect", str(path), "--partition", "cpu"]) != 0
    err = capsys.readouterr().err  # every installed engine backend is listed (openvino too, when installed)
    assert "--partition cpu: no engine builder for that backend (engine backends: " in err and "trt_like" in err
