"""IR text: parse TorchScript's printed syntax, print canonically, report errors."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from srcore import GraphParseError
from srcore.ir.graph import SourceLocation
from srcore.ir.parser import UNKNOWN_TENSOR, parse_graph
from srcore.ir.printer import print_graph
from srcore.ir.types import (BOOL, DEVICE, FLOAT, INT, NONE, STR, TENSOR, ClassType, DictType,
                             ListType, OptionalType, TensorType, TupleType)

#: independent of the executor and the memory planner: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

GOLDEN = sorted((Path(__file__).parent / "golden" / "ir").glob("*.txt"))

ARTICLE = """graph(%x.1 : Tensor, %y.1 : Tensor):
  %3 : Tensor = aten::max(%x.1)
  %5 : Tensor = aten::max(%y.1) # a free-form comment, not a location
  %6 : Tensor = aten::gt(%3, %5)
  %7 : bool = aten::Bool(%6)
  %r : Tensor = prim::If(%7)
    block0():
      -> (%x.1)
    block1():
      -> (%y.1)
  return (%r)
"""


def roundtrip(text: str, **kw) -> str:
    p = print_graph(parse_graph(text, **kw))
    assert print_graph(parse_graph(p, **kw)) == p
    return p


def consts(g):
    return {n.output.name: n for n in g.nodes if n.kind == "prim::Constant"}


def test_article_example_structure():
    g = parse_graph(ARTICLE)
    assert [v.name for v in g.inputs] == ["x.1", "y.1"]
    kinds = [n.kind for n in g.nodes]
    assert kinds == ["aten::max", "aten::max", "aten::gt", "aten::Bool", "prim::If"]
    if_ = g.nodes[4]
    assert [b.outputs[0] for b in if_.blocks] == list(g.inputs)
    assert g.outputs == [if_.output]
    # a free-form comment is no source: the node's own position in the text stands in
    assert g.nodes[1].source.in_text and g.nodes[1].source.file == "<graph>"
    assert parse_graph(ARTICLE, locate=False).nodes[1].source is None
    canonical = (ARTICLE.replace(" # a free-form comment, not a location", "")
                 .replace("%x.1 : Tensor, %y.1", "%x.1 : Tensor,\n      %y.1"))
    assert roundtrip(ARTICLE) == canonical


def test_constants_and_types():
    text = """graph(%x.1 : Tensor, %y : Float(2, 3, strides=[3, 1], requires_grad=0, device=cpu)):
  %3 : int = prim::Constant[value=1]()
  %4 : float = prim::Constant[value=0.5]()
  %5 : str = prim::Constant[value="a\\"b\\'c\\n"]()
  %6 : NoneType = prim::Constant()
  %7 : bool = prim::Constant[value=0]()
  %8 : Device = prim::Constant[value="cpu"]()
  %9 : int[] = prim::Constant[value=[1, 2]]()
  %10 : (NoneType, int) = prim::Constant[value=(None, 3)]()
  %11 : bool[] = prim::Constant[value=[1, 0]]()
  %12 : float = prim::Constant[value=1.0000000000000001e-05]()
  %13 : float = prim::Constant[value=0.]()
  %14 : float = prim::Constant[value=-inf]()
  return (%x.1)
"""
    g = parse_graph(text)
    c = {k: n.attrs.get("value") for k, n in consts(g).items()}
    assert c["3"] == 1 and type(c["3"]) is int
    assert c["4"] == 0.5
    assert c["5"] == "a\"b'c\n"
    assert "value" not in consts(g)["6"].attrs
    assert c["7"] is False
    assert c["8"] == "cpu" and consts(g)["8"].output.type == DEVICE
    assert c["9"] == [1, 2] and consts(g)["9"].output.type == ListType(INT)
    assert c["10"] == (None, 3) and consts(g)["10"].output.type == TupleType((NONE, INT))
    assert c["11"] == [True, False]
    assert c["12"] == 1e-05 and type(c["13"]) is float and c["14"] == -math.inf
    assert g.inputs[1].type == TensorType("float32", (2, 3))  # strides/device dropped
    out = roundtrip(text)
    assert '%7 : bool = prim::Constant[value=0]()' in out
    assert '%y : Float(2, 3)' in out
    assert 'value="a\\"b\'c\\n"' in out


@pytest.mark.parametrize("text,expected", [
    ("Tensor", TENSOR), ("int", INT), ("float", FLOAT), ("bool", BOOL), ("str", STR),
    ("NoneType", NONE), ("int[]", ListType(INT)), ("Tensor[]", ListType(TENSOR)),
    ("Tensor?", OptionalType(TENSOR)), ("int?", OptionalType(INT)),
    ("(Tensor, Tensor?)", TupleType((TENSOR, OptionalType(TENSOR)))),
    ("Dict(str, Tensor)", DictType(STR, TENSOR)), ("Long(*, 4)", TensorType("int64", (None, 4))),
    ("Float(batch, 64)", TensorType("float32", ("batch", 64))), ("Half(...)", TensorType("float16")),
    ("Float(SS(-2), 3)", TensorType("float32", ("SS(-2)", 3))), ("Bool()", TensorType("bool", ())),
    ("Byte(requires_grad=0, device=cuda:0)", TensorType("uint8", None)),
    ("int[][]", ListType(ListType(INT))), ("(int,)", TupleType((INT,))),
    ("__torch__.models.MLP", ClassType("__torch__.models.MLP")),
])
def test_types(text, expected):
    g = parse_graph(f"graph(%a : {text}):\n  return (%a)\n")
    assert g.inputs[0].type == expected
    again = parse_graph(print_graph(g))
    assert again.inputs[0].type == expected


def test_multiple_outputs_no_outputs_attrs_source():
    text = """graph(%t : (Tensor, Tensor), %s : str):
  %none : NoneType = prim::Constant()
  %a : Tensor, %b : Tensor = prim::TupleUnpack(%t) # /path/file.py:10:4
  = prim::RaiseException(%s, %none) # f.py:3
  %c : Tensor = prim::Foo[name="x", attr=1, f=2.5, l=[1, 2], flag=True](%a), scope: __module.fc # m.py:1:2
  return (%a, %c)
"""
    g = parse_graph(text)
    unpack, raise_, foo = list(g.nodes)[1:]
    assert [o.name for o in unpack.outputs] == ["a", "b"]
    assert unpack.source == SourceLocation("/path/file.py", 10, 4)
    assert raise_.outputs == [] and raise_.source == SourceLocation("f.py", 3, None)
    assert foo.attrs == {"name": "x", "attr": 1, "f": 2.5, "l": [1, 2], "flag": True}
    assert foo.meta["scope"] == "__module.fc" and foo.source == SourceLocation("m.py", 1, 2)
    out = roundtrip(text)
    # the scope is kept (Options.engine_fallback_modules matches it)
    assert 'prim::Foo[attr=1, f=2.5, flag=True, l=[1, 2], name="x"](%a), scope: __module.fc # m.py:1:2' in out
    assert "\n  prim::RaiseException(%s, %none) # f.py:3\n" in out  # torch reads this form back


def test_loop_and_nested_blocks():
    text = (Path(__file__).parent / "golden" / "ir" / "control_flow.txt").read_text()
    g = parse_graph(text)
    loop = next(n for n in g.nodes if n.kind == "prim::Loop")
    body = loop.blocks[0]
    assert [v.name for v in body.inputs] == ["11", "x.33"]
    assert [v.name for v in body.outputs] == ["3", "x.31"]
    inner_if = next(n for n in body.nodes if n.kind == "prim::If")
    assert inner_if.blocks[1].outputs[0].node.kind == "aten::sub"
    # a value from the enclosing graph is used two blocks deep
    lin = inner_if.blocks[0].nodes.first
    assert lin.inputs[1].name == "self.a.weight" and lin.inputs[1].node.owning_block is g.block


def test_tensor_constants_from_torch():
    text = """graph(%x : Tensor):
  %w : Float(10, strides=[1], requires_grad=0, device=cpu) = prim::Constant[value=-0.1148 -0.0101  0.1193 [ CPUFloatType{3} ]]()
  %v : Float(2, 2) = prim::Constant[value= 1  2
 3  4
[ CPUFloatType{2,2} ]]()
  %u : Float(64) = prim::Constant[value=<Tensor>]()
  %s : Tensor = prim::Constant[value={0.5}]()
  return (%w, %v, %u, %s)
"""
    g = parse_graph(text)
    c = consts(g)
    for k in "wvu":
        assert c[k].attrs == {"tensor": UNKNOWN_TENSOR} and "value" not in c[k].attrs
    assert c["s"].attrs == {"tensor": "{0.5}"}
    out = roundtrip(text)
    assert "%v : Float(2, 2) = prim::Constant[value=<Tensor>]()" in out


def test_params():
    text = 'graph(%x : Tensor):\n  %w : Float(2, 2) = prim::Constant[param="fc1.weight"]()\n  return (%w)\n'
    w = np.arange(4, dtype=np.float32).reshape(2, 2)
    g = parse_graph(text, params={"fc1.weight": w})
    assert g.outputs[0].node.attrs["value"] is w
    assert parse_graph(text).outputs[0].node.attrs == {"param": "fc1.weight"}
    assert print_graph(g) == text
    with pytest.raises(GraphParseError, match="fc1.weight"):
        parse_graph(text, params={})


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_golden_torch_graphs(path):
    text = path.read_text()
    g = parse_graph(text, filename=str(path))
    n_nodes = sum(1 for line in text.splitlines() if not line.startswith("with ") and
                  (" = " in line.split("#")[0] or line.strip().startswith("= ")))
    graphs, todo = [], [g]
    while todo:  # the graph and its ``with`` subgraphs
        h = todo.pop()
        graphs.append(h)
        todo += [v for n in h.all_nodes() for v in n.attrs.values()
                 if isinstance(v, type(g)) and all(v is not k for k in graphs + todo)]
    assert sum(1 for h in graphs for _ in h.all_nodes()) == n_nodes
    assert len(graphs) - 1 == text.count("\nwith ")
    roundtrip(text)


BAD = [
    ("graph(%x : Tensor):\n  return (%y)\n", 2, "y", "undefined value %y"),
    ("graph(%x : Tensr):\n  return (%x)\n", 1, "Tensr", "unknown type"),
    ("graph(%x : Tensor):\n  %y : Tensor = aten::relu(%x\n  return (%y)\n", 3, "return", "expected"),
    ("graph(%x : Tensor):\n  %c : bool = prim::Constant[value=1]()\n  %r : Tensor = prim::If(%c)\n"
     "    block0():\n      -> (%x)\n    block1():\n      -> ()\n  return (%r)\n", 3, "prim::If", "block1"),
    ("graph(%x : Tensor):\n  %c : int = prim::Constant[value=\"a\"]()\n  return (%x)\n", 2,
     "prim::Constant", "does not match"),
    ("graph(%x : Tensor):\n  %c : Tensor = prim::If(%x)\n    block0():\n      %z : Tensor = aten::relu(%x)\n"
     "      -> (%z)\n    block1():\n      -> (%z)\n  return (%c)\n", 7, "z", "undefined"),
    ("graph(%x : Tensor):\n  %y : Tensor = relu(%x)\n  return (%y)\n", 2, "relu", "namespace"),
    ('graph(%x : Tensor):\n  %s : str = prim::Constant[value="abc]()\n  return (%x)\n', 2, None,
     "unterminated"),
]


@pytest.mark.parametrize("text,line,token,msg", BAD)
def test_errors_name_line_column_token(text, line, token, msg):
    with pytest.raises(GraphParseError, match=msg) as ei:
        parse_graph(text, filename="m.ir")
    e = ei.value
    assert e.line == line and e.column is not None and e.column >= 1
    if token is not None:
        assert e.token.lstrip("%") == token
    assert str(e).startswith(f"m.ir:{line}:{e.column}: ")
    # the column points at the token in the source line
    if token is not None:
        assert text.splitlines()[line - 1][e.column - 1:].lstrip("%").startswith(token)


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_float_constants_round_trip(x):
    g = parse_graph(f"graph():\n  %c : float = prim::Constant[value={x!r}]()\n  return (%c)\n"
                    .replace("value=nan", "value=nan").replace("value=inf", "value=inf"))
    v = g.outputs[0].node.attrs["value"]
    assert (math.isnan(v) and math.isnan(x)) or v == x
    assert print_graph(parse_graph(print_graph(g))) == print_graph(g)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_string_constants_round_trip(s):
    from srcore.ir.builder import GraphBuilder
    b = GraphBuilder()
    b.output(b.constant(s))
    g2 = parse_graph(print_graph(b.graph))
    assert g2.outputs[0].node.attrs["value"] == s


LOOP = """graph(%x.1 : Float(1, 64), %n : int):
  %t : bool = prim::Constant[value=1]()
  %one : int = prim::Constant[value=1]()
  %h : float = prim::Constant[value=0.5]()
  %x : Tensor = prim::Loop(%n, %t, %x.1) # m.py:3:4
    block0(%i : int, %x.3 : Tensor):
      %s : Tensor = aten::sum(%x.3, %one)
      %c : bool = aten::Bool(%s)
      %x.5 : Tensor = prim::If(%c)
        block0():
          %a : Tensor = aten::tanh(%x.3)
          -> (%a)
        block1():
          %b : Tensor = aten::sub(%x.3, %h, %one)
          -> (%b)
      -> (%t, %x.5)
  return (%x)
"""


@pytest.mark.parametrize("text", [ARTICLE, LOOP])
def test_torch_parses_our_text(text):
    """torch's own IR parser (an independent reference) reads srcore's canonical output."""
    torch = pytest.importorskip("torch")
    ours = print_graph(parse_graph(text))
    tg = torch._C.parse_ir(ours)

    def kinds(nodes):
        return [(n.kind(), [kinds(b.nodes()) for b in n.blocks()]) for n in nodes]

    def our_kinds(nodes):
        return [(n.kind, [our_kinds(b.nodes) for b in n.blocks]) for n in nodes]

    assert kinds(tg.nodes()) == our_kinds(parse_graph(ours).nodes)
    # and what torch prints back parses to the same structure (torch renames some values)
    assert our_kinds(parse_graph(str(tg)).nodes) == our_kinds(parse_graph(ours).nodes)


def test_docs_example_parses_and_is_canonical():
    doc = (Path(__file__).parent.parent / "docs" / "ir-text.md").read_text()
    example = doc.split("## Example")[1].split("```")[1].removeprefix("ir").lstrip("\n")
    w = np.zeros((64, 64), np.float32)
    g = parse_graph(example, params={"fc1.weight": w})
    assert print_graph(g) == example
    from srcore.ir.verify import verify
    verify(g)


def test_type_valued_attributes():
    text = ("graph(%x : Tensor):\n  %y : Tensor = prim::profile[profiled_type=Float(1, 64, strides=[64, 1], "
            "requires_grad=0, device=cpu), seen_none=0](%x)\n  return (%y)\n")
    g = parse_graph(text)
    assert g.nodes[0].attrs == {"profiled_type": TensorType("float32", (1, 64)), "seen_none": 0}
    assert "prim::profile[profiled_type=Float(1, 64), seen_none=0](%x)" in roundtrip(text)


def test_only_control_flow_nodes_own_blocks():
    text = "graph(%x : Tensor):\n  %y : Tensor = aten::relu(%x)\n    block0():\n      -> ()\n  return (%y)\n"
    with pytest.raises(GraphParseError, match="aten::relu cannot own blocks") as ei:
        parse_graph(text)
    assert ei.value.line == 3 and ei.value.token == "block0"


@pytest.mark.parametrize("name", ["mlp_tiny", "control_flow"])
def test_frontend_graphs_round_trip_with_params(name):
    """Graphs converted from torch print, and parse back with their parameters."""
    pytest.importorskip("torch")
    import sys
    import srcore
    from benchmarks.models import MODELS  # the project's copy of the public bench set
    module, inputs = MODELS[name][0]()
    model = srcore.from_torchscript(module, inputs)
    text = print_graph(model.graph)
    g = parse_graph(text, params=model.params)
    assert print_graph(g) == text
    for n in g.nodes:
        if "param" in n.attrs:
            assert n.attrs["value"] is model.params[n.attrs["param"]]


def test_with_subgraph_sections():
    text = """graph(%x : Tensor):
  %y : Tensor = prim::DifferentiableGraph_0(%x)
  return (%y)
with prim::DifferentiableGraph_0 = graph(%a : Tensor(requires_grad=0)):
  %b : Tensor(requires_grad=0) = aten::relu(%a)
  return (%b)
"""
    g = parse_graph(text)
    sub = g.nodes[0].attrs["Subgraph"]
    assert [n.kind for n in sub.nodes] == ["aten::relu"] and sub.inputs[0].name == "a"
    assert roundtrip(text) == text.replace("Tensor(requires_grad=0)", "Tensor")
    with pytest.raises(GraphParseError, match="no prim::Other node uses this subgraph"):
        parse_graph(text.replace("with prim::DifferentiableGraph_0", "with prim::Other"))


def test_control_flow_types_are_checked():
    loop = """graph(%x : Tensor, %n : int):
  %t : bool = prim::Constant[value=1]()
  %y : Tensor = prim::Loop(%n, %t, %x)
    block0(%i : int, %z : Tensor):
      -> (%t, %z)
  return (%y)
"""
    parse_graph(loop)
    with pytest.raises(GraphParseError, match="trip count must be int, not %x : Tensor") as ei:
        parse_graph(loop.replace("prim::Loop(%n,", "prim::Loop(%x,"))
    assert ei.value.line == 3 and ei.value.token == "prim::Loop"
    with pytest.raises(GraphParseError, match="body condition must be bool"):
        parse_graph(loop.replace("-> (%t, %z)", "-> (%i, %z)"))
    with pytest.raises(GraphParseError, match="prim::If condition must be bool"):
        parse_graph(ARTICLE.replace("prim::If(%7)", "prim::If(%6)"))


def test_article_traced_resnet_excerpt():
    """The seed article's traced ResNet graph (older torch: size:stride types, class types)."""
    text = """graph(%self.1 : __torch__.torchvision.models.resnet.___torch_mangle_194.ResNet,
      %input.1 : Float(1:150528, 3:50176, 224:224, 224:1, requires_grad=0, device=cpu)):
  %1472 : __torch__.torch.nn.modules.linear.___torch_mangle_193.Linear = prim::GetAttr[name="fc"](%self.1)
  %1469 : __torch__.torch.nn.modules.pooling.___torch_mangle_192.AdaptiveAvgPool2d = prim::GetAttr[name="avgpool"](%self.1)
  %1556 : Tensor = prim::CallMethod[name="forward"](%1469, %input.1)
  %1202 : int = prim::Constant[value=1]()
  %1203 : int = prim::Constant[value=-1]()
  %input : Float(1:512, 512:1, requires_grad=1, device=cpu) = aten::flatten(%1556, %1202, %1203)
  %1557 : Tensor = prim::CallMethod[name="forward"](%1472, %input)
  return (%1557)
"""
    g = parse_graph(text)
    assert g.inputs[1].type == TensorType("float32", (1, 3, 224, 224))
    assert g.inputs[0].type == ClassType("__torch__.torchvision.models.resnet.___torch_mangle_194.ResNet")
    assert g.nodes[0].attrs == {"name": "fc"}
    flat = [n for n in g.nodes if n.kind == "aten::flatten"][0]
    assert flat.output.type == TensorType("float32", (1, 512))
    assert "%input : Float(1, 512) = aten::flatten(%1556, %1202, %1203)" in roundtrip(text)


LOCATED = """graph(%x : Float(2, 3),
      %w : Float(4, 5)):
  %y : Tensor = aten::mm(%x, %w)
  %z : Tensor = aten::relu(%y) # model.py:12:4
  return (%z)
"""


def test_nodes_without_a_source_comment_are_located_in_the_text():
    g = parse_graph(LOCATED, filename="m.ir")
    mm, relu = g.nodes
    assert str(mm.source) == "m.ir:3:3" and mm.source.in_text
    assert str(relu.source) == "model.py:12:4" and not relu.source.in_text   # a comment wins
    # the printer writes comments, not text positions: the text round-trips unchanged
    assert print_graph(g) == LOCATED
    assert str(parse_graph(LOCATED).nodes[0].source) == "<graph>:3:3"


def test_errors_after_parsing_name_the_line_of_the_text():
    import srcore

    with pytest.raises(srcore.ShapeError, match=r"inner dimensions do not match: 3 vs 4\n  at m.ir:3:3: "):
        srcore.StaticModule(parse_graph(LOCATED, filename="m.ir"), backends=("cpu",))
    typo = LOCATED.replace("aten::mm(%x, %w)", "aten::mmm(%x, %w)")
    with pytest.raises(srcore.UnsupportedOpError, match=r"(?s)aten::mmm with dtypes \(float32\)  # m.ir:3:3\n"
                                                        r".*no op 'aten::mmm' is declared.*did you mean aten::mm"):
        srcore.StaticModule(parse_graph(typo, filename="m.ir"), backends=("cpu",))
    # a kernel failing at run time names the line too
    bad = """graph(%x : Float(batch, 3), %i : Long(2)):
  %one : int = prim::Constant[value=1]()
  %y : Tensor = aten::index_select(%x, %one, %i)
  return (%y)
"""
    sm = srcore.StaticModule(parse_graph(bad, filename="idx.ir"), backends=("cpu",))
    with pytest.raises(srcore.KernelError, match=r"idx.ir:3:3"):
        sm(np.ones((2, 3), np.float32), np.array([0, 7]))


def test_srm_graphs_carry_no_text_positions(tmp_path):
    import srcore
    from srcore.model import Model

    path = tmp_path / "m.srm"
    srcore.save(Model.from_graph(parse_graph(LOCATED.replace("Float(4, 5)", "Float(3, 5)"))), str(path))
    mm, relu = srcore.load(str(path)).graph.nodes
    assert mm.source is None and str(relu.source) == "model.py:12:4"
