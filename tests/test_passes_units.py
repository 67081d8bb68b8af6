"""Unit tests of the passes' machinery and limits (graphs built with Graph/GraphBuilder and IR text)."""
from __future__ import annotations

import numpy as np
import pytest

from srcore.errors import PassError
from srcore.ir import parse_graph, print_graph
from srcore.ir.graph import Graph
from srcore.ir.types import INT, TENSOR, TensorType
from srcore.passes import (Fixpoint, Pass, PassManager, eliminate_dead_code, fold_constants, inline_calls,
                           peephole, prepare, unroll_loops)
from srcore.passes.peephole import RULES, Rule, group_rules


def kinds(g):
    return [n.kind for n in g.all_nodes() if n.kind != "prim::Constant"]


# -- PassManager ------------------------------------------------------------------------------
def _chain_graph(n=3):
    g = Graph()
    x = g.add_input(TENSOR, "x")
    v = x
    for _ in range(n):
        v = g.insert("aten::t", [v], [TENSOR]).output
    g.register_output(x)  # every t is dead
    return g


def test_manager_records_removed_added_and_time():
    g = _chain_graph(3)
    pm = PassManager([eliminate_dead_code])
    assert pm.run(g) is True
    (s,) = pm.stats
    assert (s.name, s.nodes_before, s.nodes_after, s.removed, s.added, s.changed) == \
        ("eliminate_dead_code", 3, 0, 3, 0, True)
    assert s.seconds >= 0


def test_fixpoint_stops_when_nothing_changes():
    calls = []

    def remove_one(g):  # removes one dead node per run
        calls.append(1)
        for n in reversed(list(g.nodes)):
            if not n.output.uses:
                n.destroy()
                return True
        return False

    g = _chain_graph(3)
    pm = PassManager([Fixpoint((Pass("remove_one", remove_one),), max_iterations=10)])
    pm.run(g)
    assert len(calls) == 4 and [s.iteration for s in pm.stats] == [1, 2, 3, 4]
    assert not list(g.nodes)


def test_fixpoint_respects_max_iterations():
    g = _chain_graph(1)
    pm = PassManager([Fixpoint((Pass("always", lambda g: True),), max_iterations=3)])
    pm.run(g)
    assert len(pm.stats) == 3


def _breaker(g):  # leaves a use of a value defined later: invalid SSA order
    a, b = list(g.nodes)[:2]
    a.move_after(b)
    return True


def test_verify_after_each_pass_names_the_pass():
    g = Graph()
    x = g.add_input(TENSOR, "x")
    a = g.insert("aten::relu", [x], [TENSOR]).output
    b = g.insert("aten::neg", [a], [TENSOR]).output
    g.register_output(b)
    with pytest.raises(PassError, match="breaker"):
        PassManager([Pass("breaker", _breaker)], verify=True).run(g)


def test_debug_env_turns_verification_on(monkeypatch):
    monkeypatch.setenv("SRCORE_DEBUG_PASSES", "1")
    assert PassManager([]).verify is True
    monkeypatch.setenv("SRCORE_DEBUG_PASSES", "0")
    assert PassManager([]).verify is False


def test_a_crashing_pass_is_a_pass_error():
    def boom(g):
        raise KeyError("x")

    with pytest.raises(PassError, match="pass boom failed: KeyError"):
        PassManager([boom]).run(Graph())


# -- constant folding ---------------------------------------------------------------------------
FOLD = """
graph(%x : Float(2, 2)):
  %a : int = prim::Constant[value=4]()
  %b : int = prim::Constant[value=5]()
  %c : int = aten::mul(%a, %b)
  %d : int = aten::floordiv(%c, %a)
  %z : int = prim::Constant[value=0]()
  %e : int = aten::floordiv(%c, %z)
  return (%c, %d, %e)
"""


def test_fold_scalars_and_leave_errors_for_run_time():
    g = parse_graph(FOLD)
    assert fold_constants(g)
    outs = [o.node for o in g.outputs]
    assert [n.attrs.get("value") for n in outs[:2]] == [20, 5]
    assert outs[2].kind == "aten::floordiv"  # 20 // 0 raises at run time, not at load


def test_injected_evaluator_is_used_and_may_decline():
    seen = []

    def evaluator(node, args):
        seen.append((node.kind, args))
        if node.kind == "aten::mul":
            return [args[0] * args[1] + 1000]  # a recognisably fake answer
        raise NotImplementedError

    g = parse_graph(FOLD)
    fold_constants(g, evaluator=evaluator)
    assert ("aten::mul", [4, 5]) in seen
    assert g.outputs[0].node.attrs["value"] == 1020
    assert g.outputs[1].node.kind == "aten::floordiv"


TENSOR_FOLD = """
graph(%x : Float(64, 64)):
  %w : Float(64, 64) = prim::Constant[param="w"]()
  %one : int = prim::Constant[value=1]()
  %s : Float(64, 64) = aten::add(%w, %w, %one)
  %y : Float(64, 64) = aten::mul(%x, %s)
  return (%y)
"""


def test_tensor_folding_respects_size_limit():
    w = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    g = parse_graph(TENSOR_FOLD, {"w": w})
    assert not fold_constants(g, evaluator=lambda n, a: [a[0] + a[1]], max_elements=100)
    assert fold_constants(g, evaluator=lambda n, a: [a[0] + a[2] * a[1]], max_elements=64 * 64)
    c = g.outputs[0].node.inputs[1].node
    assert c.kind == "prim::Constant" and c.attrs["param"] == "s.folded"
    np.testing.assert_array_equal(c.attrs["value"], 2 * w)


def test_tensor_folding_with_the_cpu_kernels():
    w = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    g = parse_graph(TENSOR_FOLD, {"w": w})
    assert fold_constants(g)
    np.testing.assert_array_equal(g.outputs[0].node.inputs[1].node.attrs["value"], 2 * w)


def test_random_and_param_without_data_are_not_folded():
    g = parse_graph("""
graph():
  %w : Float(2) = prim::Constant[param="w"]()
  %n : NoneType = prim::Constant()
  %two : int = prim::Constant[value=2]()
  %l : int[] = prim::ListConstruct(%two)
  %r : Tensor = aten::rand(%l, %n, %n, %n, %n)
  %s : Float(2) = aten::neg(%w)
  return (%r, %s)
""")
    seen = []

    def evaluator(node, args):
        seen.append(node.kind)
        return [list(args)]

    fold_constants(g, evaluator=evaluator)
    assert seen == ["prim::ListConstruct"]
    assert kinds(g) == ["aten::rand", "aten::neg"]


# -- peephole table -------------------------------------------------------------------------------
def test_rules_are_grouped_by_op_and_extensible():
    assert all(r.op == op for op, rules in RULES.items() for r in rules)
    custom = group_rules([Rule("neg(neg(x)) -> x", "aten::neg",
                               lambda n: n.inputs[0].node.inputs[0] if n.inputs[0].node.kind == "aten::neg"
                               else None)])
    g = parse_graph("graph(%x : Tensor):\n  %a : Tensor = aten::neg(%x)\n  %b : Tensor = aten::neg(%a)\n"
                    "  return (%b)\n")
    applied = []
    assert peephole(g, rules=custom, applied=applied) and applied == ["neg(neg(x)) -> x"]
    assert g.outputs[0] is g.inputs[0]


# -- inlining calls ---------------------------------------------------------------------------------
def _callee() -> Graph:
    f = Graph()
    a = f.add_input(TENSOR, "a")
    r = f.insert("aten::relu", [a], [TENSOR]).output
    n = f.insert("aten::neg", [r], [TENSOR]).output
    f.register_output(n)
    return f


def test_inline_call_by_graph_attribute_and_by_name():
    callee = _callee()
    for attrs, functions in (({"graph": callee}, None), ({"name": "f"}, {"f": callee})):
        g = Graph()
        x = g.add_input(TENSOR, "x")
        fn = g.insert("prim::Constant", [], [TENSOR], attrs)  # a function value
        call = g.insert("prim::CallFunction", [fn.output, x], [TENSOR])
        g.register_output(call.output)
        assert inline_calls(g, functions=functions)
        eliminate_dead_code(g)
        assert kinds(g) == ["aten::relu", "aten::neg"]
        assert kinds(callee) == ["aten::relu", "aten::neg"]  # the callee is copied, not moved


def test_unknown_calls_stay():
    g = Graph()
    x = g.add_input(TENSOR, "x")
    fn = g.insert("prim::Constant", [], [TENSOR], {"name": "unknown"})
    call = g.insert("prim::CallFunction", [fn.output, x], [TENSOR])
    g.register_output(call.output)
    assert not inline_calls(g, functions={})
    assert eliminate_dead_code(g) is False  # calls have side effects


# -- unrolling budget -------------------------------------------------------------------------------
LOOP = """
graph(%x : Float(4)):
  %true : bool = prim::Constant[value=1]()
  %n : int = prim::Constant[value={n}]()
  %a : Float(4) = prim::Loop(%n, %true, %x)
    block0(%i : int, %y : Float(4)):
      %y2 : Float(4) = aten::neg(%y)
      %y3 : Float(4) = aten::relu(%y2)
      -> (%true, %y3)
  return (%a)
"""


@pytest.mark.parametrize("trips, budget, unrolled", [(4, 8, True), (5, 8, False), (0, 8, True),
                                                     (100, 10_000, False)])
def test_unroll_budget(trips, budget, unrolled):
    g = parse_graph(LOOP.replace("{n}", str(trips)))
    assert unroll_loops(g, max_nodes=budget) is unrolled
    assert kinds(g).count("aten::neg") == (trips if unrolled else 1)


# -- prepare ------------------------------------------------------------------------------------------
def test_prepare_leaves_input_alone_and_reports():
    g = parse_graph(LOOP.replace("{n}", "3"))
    text = print_graph(g)
    res = prepare(g)
    assert print_graph(g) == text
    assert kinds(res.graph) == ["aten::neg", "aten::relu"] * 3
    assert {s.name for s in res.stats} >= {"unroll_loops", "eliminate_dead_code", "fold_constants"}


def test_prepare_input_types_enable_shape_rewrites():
    text = """
graph(%x : Tensor):
  %one : int = prim::Constant[value=1]()
  %y : Tensor = aten::mul(%x, %one)
  %s : int[] = aten::size(%y)
  return (%y, %s)
"""
    untyped = prepare(parse_graph(text)).graph
    assert kinds(untyped) == ["aten::mul", "aten::size"]
    typed = prepare(parse_graph(text), input_types=[TensorType("float32", (2, 3))]).graph
    assert kinds(typed) == []
    assert typed.outputs[0] is typed.inputs[0] and typed.outputs[1].node.attrs["value"] == [2, 3]


def test_prepare_rejects_wrong_input_types():
    g = parse_graph(LOOP.replace("{n}", "3"))
    with pytest.raises(PassError, match="2 input types for 1 graph inputs"):
        prepare(g, input_types=[TENSOR, INT])
    with pytest.raises(PassError, match="no graph input named y"):
        prepare(g, input_types={"y": TENSOR})


# -- opaque constants (torch tensor dumps, parameters without data) ---------------------------------
OPAQUE = """
graph(%x : Float(4, 4)):
  %a.w : Float(4, 4) = prim::Constant[value=<Tensor>]()
  %b.w : Float(4, 4) = prim::Constant[value=<Tensor>]()
  %p : Float(4, 4) = prim::Constant[param="p"]()
  %q : Float(4, 4) = prim::Constant[param="p"]()
  %n : NoneType = prim::Constant()
  %ya : Float(4, 4) = aten::linear(%x, %a.w, %n)
  %yb : Float(4, 4) = aten::linear(%x, %b.w, %n)
  %yp : Float(4, 4) = aten::linear(%x, %p, %n)
  %yq : Float(4, 4) = aten::linear(%x, %q, %n)
  return (%ya, %yb, %yp, %yq)
"""


def test_opaque_constants_are_neither_merged_nor_folded():
    from srcore.passes import eliminate_common_subexpressions

    g = parse_graph(OPAQUE)
    eliminate_common_subexpressions(g)
    ya, yb, yp, yq = (o.node for o in g.outputs)
    assert ya is not yb and ya.inputs[1] is not yb.inputs[1]  # two different unknown tensors
    assert yp is yq  # the same named parameter: one node
    assert not fold_constants(g, evaluator=lambda n, a: pytest.fail(f"evaluated {n.kind}"))


# -- constant folding of scalar ops against TorchScript itself -------------------------------------
SCALAR_EXPRS = ["a + b", "a - b", "a * b", "a / b", "a // b", "a % b", "a < b", "a >= b", "a == b",
                "min(a, b)", "max(a, b)", "-a", "a ** 2"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("ta, tb", [("int", "int"), ("float", "int"), ("int", "float")])
def test_folded_scalars_match_torchscript(ta, tb):
    torch = pytest.importorskip("torch")
    values = [(7, 2), (-7, 2), (7, -3), (0, 5), (-3, -1)]
    for expr in SCALAR_EXPRS:
        cu = torch.jit.CompilationUnit(f"def f(a: {ta}, b: {tb}):\n    return {expr}\n")
        for a, b in values:
            a, b = (float(a) if ta == "float" else a), (float(b) if tb == "float" else b)
            text = str(cu.f.graph)
            g = parse_graph(text)
            for v, x in zip(g.inputs, (a, b)):  # make the inputs constants, then fold
                v.replace_all_uses_with(g.insert_constant(x, before=g.nodes.first))
            fold_constants(g)
            expected = cu.f(a, b)
            out = g.outputs[0]
            assert out.node.kind == "prim::Constant", (expr, a, b, print_graph(g))
            got = out.node.attrs.get("value")
            assert got == pytest.approx(expected) and type(got) is type(expected), (expr, a, b)


def test_fold_string_and_list_concatenation():
    g = parse_graph("""
graph():
  %a : str = prim::Constant[value="ab"]()
  %b : str = prim::Constant[value="cd"]()
  %s : str = aten::add(%a, %b)
  %one : int = prim::Constant[value=1]()
  %l : int[] = prim::ListConstruct(%one)
  %m : int[] = aten::add(%l, %l)
  return (%s, %m)
""")
    assert fold_constants(g)
    assert [o.node.attrs["value"] for o in g.outputs] == ["abcd", [1, 1]]


def test_folding_keeps_a_0d_tensor_0d():
    """A folded 0-d tensor (``prim::NumToTensor(1.0)``, what torch.export's core decomposition makes
    of ``1.0 - mask``) became shape (1,) (``np.ascontiguousarray``), so it counted as a dimensioned
    float64 tensor: ``1.0 - x`` turned float64 and a later bmm failed (``expected operands of the
    same dtype``); a 0-d result became 1-d."""
    import srcore
    from srcore.model import Model

    g = parse_graph("""graph(%x : Float(3)):
  %one : float = prim::Constant[value=1.0]()
  %a : int = prim::Constant[value=1]()
  %c : Tensor = prim::NumToTensor(%one)
  %y : Tensor = aten::sub(%c, %x, %a)
  %z : Tensor = aten::mul(%c, %c)
  return (%y, %z)
""")
    sm = srcore.StaticModule(Model.from_graph(g))
    consts = [n for n in sm.graph.all_nodes() if n.kind == "prim::Constant" and isinstance(n.attrs.get("value"),
                                                                                              np.ndarray)]
    assert consts and all(n.attrs["value"].shape == () for n in consts)
    x = np.array([0.5, 2.0, -1.0], np.float32)
    y, z = sm(x)
    assert y.dtype == np.float32 and y.shape == (3,)
    np.testing.assert_array_equal(y, 1.0 - x)
    assert z.shape == () and z.dtype == np.float64 and float(z) == 1.0   # torch: float64 0-d
