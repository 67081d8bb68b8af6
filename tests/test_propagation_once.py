"""Shape propagation runs once per load: later propagations (after passes edited the graph, at the
end of the load, for an engine's segment) reuse the facts of the nodes that did not change, and give
the types a full propagation gives.

The reference is a full propagation (no reuse) of the same graph, and a load with reuse turned off:
both must agree with the load value by value. ``SRCORE_CONFORMANCE=1`` runs every parity-zoo model
with every backend list; the default run takes a few of each kind (loops, branches, lists, sizes)."""
from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import srcore
from _shared import bench_model_via_torchscript
import srcore.ops.shapes as shapes_pkg
from srcore.ir.parser import parse_graph
from srcore.ops.shapes import interp, propagate

#: propagation at load does not depend on the executor or the memory planner
pytestmark = pytest.mark.one_pass

BACKEND_LISTS = [("cpu",), ("trt_like", "cpu"), ("quantized_cpu", "cpu")]
FULL = bool(os.environ.get("SRCORE_CONFORMANCE")) or os.environ.get("SRCORE_TESTS_FULL") == "1"
#: zoo models of the default run: a data-dependent If, a loop over a list, size arithmetic, list ops
ZOO_SAMPLE = ("data_if", "rnn_loop", "size_arith", "list_stack", "split_chunk")


class Calls:
    """Every ``propagate`` call: whether it was a full one (no ``previous``), what it re-evaluated."""

    def __init__(self):
        self.full, self.incremental = [], []

    @property
    def n_full(self) -> int:
        return len(self.full)


@pytest.fixture
def calls(monkeypatch):
    c = Calls()
    real = interp.propagate

    def counted(*args, **kwargs):
        r = real(*args, **kwargs)
        (c.incremental if kwargs.get("previous") is not None else c.full).append(r)
        return r

    monkeypatch.setattr(interp, "propagate", counted)
    monkeypatch.setattr(shapes_pkg, "propagate", counted)
    return c


def _values(g):
    yield from g.inputs
    for n in g.all_nodes():
        for b in n.blocks:
            yield from b.inputs
        yield from n.outputs


def typed(g) -> list:
    return [(v.name, v.type) for v in _values(g)]


def _options(backends) -> srcore.Options:
    # engines built without timing tactics: what is checked here is typing, not speed
    engine = {"timing": False, "engine_cache": False} if "trt_like" in backends else {}
    return srcore.Options(backends=backends, engine_options=engine)


def load_without_reuse(model, backends, monkeypatch):
    """The load as before reuse: every propagation a full one."""
    real = interp.propagate

    def full(*args, previous=None, **kwargs):
        return real(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(interp, "propagate", full)
        m.setattr(shapes_pkg, "propagate", full)
        return srcore.StaticModule(model, _options(backends))


def check_load(model, backends, calls, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = srcore.StaticModule(model, _options(backends))
        assert calls.n_full == 1, f"{calls.n_full} full propagations in one load"
        ref = load_without_reuse(model, backends, monkeypatch)
    assert str(sm.graph) == str(ref.graph)
    assert typed(sm.graph) == typed(ref.graph)
    if "trt_like" not in backends:   # engine nodes are typed by the partitioner, not by rules
        g = sm.graph.copy()
        propagate(g, list(sm._typed_for), rules=sm.registry.shape_rules, schemas=sm.registry.schemas)
        assert typed(g) == typed(sm.graph)
    return sm


@pytest.mark.parametrize("name,backends", [("mlp_tiny", ("cpu",)), ("mlp_tiny", ("quantized_cpu", "cpu")),
                                           ("elementwise_chain", ("trt_like", "cpu")),
                                           ("control_flow", ("cpu",))])
def test_a_bench_model_loads_with_one_full_propagation(name, backends, calls, monkeypatch):
    model, inputs, ref = bench_model_via_torchscript(name)
    sm = check_load(model, backends, calls, monkeypatch)
    # the final propagation re-ran rules only for what the passes made (fused nodes, ...)
    final = calls.incremental[-1]
    assert final.reused > 0 and final.evaluated < final.reused + final.evaluated
    np.testing.assert_allclose(sm(*inputs), ref, rtol=1e-4, atol=1e-4)


def _zoo():
    if "parity_models" not in sys.modules:
        path = Path(__file__).resolve().parent / "parity" / "models.py"
        spec = importlib.util.spec_from_file_location("parity_models", path)
        sys.modules["parity_models"] = mod = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.parent))
        spec.loader.exec_module(mod)
    return sys.modules["parity_models"].ZOO


def _zoo_cases():
    zoo = _zoo()
    names = sorted(n for n, c in zoo.items() if not c.no_torchscript) if FULL else ZOO_SAMPLE
    lists = BACKEND_LISTS if FULL else [("cpu",)]
    return [(n, b) for n in names for b in lists]


@pytest.mark.parametrize("name,backends", _zoo_cases())
def test_a_zoo_model_loads_with_one_full_propagation_and_the_same_types(name, backends, calls, monkeypatch):
    case = _zoo()[name]
    module, inputs, _ = case.build()
    with torch.no_grad():
        ts = torch.jit.trace(module, inputs, check_trace=False) if case.torchscript == "trace" \
            else torch.jit.script(module)
    check_load(srcore.from_torchscript(ts, inputs), backends, calls, monkeypatch)


# -- the reuse itself, on small graphs ----------------------------------------------------------------

CHAIN = """graph(%x : Float(2, 3)):
  %one : int = prim::Constant[value=1]()
  %a : Tensor = aten::relu(%x)
  %b : Tensor = aten::sigmoid(%a)
  %c : Tensor = aten::add(%b, %x, %one)
  %d : Tensor = aten::tanh(%c)
  return (%d)
"""


def _node(g, kind):
    return next(n for n in g.all_nodes() if n.kind == kind)


def test_only_the_edited_node_and_what_its_change_reaches_run_again():
    g = parse_graph(CHAIN)
    first = propagate(g)
    assert first.evaluated == 5 and first.reused == 0
    again = propagate(g, previous=first)
    assert (again.evaluated, again.reused) == (0, 5)
    # a pass swaps sigmoid's input: sigmoid runs again; its facts are unchanged, so add and tanh do not
    sig = _node(g, "aten::sigmoid")
    sig.replace_input(0, g.inputs[0])
    third = propagate(g, previous=again)
    assert third.evaluated == 1 and third.reused == 4
    assert typed(g) == typed(_fresh(g))


def test_a_change_of_facts_reaches_downstream_nodes():
    g = parse_graph(CHAIN)
    first = propagate(g)
    # new input shape: every tensor node sees other facts
    res = propagate(g, [srcore.ir.types.TensorType("float32", (5, 3))], previous=first)
    assert res.evaluated == 4 and res.reused == 1   # only the constant is as it was
    assert str(_node(g, "aten::tanh").outputs[0].type) == "Float(5, 3)"


def test_facts_found_with_other_rules_are_not_reused():
    from srcore.ops.shapes.table import ShapeRuleTable

    g = parse_graph(CHAIN)
    first = propagate(g)
    registry = srcore.get_plugin_manager().registry
    again = propagate(g, previous=first)
    assert again.reused == 5
    other = ShapeRuleTable()
    for op in registry.shape_rules.names():
        other.add(op, registry.shape_rules.get(op).ref)
    res = propagate(g, rules=other, schemas=registry.schemas, previous=first)
    assert (res.evaluated, res.reused) == (5, 0)


def _fresh(g):
    c = g.copy()
    propagate(c)
    return c


LISTS = """graph(%x : Float(4, 6)):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %m1 : int = prim::Constant[value=-1]()
  %n : int = aten::size(%x, %zero)
  %l : int[] = prim::ListConstruct(%n)
  %_ : int[] = aten::append(%l, %m1)
  %k : int = aten::len(%l)
  %y : Tensor = aten::reshape(%x, %l)
  %s : bool = aten::__is__(%x, %x)
  return (%y, %k, %s)
"""


def test_lists_mutated_in_place_and_identity_tests_are_not_replayed_blindly():
    g = parse_graph(LISTS)
    first = propagate(g)
    k, s = g.outputs[1], g.outputs[2]
    assert first.known[k] == 2 and first.known[s] is True
    again = propagate(g, previous=first)
    assert again.known[k] == 2 and again.known[s] is True     # append ran again: the list has 2 items
    assert str(g.outputs[0].type) == "Float(4, 6)"
    # rewire __is__ to two different values of the same type: no longer known to be the same object
    is_node = _node(g, "aten::__is__")
    is_node.replace_input(1, _node(g, "aten::reshape").outputs[0])
    third = propagate(g, previous=again)
    assert s not in third.known or third.known[s] is not True
    assert typed(g) == typed(_fresh(g))


# -- engine segments: specialized from the load's facts ---------------------------------------------------

RESHAPE = """graph(%x : Float(5, 4, 3)):
  %zero : int = prim::Constant[value=0]()
  %m1 : int = prim::Constant[value=-1]()
  %a : Tensor = aten::relu(%x)
  %n : int = aten::size(%a, %zero)
  %shape : int[] = prim::ListConstruct(%n, %m1)
  %r : Tensor = aten::reshape(%a, %shape)
  %t : Tensor = aten::tanh(%r)
  return (%t)
"""


def test_a_segment_specializes_for_the_loads_shapes_without_propagating(calls):
    from srcore.ir.printer import print_graph
    from srcore.partition.specialize import specialize
    from test_partition_rules import toy_with

    toy = toy_with("aten::relu", "aten::reshape", "aten::tanh")
    # optimize=False: the size chain is still there for the segment to fold
    sm = srcore.StaticModule(parse_graph(RESHAPE), options=srcore.Options(backends=("te", "cpu"), optimize=False),
                             plugin_manager=toy.pm)
    (seg,) = toy.built
    assert seg.known
    n = calls.n_full
    g = seg.specialize([(5, 4, 3)])
    assert calls.n_full == n and not calls.incremental[n:]
    ref = specialize(seg.graph, [(5, 4, 3)])        # the propagating way
    assert calls.n_full == n + 1
    assert print_graph(g) == print_graph(ref) and typed(g) == typed(ref)
    shape = _node(g, "aten::reshape").inputs[1]
    assert shape.node.kind == "prim::Constant" and shape.node.attrs["value"] == [5, -1]
    # other shapes: propagated for them
    other = seg.specialize([(2, 4, 3)])
    assert _node(other, "aten::reshape").inputs[1].node.attrs["value"] == [2, -1]
    x = np.random.default_rng(0).standard_normal((5, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(sm(x), np.tanh(np.maximum(x, 0).reshape(5, -1)), rtol=1e-6)
