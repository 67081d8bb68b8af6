"""Every op that aten.yaml / prim.yaml / srcore.yaml declare has a shape rule (or a documented reason
not to), and every rule survives inputs it knows nothing or little about."""
from __future__ import annotations

import pytest

import srcore
from srcore.ir import Graph
from srcore.ir import types as T
from srcore.ops import schema as S
from srcore.ops.registry import default_registry
from srcore.ops.shapes import NO_RULE, lookup, propagate

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

REG = default_registry()
NAMES = sorted(REG.names())


def test_declarations_are_loaded():
    assert len(NAMES) > 700  # aten.yaml alone declares several hundred overloads
    assert {"aten::add.Tensor", "aten::conv2d", "prim::ListConstruct", "srcore::linear_relu"} <= set(NAMES)


def test_every_declared_op_has_a_rule_or_a_reason():
    missing = [n for n in NAMES if lookup(n) is None and n not in NO_RULE]
    assert missing == []
    for name, reason in NO_RULE.items():
        assert name in NAMES and len(reason) > 20, name


def _ir_type(t, concrete: bool):
    if isinstance(t, S.OptionalType):
        return T.OptionalType(_ir_type(t.elem, concrete))
    if isinstance(t, S.ListType):
        return T.ListType(_ir_type(t.elem, concrete))
    if isinstance(t, S.TupleType):
        return T.TupleType(tuple(_ir_type(e, concrete) for e in t.elems))
    name = getattr(t, "name", "Any")
    if name == "Tensor":
        return T.TensorType("float32", (2, 3, 4, 5)) if concrete else T.TensorType()
    return {"int": T.INT, "SymInt": T.INT, "float": T.FLOAT, "bool": T.BOOL, "str": T.STR,
            "ScalarType": T.INT, "Scalar": T.NUMBER, "Device": T.DEVICE}.get(name, T.ANY)


@pytest.mark.parametrize("concrete", [False, True])
def test_every_rule_handles_unknown_arguments(concrete):
    """Arguments whose values are unknown (graph inputs): a rule may give unknown dims, or reject a
    shape with a ShapeError (a quantized op a float tensor with a QuantizationError), but must never
    fail internally or give the wrong number of outputs."""
    broken = []
    for name in NAMES:
        if name in NO_RULE:
            continue
        s = REG.get(name)
        g = Graph()
        ins = [g.add_input(_ir_type(a.type, concrete), a.name) for a in s.arguments]
        node = g.insert(s.name, ins, [_ir_type(r.type, False) for r in s.returns])
        node.schema = s
        try:
            propagate(g)
        except srcore.QuantizationError as e:
            assert str(e).startswith(s.name), e   # names the node
        except srcore.ShapeError as e:
            if "failed:" in str(e) or "outputs, the node has" in str(e):
                broken.append(f"{name}: {str(e).splitlines()[0]}")
    assert broken == []


def test_strict_names_the_op_without_a_rule():
    g = Graph()
    x = g.add_input(T.TensorType("float32", (2,)), "x")
    from srcore.ir.graph import SourceLocation
    g.insert("mylib::frobnicate", [x], [T.TENSOR], source=SourceLocation("model.py", 7, 3))
    res = propagate(g)
    assert [n.kind for n in res.missing_rules] == ["mylib::frobnicate"]
    with pytest.raises(srcore.ShapeError, match=r"mylib::frobnicate[\s\S]*model.py:7:3"):
        propagate(g, strict=True)
