"""The graph processor (``srcore.runtime.process``): value slots, argument unboxing, blocks, lifetimes.

Hand-built graphs with hand-made dispatch results; every expected slot, argument, lifetime and
error is derived by hand from the rules in the module's docstrings (graph inputs first, then
outputs and block inputs in program order; arguments in schema order with defaults bound; an
out variant's output is fresh, anything else may alias its tensor inputs). Written for the
mutation run (docs/testing.md#mutation-testing).
"""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from srcore.dispatch.resolve import ResolvedKernel
from srcore.ir import BOOL, INT, Graph, ListType, TensorType
from srcore.memory.liveness import NodeFacts
from srcore.ops.schema import Argument, Default
from srcore.plugin import Kernel, PluginInfo, Specialized
from srcore.plugin.types import Const
from srcore.runtime.process import (GraphProcessor, _filled_containers, _written_constants, default_value,
                                    enumerate_values, free_slots)
from srcore.runtime.processed import Arg, ManagedTensor

#: no model runs: the second pass of test.sh deselects it
pytestmark = pytest.mark.one_pass

F = TensorType("float32", (2,))


def schema(text):
    return srcore.FunctionSchema.parse(text)


def rk(kind="native", op="t::f", plugin=PluginInfo("p", "srcore-p", "1"), fn=np.negative, spec=None,
       backend="cpu"):
    k = Kernel(op, backend, kind if kind != "structural" else "native", ("*",), fn)
    if plugin is not None:
        k = k.provided_by(plugin)
    return ResolvedKernel(k, fn if spec is None else spec.fn, spec, kind, backend)


def resolve_all(g, kind="native", **over):
    """Every non-structural node with a kernel of ``kind`` (``over``: node kind -> kernel kind)."""
    from srcore.dispatch import STRUCTURAL_KINDS
    return {n: rk(over.get(n.kind, kind), op=n.kind) for n in g.all_nodes() if n.kind not in STRUCTURAL_KINDS}


# -- slots -------------------------------------------------------------------------------------------------
def test_values_are_numbered_inputs_first_then_program_order_with_block_inputs():
    g = Graph()
    x = g.add_input(F, "x")
    c = g.add_input(BOOL, "c")
    a = g.insert("t::a", [x], [F, INT])
    loop = g.insert("prim::Loop", [a.outputs[1], c, x], [F])
    body = loop.add_block()
    i, h = body.add_input(INT, "i"), body.add_input(F, "h")
    inner = g.create("t::inner", [h], [F])
    body.append(inner)
    nested = g.create("prim::If", [c], [F])
    body.append(nested)
    nb = nested.add_block()
    nb_in = g.create("t::deep", [h], [F])
    nb.append(nb_in)
    nb.register_output(nb_in.output)
    body.register_output(c)
    body.register_output(inner.output)
    after = g.insert("t::b", [loop.output], [F])
    g.register_output(after.output)
    got = list(enumerate_values(g))
    assert got == [x, c, a.outputs[0], a.outputs[1], loop.output, i, h, inner.output, nested.output, nb_in.output,
                   after.output]
    proc = GraphProcessor(g, resolve_all(g))
    assert [proc.slot(v) for v in got] == list(range(11)) and proc.values == got


def test_free_slots_are_outer_values_read_inside_in_first_read_order():
    g = Graph()
    x, y, z, w = (g.add_input(F, n) for n in "xyzw")
    node = g.insert("prim::If", [g.add_input(BOOL, "c")], [F])
    b = node.add_block()
    p = b.add_input(F, "p")
    m = g.create("t::m", [y, p, x], [F])           # y, x outer; p the block's own
    b.append(m)
    sub = g.create("prim::If", [m.output], [F])    # m: defined inside
    b.append(sub)
    sb = sub.add_block()
    q = g.create("t::q", [w, y], [F])              # w outer (nested block), y again
    sb.append(q)
    sb.register_output(z)                          # z outer, read as a nested block's output
    b.register_output(q.output)
    b.register_output(x)
    slot_of = {id(v): i for i, v in enumerate(enumerate_values(g))}
    assert free_slots(b, slot_of) == (slot_of[id(y)], slot_of[id(x)], slot_of[id(w)], slot_of[id(z)])
    del slot_of[id(w)]                             # a value without a slot is not listed
    assert free_slots(b, slot_of) == (slot_of[id(y)], slot_of[id(x)], slot_of[id(z)])
    slot_of = {id(v): i for i, v in enumerate(enumerate_values(g))}
    assert free_slots(sb, slot_of) == (slot_of[id(w)], slot_of[id(y)], slot_of[id(z)])
    assert free_slots(g.block, slot_of) == ()


# -- constants ---------------------------------------------------------------------------------------------
def test_constants_are_bound_read_only_once_unless_the_graph_writes_them():
    g = Graph()
    x = g.add_input(F, "x")
    w = np.arange(2, dtype=np.float32)
    kept = np.ones(2, np.float32)
    ro = np.zeros(2, np.float32)
    ro.flags.writeable = False
    cw, ck, cr, cn = g.insert_constant(w), g.insert_constant(kept), g.insert_constant(ro), g.insert_constant(3)
    a = g.insert("t::a", [x, cw, cn], [F])
    a.schema = schema("t::a(Tensor self, Tensor w, int k) -> Tensor")
    b = g.insert("t::b", [a.output, cw], [F])
    v = g.insert("aten::view", [ck, g.insert_constant([2])], [F])
    v.schema = schema("aten::view(Tensor(a) self, int[] size) -> Tensor(a)")
    r = g.insert("aten::relu_", [v.output], [F])
    r.schema = schema("aten::relu_(Tensor(a!) self) -> Tensor(a!)")
    use = g.insert("t::c", [b.output, cr, r.output], [F])
    g.register_output(use.output)
    assert _written_constants(g) == {id(kept)}
    proc = GraphProcessor(g, resolve_all(g))
    top = proc.run()
    consts = proc.constants
    assert set(consts) == {proc.slot(c) for c in (cw, ck, cr, cn)} | {proc.slot(v.inputs[1])}
    frozen_w = consts[proc.slot(cw)]
    assert frozen_w is not w and frozen_w.base is w and not frozen_w.flags.writeable and w.flags.writeable
    assert consts[proc.slot(ck)] is kept and kept.flags.writeable      # relu_ writes it through a view
    assert consts[proc.slot(cr)] is ro and consts[proc.slot(cn)] == 3
    fa, fb = top.nodes[0].fn, top.nodes[1].fn
    assert fa.args[1].const is frozen_w and fb.args[1].const is frozen_w   # one view per array
    assert fa.args[2] == Arg(None, 3) and fa.args[0] == Arg(proc.slot(x), None)
    assert proc.frozen([1]) == [1] and proc.frozen(None) is None
    # constants are not nodes of a block
    assert [pn.node.kind for pn in top.nodes] == ["t::a", "t::b", "aten::view", "aten::relu_", "t::c"]
    assert [pn.position for pn in top.nodes] == [1, 2, 3, 4, 5]


# -- functions ---------------------------------------------------------------------------------------------
def test_arguments_follow_the_schema_with_defaults_keywords_and_varargs():
    g = Graph()
    x = g.add_input(F, "x")
    y = g.add_input(F, "y")
    two = g.insert_constant(2)
    n = g.insert("t::f", [x, two, y], [F])
    n.schema = schema("t::f(Tensor self, int k, *, Tensor other, int[2] stride=1, int? g=None, float eps=0.5) "
                      "-> Tensor")
    va = g.insert("t::v", [x, y, two], [F])
    va.schema = schema("t::v(Tensor self) -> Tensor")
    bare = g.insert("t::bare", [y, two], [F])
    g.register_output(n.output)
    proc = GraphProcessor(g, resolve_all(g))
    sx, sy = proc.slot(x), proc.slot(y)
    assert proc.full_args(n) == [(None, Arg(sx)), (None, Arg(None, 2)), ("other", Arg(sy)),
                                 ("stride", Arg(None, [1, 1])), ("g", Arg(None, None)), ("eps", Arg(None, 0.5))]
    assert proc.full_args(va) == [(None, Arg(sx)), (None, Arg(sy)), (None, Arg(None, 2))]
    assert proc.full_args(bare) == [(None, Arg(sy)), (None, Arg(None, 2))]
    fn = proc.function(n)
    assert fn.args == (Arg(sx), Arg(None, 2))
    assert fn.kwargs == (("other", Arg(sy)), ("stride", Arg(None, [1, 1])), ("g", Arg(None, None)),
                         ("eps", Arg(None, 0.5)))
    assert fn.kind == "native" and fn.n_outputs == 1 and fn.backend == "cpu" and fn.plugin == "srcore-p"
    assert fn.op == "t::f" and fn.fn is np.negative
    short = g.insert("t::s", [x], [F])
    short.schema = schema("t::s(Tensor self, int k) -> Tensor")
    proc = GraphProcessor(g, {**resolve_all(g), short: rk()})
    with pytest.raises(srcore.SrcoreError, match=r"^node t::s has 1 inputs but argument 'k' of "
                       r"t::s\(Tensor self, int k\) -> Tensor has no default$"):
        proc.function(short)


def test_a_specialization_picks_its_arguments_and_constants():
    g = Graph()
    x, y = g.add_input(F, "x"), g.add_input(F, "y")
    n = g.insert("t::add", [x, y, g.insert_constant(3)], [F])
    n.schema = schema("t::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
    spec = Specialized(np.add, args=(1, Const(7), 0), kwargs=(("alpha", 2), ("beta", Const("b"))))
    proc = GraphProcessor(g, {n: rk(spec=spec, kind="out")})
    fn = proc.function(n)
    sx, sy = proc.slot(x), proc.slot(y)
    assert fn.args == (Arg(sy), Arg(None, 7), Arg(sx))
    assert fn.kwargs == (("alpha", Arg(None, 3)), ("beta", Arg(None, "b")))
    assert fn.fn is np.add and fn.kind == "out"


def test_plugin_name_op_name_and_missing_kernels():
    g = Graph()
    x = g.add_input(F, "x")
    n = g.insert("t::f", [x], [F, F])
    n.schema = schema("t::f.one(Tensor self) -> (Tensor, Tensor)")
    wild = rk(op="t::*", plugin=PluginInfo("torch", None, None), kind="fallback")
    fn = GraphProcessor(g, {n: wild}).function(n)
    assert fn.op == "t::f.one" and fn.plugin == "torch" and fn.n_outputs == 2 and fn.kind == "fallback"
    fn = GraphProcessor(g, {n: rk(op="t::f.one", plugin=None)}).function(n)
    assert fn.plugin is None and fn.op == "t::f.one"
    n.schema = None
    assert GraphProcessor(g, {n: wild}).function(n).op == "t::*"
    assert GraphProcessor(g, {n: rk(op="t::f.x")}).function(n).op == "t::f.x"
    with pytest.raises(srcore.SrcoreError, match=r"^internal error: node t::f was not dispatched$"):
        GraphProcessor(g, {}).function(n)
    c = g.insert("prim::If", [g.add_input(BOOL, "c")], [])
    assert GraphProcessor(g, {}).function(c) is None


def test_default_values_as_a_kernel_receives_them():
    def arg(value, type_text="int[2]"):
        t = schema(f"t::d({type_text} a) -> ()").arguments[0].type
        return Argument("a", t, Default(value, str(value)))
    assert default_value(arg(1)) == [1, 1]
    assert default_value(arg((1, 2))) == [1, 2] and isinstance(default_value(arg((1, 2))), list)
    assert default_value(arg([3, 4])) == [3, 4]
    assert default_value(arg(None)) is None
    assert default_value(arg(5, "int")) == 5
    assert default_value(arg((5,), "int[]")) == [5]
    assert default_value(arg(0)) == [0, 0]
    assert default_value(arg(2.5, "float")) == 2.5


# -- blocks and lifetimes ----------------------------------------------------------------------------------
def _chain():
    """x -> a -> b -> c (returned), d reads a and b; every t:: op one tensor in, one out."""
    g = Graph()
    x = g.add_input(F, "x")
    a = g.insert("t::a", [x], [F])
    b = g.insert("t::b", [a.output], [F])
    d = g.insert("t::d", [a.output, b.output], [F])
    c = g.insert("t::c", [d.output], [F])
    g.register_output(c.output)
    return g, x, a, b, d, c


def test_out_variant_outputs_are_managed_until_their_last_read():
    g, x, a, b, d, c = _chain()
    proc = GraphProcessor(g, resolve_all(g, kind="out"))
    top = proc.run()
    s = proc.slot
    # a: made at 1, last read by d at 3; b: 2..3; d: 3..4; c escapes
    assert top.managed == (ManagedTensor(s(a.output), 1, 3), ManagedTensor(s(b.output), 2, 3),
                           ManagedTensor(s(d.output), 3, 4))
    assert top.inputs == (s(x),) and top.outputs == (s(c.output),) and top.index == 0 and top.block is g.block
    assert [pn.inputs for pn in top.nodes] == [(s(x),), (s(a.output),), (s(a.output), s(b.output)),
                                               (s(d.output),)]
    assert [pn.outputs for pn in top.nodes] == [(s(a.output),), (s(b.output),), (s(d.output),), (s(c.output),)]
    assert proc.blocks == [top]
    # without memory planning out variants allocate: nothing is managed
    assert GraphProcessor(g, resolve_all(g, kind="out"), plan_memory=False).run().managed == ()
    # a native output may alias its inputs: c (native) returned takes d (fresh) with it; a and b stay
    proc = GraphProcessor(g, resolve_all(g, kind="out", **{"t::c": "native"}))
    assert proc.run().managed == (ManagedTensor(s(a.output), 1, 3), ManagedTensor(s(b.output), 2, 3))
    # a native in the middle extends the lifetime of what it may alias: b native aliases a (read by d at 3)
    proc = GraphProcessor(g, resolve_all(g, kind="out", **{"t::b": "native"}))
    assert proc.run().managed == (ManagedTensor(proc.slot(a.output), 1, 3), ManagedTensor(proc.slot(d.output), 3, 4))


def test_node_facts_reads_fresh_and_aliasing():
    g = Graph()
    x = g.add_input(F, "x")
    k = g.insert_constant(2)
    n = g.insert("t::f", [x, k], [F, INT])
    lst = g.insert("prim::ListConstruct", [x], [ListType(F)])
    app = g.insert("aten::append", [lst.output, n.outputs[0]], [ListType(F)])
    g.register_output(app.output)
    proc = GraphProcessor(g, resolve_all(g))
    proc.run()
    s = proc.slot
    nat = proc.function(n)
    assert proc.facts(n, _as(nat, "out"), 4, (s(x), s(k)), (s(n.outputs[0]),
                      s(n.outputs[1]))) == NodeFacts(4, (s(x),), (s(n.outputs[0]),), ())
    assert proc.facts(n, nat, 1, (s(x), s(k)), ()) == NodeFacts(1, (s(x),), (), (s(n.outputs[0]),))
    assert proc.facts(n, None, 1, (s(x),), ()) == NodeFacts(1, (s(x),), (), (s(n.outputs[0]),))
    proc.plan_memory = False
    assert proc.facts(n, _as(nat, "out"), 2, (s(x),), ()) == NodeFacts(2, (s(x),), (), ())
    proc.plan_memory = True
    # an append holds its tensor input from then on: its container aliases it
    fapp = proc.facts(app, proc.function(app), 3, (s(lst.output), s(n.outputs[0])), ())
    assert fapp == NodeFacts(3, (s(lst.output), s(n.outputs[0])), (), (s(app.output), s(lst.output)))
    assert _filled_containers(app) == [lst.output]
    assert _filled_containers(n) == [] and _filled_containers(lst) == []


def _as(fn, kind):
    import attrs
    return attrs.evolve(fn, kind=kind)


def test_a_tensor_stored_into_an_outer_list_lives_to_the_end_and_forked_blocks_manage_nothing():
    g = Graph()
    x = g.add_input(F, "x")
    c = g.add_input(BOOL, "c")
    lst = g.insert("prim::ListConstruct", [], [ListType(F)])
    loop = g.insert("prim::Loop", [g.insert_constant(2), c], [])
    body = loop.add_block()
    body.add_input(INT, "i")
    h = g.create("t::h", [x], [F])
    body.append(h)
    tmp = g.create("t::tmp", [x], [F])
    body.append(tmp)
    use = g.create("t::use", [tmp.output], [F])
    body.append(use)
    app = g.create("aten::append", [lst.output, h.output], [ListType(F)])
    body.append(app)
    body.register_output(c)
    cat = g.insert("t::cat", [lst.output], [F])
    fork = g.insert("prim::fork", [], [TensorType()])
    fb = fork.add_block()
    f1 = g.create("t::f1", [x], [F])
    fb.append(f1)
    f2 = g.create("t::f2", [f1.output], [F])
    fb.append(f2)
    fb.register_output(f2.output)
    g.register_output(cat.output)
    g.register_output(fork.output)
    proc = GraphProcessor(g, resolve_all(g, kind="out", **{"aten::append": "native", "prim::ListConstruct": "native",
                                                             "t::use": "native"}))
    top = proc.run()
    s = proc.slot
    # sub-blocks come after their parent, in program order
    assert [b.index for b in proc.blocks] == [0, 1, 2] and proc.blocks[1].block is body
    assert proc.blocks[2].block is fb and proc.blocks[0] is top
    loop_info = proc.blocks[1]
    # tmp is read by use (native, returns a possible alias, never read again): 2..3; h is stored into the
    # outer list, which counts as the block's output: it escapes and is not managed
    assert loop_info.managed == (ManagedTensor(s(tmp.output), 2, 3),)
    assert loop_info.inputs == (s(body.inputs[0]),) and loop_info.outputs == (s(c),)
    assert proc.blocks[2].managed == ()
    assert [pn.blocks for pn in top.nodes if pn.blocks] == [(loop_info,), (proc.blocks[2],)]
    # the top block: the loop reads x and the list from outside; cat reads the list
    (lp,) = [pn for pn in top.nodes if pn.node is loop]
    assert lp.inputs == (s(loop.inputs[0]), s(c)) and lp.position == 2


def test_the_fork_rule_applies_only_to_forks():
    g = Graph()
    x = g.add_input(F, "x")
    node = g.insert("prim::If", [g.add_input(BOOL, "c")], [F])
    blk = node.add_block()
    f1 = g.create("t::f1", [x], [F])
    blk.append(f1)
    f2 = g.create("t::f2", [f1.output], [F])
    blk.append(f2)
    blk.register_output(f2.output)
    g.register_output(node.output)
    proc = GraphProcessor(g, resolve_all(g, kind="out"))
    proc.run()
    assert proc.blocks[1].managed == (ManagedTensor(proc.slot(f1.output), 1, 2),)


def test_a_list_made_inside_the_block_does_not_outlive_it():
    g = Graph()
    x = g.add_input(F, "x")
    loop = g.insert("prim::Loop", [g.insert_constant(2), g.add_input(BOOL, "c")], [])
    body = loop.add_block()
    body.add_input(INT, "i")
    h = g.create("t::h", [x], [F])
    body.append(h)
    lst = g.create("prim::ListConstruct", [], [ListType(F)])
    body.append(lst)
    app = g.create("aten::append", [lst.output, h.output], [ListType(F)])
    body.append(app)
    cat = g.create("t::cat", [lst.output], [F])
    body.append(cat)
    last = g.create("t::last", [x], [F])
    body.append(last)
    body.register_output(g.inputs[1])
    proc = GraphProcessor(g, resolve_all(g, kind="out", **{"aten::append": "native",
                                                             "prim::ListConstruct": "native"}))
    proc.run()
    s = proc.slot
    # h (1) is held by the list from the append (3) on; the list is last read by cat (4); last is never read
    assert proc.blocks[1].managed == (ManagedTensor(s(h.output), 1, 4), ManagedTensor(s(cat.output), 4, 4),
                                      ManagedTensor(s(last.output), 5, 5))


# -- written for the survivors of the mutation run -----------------------------------------------------------
def test_a_tensor_read_only_inside_a_branch_lives_until_the_branching_node():
    g = Graph()
    x = g.add_input(F, "x")
    a = g.insert("t::a", [x], [F])
    node = g.insert("prim::If", [g.add_input(BOOL, "c")], [F])
    blk = node.add_block()
    b = g.create("t::b", [a.output], [F])
    blk.append(b)
    blk.register_output(b.output)
    other = node.add_block()
    other.register_output(x)
    z = g.insert("t::z", [x], [F])
    g.register_output(z.output)
    proc = GraphProcessor(g, resolve_all(g, kind="out"))
    proc.run()
    # a (1) is read inside the If (2); z (3) is returned
    assert proc.blocks[0].managed == (ManagedTensor(proc.slot(a.output), 1, 2),)


def test_a_positional_default_stays_positional():
    g = Graph()
    x = g.add_input(F, "x")
    n = g.insert("t::f", [x], [F])
    n.schema = schema("t::f(Tensor self, int k=3, *, int j=4) -> Tensor")
    proc = GraphProcessor(g, resolve_all(g))
    assert proc.full_args(n) == [(None, Arg(proc.slot(x))), (None, Arg(None, 3)), ("j", Arg(None, 4))]
    fn = proc.function(n)
    assert fn.args == (Arg(proc.slot(x)), Arg(None, 3)) and fn.kwargs == (("j", Arg(None, 4)),)


def test_only_containers_of_tensors_count_as_filled():
    g = Graph()
    x = g.add_input(F, "x")
    ints = g.add_input(ListType(INT), "ints")
    tensors = g.add_input(ListType(F), "tensors")
    app_int = g.insert("aten::append", [ints, g.insert_constant(1)], [ListType(INT)])
    app_int.schema = schema("aten::append.int(int[](a!) self, int el) -> int[](a!)")
    relu_ = g.insert("aten::relu_", [x], [F])
    relu_.schema = schema("aten::relu_(Tensor(a!) self) -> Tensor(a!)")
    app_t = g.insert("aten::append", [tensors, x], [ListType(F)])
    app_t.schema = schema("aten::append.Tensor(Tensor[](a!) self, Tensor(c -> *) el) -> Tensor[](a!)")
    assert _filled_containers(app_int) == [] and _filled_containers(relu_) == []
    assert _filled_containers(app_t) == [tensors]


def test_a_tensor_stored_into_a_loop_carried_list_outlives_the_body():
    """``keep = []; acc = keep; for ...: acc.append(h(x)); acc = []``: at the first iteration the carried
    ``acc`` is the outer list, so h must not be managed by the body (its buffer would be reused while
    ``keep`` still lists it)."""
    g = Graph()
    x = g.add_input(F, "x")
    keep = g.insert("prim::ListConstruct", [], [ListType(F)])
    loop = g.insert("prim::Loop", [g.insert_constant(2), g.add_input(BOOL, "c"), keep.output], [ListType(F)])
    body = loop.add_block()
    body.add_input(INT, "i")
    carried = body.add_input(ListType(F), "acc")
    h = g.create("t::h", [x], [F])
    body.append(h)
    app = g.create("aten::append", [carried, h.output], [ListType(F)])
    body.append(app)
    fresh = g.create("prim::ListConstruct", [], [ListType(F)])
    body.append(fresh)
    tmp = g.create("t::tmp", [x], [F])
    body.append(tmp)
    body.register_output(g.inputs[1])
    body.register_output(fresh.output)
    cat = g.insert("t::cat", [keep.output], [F])
    g.register_output(cat.output)
    proc = GraphProcessor(g, resolve_all(g, kind="out", **{"aten::append": "native",
                                                             "prim::ListConstruct": "native"}))
    proc.run()
    assert proc.blocks[1].managed == (ManagedTensor(proc.slot(tmp.output), 4, 4),)
