"""from_torchscript: every bench model converts; the IR re-parses; params, specs and (through a tiny
reference interpreter that runs the srcore graph with torch ops by name) semantics match torch."""
from __future__ import annotations

import math
import os
from typing import Optional

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402
from srcore.ir import parse_graph, print_graph  # noqa: E402
from srcore.ir.verify import verify  # noqa: E402
from srcore.ir.types import DEVICE  # noqa: E402

from benchmarks import models as M  # noqa: E402  (the project's copy of the public bench set)

BENCH = M.__file__
pytestmark = pytest.mark.torch
_BUILT: dict = {}


def built(name):
    if name not in _BUILT:
        _BUILT[name] = M.MODELS[name][0]()
    return _BUILT[name]


# --- a reference interpreter: srcore graph -> torch ops called by name ----------------------------------

def _op(node):
    ns, name = node.kind.split("::")
    packet = getattr(getattr(torch.ops, ns), name)
    if node.schema is not None:
        return getattr(packet, node.schema.overload_name or "default")
    return packet  # let torch pick the overload, as TorchScript would


#: TorchScript builtins over generic types (``t[]``, ``Any``) that torch.ops cannot take from Python
PY_OPS = {
    "aten::len": len, "aten::__getitem__": lambda a, i: a[i], "aten::append": lambda a, x: a.append(x) or a,
    "aten::__is__": lambda a, b: a is b, "aten::__isnot__": lambda a, b: a is not b,
    "aten::__not__": lambda a: not a, "aten::__contains__": lambda a, x: x in a,
    "aten::format": lambda f, *a: f.format(*a), "aten::list": list,
}


def _call(n, args):
    """Call the op: positional arguments positionally, keyword-only ones (``*, alpha``) by name."""
    if n.kind in PY_OPS:
        return PY_OPS[n.kind](*args)
    op = _op(n)
    if n.schema is None:
        return op(*args)
    npos = len(n.schema.positional)
    kw = {a.name: v for a, v in zip(n.schema.kwarg_only, args[npos:])}
    return op(*args[:npos], **kw)


def run_graph(graph, *inputs):
    env = {id(v): x for v, x in zip(graph.inputs, inputs)}
    outs = _run_block(graph.block, env)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _run_block(block, env):
    for n in block.nodes:
        _run_node(n, env)
    return [env[id(v)] for v in block.outputs]


def _run_node(n, env):
    args = [env[id(v)] for v in n.inputs]
    k = n.kind
    if k == "prim::Constant":
        v = n.attrs.get("value")
        if isinstance(v, np.ndarray):
            v = torch.from_numpy(np.array(v))  # a writable copy of the (possibly read-only, mapped) param
        elif n.output.type == DEVICE:
            v = torch.device(v)
        outs = [v]
    elif k == "prim::If":
        outs = _run_block(n.blocks[0 if args[0] else 1], env)
    elif k == "prim::Loop":
        trips, cond, carried = args[0], args[1], args[2:]
        body, i = n.blocks[0], 0
        while i < trips and cond:
            env[id(body.inputs[0])] = i
            for bi, c in zip(body.inputs[1:], carried):
                env[id(bi)] = c
            cond, *carried = _run_block(body, env)
            i += 1
        outs = carried
    elif k == "prim::ListConstruct":
        outs = [list(args)]
    elif k == "prim::TupleConstruct":
        outs = [tuple(args)]
    elif k in ("prim::ListUnpack", "prim::TupleUnpack"):
        outs = list(args[0])
    elif k == "prim::TupleIndex":
        outs = [args[0][args[1]]]
    elif k == "prim::RaiseException":
        raise RuntimeError(args[0])
    elif k == "prim::Uninitialized":
        outs = [None]
    else:
        r = _call(n, args)
        outs = list(r) if len(n.outputs) > 1 else [r]
    for o, v in zip(n.outputs, outs):
        env[id(o)] = v


def assert_close(got, want, tol=1e-5):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g_, w in zip(got, want):
            assert_close(g_, w, tol)
        return
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def check_params(model, module):
    """Every param named after a module attribute equals it bit for bit."""
    sd = {k: v for k, v in module.state_dict().items()}
    named = [k for k in model.params if not k.startswith("_tensor_constant")]
    for k in named:
        if k in sd:
            np.testing.assert_array_equal(model.params[k], sd[k].numpy())
    return named


def check_ir(model):
    verify(model.graph)  # SSA, def-before-use, block arity
    text = print_graph(model.graph)
    g2 = parse_graph(text, params=model.params)
    assert print_graph(g2) == text
    for n in model.graph.all_nodes():
        assert n.kind not in ("prim::GetAttr", "prim::CallMethod", "prim::PythonOp")


# --- tests ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["mlp_tiny", "elementwise_chain", "control_flow", "resnet_small",
                                  "transformer_block", "transformer_block_explicit", "mlp_wide"])
def test_bench_model_converts_and_matches_torch(name):
    module, inputs = built(name)
    model = srcore.from_torchscript(module, inputs)
    check_ir(model)
    assert model.input_specs == tuple(srcore.InputSpec(f"x", "float32", tuple(x.shape)) for x in inputs)
    assert [v.name for v in model.graph.inputs] == ["x"]
    assert model.output_names == ("output",)
    named = check_params(model, module)
    # names not in the state dict come from freezing's folds (conv-bn: "...weight_fused_bn")
    assert all(k in module.state_dict() or "fused" in k for k in named)
    if name in ("mlp_tiny", "control_flow"):  # (freezing pools equal tensors, e.g. LayerNorm's ones)
        assert sorted(named) == sorted(module.state_dict())
    with torch.no_grad():
        want = module(*inputs)
        got = run_graph(model.graph, *inputs)
    assert_close(got, want, 1e-4)


def test_control_flow_blocks_and_both_branches():
    module, _ = built("control_flow")
    model = srcore.from_torchscript(module)
    kinds = [n.kind for n in model.graph.all_nodes()]
    assert "prim::Loop" in kinds and "prim::If" in kinds
    loop = next(n for n in model.graph.nodes if n.kind == "prim::Loop")
    assert len(loop.blocks) == 1 and len(loop.blocks[0].inputs) == 2  # (iteration, carried x)
    iff = next(n for n in model.graph.all_nodes() if n.kind == "prim::If")
    assert len(iff.blocks) == 2
    if_line = next(i for i, ln in enumerate(open(BENCH), 1) if "if bool(x.sum() > 0):" in ln)
    from srcore.frontends._paths import portable_path

    # stored relative to the sys.path entry that holds the file, never the machine's absolute path
    assert iff.source is not None and iff.source.file == portable_path(BENCH) and iff.source.line == if_line
    assert not os.path.isabs(iff.source.file) and BENCH.endswith(iff.source.file)
    assert iff.source.col == 12  # `if` in `            if bool(x.sum() > 0):`
    for x in (torch.full((1, 64), 0.3), torch.full((1, 64), -0.3), torch.randn(3, 64)):
        with torch.no_grad():
            assert_close(run_graph(model.graph, x), module(x))
    # no example inputs: specs come from the (unknown) graph input types
    assert model.input_specs == (srcore.InputSpec("x", None, None),)


def test_constants_of_every_kind():
    class K(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("steps", torch.arange(3, dtype=torch.int64))
            self.register_buffer("mask", torch.tensor([True, False, True]))

        def forward(self, x, n: int):
            d = x.device
            y = x.to(torch.device("cpu"), torch.float64).to(d) * 2.5
            y = y.reshape([-1, 3]) + self.steps
            y = torch.where(self.mask, y, torch.zeros_like(y))
            if n > 1:
                y = y.sum(dim=[0], keepdim=False)
            else:
                y = y.sum(dim=[1], keepdim=False)
            y = torch.nn.functional.gelu(y, approximate="tanh")
            return y, n + 1, None

    m = K().eval()
    model = srcore.from_torchscript(m)
    check_ir(model)
    vals = {type(n.attrs.get("value")) for n in model.graph.nodes if n.kind == "prim::Constant"}
    assert {int, float, bool, str, list, np.ndarray} <= vals, vals
    assert any(n.output.type == DEVICE and n.attrs.get("value") == "cpu" for n in model.graph.nodes
               if n.kind == "prim::Constant")
    assert any(n.kind == "prim::Constant" and not n.attrs and n.output.type == srcore.ir.NONE
               for n in model.graph.nodes)
    assert model.params["steps"].dtype == np.int64 and model.params["mask"].dtype == np.bool_
    # `n: int` is a graph input typed int, without an InputSpec (specs describe tensors)
    assert [s.name for s in model.input_specs] == ["x"] and str(model.graph.inputs[1].type) == "int"
    # a returned tuple becomes the graph's outputs
    assert model.output_names == ("output0", "output1", "output2") and len(model.graph.outputs) == 3
    assert not any(n.kind == "prim::TupleConstruct" for n in model.graph.nodes)
    x = torch.randn(2, 3)
    for n in (1, 2):
        assert_close(run_graph(model.graph, x, n), m(x, n))


def test_saved_file_traced_fallback_and_dynamic_dims(tmp_path):
    module, inputs = built("mlp_tiny")
    p = tmp_path / "m.pt"
    torch.jit.save(torch.jit.script(module), str(p))
    model = srcore.from_torchscript(str(p), inputs, dynamic_dims={"x": {0: "batch"}})
    assert model.input_specs == (srcore.InputSpec("x", "float32", ("batch", 64)),)
    assert str(model.graph.inputs[0].type) == "Float(batch, 64)"
    check_params(model, module)
    x = torch.randn(5, 64)
    assert_close(run_graph(model.graph, x), module(x))

    class NotScriptable(torch.nn.Module):  # **kwargs cannot be scripted; tracing works
        def forward(self, x, **kw):
            return torch.relu(x) * 2

    m2 = srcore.from_torchscript(NotScriptable(), (torch.randn(2, 2),))
    assert m2.input_specs == (srcore.InputSpec("x", "float32", (2, 2)),)
    x = torch.randn(2, 2)
    assert_close(run_graph(m2.graph, x), torch.relu(x) * 2)
    with pytest.raises(srcore.ConversionError, match="no example_inputs"):
        srcore.from_torchscript(NotScriptable())
    with pytest.raises(srcore.ConversionError, match="not a loadable TorchScript file"):
        srcore.from_torchscript(str(tmp_path / "missing.pt"))


class _Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_every_unsupported_node_is_listed_in_one_error():
    class Py(torch.nn.Module):
        def forward(self, x):
            return _Twice.apply(torch.relu(_Twice.apply(x)))

    with pytest.raises(srcore.ConversionError) as ei:
        srcore.from_torchscript(torch.jit.trace(Py(), (torch.randn(2),)))
    msg = str(ei.value)
    assert "2 unsupported construct(s)" in msg and msg.count("prim::PythonOp") == 2


def test_round_trip_through_srm(tmp_path):
    module, inputs = built("control_flow")
    model = srcore.from_torchscript(module, inputs)
    srcore.save(model, tmp_path / "cf.srm")
    loaded = srcore.load(tmp_path / "cf.srm", verify="full")
    assert loaded.input_specs == model.input_specs
    assert print_graph(loaded.graph) == print_graph(model.graph)
    with torch.no_grad():
        assert_close(run_graph(loaded.graph, *inputs), module(*inputs))


def test_cli_convert_pt_and_pt2(tmp_path, capsys):
    from srcore.cli import main

    module, inputs = built("mlp_tiny")
    pt = tmp_path / "mlp.pt"
    torch.jit.save(torch.jit.script(module), str(pt))
    assert main(["convert", str(pt), "--input", "x=float32:1,64", "--dynamic", "x:0=batch"]) == 0
    assert "wrote" in capsys.readouterr().out
    model = srcore.load(tmp_path / "mlp.srm")
    assert model.input_specs == (srcore.InputSpec("x", "float32", ("batch", 64)),)
    check_params(model, module)
    x = torch.randn(3, 64)
    assert_close(run_graph(model.graph, x), module(x))

    ep = torch.export.export(module, inputs)
    torch.export.save(ep, str(tmp_path / "mlp.pt2"))
    out = tmp_path / "other.srm"
    assert main(["convert", str(tmp_path / "mlp.pt2"), "-o", str(out), "--format", "json"]) == 0
    import json
    summary = json.loads(capsys.readouterr().out)
    assert summary["output"] == str(out) and summary["params"] == 6
    assert summary["inputs"] == [{"name": "x", "dtype": "float32", "shape": [1, 64]}]
    assert_close(run_graph(srcore.load(out).graph, inputs[0]), module(*inputs))

    # errors: exit 1 (bad input) or 2 (a malformed flag) with the culprit on stderr
    (tmp_path / "junk.pt").write_bytes(b"not a model")
    assert main(["convert", str(tmp_path / "junk.pt")]) == 1
    assert "junk.pt" in capsys.readouterr().err
    assert main(["convert", str(tmp_path / "model.onnx")]) == 1
    assert main(["convert", str(pt), "--dynamic", "bad"]) == 2  # a malformed flag is a usage error
    assert main(["convert", str(pt), "--input", "x=float99:1"]) == 2
    assert "float99" in capsys.readouterr().err
    assert main(["convert", str(pt), "--dynamic", "x:0=batch"]) == 1  # rank unknown without --input
    assert "rank is unknown" in capsys.readouterr().err


@pytest.mark.parametrize("name, frontend", [("control_flow", "ts"), ("mlp_tiny", "export"),
                                            ("transformer_block_explicit", "ts")])
def test_end_to_end_through_srm_and_static_module(tmp_path, name, frontend):
    """The whole path: torch module -> frontend -> .srm -> load (mapped params) -> StaticModule -> numpy."""
    module, inputs = built(name)
    conv = srcore.from_torchscript if frontend == "ts" else srcore.from_torch
    srcore.save(conv(module, inputs), tmp_path / "m.srm")
    sm = srcore.StaticModule(srcore.load(tmp_path / "m.srm"))
    xs = [inputs[0]] + ([-inputs[0].abs(), inputs[0].abs()] if name == "control_flow" else [])
    for x in xs:
        with torch.no_grad():
            want = module(x).numpy()
        np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=1e-5)


def _helper(x, k: int):
    return torch.relu(x) * k


def _scriptable_fn(x, n: int):
    y = x
    for i in range(n):
        y = _helper(y, i + 1) - 0.5
    return y


def test_functions_script_or_trace():
    model = srcore.from_torchscript(_scriptable_fn, (torch.randn(3), 2))
    assert "prim::CallFunction" not in model.required_ops() and "prim::Loop" in model.required_ops()
    assert [s.name for s in model.input_specs] == ["x"] and [v.name for v in model.graph.inputs] == ["x", "n"]
    x = torch.randn(3)
    assert_close(run_graph(model.graph, x, 3), _scriptable_fn(x, 3))
    traced = srcore.from_torchscript(lambda x, **kw: torch.tanh(x) + 1, (torch.randn(2),))
    assert traced.input_specs == (srcore.InputSpec("x", "float32", (2,)),)
    assert_close(run_graph(traced.graph, x[:2]), torch.tanh(x[:2]) + 1)


def test_a_module_with_an_overloaded_forward_gets_a_conversion_error():
    """nn.LSTM's scripted forward is two overloads: a ConversionError that says so and how to wrap it."""
    with pytest.raises(srcore.ConversionError, match=r"overloaded \(forward__0, forward__1\).*wrap it"):
        srcore.from_torchscript(torch.nn.LSTM(4, 3))


def test_example_inputs_count_is_checked_and_numpy_examples_fix_the_specs():
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 2).eval()
    x = torch.randn(3, 4)
    with pytest.raises(srcore.ConversionError, match=r"2 example inputs for a model that takes 1 \(input\)"):
        srcore.from_torchscript(torch.jit.script(m), (x, x))
    model = srcore.from_torchscript(torch.jit.script(m), (x.numpy(),))
    assert [(s.name, s.dtype, s.shape) for s in model.input_specs] == [("input", "float32", (3, 4))]
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(srcore.StaticModule(model)(x.numpy()), want, rtol=1e-6, atol=1e-6)


class _OptionalMask(torch.nn.Module):
    def forward(self, x, mask: Optional[torch.Tensor] = None):
        if mask is not None:
            x = x.masked_fill(~mask, 0.0)
        return x * 2.0


def test_optional_tensor_input_given_a_tensor_or_none(tmp_path):
    """``mask: Optional[Tensor] = None`` with a tensor example is a tensor input (it was a spec the
    graph's Optional input did not match: loading the saved model failed with "model input specs
    do not match"); a None example keeps it optional, and the StaticModule takes None or a tensor."""
    m = _OptionalMask()
    x, mask = torch.randn(3, 4), torch.rand(3, 4) > 0.5
    model = srcore.from_torchscript(torch.jit.script(m), (x, mask), dynamic_dims={"x": {0: "b"}, "mask": {0: "b"}})
    srcore.save(model, tmp_path / "m.srm")
    model = srcore.load(tmp_path / "m.srm")
    assert [s.name for s in model.input_specs] == ["x", "mask"] and model.input_specs[1].dtype == "bool"
    sm = srcore.StaticModule(model)
    for b in (3, 5):
        x, mask = torch.randn(b, 4), torch.rand(b, 4) > 0.5
        np.testing.assert_array_equal(sm(x.numpy(), mask.numpy()), m(x, mask).numpy())
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(m), (x, None)))
    np.testing.assert_array_equal(sm(x.numpy(), None), m(x).numpy())
    np.testing.assert_array_equal(sm(x.numpy(), mask.numpy()), m(x, mask).numpy())


class _NoGrad(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            y = self.lin(x).relu()
        return y * 2 + x


def test_no_grad_block_keeps_its_body():
    """``with torch.no_grad():`` scripts to prim::CreateObject/SetAttr/Enter/Exit on a grad_mode
    object (a ConversionError listing all four before); those go, the body stays. Other objects'
    SetAttr/Enter stay unsupported."""
    m, x = _NoGrad().eval(), torch.randn(3, 4)
    model = srcore.from_torchscript(torch.jit.script(m), (x,))
    kinds = [n.kind for n in model.graph.all_nodes()]
    assert not {"prim::CreateObject", "prim::SetAttr", "prim::Enter", "prim::Exit"} & set(kinds)
    with torch.no_grad():
        np.testing.assert_allclose(srcore.StaticModule(model)(x.numpy()), m(x).numpy(), rtol=1e-5, atol=1e-6)


class _BufferIndex(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("li", torch.tensor([1, 2, 2]))
        self.register_buffer("lj", torch.tensor([0, 0, 1]))

    def forward(self, z):
        return z[:, self.li, self.lj] * 2.0


def test_index_with_buffer_tensors_and_none():
    """``z[:, buf_a, buf_b]`` freezes into ``aten::index(z, [None, buf_a, buf_b])`` with the list a
    constant ``Tensor?[]``: a ConversionError ("has no srcore equivalent") before (DLRM's pairwise
    interactions); now a parameter per tensor and a None constant in a prim::ListConstruct."""
    m, z = _BufferIndex(), torch.randn(2, 3, 3)
    model = srcore.from_torchscript(torch.jit.script(m), (z,), dynamic_dims={"z": {0: "b"}})
    sm = srcore.StaticModule(model)
    for b in (2, 5):
        z = torch.randn(b, 3, 3)
        np.testing.assert_array_equal(sm(z.numpy()), m(z).numpy())
