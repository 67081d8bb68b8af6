"""``partition_graph`` called directly (no StaticModule): which runs become engines and under what
name, the whole-graph exception to the minimum block size, what a builder's refusal or failure
becomes, serialized engines loaded by their key, two engine backends in turn, the report's text
and ``require_full_compilation``. The engines here are stand-ins (what is checked is the
partitioner's bookkeeping, against the graph text); that engines compute what the cpu backend
computes is tests/test_partition.py's job."""
from __future__ import annotations

import attrs
import pytest

import srcore
from srcore.errors import EngineBuildError, EngineOptionError, SrcoreError, SrcoreFormatError, ShapeError
from srcore.ir.parser import parse_graph
from srcore.partition import ENGINE_KIND, partition_graph
from srcore.partition.build import CORE_ENGINE_OPTIONS, PartitionReport, Refused, SegmentReport
from srcore.plugin import EngineBuilder
from srcore.plugin.manager import PluginManager
from srcore.plugin.types import EngineData

pytestmark = pytest.mark.one_pass


@pytest.fixture(scope="module")
def table():
    return PluginManager().load().kernel_table


class Builder:
    """An engine builder for backend ``name`` taking ``ops``; ``fail``: what build raises or returns."""

    def __init__(self, name, ops, fail=None, with_load=False):
        self.name, self.ops, self.fail = name, set(ops), fail
        self.built, self.loaded = [], []
        self.eb = EngineBuilder(name, supports=lambda info: info.op in self.ops, build=self.build,
                                load=self.load if with_load else None)

    def build(self, segment):
        self.built.append(segment)
        if isinstance(self.fail, BaseException):
            raise self.fail
        if self.fail is not None:
            return self.fail

        def engine(*xs):
            raise AssertionError("not run here")
        engine.describe = lambda: f"{self.name} engine of {len(segment.graph.inputs)} input(s)"
        return engine

    def load(self, segment):
        self.loaded.append(segment)
        return lambda *xs: None


@attrs.define
class Registry:
    engine_builders: dict


def run(text, table, *builders, stored=None, known=None, factory=None, **kw):
    g = parse_graph(text)
    opts = srcore.Options(backends=kw.pop("backends", tuple(b.name for b in builders) + ("cpu",)), **kw)
    report, engines = partition_graph(g, Registry({b.name: b.eb for b in builders}), table, opts,
                                      fallback_factory=factory, stored=stored, known=known)
    return g, report, engines


def kinds(g):
    return [n.kind for n in g.nodes if n.kind != "prim::Constant"]


TWO_RUNS = """graph(%x : Float(2, 8)):
  %one : int = prim::Constant[value=1]()
  %a : Float(2, 8) = aten::relu(%x)
  %b : Float(2, 8) = aten::sigmoid(%a)
  %c : Float(2, 8) = aten::exp(%b)
  %d : Float(2, 8) = aten::tanh(%c)
  %e : Float(2, 8) = aten::add(%d, %a, %one)
  %f : Float(2, 8) = aten::relu(%e)
  return (%f)
"""
TE_OPS = ("aten::relu", "aten::sigmoid", "aten::tanh", "aten::add.Tensor")


def test_runs_become_named_engines_and_the_report_says_so(table):
    te = Builder("te", TE_OPS)
    g, report, engines = run(TWO_RUNS, table, te, engine_min_block_size=2)
    assert kinds(g) == [ENGINE_KIND, "aten::exp", ENGINE_KIND]
    e0, e1 = [n for n in g.nodes if n.kind == ENGINE_KIND]
    assert (e0.attrs["name"], e1.attrs["name"]) == ("te_engine_0", "te_engine_1")
    assert set(engines) == {e0, e1} and all(callable(e) for e in engines.values())
    assert [n.name for n in e0.outputs] == ["a", "b"] and [n.name for n in e1.inputs] == ["c", "a"]
    s0, s1 = report.segments
    assert (s0.name, s0.backend, s0.ops, s0.status, s0.reason) == (
        "te_engine_0", "te", ("aten::relu", "aten::sigmoid"), "engine", "")
    assert s1.ops == ("aten::tanh", "aten::add", "aten::relu") and s1.source == "<graph>:6:3"
    assert s0.segment is te.built[0] and s0.engine is engines[e0] and not s0.loaded
    assert [(s.name, s.backend) for s in te.built] == [("te_engine_0", "te"), ("te_engine_1", "te")]
    assert s0.description == "te engine of 1 input(s)" and s1.description == "te engine of 2 input(s)"
    assert 0 <= s0.build_seconds < 60 and report.engines == (s0, s1)
    assert report.refused == (Refused("te", "%c = aten::exp", "<graph>:5:3", "not supported by te"),)
    assert report.format() == "\n".join([
        f"te_engine_0 [te] 2 node(s): engine (built in {s0.build_seconds * 1e3:.1f} ms)",
        "  ops: aten::relu, aten::sigmoid",
        "  from: <graph>:3:3",
        "  te engine of 1 input(s)",
        f"te_engine_1 [te] 3 node(s): engine (built in {s1.build_seconds * 1e3:.1f} ms)",
        "  ops: aten::tanh, aten::add, aten::relu",
        "  from: <graph>:6:3",
        "  te engine of 2 input(s)",
        "1 node(s) outside engines:",
        "  [te] %c = aten::exp: not supported by te  # <graph>:5:3",
    ])


def test_too_small_runs_stay_unless_they_are_the_whole_graph(table):
    te = Builder("te", TE_OPS)
    g, report, _ = run(TWO_RUNS, table, te, engine_min_block_size=3)
    assert kinds(g) == ["aten::relu", "aten::sigmoid", "aten::exp", ENGINE_KIND]
    assert [(s.name, s.status, s.reason) for s in report.segments] == [
        ("te_engine_0", "too small", "2 node(s) < Options.engine_min_block_size=3"),
        ("te_engine_1", "engine", "")]
    assert report.engines == (report.segments[1],)
    lines = report.format().splitlines()
    assert lines[:3] == ["te_engine_0 [te] 2 node(s): too small", "  ops: aten::relu, aten::sigmoid",
                         "  from: <graph>:3:3"]
    assert lines[3] == "  why: 2 node(s) < Options.engine_min_block_size=3"
    # a graph of two nodes, both supported: the engine takes it whatever the minimum
    te.ops.add("aten::exp")
    whole = TWO_RUNS.replace("%d : Float(2, 8) = aten::tanh(%c)", "").replace(
        "%e : Float(2, 8) = aten::add(%d, %a, %one)", "").replace("aten::relu(%e)", "aten::relu(%c)")
    g, report, _ = run(whole, table, te, engine_min_block_size=10)
    assert kinds(g) == [ENGINE_KIND] and report.segments[0].status == "engine"
    # ... but not a sub-block's run of the same size
    loop = """graph(%x : Float(2, 8), %n : int):
  %true : bool = prim::Constant[value=1]()
  %y : Float(2, 8) = prim::Loop(%n, %true, %x)
    block0(%i : int, %h : Float(2, 8)):
      %a : Float(2, 8) = aten::relu(%h)
      %b : Float(2, 8) = aten::tanh(%a)
      -> (%true, %b)
  return (%y)
"""
    g, report, _ = run(loop, table, Builder("te", TE_OPS), engine_min_block_size=3)
    assert [s.status for s in report.segments] == ["too small"]
    g, report, _ = run(loop, table, Builder("te", TE_OPS), engine_min_block_size=2)
    assert [s.status for s in report.segments] == ["engine"]


@pytest.mark.parametrize("fail,why", [
    (EngineBuildError("no tactic (test)"), "no tactic (test)"),
    (ShapeError("odd shape (test)"), "ShapeError: odd shape (test)"),
    (ZeroDivisionError("bug (test)"), "the builder failed: ZeroDivisionError: bug (test)"),
    (42, "the builder returned int, not a callable engine"),
])
def test_a_refusal_or_failure_leaves_the_nodes_and_says_why(table, fail, why):
    te = Builder("te", TE_OPS, fail=fail)
    g, report, engines = run(TWO_RUNS, table, te, engine_min_block_size=2)
    assert kinds(g) == ["aten::relu", "aten::sigmoid", "aten::exp", "aten::tanh", "aten::add", "aten::relu"]
    assert engines == {} and report.engines == ()
    assert [(s.status, s.reason, s.engine, s.segment) for s in report.segments] == [("fallback", why, None, None)] * 2
    assert "te_engine_1 [te] 3 node(s): fallback\n" in report.format() + "\n"
    with pytest.raises(EngineBuildError) as exc:
        run(TWO_RUNS, table, Builder("te", TE_OPS, fail=fail), engine_min_block_size=2, require_full_compilation=True)
    assert str(exc.value) == "\n".join([
        "Options(require_full_compilation=True), but not every node is in an engine:",
        f"  te_engine_0 (2 nodes from <graph>:3:3): fallback: {why}",
        f"  te_engine_1 (3 nodes from <graph>:6:3): fallback: {why}",
        "  %c = aten::exp: not supported by te  # <graph>:5:3"])


@pytest.mark.parametrize("fail", [SrcoreFormatError("corrupt engine (test)"), EngineOptionError("bad option (test)")])
def test_the_users_errors_are_raised_not_fallen_back_from(table, fail):
    with pytest.raises(type(fail), match="test"):
        run(TWO_RUNS, table, Builder("te", TE_OPS, fail=fail), engine_min_block_size=2)


def test_full_compilation_passes_when_everything_is_an_engine(table):
    te = Builder("te", TE_OPS + ("aten::exp",))
    g, report, _ = run(TWO_RUNS, table, te, require_full_compilation=True)
    assert kinds(g) == [ENGINE_KIND] and te.built[0].fallback is None


def test_a_run_whose_results_nothing_reads_is_left(table):
    text = """graph(%x : Float(2, 8)):
  %a : Float(2, 8) = aten::relu(%x)
  %b : Float(2, 8) = aten::tanh(%a)
  %c : Float(2, 8) = aten::exp(%x)
  return (%c)
"""
    te = Builder("te", TE_OPS)
    g, report, _ = run(text, table, te, engine_min_block_size=1)
    assert [(s.status, s.reason) for s in report.segments] == [("fallback", "the segment's results are unused")]
    assert te.built == [] and kinds(g) == ["aten::relu", "aten::tanh", "aten::exp"]


def test_a_second_engine_backend_takes_what_the_first_left(table):
    first = Builder("te", ("aten::relu", "aten::sigmoid"))
    second = Builder("te2", ("aten::exp", "aten::tanh", "aten::add.Tensor", "aten::relu"))
    g, report, engines = run(TWO_RUNS, table, first, second, engine_min_block_size=2)
    assert [(n.attrs["backend"], n.attrs["name"]) for n in g.nodes if n.kind == ENGINE_KIND] == [
        ("te", "te_engine_0"), ("te2", "te2_engine_0")]
    assert kinds(g) == [ENGINE_KIND, ENGINE_KIND]
    assert [(s.backend, s.ops, s.status) for s in report.segments] == [
        ("te", ("aten::relu", "aten::sigmoid"), "engine"), ("te", ("aten::relu",), "too small"),
        ("te2", ("aten::exp", "aten::tanh", "aten::add", "aten::relu"), "engine")]
    # te refused three nodes, te2 took them all: nothing is left outside engines
    assert report.refused == ()
    # te2's engine reads te's outputs (te's engine node is no candidate for te2)
    (e2,) = [n for n in g.nodes if n.kind == ENGINE_KIND and n.attrs["backend"] == "te2"]
    assert [v.name for v in e2.inputs] == ["b", "a"]


def test_an_engine_backend_not_in_the_backends_list_is_skipped(table):
    te = Builder("te", TE_OPS)
    g, report, engines = run(TWO_RUNS, table, te, backends=("cpu",))
    assert report == PartitionReport() and engines == {} and te.built == []
    assert report.format() == ("no engine backend among the module's backends: every node runs on its own "
                               "kernel")


def test_builder_options_known_values_and_fallback_reach_the_segment(table):
    te = Builder("te", TE_OPS + ("aten::exp",))
    made = []

    def factory(graph, options):
        made.append((graph, options))
        return "module"
    opts = {"precision": "float16", "profiles": [1], "calibration": 2, "calibrator": 3, "calibration_batch_size": 4}
    g = parse_graph(TWO_RUNS)
    known = {v: 7 for n in g.nodes for v in n.outputs if v.name in ("a", "e")} | {g.inputs[0]: 1}
    report, _ = partition_graph(g, Registry({"te": te.eb}), table,
                                srcore.Options(backends=("te", "cpu"), engine_options=opts),
                                fallback_factory=factory, known=known)
    (seg,) = te.built
    assert dict(seg.options) == {"precision": "float16"} and set(opts) - {"precision"} == CORE_ENGINE_OPTIONS
    assert seg.known == {"a": 7, "e": 7}
    assert seg.fallback is not None and seg.fallback.backends == ("cpu",) and seg.fallback.graph is seg.graph
    assert seg.fallback.options.backends == ("cpu",) and made == []     # built on first call only
    # without known values, without a next backend, without a factory: none
    te2 = Builder("te", TE_OPS + ("aten::exp",))
    run(TWO_RUNS, table, te2, factory=factory, backends=("cpu", "te"))
    run(TWO_RUNS, table, te2, factory=None)
    assert [(s.fallback, s.known) for s in te2.built] == [(None, None), (None, None)]


def test_serialized_engines_are_loaded_by_key_and_the_rest_built(table):
    te = Builder("te", TE_OPS, with_load=True)
    _, report, _ = run(TWO_RUNS, table, te, engine_min_block_size=2)
    k0, k1 = (s.key() for s in te.built)
    stored = {k0: EngineData("te", {"n": 0}), "0" * 64: EngineData("te", {"n": 9})}
    te2 = Builder("te", TE_OPS, with_load=True)
    _, report, _ = run(TWO_RUNS, table, te2, stored=stored, engine_min_block_size=2)
    assert [s.stored.meta for s in te2.loaded] == [{"n": 0}] and [s.key() for s in te2.built] == [k1]
    assert [s.loaded for s in report.segments] == [True, False]
    assert report.segments[0].segment.stored is stored[k0]
    assert report.format().splitlines()[0].startswith("te_engine_0 [te] 2 node(s): engine (loaded in ")
    # stored for another backend, or a builder without load(): built
    for data, load in ((EngineData("te_other", {"n": 0}), True), (EngineData("te", {"n": 0}), False)):
        te3 = Builder("te", TE_OPS, with_load=load)
        run(TWO_RUNS, table, te3, stored={k0: data}, engine_min_block_size=2)
        assert te3.loaded == [] and len(te3.built) == 2


def test_report_text_counts_repeated_ops_and_omits_what_is_missing():
    seg = SegmentReport("e0", "te", ("aten::relu", "aten::add", "aten::relu", "aten::relu"), None, "too small",
                        "why not")
    r = PartitionReport((seg,), (Refused("te", "aten::warn", None, "writes in place or has side effects"),))
    assert r.format() == "\n".join(["e0 [te] 4 node(s): too small", "  ops: aten::relu x3, aten::add",
                                    "  why: why not", "1 node(s) outside engines:",
                                    "  [te] aten::warn: writes in place or has side effects"])
    assert seg.description == "" and r.engines == ()


def test_an_appended_list_is_frozen_only_when_an_engine_backend_partitions(table):
    text = """graph(%x : Float(2, 8)):
  %zero : int = prim::Constant[value=0]()
  %l : Tensor[] = prim::ListConstruct()
  %a : Float(2, 8) = aten::relu(%x)
  %b : Float(2, 8) = aten::tanh(%x)
  %l1 : Tensor[] = aten::append(%l, %a)
  %l2 : Tensor[] = aten::append(%l, %b)
  %c : Float(4, 8) = aten::cat(%l, %zero)
  return (%c)
"""
    te = Builder("te", TE_OPS + ("aten::cat",))
    g, report, _ = run(text, table, te, engine_min_block_size=1)
    assert kinds(g) == [ENGINE_KIND] and report.refused == ()
    g, report, _ = run(text, table, te, backends=("cpu",))
    assert "aten::append" in kinds(g)


def test_report_text_of_hand_made_reports():
    built = SegmentReport("e1", "te", ("aten::mul", "aten::add", "aten::mul"), "m.py:3", "engine", build_seconds=0.25)
    loaded = SegmentReport("e2", "te", ("aten::mul",), None, "engine", build_seconds=0.0125, loaded=True)
    r = PartitionReport((built, loaded))
    assert r.format() == "\n".join(["e1 [te] 3 node(s): engine (built in 250.0 ms)", "  ops: aten::mul x2, aten::add",
                                    "  from: m.py:3", "e2 [te] 1 node(s): engine (loaded in 12.5 ms)",
                                    "  ops: aten::mul"])
    assert PartitionReport((), (Refused("te", "aten::warn", None, "side effects"),)).format() == \
        "1 node(s) outside engines:\n  [te] aten::warn: side effects"


NAMELESS = """graph(%x : Float(2, 8)):
  %one : int = prim::Constant[value=1]()
  %a : Float(2, 8) = aten::relu(%x)
  %b : Float(2, 8) = aten::tanh(%a)
  %v : Float(2), %i : Long(2) = aten::max(%b, %one)
   = prim::Print(%i)
  return (%v)
"""


def test_nodes_without_outputs_or_sources_in_the_report_and_the_full_compilation_error(table):
    g = parse_graph(NAMELESS)
    for n in g.nodes:
        n.source = None
    opts = srcore.Options(backends=("te", "cpu"), engine_min_block_size=3, require_full_compilation=True)
    with pytest.raises(EngineBuildError) as exc:
        partition_graph(g, Registry({"te": Builder("te", TE_OPS).eb}), table, opts)
    assert str(exc.value) == "\n".join([
        "Options(require_full_compilation=True), but not every node is in an engine:",
        "  te_engine_0 (2 nodes): too small: 2 node(s) < Options.engine_min_block_size=3",
        "  %v, %i = aten::max: not supported by te",
        "  prim::Print: writes in place or has side effects"])


def test_the_whole_graph_counts_without_its_chains(table):
    text = """graph(%x : Float(batch, 4, 3)):
  %zero : int = prim::Constant[value=0]()
  %m1 : int = prim::Constant[value=-1]()
  %a : Tensor = aten::relu(%x)
  %n : int = aten::size(%a, %zero)
  %l : int[] = prim::ListConstruct(%n, %m1)
  %r : Tensor = aten::reshape(%a, %l)
  return (%r)
"""
    te = Builder("te", ("aten::relu", "aten::reshape"))
    g, report, _ = run(text, table, te, engine_min_block_size=3)
    assert kinds(g) == [ENGINE_KIND] and [s.status for s in report.segments] == ["engine"]


def test_each_segment_is_logged(table, caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="srcore.partition"):
        _, report, _ = run(TWO_RUNS, table, Builder("te", TE_OPS), engine_min_block_size=3)
    msgs = [r.getMessage() for r in caplog.records if r.name == "srcore.partition"]
    seconds = report.segments[1].build_seconds
    assert msgs == ["te_engine_0: 2 node(s) run node by node (too small): 2 node(s) < "
                    "Options.engine_min_block_size=3",
                    f"te_engine_1: 3 node(s) built into an engine in {seconds * 1e3:.1f} ms"]


def test_a_loaded_engine_is_logged_as_loaded(caplog):
    import logging

    from srcore.partition.build import _log_segment

    with caplog.at_level(logging.INFO, logger="srcore.partition"):
        _log_segment(SegmentReport("e2", "te", ("aten::mul", "aten::add"), None, "engine", build_seconds=0.25,
                                   loaded=True))
    assert [r.getMessage() for r in caplog.records] == ["e2: 2 node(s) loaded into an engine in 250.0 ms"]


def test_a_builder_that_cannot_be_imported_is_named_in_the_reason(table):
    from srcore.plugin.types import PluginInfo

    who = PluginInfo("toy", "srcore-toy", "0.1")
    te = Builder("te", TE_OPS, with_load=True)
    te.eb = EngineBuilder("te", supports=te.eb.supports, build="t21_no_such_module:build",
                          load="t21_no_such_module:load", provider=who)
    _, report, _ = run(TWO_RUNS, table, te, engine_min_block_size=2)
    first = report.segments[0]
    assert first.status == "fallback" and first.reason == (
        "PluginError: plugin toy (srcore-toy 0.1): cannot import build of the te engine builder "
        "'t21_no_such_module:build' of the kernel for srcore::engine: ModuleNotFoundError: "
        "No module named 't21_no_such_module'")
    key = Builder("te", TE_OPS)
    run(TWO_RUNS, table, key, engine_min_block_size=2)
    _, report, _ = run(TWO_RUNS, table, te, engine_min_block_size=2,
                       stored={key.built[0].key(): EngineData("te", {})})
    assert report.segments[0].reason == (
        "PluginError: plugin toy (srcore-toy 0.1): cannot import load of the te engine builder "
        "'t21_no_such_module:load' of the kernel for srcore::engine: ModuleNotFoundError: "
        "No module named 't21_no_such_module'")


def test_a_supports_that_cannot_be_imported_fails_the_partition_naming_it(table):
    from srcore.errors import PluginError
    from srcore.plugin.types import PluginInfo

    te = Builder("te", TE_OPS)
    te.eb = EngineBuilder("te", supports="t21_no_such_module:supports", build=te.build,
                          provider=PluginInfo("toy", "srcore-toy", "0.1"))
    with pytest.raises(PluginError) as exc:
        run(TWO_RUNS, table, te)
    assert str(exc.value) == ("plugin toy (srcore-toy 0.1): cannot import supports of the te engine builder "
                              "'t21_no_such_module:supports' of the kernel for srcore::engine: ModuleNotFoundError: "
                              "No module named 't21_no_such_module'")


def test_the_build_loop_has_a_progress_bar_per_backend(table, monkeypatch):
    import srcore.partition.build as build

    bars = []

    def progress(items, desc, total=None, unit="step"):
        bars.append((desc, total, unit))
        return items
    monkeypatch.setattr(build, "progress", progress)
    run(TWO_RUNS, table, Builder("te", TE_OPS), engine_min_block_size=2)
    assert bars == [("build te engines", 2, "engine")]
