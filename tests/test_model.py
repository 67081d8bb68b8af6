"""srcore.Model / InputSpec: params bound in the graph, required ops, validation."""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from srcore.ir import Graph, TensorType, INT
from srcore.model import InputSpec, Model, bind_params, collect_params

#: the Model class and its validation: no StaticModule is built
pytestmark = pytest.mark.one_pass


def _graph():
    g = Graph()
    x = g.add_input(TensorType("float32", ("batch", 4)), "x")
    w = np.ones((3, 4), np.float32)
    c = g.create("prim::Constant", (), (TensorType("float32", (3, 4)),), {"value": w, "param": "fc.weight"})
    g.block.append(c)
    k = g.insert_constant(1)
    loop = g.create("prim::Loop", (k, g.insert_constant(True), x), (x.type,))
    g.block.append(loop)
    body = loop.add_block()
    body.add_input(INT, "i")
    xi = body.add_input(x.type, "xi")
    mm = g.create("aten::relu", (xi,), (x.type,))
    body.append(mm)
    body.register_output(g.insert_constant(True, before=mm))
    body.register_output(mm.output)
    out = g.create("aten::matmul", (loop.output, c.output), (TensorType("float32", ("batch", 3)),))
    g.block.append(out)
    g.register_output(out.output)
    return g, w


def test_from_graph_collects_params_specs_and_ops():
    g, w = _graph()
    m = Model.from_graph(g)
    assert m.params == {"fc.weight": w} and m.params["fc.weight"] is w
    assert m.input_specs == (InputSpec("x", "float32", ("batch", 4)),)
    assert m.output_names == ("output",)
    # nested block nodes count; prim::Param/Return do not
    assert m.required_ops() == ["aten::matmul", "aten::relu", "prim::Constant", "prim::Loop"]
    m.validate()


def test_bind_params_replaces_arrays_and_reports_missing():
    g, _ = _graph()
    new = np.zeros((3, 4), np.float32)
    bind_params(g, {"fc.weight": new})
    assert collect_params(g)["fc.weight"] is new
    with pytest.raises(srcore.SrcoreError, match="fc.weight"):
        bind_params(g, {})


def test_validate_names_the_problem():
    g, _ = _graph()
    m = Model.from_graph(g)
    m.params = {}
    with pytest.raises(srcore.SrcoreError, match="unknown parameter 'fc.weight'"):
        m.validate()
    m = Model.from_graph(g, input_specs=())
    with pytest.raises(srcore.SrcoreError, match=r"input specs \[\] do not match the graph's tensor inputs \['x'\]"):
        m.validate()
    g.add_input(srcore.ir.INT, "n")  # a non-tensor input needs no spec
    Model.from_graph(g).validate()
    assert [s.name for s in Model.from_graph(g).input_specs] == ["x"]


def test_input_spec_json_round_trip_and_checks():
    s = InputSpec("x", "int64", ["batch", None, 3])
    assert s.shape == ("batch", None, 3)
    assert InputSpec.from_json(s.to_json()) == s
    assert s.tensor_type() == TensorType("int64", ("batch", None, 3))
    with pytest.raises(ValueError):
        InputSpec("x", "float32", (-1,))
    with pytest.raises(ValueError):
        InputSpec.from_json({"dtype": "float32"})


def test_public_names():
    assert srcore.Model is Model and srcore.InputSpec is InputSpec
