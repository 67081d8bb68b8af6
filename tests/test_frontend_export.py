"""from_torch (torch.export): bench models, cond/while_loop, dynamic shapes, .pt2 files, errors;
semantics checked with the reference interpreter of test_frontend_torchscript."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402
from srcore.ir import parse_graph, print_graph  # noqa: E402
from srcore.ir.verify import verify  # noqa: E402

_spec = importlib.util.spec_from_file_location("_ts_ref", Path(__file__).with_name("test_frontend_torchscript.py"))
ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ref)
run_graph, assert_close, built = ref.run_graph, ref.assert_close, ref.built
pytestmark = pytest.mark.torch


def check_ir(model, module):
    verify(model.graph)  # SSA, def-before-use, block arity
    text = print_graph(model.graph)
    assert print_graph(parse_graph(text, params=model.params)) == text
    sd = module.state_dict()
    for k, a in model.params.items():  # names come from the graph signature: the state-dict keys
        np.testing.assert_array_equal(a, sd[k].numpy())
    for n in model.graph.all_nodes():
        if n.kind.startswith("aten::"):
            assert n.schema is not None and n.schema.qualified_name.startswith(n.kind), n


@pytest.mark.parametrize("name", ["mlp_tiny", "elementwise_chain", "resnet_small", "transformer_block",
                                  "transformer_block_explicit"])
def test_bench_model_converts_and_matches_torch(name):
    module, inputs = built(name)
    model = srcore.from_torch(module, inputs)
    check_ir(model, module)
    assert model.input_specs == (srcore.InputSpec("x", "float32", tuple(inputs[0].shape)),)
    ops = set(model.required_ops())
    # high-level ops are kept (no core-ATen decomposition of linear/conv/norms)
    assert ops & {"aten::linear", "aten::conv2d", "aten::layer_norm", "aten::batch_norm"} or name == "elementwise_chain"
    assert not ops & {"aten::addmm", "aten::convolution", "aten::_native_batch_norm_legit_no_training"}
    if name == "elementwise_chain":  # y * 0.5 picks the Scalar overload, as TorchScript does
        muls = [n for n in model.graph.nodes if n.kind == "aten::mul"]
        assert {n.schema.overload_name for n in muls} == {"Tensor", "Scalar"}
    with torch.no_grad():
        assert_close(run_graph(model.graph, *inputs), module(*inputs), 1e-4)


def test_node_schema_is_the_declared_overload():
    from srcore.plugin.manager import get_plugin_manager

    module, inputs = built("mlp_tiny")
    model = srcore.from_torch(module, inputs)
    declared = get_plugin_manager().registry.declared
    linear = next(n for n in model.graph.nodes if n.kind == "aten::linear")
    assert str(linear.schema) == str(declared["aten::linear"][0])
    assert str(linear.schema) == str(torch.ops.aten.linear.default._schema)


def test_data_dependent_python_if_is_a_conversion_error():
    module, inputs = built("control_flow")  # `if bool(x.sum() > 0)`: export cannot trace it
    with pytest.raises(srcore.ConversionError, match="torch.export failed on ControlFlow"):
        srcore.from_torch(module, inputs)


class CondSplit(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = torch.cond(x.sum() > 0, lambda x: torch.tanh(self.l(x)), lambda x: torch.sigmoid(x) - 0.5, (x,))
        a, b = torch.split(y, 2, dim=1)
        return a * x.shape[0], b


def test_cond_split_and_dynamic_batch(tmp_path):
    from torch.export import Dim

    m = CondSplit().eval()
    model = srcore.from_torch(m, (torch.randn(3, 4),), dynamic_shapes={"x": {0: Dim("batch")}})
    check_ir(model, m)
    assert model.input_specs == (srcore.InputSpec("x", "float32", ("batch", 4)),)
    assert model.output_names == ("output0", "output1")
    iff = next(n for n in model.graph.nodes if n.kind == "prim::If")
    assert len(iff.blocks) == 2 and iff.inputs[0].type == srcore.ir.BOOL
    assert any(n.kind == "prim::ListUnpack" for n in model.graph.nodes)
    for x in (torch.randn(5, 4).abs(), -torch.randn(2, 4).abs()):  # both branches, two batch sizes
        assert_close(run_graph(model.graph, x), m(x))
    # the same through a .pt2 file and through .srm
    ep = torch.export.export(m, (torch.randn(3, 4),), dynamic_shapes={"x": {0: Dim("batch")}})
    torch.export.save(ep, str(tmp_path / "m.pt2"))
    m2 = srcore.from_torch(str(tmp_path / "m.pt2"))
    assert print_graph(m2.graph).count("prim::If") == 1
    srcore.save(m2, tmp_path / "m.srm")
    loaded = srcore.load(tmp_path / "m.srm")
    x = torch.randn(4, 4)
    assert_close(run_graph(loaded.graph, x), m(x))


def test_while_loop_becomes_prim_loop():
    from torch._higher_order_ops.while_loop import while_loop

    class W(torch.nn.Module):
        def forward(self, x):
            return while_loop(lambda i, x: i < 5, lambda i, x: (i + 1, x * 2), (torch.tensor(0), x))

    m = W()
    model = srcore.from_torch(m, (torch.randn(3),))
    loop = next(n for n in model.graph.nodes if n.kind == "prim::Loop")
    assert [str(v.type) for v in loop.blocks[0].inputs] == ["int", "Long()", "Float(3)"]
    assert model.params["lifted_tensor_0"].shape == ()
    x = torch.randn(3)
    assert_close(run_graph(model.graph, x), m(x))


def test_mutation_is_functionalized_and_core_decomposition_is_available():
    class Mut(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(3, 3)

        def forward(self, x):
            y = self.l(x)
            y.add_(1.0)
            return torch.relu(y)

    m = Mut().eval()
    x = torch.randn(2, 3)
    model = srcore.from_torch(m, (x,))
    assert not any(n.kind.endswith("_") for n in model.graph.all_nodes())
    assert_close(run_graph(model.graph, x), m(x))
    core = srcore.from_torch(m, (x,), decompositions="core")
    assert "aten::linear" not in core.required_ops()
    assert_close(run_graph(core.graph, x), m(x))


def test_unsupported_targets_are_listed_together(monkeypatch):
    from srcore.frontends import torch_export

    class Two(torch.nn.Module):
        def forward(self, x):
            return torch.sin(x) + torch.cos(x)

    ep = torch.export.export(Two(), (torch.randn(2),))
    for n in ep.graph.nodes:  # swap the op targets for a Python callable export would never emit
        if n.op == "call_function":
            if n.target in (torch.ops.aten.sin.default, torch.ops.aten.cos.default):
                n.target = np.sin
    with pytest.raises(srcore.ConversionError) as ei:
        torch_export.from_torch(ep)
    msg = str(ei.value)
    assert "2 unsupported construct(s)" in msg and msg.count("is not supported") == 2
    with pytest.raises(srcore.ConversionError, match="needs example_inputs"):
        srcore.from_torch(Two())
    with pytest.raises(srcore.ConversionError, match="not a loadable torch.export file"):
        srcore.from_torch("/nonexistent/file.pt2")


# --- property: random straight-line programs keep their meaning through both frontends -------------------
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

_UNARY = {"relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "neg": torch.neg, "abs": torch.abs,
          "gelu": torch.nn.functional.gelu, "softmax": lambda y: torch.softmax(y, dim=-1),
          "transpose": lambda y: y.transpose(0, 1), "sum_keep": lambda y: y.sum(dim=1, keepdim=True),
          "flatten_view": lambda y: y.reshape(-1).reshape(y.shape), "clamp": lambda y: torch.clamp(y, -0.5, 0.7),
          "layer_norm": lambda y: torch.nn.functional.layer_norm(y, (y.shape[-1],))}
_BINARY = {"add_s": lambda y, x, c: y + c, "mul_s": lambda y, x, c: y * c, "sub_s": lambda y, x, c: y - c,
           "div_s": lambda y, x, c: y / (abs(c) + 1), "add_x": lambda y, x, c: y + x * c,
           "mul_x": lambda y, x, c: y * x, "rsub": lambda y, x, c: c - y, "pow2": lambda y, x, c: y ** 2,
           "where": lambda y, x, c: torch.where(y > c, y, x), "cat_half": lambda y, x, c: torch.cat(
               [y[:, :2], x[:, 2:]], dim=1)}


class _Program(torch.nn.Module):
    def __init__(self, steps):
        super().__init__()
        self.steps = steps
        self.w = torch.nn.Parameter(torch.randn(4, 4) * 0.5)

    def forward(self, x):
        y = x
        for name, c in self.steps:
            if name == "linear":
                y = torch.nn.functional.linear(y, self.w)
            elif name in _UNARY:
                y = _UNARY[name](y)
            else:
                y = _BINARY[name](y, x, c)
            if y.shape != x.shape:  # keep shapes compatible with x for the next binary step
                y = y.expand(x.shape) if y.shape[-1] == 1 else y.transpose(0, 1)
        return y


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.sampled_from(sorted(_UNARY) + sorted(_BINARY) + ["linear"]),
                                st.sampled_from([0.5, -1.25, 2.0, 3])), min_size=1, max_size=6))
def test_random_programs_keep_their_meaning(steps):
    m = _Program(steps).eval()
    x = torch.randn(4, 4)
    with torch.no_grad():
        want = m(x)
        for model in (srcore.from_torch(m, (x,)), srcore.from_torchscript(torch.jit.trace(m, (x,)))):
            verify(model.graph)
            assert_close(run_graph(model.graph, x), want, 1e-5)


class _NoGrad(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            y = self.lin(x).relu()
        return y * 2 + x


def test_no_grad_block_is_inlined():
    """``with torch.no_grad():`` exports as ``wrap_with_set_grad_enabled(False, submod, x)``, which
    was "not supported"; srcore records no gradients, so the body is inlined."""
    m, x = _NoGrad().eval(), torch.randn(3, 4)
    model = srcore.from_torch(m, (x,))
    assert "aten::linear" in [n.kind for n in model.graph.all_nodes()]
    with torch.no_grad():
        np.testing.assert_allclose(srcore.StaticModule(model)(x.numpy()), m(x).numpy(), rtol=1e-5, atol=1e-6)


class _CoreOps(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = torch.nn.GroupNorm(2, 4)

    def forward(self, x, mask):
        y = self.gn(x).flatten(2)                                   # native_group_norm
        ext = (1.0 - mask.to(y.dtype)) * -10000.0                    # NumToTensor(1.0): stays 0-d
        s = y @ y.transpose(1, 2) + ext[:, None, :]
        s = s.masked_fill(s < -5000.0, float("-inf"))                # scalar_tensor
        t = torch.eye(4) + torch.diag(torch.diagonal(s[0]))        # eye (uint8 eq), diagonal
        return torch.softmax(s, -1), t, torch.cdist(y, y)           # _cdist_forward


def test_core_decompositions_of_the_zoo_ops():
    """``decompositions="core"`` turned these into ops srcore lacked (scalar_tensor, diagonal,
    native_group_norm, _cdist_forward, uint8 eq) and folded ``1.0 - mask`` into a 1-d float64
    constant, which broke the dtypes downstream."""
    m = _CoreOps().eval()
    x, mask = torch.randn(2, 4, 2, 2), torch.tensor([[1, 1, 0, 1], [1, 0, 1, 1]])
    model = srcore.from_torch(m, (x, mask), decompositions="core")
    kinds = {n.kind for n in model.graph.all_nodes()}
    assert {"aten::scalar_tensor", "aten::native_group_norm", "aten::_cdist_forward"} <= kinds
    sm = srcore.StaticModule(model)
    with torch.no_grad():
        want = m(x, mask)
    for got, w in zip(sm(x.numpy(), mask.numpy()), want):
        assert got.dtype == w.numpy().dtype and got.shape == tuple(w.shape)
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-4, atol=1e-4)


def test_structured_inputs_are_parsed_once_per_module(monkeypatch):
    """A model exported with a list and a dict argument takes them as torch does on every runtime; the
    metadata's ``input_tree`` JSON is parsed once for the module, not once per runtime (thread)."""
    import json
    import threading

    class Structured(torch.nn.Module):
        def forward(self, xs, d):
            return xs[0] * d["a"] + xs[1]

    xs, d = [torch.randn(2, 3), torch.randn(2, 3)], {"a": torch.randn(2, 3)}
    sm = srcore.StaticModule(srcore.from_torch(Structured(), (xs, d)))
    calls = []
    real = json.loads
    monkeypatch.setattr(json, "loads", lambda *a, **k: calls.append(1) or real(*a, **k))
    want = Structured()(xs, d).numpy()
    outs = []

    def run():
        outs.append(sm([x.numpy() for x in xs], {"a": d["a"].numpy()}))
    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    outs.append(srcore.StaticRuntime(sm)([x.numpy() for x in xs], {"a": d["a"].numpy()}))
    assert len(outs) == 4
    for o in outs:
        np.testing.assert_allclose(o, want, rtol=1e-6)
    assert len(calls) <= 1 and sm.input_tree is sm.runtime()._input_tree is not None
