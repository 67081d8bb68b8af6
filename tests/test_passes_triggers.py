"""Passes skipped by their trigger kinds (``srcore.passes.triggers``): a pass that changes a graph
always has a trigger kind in it, the pipeline runs it there, and skipping gives the same prepared
graph as running every pass (golden pass cases, the IR tests' torch graphs, the digits example; with
``SRCORE_TESTS_FULL=1`` also every bench model of ``benchmarks.models.ALL_MODELS``, with its input types)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import srcore
from srcore.ir import parse_graph, print_graph
from srcore.ir.graph import Graph
from srcore.ir.names import base_op
from srcore.ir.types import TENSOR
from srcore.passes import Fixpoint, PassManager, default_pipeline, prepare
from srcore.passes import manager as manager_mod
from srcore.passes.triggers import fires
from test_passes_golden import load_case

pytestmark = pytest.mark.one_pass

TESTS = Path(__file__).parent
if str(TESTS.parent) not in sys.path:  # benchmarks/ (the bench models) is a top-level package of the checkout
    sys.path.insert(0, str(TESTS.parent))
GOLDEN_CASES = sorted((TESTS / "golden" / "passes").glob("*/*.ir"))
TORCH_GRAPHS = sorted((TESTS / "golden" / "ir").glob("*.txt"))
DIGITS = TESTS.parent / "examples" / "digits" / "digits.srm"
#: the IR tests' largest torch graphs (~0.1 s a pipeline run): in the full run only
HEAVY = {"transformer_block", "resnet_small.traced", "resnet_small"}

#: graphs for the passes without golden cases: a decidable ``is``, a 0-d constant operand, a routed expert
EXTRA = {
    "identity": """graph(%x : Float(2, 3)):
  %r : Float(2, 3) = aten::relu(%x)
  %s : bool = aten::__isnot__(%r, %x)
  return (%s)
""",
    "scalar": """graph(%x : Float(2, 3)):
  %c : Double() = prim::Constant[value=<Tensor>]()
  %a : Float(2, 3) = aten::mul(%x, %c)
  return (%a)
""",
    "routing": """graph(%idx : Long(4, 2), %x : Float(4, 3)):
  %e : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %m : Bool(4, 2) = aten::eq(%idx, %e)
  %w : Tensor[] = aten::where(%m)
  %tok : Tensor, %slot : Tensor = prim::ListUnpack(%w)
  %l : Tensor?[] = prim::ListConstruct(%tok)
  %r : Tensor = aten::index(%x, %l)
  %y : Tensor = aten::relu(%r)
  %o : Tensor = aten::index_add(%x, %e, %tok, %y, %one)
  return (%o)
""",
}


def _graphs():
    from srcore.errors import GraphParseError

    out = {}
    for p in GOLDEN_CASES:
        out[f"golden/{p.parent.name}/{p.stem}"] = load_case(p)[0]
    full = os.environ.get("SRCORE_TESTS_FULL") == "1"
    for p in TORCH_GRAPHS:
        if p.stem in HEAVY and not full:
            continue
        try:
            out[f"ir/{p.stem}"] = parse_graph(p.read_text())
        except GraphParseError:
            continue
    for name, text in EXTRA.items():
        g = parse_graph(text)
        for n in g.all_nodes():
            if n.kind == "prim::Constant" and n.output.name == "c":
                n.attrs["value"] = np.array(0.5)
        out[name] = g
    out["call"] = _call_graph()
    out["lstm"] = _lstm_graph()
    out["digits"] = srcore.load(DIGITS).graph
    return out


def _call_graph():
    """``prim::CallFunction`` of a known callee (what inline_calls inlines)."""
    callee = Graph()
    callee.register_output(callee.insert("aten::relu", [callee.add_input(TENSOR, "a")], [TENSOR]).output)
    g = Graph()
    fn = g.insert("prim::Constant", [], [TENSOR], {"graph": callee})
    g.register_output(g.insert("prim::CallFunction", [fn.output, g.add_input(TENSOR, "x")], [TENSOR]).output)
    return g


def _lstm_graph():
    """A hand-written LSTM cell, traced (what fold_cell_decompositions matches)."""
    torch = pytest.importorskip("torch")

    class Cell(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ih, self.hh = torch.nn.Linear(3, 12), torch.nn.Linear(3, 12)

        def forward(self, x, h, c):
            i, f, g, o = (self.ih(x) + self.hh(h)).chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            return torch.sigmoid(o) * torch.tanh(c), c

    args = tuple(torch.zeros(2, 3) for _ in range(3))
    with torch.no_grad():
        model = srcore.from_torchscript(torch.jit.trace(Cell(), args), args)
    return model.graph


@pytest.fixture(scope="module")
def graphs():
    return _graphs()


def _triggered(passes):
    """``{name: Pass}`` of the pipeline's passes that declare triggers."""
    out = {}
    for p in passes:
        for q in (p.passes if isinstance(p, Fixpoint) else (p,)):
            if q.triggers is not None:
                out[q.name] = q
    return out


def _kinds(graph):
    return frozenset(base_op(n.kind) for n in graph.all_nodes())


def test_a_pass_that_changes_a_graph_is_not_skipped_on_it(graphs):
    triggered = _triggered(default_pipeline())
    fired = set()
    for gname, graph in graphs.items():
        for name, p in triggered.items():
            g = graph.copy()
            if not p(g):
                continue
            fired.add(name)
            assert fires(p.triggers, _kinds(graph)), f"{name} changed {gname} but its triggers say it cannot"
            pm = PassManager([p])
            pm.run(graph.copy())
            assert pm.skipped == [] and [s.name for s in pm.stats] == [name]
    assert fired == set(triggered), f"no graph here on which these fire: {sorted(set(triggered) - fired)}"


def test_skipped_where_no_trigger_kind_is_present(graphs):
    pm = PassManager(default_pipeline())
    pm.run(graphs["digits"].copy())   # conv2d, relu, max_pool2d, flatten, linear
    assert {"inline_calls", "remove_training_ops", "fold_batch_norm", "unroll_loops",
            "fold_cell_decompositions", "functionalize_inplace"} <= set(pm.skipped)
    assert not set(pm.skipped) & {s.name for s in pm.stats}
    assert "fuse_ops" in {s.name for s in pm.stats}   # no triggers: always runs


def test_skipping_gives_what_running_every_pass_gives(graphs, monkeypatch):
    skipped_somewhere = False
    for gname, graph in graphs.items():
        kept, every = graph.copy(), graph.copy()
        pm = PassManager(default_pipeline())
        pm.run(kept)
        skipped_somewhere |= bool(pm.skipped)
        with monkeypatch.context() as m:
            m.setattr(manager_mod, "fires", lambda trigger, kinds: True)
            PassManager(default_pipeline()).run(every)
        assert print_graph(kept) == print_graph(every), gname
    assert skipped_somewhere


def test_the_package_names_are_the_functions_after_a_pipeline_ran(graphs):
    import types

    import srcore.passes as passes

    prepare(graphs["scalar"])   # imports the pass modules whose names the package also exports
    for name in passes.__all__:
        assert not isinstance(getattr(passes, name), types.ModuleType), name


def test_peephole_triggers_are_its_rules_kinds():
    from srcore.passes.peephole import RULES_LIST, unary_of_permute
    from srcore.passes.triggers import PEEPHOLE_OPS, PERMUTE_COMMUTING, peephole_rules

    assert {r.op for r in RULES_LIST if r.rewrite is not unary_of_permute} == PEEPHOLE_OPS
    assert {r.op for r in RULES_LIST if r.rewrite is unary_of_permute} == set(PERMUTE_COMMUTING)
    assert peephole_rules(frozenset({"aten::permute", "aten::relu"}))
    assert not peephole_rules(frozenset({"aten::relu", "aten::conv2d", "aten::linear", "prim::Constant"}))


def test_the_package_names_are_the_functions_when_their_modules_are_imported_first():
    """``srcore.passes`` imports nothing itself: importing ``srcore.passes.peephole`` (or ``prepare``,
    ``scalar_operands``) before any name leaves the package's attribute the function, as before."""
    code = ("import types, srcore.passes.peephole, srcore.passes.prepare, srcore.passes.scalar_operands\n"
            "import srcore.passes as p\n"
            "print([n for n in p.__all__ if isinstance(getattr(p, n), types.ModuleType)], p.peephole.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "srcore.passes.peephole"]


def _bench_graph(name):
    """The bench model ``name`` (``benchmarks.models.ALL_MODELS``) through TorchScript, with its
    example inputs' types."""
    torch = pytest.importorskip("torch")
    from benchmarks.models import ALL_MODELS
    from srcore.ir.types import TensorType

    build, meta = ALL_MODELS[name]
    m, inputs = build()
    with torch.no_grad():
        ts = torch.jit.trace(m, inputs, check_trace=False) if meta["torchscript"] == "trace" else torch.jit.script(m)
    graph = srcore.from_torchscript(ts, inputs).graph
    return graph, [TensorType(str(t.dtype).removeprefix("torch."), tuple(t.shape)) for t in inputs]


def _bench_names():
    try:
        from benchmarks.models import ALL_MODELS
    except ImportError:   # torch missing: the test skips
        return ["mlp_tiny"]
    return sorted(ALL_MODELS)


@pytest.mark.full   # ~1-3 s a model: scripts and prepares each bench model twice
@pytest.mark.parametrize("name", _bench_names())
def test_skipping_on_the_bench_models(name, monkeypatch):
    graph, types = _bench_graph(name)
    kept = prepare(graph, input_types=types)
    with monkeypatch.context() as m:
        m.setattr(manager_mod, "fires", lambda trigger, kinds: True)
        every = prepare(graph, input_types=types)
    assert print_graph(kept.graph) == print_graph(every.graph)
    ran = {s.name for s in every.stats if s.changed}
    for name_, p in _triggered(default_pipeline()).items():   # a pass that changed the graph was not skipped
        if name_ in ran:
            assert name_ in {s.name for s in kept.stats}, name_
