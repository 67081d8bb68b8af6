"""A ``"*"`` kernel never gets a quantized dtype: a quantized op runs on a kernel that keeps the
parameters (checked against torch's own quantized op) or the load fails naming it.

Before, cpu's ``"*"`` kernels (pixel_shuffle, repeat, flip, ...) matched ``quint8`` too, computed on the
stored integers and dropped the scale and zero point: an FX-quantized model gave wrong values with no
error. torch is the reference: its QuantizedCPU kernels, dequantized; data movement is exact.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import srcore
from srcore.dispatch import resolve_graph, resolve_node
from srcore.ir import Graph, ListType, OptionalType, TensorType
from srcore.plugin import ANY_QUANTIZED
from srcore.plugin.manager import get_plugin_manager

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

pytestmark = pytest.mark.usefixtures("fbgemm")

SCALE, ZP = 0.05, 7
INDEX = [4, 0, 4, 2]   # index_select's second input
QTYPE = f"scale={SCALE}, zero_point={ZP}"


def _q(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.quantize_per_tensor(torch.randn(*shape, generator=g), SCALE, ZP, torch.quint8)


def _qin(shape):
    return f"%x : QUInt8({', '.join(map(str, shape))}, {QTYPE})"


def _graph(shape, body, outs=1, extra=""):
    """``body`` computes ``%r`` (or ``%r0..``) from the quantized ``%x``; the graph dequantizes them."""
    names = ["%r"] if outs == 1 else [f"%r{i}" for i in range(outs)]
    deq = "".join(f"  %d{i} : Tensor = aten::dequantize({n})\n" for i, n in enumerate(names))
    ret = ", ".join(f"%d{i}" for i in range(outs))
    return f"graph({_qin(shape)}{extra}):\n{body}{deq}  return ({ret})\n"


def _ints(name, *vals):
    lines = "".join(f"  %{name}{i} : int = prim::Constant[value={v}]()\n" for i, v in enumerate(vals))
    return lines + f"  %{name} : int[] = prim::ListConstruct({', '.join(f'%{name}{i}' for i in range(len(vals)))})\n"


def _c(name, v):
    return f"  %{name} : int = prim::Constant[value={v}]()\n"


def _unpack(n):
    return f"  {', '.join(f'%r{i} : Tensor' for i in range(n))} = prim::ListUnpack(%l)\n"


# op -> (input shape, IR body, number of outputs, torch's op on the quantized input)
RUNS = {
    "aten::flip": ((2, 4, 3, 3), _ints("dims", 1, 3) + "  %r : Tensor = aten::flip(%x, %dims)\n", 1,
                   lambda x: x.flip((1, 3))),
    "aten::chunk": ((2, 5, 3), _c("n", 3) + _c("d", 1) + "  %l : Tensor[] = aten::chunk(%x, %n, %d)\n" + _unpack(3), 3,
                    lambda x: x.chunk(3, 1)),
    "aten::split.Tensor": ((2, 5, 3), _c("n", 2) + _c("d", -2)
                           + "  %l : Tensor[] = aten::split(%x, %n, %d)\n" + _unpack(3), 3, lambda x: x.split(2, -2)),
    "aten::split_with_sizes": ((2, 5, 3), _ints("s", 1, 4) + _c("d", 1)
                               + "  %l : Tensor[] = aten::split_with_sizes(%x, %s, %d)\n" + _unpack(2), 2,
                               lambda x: x.split([1, 4], 1)),
    "aten::unbind.int": ((3, 2, 4), _c("d", 2) + "  %l : Tensor[] = aten::unbind(%x, %d)\n" + _unpack(4), 4,
                         lambda x: x.unbind(2)),
    "aten::narrow": ((2, 6, 3), _c("d", 1) + _c("s", 2) + _c("n", 3) + "  %r : Tensor = aten::narrow(%x, %d, %s, %n)\n",
                     1, lambda x: x.narrow(1, 2, 3)),
    "aten::expand": ((1, 4, 1), _ints("s", 3, -1, 5) + "  %f : bool = prim::Constant[value=0]()\n"
                     "  %r : Tensor = aten::expand(%x, %s, %f)\n", 1, lambda x: x.expand(3, -1, 5)),
    "aten::t": ((4, 3), "  %r : Tensor = aten::t(%x)\n", 1, lambda x: x.t()),
    "aten::stack": ((2, 3, 4), _c("d", 1) + "  %xs : Tensor[] = prim::ListConstruct(%x, %x)\n"
                    "  %r : Tensor = aten::stack(%xs, %d)\n", 1, lambda x: torch.stack([x, x], 1)),
    "aten::cat": ((2, 3, 4), _c("d", -1) + "  %xs : Tensor[] = prim::ListConstruct(%x, %x)\n"
                  "  %r : Tensor = aten::cat(%xs, %d)\n", 1, lambda x: torch.cat([x, x], -1)),
    "aten::repeat": ((2, 3), _ints("s", 2, 1, 3) + "  %r : Tensor = aten::repeat(%x, %s)\n", 1,
                     lambda x: x.repeat(2, 1, 3)),
    "aten::pixel_shuffle": ((1, 8, 2, 3), _c("u", 2) + "  %r : Tensor = aten::pixel_shuffle(%x, %u)\n", 1,
                            lambda x: F.pixel_shuffle(x, 2)),
    "aten::pixel_unshuffle": ((1, 2, 4, 6), _c("u", 2) + "  %r : Tensor = aten::pixel_unshuffle(%x, %u)\n", 1,
                              lambda x: F.pixel_unshuffle(x, 2)),
    "aten::permute": ((2, 3, 4), _ints("p", 2, 0, 1) + "  %r : Tensor = aten::permute(%x, %p)\n", 1,
                      lambda x: x.permute(2, 0, 1)),
    "aten::transpose.int": ((2, 3, 4), _c("a", 0) + _c("b", 2) + "  %r : Tensor = aten::transpose(%x, %a, %b)\n", 1,
                            lambda x: x.transpose(0, 2)),
    "aten::reshape": ((2, 3, 4), _ints("s", 4, -1) + "  %r : Tensor = aten::reshape(%x, %s)\n", 1,
                      lambda x: x.reshape(4, -1)),
    "aten::view": ((2, 3, 4), _ints("s", 6, 4) + "  %r : Tensor = aten::view(%x, %s)\n", 1, lambda x: x.view(6, 4)),
    "aten::flatten.using_ints": ((2, 3, 4), _c("a", 1) + _c("b", 2) + "  %r : Tensor = aten::flatten(%x, %a, %b)\n",
                                 1, lambda x: x.flatten(1)),
    "aten::select.int": ((2, 3, 4), _c("d", 1) + _c("i", -1) + "  %r : Tensor = aten::select(%x, %d, %i)\n", 1,
                         lambda x: x.select(1, -1)),
    "aten::slice.Tensor": ((2, 5, 4), _c("d", 1) + _c("a", 1) + _c("b", 5) + _c("s", 2)
                           + "  %r : Tensor = aten::slice(%x, %d, %a, %b, %s)\n", 1, lambda x: x[:, 1:5:2]),
    "aten::squeeze.dim": ((2, 1, 4), _c("d", 1) + "  %r : Tensor = aten::squeeze(%x, %d)\n", 1,
                          lambda x: x.squeeze(1)),
    "aten::unsqueeze": ((2, 4), _c("d", 0) + "  %r : Tensor = aten::unsqueeze(%x, %d)\n", 1,
                        lambda x: x.unsqueeze(0)),
    "aten::contiguous": ((2, 4), _c("m", 0) + "  %t : Tensor = aten::t(%x)\n"
                         "  %r : Tensor = aten::contiguous(%t, %m)\n", 1, lambda x: x.t().contiguous()),
    "aten::clone": ((2, 4), "  %n : NoneType = prim::Constant()\n  %r : Tensor = aten::clone(%x, %n)\n", 1,
                    lambda x: x.clone()),
    "aten::detach": ((2, 4), "  %r : Tensor = aten::detach(%x)\n", 1, lambda x: x.detach()),
    "aten::movedim.int": ((2, 3, 4), _c("a", 0) + _c("b", 2) + "  %r : Tensor = aten::movedim(%x, %a, %b)\n", 1,
                          lambda x: x.movedim(0, 2)),
    "aten::movedim.intlist": ((2, 3, 4), _ints("a", 0, 1) + _ints("b", 2, 0)
                              + "  %r : Tensor = aten::movedim(%x, %a, %b)\n", 1, lambda x: x.movedim((0, 1), (2, 0))),
    "aten::unflatten.int": ((2, 6), _c("d", 1) + _ints("s", 2, 3) + "  %r : Tensor = aten::unflatten(%x, %d, %s)\n",
                            1, lambda x: x.unflatten(1, (2, 3))),
    "aten::view_as": ((2, 6), _ints("s", 3, 4) + "  %y : Tensor = aten::reshape(%x, %s)\n"
                      "  %r : Tensor = aten::view_as(%x, %y)\n", 1, lambda x: x.view(3, 4)),
    "aten::expand_as": ((1, 4), _ints("s", 3, 4) + "  %f : bool = prim::Constant[value=0]()\n"
                        "  %y : Tensor = aten::expand(%x, %s, %f)\n"
                        "  %r : Tensor = aten::expand_as(%x, %y)\n", 1, lambda x: x.expand(3, 4)),
    "aten::index_select": ((2, 5, 3), _c("d", 1) + "  %r : Tensor = aten::index_select(%x, %d, %i)\n", 1,
                           lambda x: x.index_select(1, torch.tensor(INDEX))),
    "aten::diagonal": ((3, 4), _c("o", 1) + _c("a", 0) + _c("b", 1) + "  %r : Tensor = aten::diagonal(%x, %o, %a, %b)\n",
                       1, lambda x: x.diagonal(1, 0, 1)),
    "aten::tensor_split.sections": ((2, 7), _c("n", 3) + _c("d", 1)
                                    + "  %l : Tensor[] = aten::tensor_split(%x, %n, %d)\n" + _unpack(3), 3,
                                    lambda x: x.tensor_split(3, 1)),
    "aten::tensor_split.indices": ((2, 7), _ints("s", 1, 5) + _c("d", 1)
                                   + "  %l : Tensor[] = aten::tensor_split(%x, %s, %d)\n" + _unpack(3), 3,
                                   lambda x: x.tensor_split([1, 5], 1)),
    "aten::tensor_split.tensor_indices_or_sections": ((2, 5, 3), _c("d", 1)
                                                      + "  %l : Tensor[] = aten::tensor_split(%x, %i, %d)\n"
                                                      + _unpack(5), 5, lambda x: x.tensor_split(torch.tensor(INDEX), 1)),
    "aten::repeat_interleave.self_int": ((2, 3), _c("n", 2) + _c("d", 1) + "  %o : NoneType = prim::Constant()\n"
                                         "  %r : Tensor = aten::repeat_interleave(%x, %n, %d, %o)\n", 1,
                                         lambda x: x.repeat_interleave(2, 1)),
    "aten::repeat_interleave.self_Tensor": ((4, 3), _c("d", 0) + "  %o : NoneType = prim::Constant()\n"
                                            "  %r : Tensor = aten::repeat_interleave(%x, %i, %d, %o)\n", 1,
                                            lambda x: x.repeat_interleave(torch.tensor(INDEX), 0)),
    "aten::index.Tensor": ((2, 5), "  %n : NoneType = prim::Constant()\n  %l : Tensor?[] = prim::ListConstruct(%n, %i)\n"
                           "  %r : Tensor = aten::index(%x, %l)\n", 1, lambda x: x[:, torch.tensor(INDEX)]),
    "aten::unfold": ((3, 5), _c("d", 1) + _c("n", 2) + _c("s", 2) + "  %r : Tensor = aten::unfold(%x, %d, %n, %s)\n",
                     1, lambda x: x.unfold(1, 2, 2)),
    "aten::index_put": ((5, 3), _c("c0", 0) + "  %f : bool = prim::Constant[value=0]()\n"
                        "  %h : float = prim::Constant[value=0.5]()\n  %l : Tensor?[] = prim::ListConstruct(%i)\n"
                        "  %v : Tensor = aten::dequantize(%x)\n  %s : Tensor = aten::index_select(%v, %c0, %i)\n"
                        "  %w : Tensor = aten::mul(%s, %h)\n  %r : Tensor = aten::index_put(%x, %l, %w, %f)\n", 1,
                        lambda x: x.index_put((torch.tensor(INDEX),), x.dequantize()[torch.tensor(INDEX)] * 0.5)),
    "aten::dropout": ((2, 4), "  %p : float = prim::Constant[value=0.5]()\n  %f : bool = prim::Constant[value=0]()\n"
                      "  %r : Tensor = aten::dropout(%x, %p, %f)\n", 1, lambda x: F.dropout(x, 0.5, False)),
}

#: overloads whose quantized kernel is the same function as a checked one's (a list of sizes, as there)
SAME_KERNEL = {"aten::split": "aten::split_with_sizes", "aten::split.sizes": "aten::split_with_sizes",
               "aten::squeeze": "aten::squeeze.dim", "aten::squeeze.dims": "aten::squeeze.dim",
               "aten::reshape_as": "aten::view_as",
               "aten::index.Tensor_hacked_twin": "aten::index.Tensor",
               "aten::pixel_shuffle.out": "aten::pixel_shuffle", "aten::pixel_unshuffle.out": "aten::pixel_unshuffle",
               # in place: the functional kernel writes through it (and test_more_ops checks it in models)
               "aten::index_put_": "aten::index_put"}

# quantized ops srcore has no quantized kernel for: the load fails naming the node, op and dtype
# (torch refuses roll, tril and zeros_like on quantized tensors too)
REFUSED = {
    "aten::roll": ((2, 4), _ints("s", 1) + _ints("d", 1) + "  %r : Tensor = aten::roll(%x, %s, %d)\n"),
    "aten::tril": ((3, 3), _c("k", 0) + "  %r : Tensor = aten::tril(%x, %k)\n"),
    "aten::zeros_like": ((3, 3), "  %n : NoneType = prim::Constant()\n"
                         "  %r : Tensor = aten::zeros_like(%x, %n, %n, %n, %n, %n)\n"),
}


def _check_quantized_nodes(sm):
    from srcore.dispatch import dispatch_dtypes

    for pn in sm.top.nodes:
        if pn.fn is not None and any(d in ("quint8", "qint8", "qint32") for d in dispatch_dtypes(pn.node)):
            rk = sm.resolved_kernels[pn.node]
            assert rk.backend == "quantized_cpu" or ANY_QUANTIZED in rk.kernel.dtypes, (pn.node.kind, rk.kernel)


def _run(sm, *xs):
    out = sm(*xs)
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("op", sorted(RUNS))
def test_a_quantized_data_op_keeps_the_parameters_as_torchs(op):
    shape, body, outs, ref = RUNS[op]
    extra, args = (", %i : Long(4)", (np.array(INDEX, np.int64),)) if "%i" in body else ("", ())
    sm = srcore.StaticModule(srcore.parse_graph(_graph(shape, body, outs, extra)))
    # the op itself, or what the passes made of it (chunk -> slices; clone, detach removed): every node
    # with a quantized value runs on a kernel that takes quantized dtypes
    _check_quantized_nodes(sm)
    x = _q(shape)
    want = ref(x)
    want = [t.dequantize().numpy() for t in (want if isinstance(want, (tuple, list)) else (want,))]
    got = _run(sm, x, *args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == np.float32
        np.testing.assert_array_equal(g, w)   # data movement: exact


@pytest.mark.parametrize("op", sorted(REFUSED))
def test_a_quantized_op_without_a_quantized_kernel_fails_the_load_by_name(op):
    shape, body = REFUSED[op]
    text = _graph(shape, body)
    with pytest.raises(srcore.UnsupportedOpError) as err:
        srcore.StaticModule(srcore.parse_graph(text))
    msg = str(err.value)
    (miss,) = err.value.missing
    assert miss.op.rstrip(".") == op and "quint8" in miss.dtypes, msg
    assert op.split(".")[0] in msg and "quint8" in msg and "is not a quantized dtype" in msg, msg


def _arg_type(st):
    """The IR type of schema type ``st``, its tensors ``quint8``."""
    from srcore.ir.infer import schema_type_to_ir

    def q(t):
        if isinstance(t, TensorType):
            return TensorType("quint8", (2, 3))
        if isinstance(t, (ListType, OptionalType)):
            return type(t)(q(t.elem))
        return t

    return q(schema_type_to_ir(st))


def _takes_tensors(schema):
    return any("Tensor" in str(a.type) for a in schema.arguments)


def _star_ops():
    table = get_plugin_manager().kernel_table
    ops = sorted({k.op for k in table if k.backend == "cpu" and "*" in k.dtypes and not k.is_wildcard})
    return table, ops


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_no_cpu_star_kernel_runs_a_quantized_node_unless_it_takes_quantized():
    """Every op cpu registers with ``"*"``, on a node whose tensors are ``quint8``: a quantized_cpu kernel
    checked against torch above, a cpu kernel listing ``"quantized"`` (it never reads elements), or a
    load-time ``UnsupportedOpError`` naming the op and the dtype."""
    table, ops = _star_ops()
    schemas = table.schemas
    checked = refused = structural = 0
    for op in ops:
        schema = schemas.get(op) if hasattr(schemas, "get") else None
        if schema is None or not _takes_tensors(schema) or schema.is_out:
            continue
        g = Graph()
        try:
            inputs = [g.add_input(_arg_type(a.type), a.name) for a in schema.arguments]
        except Exception:   # noqa: BLE001 - an argument type a graph input cannot have
            continue
        node = g.insert(schema.qualified_name.split(".")[0], inputs, [_arg_type(r.type) for r in schema.returns])
        node.schema = schema
        for o in node.outputs:
            g.register_output(o)
        rk = resolve_node(node, table, ("quantized_cpu", "cpu"))
        if rk is None:
            with pytest.raises(srcore.UnsupportedOpError, match="quint8"):
                resolve_graph(g, table, ("quantized_cpu", "cpu"))
            refused += 1
        elif rk.backend == "quantized_cpu":
            assert SAME_KERNEL.get(op, op) in RUNS, f"{op}: a quantized kernel no test here checks against torch"
            checked += 1
        else:
            assert ANY_QUANTIZED in rk.kernel.dtypes, (op, rk.kernel)
            structural += 1
    assert checked >= 15 and refused >= 50 and structural >= 10, (checked, refused, structural)


# -- models -----------------------------------------------------------------------------------------------
class _Moves(nn.Module):
    """Data movement between quantized convs: flip, chunk, cat, pixel_shuffle, repeat, narrow, stack, size."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(4, 8, 1)

    def forward(self, x):
        y = self.a(x)
        p, q = torch.chunk(y, 2, dim=1)
        z = torch.cat([torch.flip(p, [3]), q.narrow(1, 1, 2), q[:, :2]], dim=1)   # 8 channels
        u = F.pixel_shuffle(z, 2)                                                # (N, 2, 2H, 2W)
        w = self.b(u.repeat(1, 2, 1, 1))
        return w.flatten(1).size(1), torch.stack([w[:, 0], w[:, 3]], 1).reshape(w.size(0), -1)


def _eager_model(inner=None):
    import torch.ao.quantization as tq

    class Eager(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant, self.m = tq.QuantStub(), tq.DeQuantStub(), inner or _Moves()

        def forward(self, x):
            n, r = self.m(self.quant(x))
            return n, self.dequant(r)

    net = Eager().eval()
    net.qconfig = tq.get_default_qconfig("fbgemm")
    tq.prepare(net, inplace=True)
    for s in range(3):
        net(torch.randn(2, 3, 5, 6, generator=torch.Generator().manual_seed(s)))
    tq.convert(net, inplace=True)
    return net


def _fx_model():
    import torch.ao.quantization as tq
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    x = torch.randn(2, 3, 5, 6)
    prepared = prepare_fx(_Moves().eval(), tq.get_default_qconfig_mapping("fbgemm"), (x,))
    for s in range(3):
        prepared(torch.randn(2, 3, 5, 6, generator=torch.Generator().manual_seed(s)))
    return convert_fx(prepared)


@pytest.mark.parametrize("workflow", ["eager", "fx", "eager-dynamic"])
def test_quantized_models_moving_data_match_torch(workflow):
    """Bit for bit with torch; with a symbolic batch the sizes and the reshape stay nodes at run time
    (cpu's ``("*", "quantized")`` size of a quantized tensor, quantized_cpu's reshape)."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = _fx_model() if workflow == "fx" else _eager_model()
        x = torch.randn(2, 3, 5, 6, generator=torch.Generator().manual_seed(9))
        dyn = {"x": {0: "batch"}} if workflow.endswith("dynamic") else None
        sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(net), (x,), dynamic_dims=dyn))
        if dyn:
            x = torch.randn(3, 3, 5, 6, generator=torch.Generator().manual_seed(9))
            ran = {pn.node.kind for pn in sm.top.nodes if pn.fn is not None}
            assert {"aten::size", "aten::reshape"} <= ran, ran
        with torch.no_grad():
            n_want, want = net(x)
    # (FX leaves flip in float: torch dequantizes before it; eager runs it on the quantized tensor)
    moved = {pn.node.kind for pn in sm.top.nodes if pn.fn is not None and pn.fn.backend == "quantized_cpu"}
    assert {"aten::cat", "aten::pixel_shuffle", "aten::repeat", "aten::stack"} <= moved, moved
    assert workflow == "fx" or "aten::flip" in moved, moved
    _check_quantized_nodes(sm)
    n_got, got = sm(x.numpy())
    assert int(n_got) == n_want
    assert got.dtype == np.float32 and got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got, want.dequantize().numpy() if want.is_quantized else want.numpy())


class _Topk(nn.Module):
    """``argsort`` of a quantized conv's output (torch sorts): refused by srcore until the quantized zoo's
    session, which gave it a kernel (the example of a refusal below is ``roll``)."""

    def __init__(self, op="argsort"):
        super().__init__()
        self.c, self.op = nn.Conv2d(3, 4, 1), op

    def forward(self, x):
        y = self.c(x)
        if self.op == "argsort":
            return int(torch.argsort(y, 1)[0, 0, 0, 0]), y
        return 0, torch.roll(y, 1, 1)


def test_a_quantized_model_with_argsort_runs_as_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = _eager_model(_Topk())
        x = torch.randn(1, 3, 4, 4)
        want = net(x)
        sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(net), (x,)))
    got = sm(x.numpy())
    assert got[0] == want[0]
    np.testing.assert_array_equal(got[1], want[1].numpy())


def test_a_quantized_model_with_an_op_srcore_cannot_run_quantized_fails_the_load_by_name():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = _eager_model(_Topk("roll"))     # torch refuses roll of a quantized tensor too, when it runs
        x = torch.randn(1, 3, 4, 4)
        model = srcore.from_torchscript(torch.jit.script(net), (x,))
    with pytest.raises(srcore.UnsupportedOpError) as err:
        srcore.StaticModule(model)
    (miss,) = err.value.missing
    assert miss.op == "aten::roll" and miss.dtypes == ("quint8",), str(err.value)
    assert "is not a quantized dtype" in str(err.value)


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_the_data_kernels_refuse_what_torch_refuses_by_name():
    from srcore_quantized.kernels import shape as K

    x = srcore.QuantizedArray(np.arange(6, dtype=np.uint8).reshape(2, 3), "quint8", srcore.QParams(0.5, 3))
    with pytest.raises(srcore.KernelError, match="index_select: index out of range"):
        K.index_select_out(x, 1, np.array([-1]))
    with pytest.raises(srcore.KernelError, match="expand: -1 is not allowed for a new leading dim"):
        K.expand(x, [-1, 2, 3])
    with pytest.raises(srcore.KernelError, match="split_with_sizes: split sizes \\[1, 1\\] do not add up"):
        K.split(x, [1, 1], 1)
    with pytest.raises(srcore.KernelError, match="narrow: start \\(2\\) \\+ length \\(2\\) exceeds"):
        K.narrow(x, 1, 2, 2)
    per_channel = srcore.QuantizedArray(np.zeros((2, 3), np.int8), "qint8", srcore.QParams((0.1, 0.2), (0, 0), axis=0))
    with pytest.raises(srcore.KernelError, match="aten::flip: the input is quantized per channel"):
        K.flip_out(per_channel, [0])
    # views keep the parameters and share the integers
    (a, b) = K.chunk(x, 2, 1)
    assert a.qparams == x.qparams and np.shares_memory(a, x) and a.shape == (2, 2) and b.shape == (2, 1)
