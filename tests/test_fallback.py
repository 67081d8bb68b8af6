"""The fallback tier: decompositions at load, the torch fallback kernel, model-recorded schemas, the report.

References: torch (the ops' own implementation) and numpy written by hand.
"""
from __future__ import annotations

import types

import numpy as np
import pytest

import srcore
from srcore.ir import Graph, TensorType
from srcore.plugin import Decomposition, OpLibrary, ShapeRule, hookimpl
from srcore.plugin.manager import PluginManager, get_plugin_manager

torch = pytest.importorskip("torch")  # CI installs it (the test extra); the fallback needs it

RNG = np.random.default_rng(3)


def graph_of(text: str):
    return srcore.parse_graph(text)


def load(g, **options):
    return srcore.StaticModule(g, options=srcore.Options(**options) if options else None)


# -- the core's decompositions ---------------------------------------------------------------------------
@pytest.mark.one_pass
def test_every_core_decomposition_parses_and_type_checks():
    registry = get_plugin_manager().registry
    table = registry.kernel_table
    found = 0
    for op, (schema, _) in registry.declared.items():
        if any(table.lookup(op, "cpu", kind) for kind in ("out", "native")) or not op.startswith("aten::"):
            continue
        got = registry.decompositions.graph_for(schema, registry.schemas)  # raises if one does not type-check
        if got is not None:
            graph, rec = got
            assert rec.provider.name == "builtin" and len(graph.outputs) == len(schema.returns)
            found += 1
    assert found >= 200, found  # docs/static-dispatch.md: the .out and in-place overloads, and the table


CASES = [  # (IR text with the op, inputs, torch reference)
    ("graph(%a : Long(4), %b : Long(4)):\n  %r : Tensor = aten::__and__(%a, %b)\n  return (%r)\n",
     lambda: (np.array([1, 2, 3, 12]), np.array([7, 5, 1, 4])), lambda a, b: a & b),
    ("graph(%a : Long(4)):\n  %s : int = prim::Constant[value=6]()\n  %r : Tensor = aten::__xor__(%a, %s)\n"
     "  return (%r)\n", lambda: (np.array([1, 2, 3, 12]),), lambda a: a ^ 6),
    ("graph(%m : Float(3, 4), %n : Float(4, 5)):\n  %dt : int = prim::Constant[value=7]()\n"
     "  %r : Tensor = aten::mm(%m, %n, %dt)\n  return (%r)\n",
     lambda: (RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((4, 5)).astype(np.float32)),
     lambda m, n: torch.mm(m.double(), n.double())),
    ("graph(%x : Float(3, 4)):\n  %two : int = prim::Constant[value=2]()\n  %y : Tensor = aten::mul(%x, %two)\n"
     "  %r : Tensor = aten::round_(%y, %two)\n  return (%r)\n",
     lambda: (RNG.standard_normal((3, 4)).astype(np.float32),), lambda x: torch.round(x * 2, decimals=2)),
    ("graph(%x : Float(3, 4), %y : Float(3, 4)):\n  %o : Tensor = aten::empty_like(%x)\n"
     "  %one : int = prim::Constant[value=1]()\n  %r : Tensor = aten::add(%x, %y, %one, %o)\n  return (%r)\n",
     lambda: (RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((3, 4)).astype(np.float32)),
     lambda x, y: x + y),
    ("graph(%x : Float(3, 4), %v : Float(3), %i : Long(3)):\n  %one : int = prim::Constant[value=1]()\n"
     "  %f : bool = prim::Constant[value=0]()\n"
     "  %a : Tensor, %b : Tensor = aten::max(%x, %one, %f, %v, %i)\n  return (%a, %b)\n",
     lambda: (RNG.standard_normal((3, 4)).astype(np.float32), np.zeros(3, np.float32), np.zeros(3, np.int64)),
     lambda x, v, i: torch.max(x, 1)),
]


@pytest.mark.parametrize("text, inputs, reference", CASES, ids=["__and__", "__xor__.Scalar", "mm.dtype",
                                                                   "round_.decimals", "add.out", "max.dim_max"])
def test_core_decompositions_compute_what_torch_does(text, inputs, reference):
    g = graph_of(text)
    sm = load(g)
    (d, *_) = sm.load_report.decomposed
    assert d.plugin.startswith("srcore ")
    xs = inputs()
    got = sm(*xs)
    ref = reference(*(torch.from_numpy(x.copy()) for x in xs))
    for g, r in zip(got if isinstance(got, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,)):
        np.testing.assert_allclose(g, r.numpy(), rtol=1e-6, atol=1e-6)
        assert g.dtype == r.numpy().dtype
    assert all(r.kind != "fallback" for b in sm.blocks for r in (pn.fn for pn in b.nodes) if r is not None)


def test_an_out_tensor_of_another_shape_is_an_error_not_a_broadcast():
    g = graph_of("graph(%x : Float(3, 4), %y : Float(4), %o : Tensor):\n  %one : int = prim::Constant[value=1]()\n"
                 "  %r : Tensor = aten::add(%x, %y, %one, %o)\n  return (%r, %o)\n")
    sm = load(g)
    x, y = np.ones((3, 4), np.float32), np.arange(4, dtype=np.float32)
    out = np.zeros((3, 4), np.float32)
    r, o = sm(x, y, out)
    np.testing.assert_array_equal(r, x + y) and np.testing.assert_array_equal(o, x + y)
    with pytest.raises(srcore.SrcoreError, match=r"aten::add.out: the out= tensor 'out' has another shape than "
                       r"the result; torch would resize it"):
        sm(x, y, np.zeros(4, np.float32))  # broadcasting x + y into it would be a silent wrong answer


# -- plugin decompositions: order, nesting, bad ones -----------------------------------------------------------
LIB = OpLibrary("dx", schemas=("dx::axpy(Tensor x, Tensor y, float a) -> Tensor", "dx::sq(Tensor x) -> Tensor",
                               "dx::bad(Tensor x) -> Tensor"))
AXPY = """graph(%x : Tensor, %y : Tensor, %a : float):
  %ax : Tensor = aten::mul(%x, %a)
  %s : Tensor = dx::sq(%y)
  %one : int = prim::Constant[value=1]()
  %r : Tensor = aten::add(%ax, %s, %one)
  return (%r)
"""
SQ = "graph(%x : Tensor):\n  %r : Tensor = aten::mul(%x, %x)\n  return (%r)\n"


def dx_plugin(**decomps):
    mod = types.ModuleType("srcore_dx")
    mod.srcore_op_libraries = hookimpl(lambda: iter([LIB]), specname="srcore_op_libraries")
    same = lambda ctx: [ctx.tensor(0, "x")]  # noqa: E731
    mod.srcore_shape_rules = hookimpl(lambda: iter([ShapeRule(("dx::axpy", "dx::sq", "dx::bad"), same)]),
                                      specname="srcore_shape_rules")
    recs = [Decomposition(op, text) for op, text in decomps.items()]
    mod.srcore_decompositions = hookimpl(lambda: iter(recs), specname="srcore_decompositions")
    pm = PluginManager().load()
    pm.register(mod, "dx", dist="srcore-dx", version="0.2")
    return pm


def axpy_graph(op="dx::axpy"):
    g = Graph()
    x = g.add_input(TensorType("float32", (2, 3)), "x")
    y = g.add_input(TensorType("float32", (2, 3)), "y")
    inputs = [x, y, g.insert_constant(3.0)] if op == "dx::axpy" else [x]
    g.register_output(g.insert(op, inputs, [TensorType()]).output)
    return g


def test_decompositions_nest_and_are_reported():
    pm = dx_plugin(**{"dx::axpy": AXPY, "dx::sq": SQ})
    sm = srcore.StaticModule(axpy_graph(), plugin_manager=pm)
    assert [(d.op, d.plugin) for d in sm.load_report.decomposed] == [("dx::axpy", "srcore-dx 0.2"),
                                                                      ("dx::sq", "srcore-dx 0.2")]
    x, y = RNG.standard_normal((2, 3)).astype(np.float32), RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(sm(x, y), 3 * x + y * y, rtol=1e-6)
    assert all(n.kind.startswith(("aten::", "prim::", "srcore::")) for n in sm.graph.nodes)
    (row,) = sm.memory_report(x, y)
    assert row["managed_tensors"] >= 1  # the decomposed body is planned like any core ops


@pytest.mark.one_pass
@pytest.mark.parametrize("text, message", [
    ("graph(%x : Tensor, %y : Tensor):\n  return (%x)\n", r"it takes 2 input\(s\), the op 1"),
    ("graph(%x : Tensor):\n  %n : int = aten::dim(%x)\n  return (%n)\n", r"output %n : int stands for return Tensor"),
    ("graph(%x : Tensor):\n  %r : Tensor = dx::nope(%x)\n  return (%r)\n", r"no op 'dx::nope' is declared"),
    ("graph(%x : Tensor):\n  %r : Tensor = dx::bad(%x)\n  return (%r)\n", r"it calls dx::bad itself"),
    ("graph(%x : Tensor) :\n  %r = \n", r"<decomposition of dx::bad>:2"),
])
def test_a_decomposition_that_does_not_type_check_fails_the_load_naming_plugin_and_op(text, message):
    pm = dx_plugin(**{"dx::bad": text, "dx::sq": SQ})
    with pytest.raises(srcore.PluginError, match=r"plugin dx \(srcore-dx 0.2\): the decomposition of dx::bad does "
                       r"not type-check: (.|\n)*" + message):
        srcore.StaticModule(axpy_graph("dx::bad"), plugin_manager=pm)
    x = RNG.standard_normal((2, 3)).astype(np.float32)  # the plugin's other decompositions still work
    np.testing.assert_allclose(srcore.StaticModule(axpy_graph("dx::sq"), plugin_manager=pm)(x, x), x * x)


@pytest.mark.one_pass
def test_decompositions_for_undeclared_or_taken_ops_are_rejected_one_by_one():
    pm = dx_plugin(**{"dx::sq": SQ, "dx::nope": SQ, "aten::__and__.Tensor": SQ})
    errors = [e for e in (pm.registry and pm.report("dx").errors)]
    assert any("decomposition of undeclared op 'dx::nope'" in e for e in errors), errors
    assert any("decomposition of aten::__and__.Tensor ignored: builtin" in e for e in errors), errors


# -- the torch fallback ---------------------------------------------------------------------------------------------
class Stft(torch.nn.Module):
    def forward(self, x):
        s = torch.stft(x, n_fft=16, hop_length=4, window=torch.hann_window(16), return_complex=True)
        return s.abs() * 2.0


@pytest.fixture(scope="module")
def stft_model():
    x = torch.randn(2, 64)
    return srcore.from_torchscript(Stft(), (x,)), x


def test_an_undeclared_op_converts_saves_and_runs_through_the_torch_fallback(stft_model, tmp_path):
    model, x = stft_model
    srcore.save(model, tmp_path / "stft.srm")
    loaded = srcore.load(tmp_path / "stft.srm")
    assert [str(s.qualified_name) for s in loaded.op_schemas] == ["aten::stft"]  # recorded from torch
    sm = srcore.StaticModule(loaded)
    np.testing.assert_allclose(sm(x.numpy()), Stft()(x).numpy(), rtol=1e-5, atol=1e-5)
    why = {f.op: f.reason for f in sm.load_report.fallbacks}
    assert "an op srcore does not declare; its schema came with the model" in why["aten::stft"]
    assert "takes dtypes (complex64" in why["aten::abs"]  # srcore-cpu's abs has no complex kernel
    # torch's meta kernels typed the fallback's output: the nodes after it are planned
    mul = next(n for n in sm.graph.nodes if n.kind == "aten::mul")
    assert mul.outputs[0].type == TensorType("float32", (2, 9, 17))


@pytest.mark.one_pass
def test_no_fallback_turns_fallbacks_into_load_errors(stft_model):
    model, _ = stft_model
    with pytest.raises(srcore.UnsupportedOpError, match=r"(?s)aten::stft.*fallback kernels are off "
                       r"\(Options\(allow_fallback=False\), --no-fallback\)"):
        srcore.StaticModule(model, options=srcore.Options(allow_fallback=False))


def test_a_dtype_the_numpy_kernel_lacks_falls_back_and_decompositions_come_first():
    g = graph_of("graph(%x : ComplexFloat(5), %a : Long(3), %b : Long(3)):\n  %r : Tensor = aten::sigmoid(%x)\n"
                 "  %c : Tensor = aten::__or__(%a, %b)\n  return (%r, %c)\n")
    sm = load(g)
    assert [f.op for f in sm.load_report.fallbacks] == ["aten::sigmoid"]  # complex64: no numpy sigmoid kernel
    assert [d.op for d in sm.load_report.decomposed] == ["aten::__or__.Tensor"]  # not the fallback
    x = np.array([-1, 0.5j, 2, -3 + 1j, 0], np.complex64)
    r, c = sm(x, np.array([1, 2, 4]), np.array([4, 2, 1]))
    np.testing.assert_allclose(r, 1 / (1 + np.exp(-x.astype(np.complex128))), rtol=1e-6)
    np.testing.assert_array_equal(c, [5, 2, 5])
    assert r.dtype == np.complex64


def test_inspect_dispatch_shows_which_nodes_fell_back_and_why(stft_model, tmp_path, capsys):
    from srcore.cli.main import main

    model, _ = stft_model
    srcore.save(model, tmp_path / "stft.srm")
    assert main(["inspect", str(tmp_path / "stft.srm"), "--dispatch"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "aten::stft" in ln)
    assert line.split()[1:4] == ["aten::stft", "fallback", "cpu"]
    assert "fell back: no out or native kernel for aten::stft on quantized_cpu, cpu" in out  # the default backends
    assert main(["run", str(tmp_path / "stft.srm"), "--no-fallback"]) == 1
    assert "fallback kernels are off" in capsys.readouterr().err


@pytest.mark.one_pass
def test_list_ops_lists_the_fallback_kernel(capsys):
    from srcore.cli.main import main

    assert main(["list-ops", "--kind", "fallback", "--op", "aten::stft*", "--format", "json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out) == []  # not declared: list-ops lists declared ops only
    assert main(["list-ops", "--kind", "fallback", "--op", "aten::cumprod", "--format", "json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert {e["overload"] for e in entries} >= {"", "out"}  # every aten overload: the torch fallback
    assert all([(k["backend"], k["kind"], k["plugin"]) for k in e["kernels"]] == [("cpu", "fallback", "srcore-cpu")]
               for e in entries)


def test_the_torch_fallback_never_takes_quantized_values():
    """A quantized tensor as a plain torch tensor loses its scale and zero point (found as constant folding
    of a PT2E model's weight dequantize through the fallback: logits ~100x off). Loads on cpu alone refuse
    the quantized nodes; constant folding leaves them to quantized_cpu; a call with one is a KernelError."""
    from srcore.plugin import KernelError, QParams, QuantizedArray

    from srcore_cpu import torch_fallback

    q = QuantizedArray.wrap(np.array([[-3, 5], [7, 127]], np.int8), "qint8", QParams(0.5, 0))
    g = Graph()
    w = g.insert_constant(q)
    g.register_output(g.insert("aten::dequantize", [w], [TensorType()]).output)
    with pytest.raises(srcore.UnsupportedOpError, match=r"(?s)aten::dequantize.*kernel for backend quantized_cpu"):
        srcore.StaticModule(g, backends=("cpu",), options=srcore.Options(optimize=False))
    sm = srcore.StaticModule(g)   # folded or run, with the quantized kernel: 0.5 * q
    np.testing.assert_array_equal(sm(), np.array([[-1.5, 2.5], [3.5, 63.5]], np.float32))
    with pytest.raises(KernelError, match="quantized"):
        torch_fallback._to_tensor(q)
