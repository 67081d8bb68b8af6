"""Shape propagation at load: a run whose inputs have exactly the load's input types (static shapes)
plans with the types the load propagated, and gets the plan a fresh propagation gives."""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from _shared import bench_model_via_torchscript
from srcore.ir import parse_graph

CHAIN = """graph(%x : Float({batch}, 16)):
  %one : int = prim::Constant[value=1]()
  %a : Tensor = aten::add(%x, %x, %one)
  %c : Tensor = aten::sigmoid(%a)
  %d : Tensor = aten::mul(%c, %x)
  %e : Tensor = aten::cumsum(%d, %one)
  %f : Tensor = aten::relu(%e)
  %g : Tensor = aten::sub(%f, %a, %one)
  return (%g)
"""


def _count_propagations(monkeypatch):
    import srcore.runtime.static_module as sm_mod

    calls = []
    real = sm_mod._propagate

    def counted(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(sm_mod, "_propagate", counted)
    return calls


@pytest.mark.parametrize("name", ["mlp_tiny", "control_flow"])
def test_a_static_first_run_reuses_the_loads_types_and_plans_the_same(name, monkeypatch):
    model, inputs, ref = bench_model_via_torchscript(name)
    calls = _count_propagations(monkeypatch)
    sm = srcore.StaticModule(model)
    assert len(calls) == 1  # the load's, after the passes
    np.testing.assert_allclose(sm(*inputs), ref, rtol=1e-4, atol=1e-4)
    assert len(calls) == 1  # the first run planned with the load's types
    rt = sm.runtime()
    key, types = rt.signature_of(rt.bind(inputs, {}))
    assert sm.signature_info(key, types) == sm._compute_signature(types, reuse=False)
    assert len(calls) == 2


def test_a_partitioned_graph_plans_the_same_from_the_loads_types():
    from srcore.plugin.manager import PluginManager
    from test_partition import ToyEngines  # engine backend "te": a segment runs as a nested cpu StaticModule

    toy = ToyEngines()
    toy.pm = pm = PluginManager().load()
    pm.register(toy, "toy", dist="srcore-toy", version="0.1")
    model = parse_graph(CHAIN.format(batch=4))
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    a = x + x
    ref = np.maximum(np.cumsum(x / (1 + np.exp(-a)), axis=1), 0) - a
    sm = srcore.StaticModule(model, backends=("te", "cpu"), plugin_manager=pm)
    assert sm.partition.engines  # an engine node replaced part of the graph after the load typed it
    np.testing.assert_allclose(sm(x), ref, rtol=1e-5, atol=1e-5)
    rt = sm.runtime()
    key, types = rt.signature_of(rt.bind([x], {}))
    assert sm.signature_info(key, types) == sm._compute_signature(types, reuse=False)


def test_other_input_shapes_propagate_again(monkeypatch):
    model = parse_graph(CHAIN.format(batch="batch"))
    calls = _count_propagations(monkeypatch)
    sm = srcore.StaticModule(model, backends=("cpu",))
    x = np.ones((3, 16), np.float32)
    y = sm(x)
    assert len(calls) == 2 and y.shape == (3, 16)  # the load's types have a symbolic batch: not reused
    mem = sm.memory_report(x)[0]
    assert mem["managed_tensors"] > 0
