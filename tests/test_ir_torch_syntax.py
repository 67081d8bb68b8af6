"""IR text parity with torch: what ``torch._C.parse_ir`` reads, srcore reads, and ``print_graph(dialect="torch")``
writes text torch reads back (same nodes, same types where torch can say them).

The corpora: every graph of Static Runtime's generated tests (tests/data), the graphs torch
prints for OpInfo samples (traced; a sample per OpInfo by default, every sample with
``SRCORE_CONFORMANCE=1``) and for the parity models.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from srcore import GraphParseError, parse_graph, print_graph  # noqa: E402
from srcore.ir.types import (ANY, BOOL, COMPLEX, FLOAT, INT, NONE, STR, TENSOR, ListType, OpaqueType,  # noqa: E402
                             OptionalType, TupleType, UnionType)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from static_runtime.corpus import load_cases  # noqa: E402

pytestmark = pytest.mark.one_pass


def kinds(block_nodes):
    out = []
    for n in block_nodes:
        k = n.kind() if callable(getattr(n, "kind", None)) else n.kind
        out.append(k)
        blocks = n.blocks() if callable(getattr(n, "blocks", None)) else n.blocks
        for b in blocks:
            out.append("{")
            out += kinds(b.nodes() if callable(getattr(b, "nodes", None)) else b.nodes)
            out.append("}")
    return out


def both_ways(text: str):
    """srcore reads torch's text; torch reads srcore's; srcore reads torch's print of that."""
    g = parse_graph(text)
    back = print_graph(g, dialect="torch")
    tg = torch._C.parse_ir(back, parse_tensor_constants=True)
    assert kinds(tg.nodes()) == kinds(g.nodes), back
    assert len(list(tg.inputs())) == len(g.inputs) and len(list(tg.outputs())) == len(g.outputs)
    g2 = parse_graph(str(tg))
    assert kinds(g2.nodes) == kinds(g.nodes)
    assert [_canon(v.type) for v in g2.inputs] == [_canon(v.type) for v in parse_graph(back).inputs]
    return g


def _canon(t):
    """A type with union members in a fixed order (torch sorts them its own way)."""
    if isinstance(t, UnionType):
        return "Union(" + ", ".join(sorted(_canon(e) for e in t.elems)) + ")"
    return str(t)


# -- forms torch accepts ----------------------------------------------------------------------
def test_none_type_and_untyped_values_take_torchs_types():
    text = """graph(%self: Tensor, %w, %i : int):
    %bias: None = prim::Constant()
    %ret = aten::acos(%self)
    %n = aten::size(%w, %i)
    %flag = aten::eq(%n, %i)
    %l = prim::ListConstruct(%n, %i)
    %t = prim::TupleConstruct(%n, %ret)
    %c = prim::Constant[value=2.5]()
    %cloned = aten::clone(%ret, %bias)
    return (%cloned, %flag, %l, %t, %c)
"""
    torch._C.parse_ir(text)
    g = both_ways(text)
    types = {v.name: v.type for n in g.nodes for v in n.outputs}
    assert g.inputs[1].type == TENSOR  # torch's default for an untyped value
    assert types["bias"] == NONE and types["ret"] == TENSOR and types["n"] == INT and types["flag"] == BOOL
    assert types["l"] == ListType(INT) and types["t"] == TupleType((INT, TENSOR)) and types["c"] == FLOAT


def test_node_without_outputs_both_spellings():
    text = """graph(%x : Tensor):
  %m : str = prim::Constant[value="bad"]()
  %n : NoneType = prim::Constant()
  prim::RaiseException(%m, %n)
  return (%x)
"""
    g = both_ways(text)
    assert [len(n.outputs) for n in g.nodes] == [1, 1, 0]
    assert "\n  prim::RaiseException(%m, %n)\n" in print_graph(g)
    # srcore's older spelling still reads
    assert len(list(parse_graph(text.replace("  prim::Raise", "   = prim::Raise")).nodes)) == 3


def test_a_later_definition_shadows_an_earlier_one_as_in_torch():
    text = """graph(%x : Tensor, %bias : Tensor):
  %bias : None = prim::Constant()
  %y : Tensor = aten::clone(%x, %bias)
  return (%y)
"""
    tg = torch._C.parse_ir(text)
    g = both_ways(text)
    y = list(g.nodes)[-1]
    assert y.inputs[1].type == NONE and str(list(list(tg.nodes())[-1].inputs())[1].type()) == "NoneType"


@pytest.mark.parametrize("spelling,expected", [
    ("None", NONE), ("complex", COMPLEX), ("SymInt", INT), ("t", ANY), ("Union(Tensor, int)", UnionType((TENSOR, INT))),
    ("Union(str, int, NoneType)", UnionType((STR, INT, NONE))), ("Storage", OpaqueType("Storage")),
    ("Capsule", OpaqueType("Capsule")), ("Dict(str, Tensor?)", None), ("Await(Tensor)", None), ("RRef(int)", None),
    ("(int, float)[]", None), ("Tensor?[]", ListType(OptionalType(TENSOR))),
])
def test_every_type_torch_reads(spelling, expected):
    text = f"graph(%x : {spelling}):\n  return (%x)\n"
    torch._C.parse_ir(text)
    g = both_ways(text)
    if expected is not None:
        assert g.inputs[0].type == expected
    assert parse_graph(print_graph(g)).inputs[0].type == g.inputs[0].type


def test_attribute_kinds():
    text = """graph(%x : Tensor):
  %a : int[] = prim::Constant[value=[1, 2]]()
  %y : Tensor = prim::profile[profiled_type=Float(2, 3), seen_none=0](%x)
  %z : bool = prim::isinstance[types=[Tensor, int]](%x)
  %s : str[] = prim::Constant[value=["a", "b"]]()
  %f : float[] = prim::Constant[value=[1.5, -2.]]()
  %t : Double() = prim::Constant[value={0.5}]()
  %u : Float(2, 3) = prim::Constant[value=<Tensor>]()
  return (%y, %z, %a, %s, %f, %t, %u)
"""
    g = both_ways(text)
    isinst = [n for n in g.nodes if n.kind == "prim::isinstance"][0]
    assert isinst.attrs["types"] == [TENSOR, INT]


def test_torch_dialect_writes_types_torch_reads():
    text = "graph(%x : Float(batch, 3), %y : Double(...), %z : Tensor(2, 3)):\n  return (%x, %y, %z)\n"
    g = parse_graph(text)
    back = print_graph(g, dialect="torch")
    assert "Float(*, 3)" in back and "Double(device=cpu)" in back
    torch._C.parse_ir(back)
    # srcore's own dialect keeps what torch cannot say (symbols, a dtype without a rank)
    assert [v.type for v in parse_graph(print_graph(g)).inputs] == [v.type for v in g.inputs]
    with pytest.raises(ValueError):
        print_graph(g, dialect="onnx")
    # a traced node's scope is srcore's to keep; torch cannot read it back, so its dialect leaves it out
    scoped = parse_graph("graph(%x : Tensor):\n  %y : Tensor = aten::relu(%x), scope: __module.fc\n  return (%y)\n")
    assert ", scope: __module.fc" in print_graph(scoped)
    torch._C.parse_ir(print_graph(scoped, dialect="torch"))


def test_bad_text_still_names_the_token():
    with pytest.raises(GraphParseError, match="1:12.*Unknwn"):
        parse_graph("graph(%x : Unknwn):\n  return (%x)\n")


# -- corpora ----------------------------------------------------------------------------------
SR_CASES = load_cases()


def test_static_runtime_generated_graphs_parse_both_ways():
    """All ~260 one-op graphs of Static Runtime's generated tests, as torch writes them."""
    assert len(SR_CASES) >= 250
    for case in SR_CASES:
        both_ways(case["graph"])


def _opinfo_graphs(full: bool):
    """(OpInfo name, graph text torch prints) for traced OpInfo samples whose text torch reads back.

    ``full``: every sample of every OpInfo; else the first sample of every sixth OpInfo.
    """
    pytest.importorskip("expecttest")
    import itertools

    from torch.testing._internal.common_methods_invocations import op_db

    from _opinfo_samples import quick_samples

    for info in op_db if full else op_db[::6]:
        try:
            # the same samples without torch's per-iterator stack search and per-sample seed queueing
            with quick_samples():
                samples = info.sample_inputs("cpu", torch.float32, requires_grad=False)
                samples = list(samples) if full else list(itertools.islice(samples, 1))
        except Exception:  # noqa: BLE001 - an OpInfo that cannot make float32 samples
            continue
        for sample in samples:
            tensors = [a for a in (sample.input, *sample.args) if isinstance(a, torch.Tensor)]
            if not tensors or not isinstance(sample.input, torch.Tensor):
                continue

            def fn(*ts, _s=sample, _op=info.op):
                it = iter(ts)
                args = [next(it) if isinstance(a, torch.Tensor) else a for a in (_s.input, *_s.args)]
                return _op(*args, **_s.kwargs)
            try:
                with torch.no_grad():
                    text = str(torch.jit.trace(fn, tuple(tensors), check_trace=False).graph)
                torch._C.parse_ir(text, parse_tensor_constants=True)
            except Exception:  # noqa: BLE001 - torch cannot trace it, or cannot read its own text
                continue
            yield info.name, text


def test_opinfo_traced_graphs_parse_both_ways():
    """The graph torch prints for OpInfo samples (see ``_opinfo_graphs``; all with SRCORE_CONFORMANCE=1)."""
    import warnings
    n = 0
    full = bool(os.environ.get("SRCORE_CONFORMANCE")) or os.environ.get("SRCORE_TESTS_FULL") == "1"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, text in _opinfo_graphs(full):
            try:
                both_ways(text)
            except Exception as e:
                raise AssertionError(f"{name}: {type(e).__name__}: {e}\n{text}") from None
            n += 1
    assert n >= (1000 if full else 60), n


def test_parity_model_graphs_parse_both_ways():
    """Parity zoo models, frozen, as torch prints their graphs (every third; all with SRCORE_CONFORMANCE=1)."""
    import importlib.util
    import warnings

    if "parity_models" not in sys.modules:  # the zoo, under the name the parity suite gives it
        path = Path(__file__).resolve().parent / "parity" / "models.py"
        spec = importlib.util.spec_from_file_location("parity_models", path)
        sys.modules["parity_models"] = mod = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.parent))
        spec.loader.exec_module(mod)
    ZOO = sys.modules["parity_models"].ZOO
    n = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = bool(os.environ.get("SRCORE_CONFORMANCE")) or os.environ.get("SRCORE_TESTS_FULL") == "1"
        for name, case in sorted(ZOO.items())[:: 1 if full else 3]:
            if case.no_torchscript:
                continue
            module, inputs, _others = case.build()
            make = torch.jit.script if case.torchscript == "script" else (lambda m: torch.jit.trace(m, inputs))
            try:
                frozen = torch.jit.freeze(make(module).eval())
            except Exception:  # noqa: BLE001 - the parity suite asserts these itself
                continue
            graph = frozen.graph.copy()
            self_ = next(graph.inputs())
            if self_.type().kind() == "ClassType" and not self_.uses():  # torch cannot read class types
                graph.eraseInput(0)
            text = str(graph)
            if "<Tensors>" in text or "Type{" in text:  # tensor lists / dumps: no text holds their values
                continue
            try:
                torch._C.parse_ir(text, parse_tensor_constants=True)
            except RuntimeError:  # torch cannot read its own print (annotate(List[int], []), ...): srcore can
                parse_graph(text)
                continue
            try:
                both_ways(text)
            except Exception as e:
                raise AssertionError(f"{name}: {type(e).__name__}: {e}") from None
            n += 1
    assert n >= (10 if full else 3), n
