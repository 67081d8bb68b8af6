"""The passes preserve meaning: graphs run before and after through a torch-based reference interpreter.

The interpreter is independent of srcore's kernels: tensor ops are ``torch.ops.aten``
calls, the fused ``srcore::`` ops are written out with ``torch.nn.functional``.
"""
from __future__ import annotations

import operator

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from srcore.ir import parse_graph, print_graph
from srcore.ir.verify import verify
from srcore.passes import prepare, prepare_for_static_runtime

F = torch.nn.functional

FUSED = {
    "srcore::linear_relu": lambda x, w, b: F.relu(F.linear(x, w, b)),
    "srcore::linear_gelu": lambda x, w, b, approximate="none": F.gelu(F.linear(x, w, b), approximate=approximate),
    "srcore::conv2d_relu": lambda x, w, b, s, p, d, g: F.relu(F.conv2d(x, w, b, s, p, d, g)),
    "srcore::conv2d_add_relu": lambda x, w, b, other, s, p, d, g: F.relu(F.conv2d(x, w, b, s, p, d, g) + other),
    "srcore::linear_silu": lambda x, w, b: F.silu(F.linear(x, w, b)),
    "srcore::add_relu": lambda a, b, alpha=1: F.relu(a + alpha * b),
    "srcore::linear_tanh": lambda x, w, b: torch.tanh(F.linear(x, w, b)),
    "srcore::linear_sigmoid": lambda x, w, b: torch.sigmoid(F.linear(x, w, b)),
    "srcore::sum_gt": lambda x, c: bool(x.sum() > c),
}
SCALAR = {"aten::add": operator.add, "aten::sub": operator.sub, "aten::mul": operator.mul,
          "aten::lt": operator.lt, "aten::gt": operator.gt, "aten::eq": operator.eq,
          "aten::len": len, "aten::__getitem__": operator.getitem}


def _tensorish(args) -> bool:
    return any(isinstance(a, torch.Tensor) for a in args)


PRINTED: list = []  # what prim::Print wrote during the last run


def run(graph, *inputs):
    PRINTED.clear()
    env = {id(v): x for v, x in zip(graph.inputs, inputs)}
    return _run_block(graph.block, env)


def _run_block(block, env):
    for n in block.nodes:
        args = [env[id(v)] for v in n.inputs]
        outs = _run_node(n, args, env)
        for o, r in zip(n.outputs, outs):
            env[id(o)] = r
    return [env[id(v)] for v in block.outputs]


def _run_node(n, args, env):
    k = n.kind
    if k == "prim::Constant":
        v = n.attrs.get("value")
        return [torch.from_numpy(np.array(v)) if isinstance(v, np.ndarray) else v]
    if k == "prim::Print":
        PRINTED.append(tuple(args))
        return []
    if k == "prim::ListConstruct":
        return [list(args)]
    if k == "prim::TupleConstruct":
        return [tuple(args)]
    if k in ("prim::ListUnpack", "prim::TupleUnpack"):
        return list(args[0])
    if k == "prim::TupleIndex":
        return [args[0][args[1]]]
    if k == "aten::append":  # mutates the list in place, as TorchScript does
        args[0].append(args[1])
        return [args[0]]
    if k in ("aten::extend", "aten::add_") and isinstance(args[0], list):   # (+= on a list is add_)
        args[0].extend(args[1])
        return [args[0]]
    if k == "aten::insert":
        args[0].insert(args[1], args[2])
        return []
    if k == "aten::_set_item":
        args[0][args[1]] = args[2]
        return [args[0]]
    if k == "aten::list":
        return [list(args[0])]
    if k == "prim::If":
        return _run_block(n.blocks[0 if args[0] else 1], env)
    if k == "prim::Loop":
        trips, cond, carried = args[0], args[1], args[2:]
        body = n.blocks[0]
        i = 0
        while cond and i < trips:
            env.update({id(p): v for p, v in zip(body.inputs, [i, *carried])})
            cond, *carried = _run_block(body, env)
            i += 1
        return carried
    if k in FUSED:
        return [FUSED[k](*args)]
    if k in SCALAR and not _tensorish(args):
        return [SCALAR[k](*args)]
    if k == "aten::__is__":
        return [args[0] is args[1]]
    r = _call_aten(k, args)
    return list(r) if len(n.outputs) > 1 else [r]


def _call_aten(kind, args):
    """Call the first torch overload of ``kind`` that accepts ``args`` (graph inputs are schema-ordered)."""
    op = getattr(torch.ops.aten, kind.split("::")[1].split(".")[0])
    errors = []
    for schema in torch._C._jit_get_schemas_for_operator(kind):
        if len(args) > len(schema.arguments):
            continue
        pos = [a for a, s in zip(args, schema.arguments) if not s.kwarg_only]
        kw = {s.name: a for a, s in zip(args, schema.arguments) if s.kwarg_only}
        try:
            return op(*pos, **kw)
        except RuntimeError as exc:
            errors.append(str(exc).splitlines()[0])
    raise RuntimeError(f"no overload of {kind} accepts the arguments: {errors}")


def _params(text, rng):
    g = parse_graph(text)
    out = {}
    for node in g.all_nodes():
        name = node.attrs.get("param")
        if name:
            data = rng.standard_normal(node.output.type.shape).astype(np.float32)
            out[name] = np.abs(data) + 0.5 if name.endswith("var") else data
    return out


def check(text, input_shapes, *, seed=0, **kw):
    rng = np.random.default_rng(seed)
    g = parse_graph(text, _params(text, rng))
    inputs = [torch.from_numpy(rng.standard_normal(s).astype(np.float32)) for s in input_shapes]
    before = run(g, *inputs)
    report = []
    prepared = prepare_for_static_runtime(g, report=report, verify=True, **kw)
    after = run(prepared, *inputs)
    for b, a in zip(before, after):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    return g, prepared, report


SEED = (__import__("pathlib").Path(__file__).parent / "golden/passes/prepare/seed_article.ir").read_text()


def test_seed_article_same_result_single_sum():
    g, prepared, report = check(SEED.split("# ---- after ----")[0], [(3, 4)])
    kinds = [n.kind for n in prepared.all_nodes() if n.kind != "prim::Constant"]
    assert kinds == ["aten::sum"]
    assert sum(1 for n in g.all_nodes() if n.kind == "prim::Loop") == 2  # the input is untouched
    assert sum(s.removed for s in report) - sum(s.added for s in report) == \
        sum(1 for _ in g.all_nodes()) - sum(1 for _ in prepared.all_nodes())


MODEL = """
graph(%img : Float(2, 3, 8, 8), %feat : Float(2, 16)):
  %w1 : Float(4, 3, 3, 3) = prim::Constant[param="conv1.weight"]()
  %g1 : Float(4) = prim::Constant[param="bn1.weight"]()
  %b1 : Float(4) = prim::Constant[param="bn1.bias"]()
  %m1 : Float(4) = prim::Constant[param="bn1.running_mean"]()
  %v1 : Float(4) = prim::Constant[param="bn1.running_var"]()
  %w2 : Float(4, 4, 3, 3) = prim::Constant[param="conv2.weight"]()
  %cb2 : Float(4) = prim::Constant[param="conv2.bias"]()
  %fw : Float(8, 16) = prim::Constant[param="fc.weight"]()
  %fb : Float(8) = prim::Constant[param="fc.bias"]()
  %g3 : Float(8) = prim::Constant[param="bn3.weight"]()
  %b3 : Float(8) = prim::Constant[param="bn3.bias"]()
  %m3 : Float(8) = prim::Constant[param="bn3.running_mean"]()
  %v3 : Float(8) = prim::Constant[param="bn3.running_var"]()
  %fw2 : Float(8, 8) = prim::Constant[param="fc2.weight"]()
  %none : NoneType = prim::Constant()
  %one : int = prim::Constant[value=1]()
  %zero : int = prim::Constant[value=0]()
  %false : bool = prim::Constant[value=0]()
  %true : bool = prim::Constant[value=1]()
  %p : float = prim::Constant[value=0.25]()
  %mom : float = prim::Constant[value=0.1]()
  %eps : float = prim::Constant[value=1e-05]()
  %approx : str = prim::Constant[value="none"]()
  %s : int[] = prim::ListConstruct(%one, %one)
  %pad : int[] = prim::ListConstruct(%one, %one)
  %c1 : Float(2, 4, 8, 8) = aten::conv2d(%img, %w1, %none, %s, %pad, %s, %one)
  %n1 : Float(2, 4, 8, 8) = aten::batch_norm(%c1, %g1, %b1, %m1, %v1, %false, %mom, %eps, %true)
  %r1 : Float(2, 4, 8, 8) = aten::relu(%n1)
  %d1 : Float(2, 4, 8, 8) = aten::dropout(%r1, %p, %false)
  %c2 : Float(2, 4, 8, 8) = aten::conv2d(%d1, %w2, %cb2, %s, %pad, %s, %one)
  %a2 : Float(2, 4, 8, 8) = aten::add(%c2, %r1, %one)
  %r2 : Float(2, 4, 8, 8) = aten::relu(%a2)
  %id : Float(2, 4, 8, 8) = aten::mul(%r2, %one)
  %rank : int = aten::dim(%id)
  %four : int = prim::Constant[value=4]()
  %is4 : bool = aten::eq(%rank, %four)
  %flat : Tensor = prim::If(%is4)
    block0():
      %sz : int[] = aten::size(%id)
      %n : int, %c : int, %h : int, %w : int = prim::ListUnpack(%sz)
      %chw : int = aten::mul(%c, %h)
      %chw2 : int = aten::mul(%chw, %w)
      %shape : int[] = prim::ListConstruct(%n, %chw2)
      %v : Tensor = aten::reshape(%id, %shape)
      -> (%v)
    block1():
      -> (%id)
  %f1 : Float(2, 8) = aten::linear(%feat, %fw, %fb)
  %f2 : Float(2, 8) = aten::batch_norm(%f1, %g3, %b3, %m3, %v3, %false, %mom, %eps, %true)
  %f3 : Float(2, 8) = aten::detach(%f2)
  %f4 : Float(2, 8) = aten::linear(%f3, %fw2, %none)
  %f5 : Float(2, 8) = aten::gelu(%f4, %approx)
  %t1 : Float(8, 2) = aten::t(%f5)
  %t2 : Float(2, 8) = aten::t(%t1)
  %out : (Tensor, Tensor) = prim::TupleConstruct(%flat, %t2)
  return (%out)
"""


def test_model_pipeline_preserves_values_and_fuses():
    _, prepared, _ = check(MODEL, [(2, 3, 8, 8), (2, 16)])
    kinds = [n.kind for n in prepared.all_nodes() if n.kind != "prim::Constant"]
    assert "aten::batch_norm" not in kinds and "aten::dropout" not in kinds and "prim::If" not in kinds
    assert kinds.count("srcore::conv2d_relu") == 1
    assert kinds.count("srcore::conv2d_add_relu") == 1  # relu(conv2(r1) + r1)
    assert "srcore::linear_gelu" in kinds and "aten::t" not in kinds
    params = {n.attrs.get("param") for n in prepared.all_nodes() if n.kind == "prim::Constant"}
    assert {"conv1.weight.bnfold", "conv1.bias.bnfold", "fc.weight.bnfold", "fc.bias.bnfold"} <= params


def test_model_pipeline_without_fusion():
    _, prepared, _ = check(MODEL, [(2, 3, 8, 8), (2, 16)], fuse=False)
    assert not any(n.kind.startswith("srcore::") for n in prepared.all_nodes())


def test_residual_block_fuses_add_relu():
    text = """
graph(%x : Float(1, 4, 6, 6)):
  %w : Float(4, 4, 3, 3) = prim::Constant[param="conv.weight"]()
  %b : Float(4) = prim::Constant[param="conv.bias"]()
  %one : int = prim::Constant[value=1]()
  %s : int[] = prim::ListConstruct(%one, %one)
  %c : Float(1, 4, 6, 6) = aten::conv2d(%x, %w, %b, %s, %s, %s, %one)
  %a : Float(1, 4, 6, 6) = aten::add(%x, %c, %one)
  %r : Float(1, 4, 6, 6) = aten::relu(%a)
  return (%r)
"""
    _, prepared, _ = check(text, [(1, 4, 6, 6)])
    assert [n.kind for n in prepared.nodes if n.kind != "prim::Constant"] == ["srcore::conv2d_add_relu"]


# -- property: random chains of rewritable ops keep their values ----------------------------------
UNARY = ["aten::relu", "aten::neg", "aten::t", "aten::detach", "aten::contiguous"]
IDENT = [("aten::add", "%zero", True), ("aten::sub", "%zero", True), ("aten::mul", "%one", False),
         ("aten::div", "%one", False), ("aten::mul", "%fone", False), ("aten::add", "%fzero", True)]


@st.composite
def chains(draw):
    lines, cur, n = [], "%x", 0
    for _ in range(draw(st.integers(1, 12))):
        n += 1
        choice = draw(st.integers(0, 3))
        if choice == 0:
            op = draw(st.sampled_from(UNARY))
            extra = ", %zero" if op == "aten::contiguous" else ""
            lines.append(f"  %v{n} : Tensor = {op}({cur}{extra})")
        elif choice == 1:
            op, c, alpha = draw(st.sampled_from(IDENT))
            lines.append(f"  %v{n} : Tensor = {op}({cur}, {c}{', %one' if alpha else ''})")
        elif choice == 2:  # a duplicate of the previous line's op on the same input (CSE)
            lines.append(f"  %v{n} : Tensor = aten::mul({cur}, {cur})")
        else:
            other = draw(st.sampled_from(["%x", cur]))
            lines.append(f"  %v{n} : Tensor = aten::add({cur}, {other}, %one)")
        cur = f"%v{n}"
    head = ("graph(%x : Float(3, 3)):\n  %zero : int = prim::Constant[value=0]()\n"
            "  %one : int = prim::Constant[value=1]()\n  %fzero : float = prim::Constant[value=0.]()\n"
            "  %fone : float = prim::Constant[value=1.]()\n")
    return head + "\n".join(lines) + f"\n  return ({cur})\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains(), st.booleans())
def test_random_chains_keep_values(text, typed):
    types = [parse_graph(text).inputs[0].type] if typed else None
    g = parse_graph(text)
    x = torch.randn(3, 3)
    before = run(g, x)
    prepared = prepare_for_static_runtime(g, input_types=types, verify=True)
    verify(prepared)
    torch.testing.assert_close(run(prepared, x)[0], before[0])
    assert print_graph(g) == print_graph(parse_graph(text))  # the input graph is untouched


def _seed_fn(x):
    for i in range(1000):
        y = x + 1  # noqa: F841
    for i in range(100):
        x = x.t()
        x = x.t()
    return x.sum()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_seed_article_from_torch_script_itself():
    """The graph torch prints today (its cleanup already drops the first loop) prepares the same way."""
    g = parse_graph(str(torch.jit.script(_seed_fn).graph))
    prepared = prepare_for_static_runtime(g, verify=True)
    assert [n.kind for n in prepared.all_nodes() if n.kind != "prim::Constant"] == ["aten::sum"]
    x = torch.randn(3, 5)
    torch.testing.assert_close(run(prepared, x)[0], _seed_fn(x))


# -- property: random integer programs with ifs, loops, lists and prints ---------------------------
from srcore.ir import GraphBuilder  # noqa: E402
from srcore.ir.types import BOOL, INT, ListType, TensorType  # noqa: E402


class _Gen:
    def __init__(self, draw):
        self.draw, self.b = draw, GraphBuilder()

    def pick(self, scope):
        return self.draw(st.sampled_from(scope))

    def block(self, scope, depth):
        scope = list(scope)
        for _ in range(self.draw(st.integers(1, 5))):
            choice = self.draw(st.integers(0, 6 if depth < 2 else 3))
            b = self.b
            if choice == 0:
                scope.append(b.constant(self.draw(st.integers(-3, 3)), INT))
            elif choice == 1:
                kind = self.draw(st.sampled_from(["aten::add", "aten::sub", "aten::mul"]))
                scope.append(b.op(kind, self.pick(scope), self.pick(scope), output_types=[INT]))
            elif choice == 2:
                b.node("prim::Print", self.pick(scope), output_types=[])
            elif choice == 3:
                lst = b.op("prim::ListConstruct", self.pick(scope), self.pick(scope),
                           output_types=[ListType(INT)])
                idx = b.constant(self.draw(st.integers(-2, 1)), INT)
                scope.append(b.op("aten::__getitem__", lst, idx, output_types=[INT]))
                scope.append(b.op("aten::len", lst, output_types=[INT]))
            elif choice == 4:
                scope += self.if_(scope, depth)
            else:
                scope += self.loop(scope, depth)
        return scope

    def if_(self, scope, depth):
        cond = self.b.op("aten::lt", self.pick(scope), self.pick(scope), output_types=[BOOL])
        if self.draw(st.booleans()):
            cond = self.b.constant(self.draw(st.booleans()), BOOL)
        n = self.draw(st.integers(0, 2))
        with self.b.if_(cond, output_types=[INT] * n) as (then, else_):
            for blk in (then, else_):
                with blk:
                    inner = self.block(scope, depth + 1)
                blk.output(*[self.pick(inner) for _ in range(n)])
        return list(self.b.last.outputs)

    def loop(self, scope, depth):
        trips = self.b.constant(self.draw(st.integers(-1, 4)), INT) if self.draw(st.booleans()) \
            else self.pick(scope)
        carried = [self.pick(scope) for _ in range(self.draw(st.integers(0, 2)))]
        with self.b.loop(trips, carried) as body:
            with body:
                inner = self.block(scope + [body.index, *body.carried], depth + 1)
            # a body output may be its own input (pass-through) or anything computed
            body.output(True, *[self.draw(st.sampled_from([p, self.pick(inner)])) for p in body.carried])
        return list(self.b.last.outputs)


@st.composite
def programs(draw):
    gen = _Gen(draw)
    a, b = gen.b.input("a", INT), gen.b.input("b", INT)
    scope = gen.block([a, b], 0)
    gen.b.output(*[gen.pick(scope) for _ in range(draw(st.integers(1, 3)))])
    return gen.b.graph


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(-3, 5), st.integers(-3, 5))
def test_random_programs_keep_results_and_prints(g, a, b):
    verify(g)
    before, printed = run(g, a, b), list(PRINTED)
    prepared = prepare_for_static_runtime(g, verify=True)
    assert run(prepared, a, b) == before
    assert PRINTED == printed


# -- property: random tensor programs with views and in-place ops (torch's aliasing is the oracle) --
T33 = TensorType("float32", (3, 3))


@st.composite
def tensor_programs(draw):
    b = GraphBuilder()
    scope = [b.input("x", T33), b.input("y", T33)]
    one, zero = b.constant(1, INT), b.constant(0, INT)
    for _ in range(draw(st.integers(1, 14))):
        u, w = draw(st.sampled_from(scope)), draw(st.sampled_from(scope))
        op = draw(st.sampled_from(["relu", "neg", "t", "add", "mul1", "add0", "relu_", "add_", "mul_",
                                   "contiguous", "detach", "dup", "loop"]))
        if op in ("relu", "neg", "t", "detach"):
            v = b.op(f"aten::{op}", u, output_types=[T33])
        elif op == "contiguous":
            v = b.op("aten::contiguous", u, zero, output_types=[T33])
        elif op == "add":
            v = b.op("aten::add", u, w, one, output_types=[T33])
        elif op == "mul1":
            v = b.op("aten::mul", u, one, output_types=[T33])
        elif op == "add0":
            v = b.op("aten::add", u, zero, one, output_types=[T33])
        elif op == "relu_":
            v = b.op("aten::relu_", u, output_types=[T33])
        elif op == "add_":  # the other operand must not overlap the written one
            v = b.op("aten::add_", u, b.op("aten::neg", w, output_types=[T33]), one, output_types=[T33])
        elif op == "mul_":
            v = b.op("aten::mul_", u, b.constant(2, INT), output_types=[T33])
        elif op == "dup":  # the same expression twice (a CSE candidate)
            b.op("aten::mul", u, w, output_types=[T33])
            v = b.op("aten::mul", u, w, output_types=[T33])
        else:  # a loop applying t twice (or once) to a carried value
            trips = b.constant(draw(st.integers(0, 3)), INT)
            with b.loop(trips, [u]) as body:
                with body:
                    z = b.op("aten::t", body.carried[0], output_types=[T33])
                    if draw(st.booleans()):
                        z = b.op("aten::t", z, output_types=[T33])
                body.output(True, z)
            v = b.last.output
        scope.append(v)
    b.output(*[draw(st.sampled_from(scope)) for _ in range(draw(st.integers(1, 2)))])
    return b.graph


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensor_programs(), st.booleans())
def test_random_tensor_programs_with_mutation(g, typed):
    verify(g)
    note(print_graph(g))
    x, y = torch.randn(3, 3), torch.randn(3, 3)
    xb, yb = x.clone(), y.clone()
    before = [t.clone() for t in run(g, xb, yb)]
    prepared = prepare_for_static_runtime(g, verify=True, input_types=[T33, T33] if typed else None)
    xa, ya = x.clone(), y.clone()
    after = run(prepared, xa, ya)
    for a, b_ in zip(after, before):
        torch.testing.assert_close(a, b_)
    torch.testing.assert_close(xa, xb)  # writes to the inputs are kept
    torch.testing.assert_close(ya, yb)


# -- batch norm folding against torch, per conv kind and optional parameter --------------------------
CONV_BN = """
graph(%x : Float({xshape})):
  %w : Float({wshape}) = prim::Constant[param="conv.weight"]()
  {bias}
  {gamma}
  {beta}
  %m : Float(4) = prim::Constant[param="bn.running_mean"]()
  %v : Float(4) = prim::Constant[param="bn.running_var"]()
  %one : int = prim::Constant[value=1]()
  %zero : int = prim::Constant[value=0]()
  %false : bool = prim::Constant[value=0]()
  %true : bool = prim::Constant[value=1]()
  %mom : float = prim::Constant[value=0.1]()
  %eps : float = prim::Constant[value=0.001]()
  %s : int[] = prim::ListConstruct({ones})
  %p : int[] = prim::ListConstruct({zeros})
  %c : Float(*) = {conv}
  %y : Float(*) = aten::batch_norm(%c, %g, %be, %m, %v, %false, %mom, %eps, %true)
  return (%y)
"""
CONVS = {
    "conv1d": ("2, 3, 9", "4, 3, 3", 1, "aten::conv1d(%x, %w, %b, %s, %p, %s, %one)"),
    "conv2d": ("2, 3, 7, 7", "4, 3, 3, 3", 2, "aten::conv2d(%x, %w, %b, %s, %p, %s, %one)"),
    "conv3d": ("1, 3, 5, 5, 5", "4, 3, 2, 2, 2", 3, "aten::conv3d(%x, %w, %b, %s, %p, %s, %one)"),
    "_convolution": ("2, 3, 7, 7", "4, 3, 3, 3", 2, "aten::_convolution(%x, %w, %b, %s, %p, %s, %false, "
                     "%p, %one, %false, %false, %true, %true)"),
}


@pytest.mark.parametrize("conv", sorted(CONVS))
@pytest.mark.parametrize("has_bias, affine", [(True, True), (False, True), (True, False), (False, False)])
def test_conv_batch_norm_folding_matches_torch(conv, has_bias, affine):
    xshape, wshape, nd, call = CONVS[conv]
    none = "%{} : NoneType = prim::Constant()"
    text = CONV_BN.format(
        xshape=xshape, wshape=wshape, conv=call, ones=", ".join(["%one"] * nd), zeros=", ".join(["%zero"] * nd),
        bias='%b : Float(4) = prim::Constant[param="conv.bias"]()' if has_bias else none.format("b"),
        gamma='%g : Float(4) = prim::Constant[param="bn.weight"]()' if affine else none.format("g"),
        beta='%be : Float(4) = prim::Constant[param="bn.bias"]()' if affine else none.format("be"))
    _, prepared, _ = check(text, [tuple(int(d) for d in xshape.split(","))], fuse=False)
    assert [n.kind for n in prepared.nodes if n.kind != "prim::Constant"] == [f"aten::{conv}"]


# -- property: fold_known_values on programs reading a symbolic and a static dim -------------------
@st.composite
def size_programs(draw):
    """Integer programs whose seeds are ``x.size(0)`` (symbolic: must never fold), ``x.size(1)`` and
    ``x.dim()`` (static: fold), a list built with ``append`` and its ``len``."""
    gen = _Gen(draw)
    b = gen.b
    x = b.input("x", TensorType("float32", ("batch", 3)))
    zero, one = b.constant(0, INT), b.constant(1, INT)
    seeds = [b.op("aten::size", x, zero, output_types=[INT]), b.op("aten::size", x, one, output_types=[INT]),
             b.op("aten::dim", x, output_types=[INT])]
    lst = b.op("prim::ListConstruct", output_types=[ListType(INT)])
    for _ in range(draw(st.integers(0, 3))):
        b.op("aten::append", lst, draw(st.sampled_from(seeds)), output_types=[ListType(INT)])
        seeds.append(b.op("aten::len", lst, output_types=[INT]))
    scope = gen.block(seeds, 0)
    gen.b.output(*[gen.pick(scope) for _ in range(draw(st.integers(1, 3)))])
    return gen.b.graph


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size_programs())
def test_known_values_hold_for_every_input_of_the_spec(g):
    verify(g)
    prepared = prepare_for_static_runtime(g, verify=True)
    for batch in (1, 2, 5):  # one prepared graph, any batch size the spec allows
        x = torch.zeros(batch, 3)
        before, printed = run(g, x), list(PRINTED)
        assert run(prepared, x) == before
        assert PRINTED == printed


def test_a_view_op_known_only_by_its_schema_keeps_in_place_writes_visible():
    """``split_with_sizes`` returns views of its input (``Tensor(a -> *) self -> Tensor(a)[]``) but
    is in no hand list: the passes read the schema's alias sets, so folding the split of a
    constant does not detach ``relu_``'s write from the later read of the constant (it did:
    a silent wrong answer with the default pipeline only)."""
    import srcore
    from srcore.model import Model

    w = np.array([-1.0, 2.0, -3.0, 4.0], np.float32)
    g = parse_graph("""graph(%x : Float(4)):
  %c : Tensor = prim::Constant[param="w"]()
  %s : int[] = prim::Constant[value=[2, 2]]()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %p : Tensor[] = aten::split_with_sizes(%c, %s, %zero)
  %a : Tensor, %b : Tensor = prim::ListUnpack(%p)
  %a2 : Tensor = aten::relu_(%a)
  %y : Tensor = aten::add(%x, %c, %one)
  return (%y)
""", {"w": w})
    wt = torch.from_numpy(w.copy())
    a, _ = torch.split_with_sizes(wt, [2, 2], 0)
    a.relu_()
    x = np.arange(4, dtype=np.float32)
    expected = (torch.from_numpy(x) + wt).numpy()
    for optimize in (True, False):
        sm = srcore.StaticModule(Model.from_graph(g), options=srcore.Options(optimize=optimize))
        np.testing.assert_array_equal(sm(x), expected)
