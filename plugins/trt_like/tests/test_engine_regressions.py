"""Regression tests of trt_like engine bugs the conformance sweep (test_conformance.py) found:
each graph here once crashed, fell back for no reason, or gave a wrong answer."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import srcore
from srcore.ir.parser import parse_graph

TRT = ("trt_like", "cpu")


def module(text: str, params=None, **options) -> srcore.StaticModule:
    opts = srcore.Options(backends=TRT, engine_min_block_size=1, optimize=False, **options)
    return srcore.StaticModule(parse_graph(text, params=params), options=opts)


def engine_ops(sm) -> list[str]:
    return [op for s in sm.partition.engines for op in s.ops]


def test_add_without_alpha_falls_back_to_the_per_node_kernel():
    """``aten::add(%x, %y)`` leaves ``alpha`` out; trt_like's per-node add matcher asked for it and
    the node info raised KeyError (a matcher sees an omitted argument's schema default now)."""
    sm = module("""graph(%x : Float(2, 3), %y : Float(3)):
  %r : Tensor = aten::add(%x, %y)
  return (%r)
""", engine_fallback_ops=("aten::add",))
    x, y = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(3, np.float32)
    np.testing.assert_array_equal(sm(x, y), x + y)


@pytest.mark.parametrize("text, shapes", [
    # a broadcast add with a zero-size dim: the generated kernel had an empty loop body (IndentationError)
    ("""graph(%x : Float(2, 0), %y : Float(1, 0)):
  %r : Tensor = aten::mul(%x, %y)
  return (%r)
""", [(2, 0), (1, 0)]),
    # softmax over rows of nothing / of no rows: the compiled and numpy kernels raised at run time
    ("""graph(%x : Float(3, 0)):
  %d : int = prim::Constant[value=1]()
  %n : NoneType = prim::Constant()
  %r : Tensor = aten::softmax(%x, %d, %n)
  return (%r)
""", [(3, 0)]),
    ("""graph(%x : Float(0, 3)):
  %d : int = prim::Constant[value=0]()
  %n : NoneType = prim::Constant()
  %r : Tensor = aten::log_softmax(%x, %d, %n)
  return (%r)
""", [(0, 3)]),
    # an empty batch through a conv (its tactics refuse empty shapes)
    ("""graph(%x : Float(0, 2, 4, 4)):
  %w : Float(3, 2, 3, 3) = prim::Constant[param="w"]()
  %n : NoneType = prim::Constant()
  %s : int[] = prim::Constant[value=[1, 1]]()
  %g : int = prim::Constant[value=1]()
  %r : Tensor = aten::conv2d(%x, %w, %n, %s, %s, %s, %g)
  return (%r)
""", [(0, 2, 4, 4)]),
])
def test_layers_with_empty_outputs_run(text, shapes):
    sm = module(text, params={"w": np.ones((3, 2, 3, 3), np.float32)})
    assert engine_ops(sm), sm.partition.format()
    out = sm(*[np.ones(s, np.float32) for s in shapes])
    assert out.size == 0


def test_a_gemm_over_an_empty_sum_is_zero():
    """``(3, 0) @ (0, 5)`` by a constant: the builder divided by K = 0; the result is zeros."""
    sm = module("""graph(%x : Float(3, 0)):
  %w : Float(0, 5) = prim::Constant[param="w"]()
  %r : Tensor = aten::matmul(%x, %w)
  return (%r)
""", params={"w": np.ones((0, 5), np.float32)})
    assert engine_ops(sm) == ["aten::matmul"], sm.partition.format()
    np.testing.assert_array_equal(sm(np.ones((3, 0), np.float32)), np.zeros((3, 5), np.float32))


@pytest.mark.parametrize("node, want", [
    ("aten::softmax(%x, %d, %n)", lambda x: torch.softmax(x, 0)),
    ("aten::log_softmax(%x, %d, %n)", lambda x: torch.log_softmax(x, -1)),
    ("aten::transpose(%x, %d, %d)", lambda x: x.transpose(0, -1)),
])
def test_0d_inputs_go_into_engines(node, want):
    """0-d tensors with dim 0 / -1: the converters took ``dim % 0`` (ZeroDivisionError: fell back;
    transpose's shape rule raised ShapeError, so the model did not load)."""
    sm = module(f"""graph(%x : Float()):
  %d : int = prim::Constant[value=-1]()
  %n : NoneType = prim::Constant()
  %r : Tensor = {node}
  return (%r)
""")
    assert engine_ops(sm), sm.partition.format()
    for v in (2.5, np.inf, np.nan):
        x = np.array(v, np.float32)
        np.testing.assert_array_equal(sm(x), want(torch.from_numpy(x)).numpy())


def test_0d_mean():
    sm = module("""graph(%x : Float()):
  %d : int[] = prim::Constant[value=[0]]()
  %k : bool = prim::Constant[value=0]()
  %n : NoneType = prim::Constant()
  %r : Tensor = aten::mean(%x, %d, %k, %n)
  return (%r)
""")
    assert engine_ops(sm) == ["aten::mean"], sm.partition.format()
    np.testing.assert_array_equal(sm(np.array(-3.5, np.float32)), np.array(-3.5, np.float32))


ADDMM = """graph(%x : Float(3, 4)):
  %b : Float({bias}) = prim::Constant[param="b"]()
  %w : Float(4, 5) = prim::Constant[param="w"]()
  %beta : float = prim::Constant[value={beta}]()
  %alpha : float = prim::Constant[value={alpha}]()
  %r : Tensor = aten::addmm(%b, %x, %w, %beta, %alpha)
  return (%r)
"""


@pytest.mark.parametrize("bias, beta", [((3, 5), 1.0), ((1, 5), 0.5), ((3, 1), 1.0), ((5,), 0.0)])
def test_addmm_bias_broadcasts_and_beta_0_ignores_it(bias, beta):
    """addmm's ``self`` is any shape broadcasting to the output: a (M, N) or (1, N) one failed the
    builder (np.broadcast_to to (N,)); with beta = 0 torch ignores it, NaNs included (we gave NaN)."""
    rng = np.random.default_rng(0)
    b = rng.standard_normal(bias).astype(np.float32)
    b.reshape(-1)[0] = np.nan if beta == 0 else b.reshape(-1)[0]
    w = rng.standard_normal((4, 5)).astype(np.float32)
    sm = module(ADDMM.format(bias=", ".join(map(str, bias)), beta=beta, alpha=2.0), params={"b": b, "w": w})
    assert engine_ops(sm) == ["aten::addmm"], sm.partition.format()
    x = rng.standard_normal((3, 4)).astype(np.float32)
    want = torch.addmm(torch.from_numpy(b), torch.from_numpy(x), torch.from_numpy(w), beta=beta, alpha=2.0)
    np.testing.assert_allclose(sm(x), want.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("text,why", [
    (ADDMM.format(bias=5, beta=1.0, alpha=0.0), "alpha=0 (torch does not read mat1 @ mat2 then)"),
    ("""graph(%x : Float(3, 4), %v : Float(4)):
  %r : Tensor = aten::matmul(%x, %v)
  return (%r)
""", "a matrix-vector product (self (3, 4) @ other (4))"),      # matrix-vector products run outside engines
    ("""graph(%x : Float(2, 6, 6)):
  %k : int[] = prim::Constant[value=[2, 2]]()
  %r : Tensor = aten::avg_pool2d(%x, %k)
  return (%r)
""", "self of shape (2, 6, 6) is not 4-D (the layers are batched NCHW)"),   # unbatched (C, H, W)
])
def test_what_engines_cannot_take_is_refused_by_supports(text, why):
    """These were accepted by supports() and then refused by the builder (or its conv spec): the
    answer was right, but the report said 'fallback' with a builder error instead of 'not supported'."""
    sm = module(text, params={"b": np.ones(5, np.float32), "w": np.ones((4, 5), np.float32)})
    assert not sm.partition.engines
    assert [r.reason for r in sm.partition.refused] == [f"not supported by trt_like: {why}"], sm.partition.format()


def test_log_softmax_of_large_values_keeps_its_precision():
    """The compiled log_softmax computed ``x - (max + log(sum))``: rounding ``max + log(sum)`` lost
    the low bits (x = 88..90: 40 ulp; x ~ 1e6: 0.03 absolute); torch's order is (x - max) - log(sum)."""
    sm = module("""graph(%x : Float(2, 3)):
  %d : int = prim::Constant[value=1]()
  %n : NoneType = prim::Constant()
  %r : Tensor = aten::log_softmax(%x, %d, %n)
  return (%r)
""", engine_options={"timing": False})
    assert "[numba]" in sm.partition.engines[0].description
    x = np.array([[88.0, 89.0, 90.0], [1e6, 1e6 + 0.5, 1e6 + 1.0]], np.float32)
    want = torch.log_softmax(torch.from_numpy(x).double(), 1).numpy()
    np.testing.assert_allclose(sm(x), want, rtol=4 * 2.0 ** -23, atol=0)


@pytest.mark.parametrize("op, x, want", [
    ("aten::sigmoid(%x)", -100.0, 0.0),             # torch: exp(100) overflows, 1 / inf = 0 (numpy float64: 3.7e-44)
    ("aten::pow(%x, %e)", -0.0, -np.inf),           # torch: 1 / sqrt(-0.0) = -inf (powf(-0.0, -0.5) = +inf)
])
def test_numpy_tactics_follow_torch(op, x, want, monkeypatch):
    """The numpy tactic of fused pointwise layers (chosen when it times fastest) computed sigmoid and
    silu in float64 and pow by np.power: not torch's float32 answers at the edges."""
    from srcore_trt_like.tactics import choose
    orig = choose.candidates
    monkeypatch.setattr(choose, "candidates", lambda l, n: [c for c in orig(l, n) if c.name == "numpy"])
    sm = module(f"""graph(%x : Float(1)):
  %e : float = prim::Constant[value=-0.5]()
  %r : Tensor = {op}
  return (%r)
""")
    assert "[numpy]" in sm.partition.engines[0].description
    np.testing.assert_array_equal(sm(np.array([x], np.float32)), np.array([want], np.float32))


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
def test_winograd_keeps_nan_and_inf_to_their_receptive_field():
    """Winograd's transforms mix a whole tile: one NaN or inf input made NaN outputs whose receptive
    field does not hold it; such inputs now take the direct tactic."""
    from srcore_trt_like.conv import ConvSpec, conv_tactic_builders

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 9, 9)).astype(np.float32)
    x[0, 0, 1, 1], x[0, 1, 7, 2] = np.nan, np.inf
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy()
    spec = ConvSpec(x.shape, 3, (3, 3), (1, 1), (1, 1), (1, 1), 1, relu=False, residual=False)
    names = []
    for name, build in conv_tactic_builders(spec, w, None):
        y = np.empty_like(want)
        build()(x, y)
        names.append(name)
        np.testing.assert_array_equal(np.isnan(y), np.isnan(want), err_msg=name)
        np.testing.assert_array_equal(np.isinf(y), np.isinf(want), err_msg=name)
    assert any(n.startswith("winograd") for n in names)


@pytest.mark.parametrize("node", ["aten::clamp(%x, %nan, %one)", "aten::clamp(%x, %none, %nan)",
                                  "aten::hardtanh(%x, %nan, %one)"])
def test_a_nan_clamp_bound_makes_nan(node):
    """torch's clamp is min(max(x, lo), hi) with NaN from either side: a NaN bound gives NaN
    everywhere; the compiled clamp returned x (or the other bound)."""
    sm = module(f"""graph(%x : Float(4)):
  %nan : float = prim::Constant[value=nan]()
  %one : float = prim::Constant[value=1.0]()
  %none : NoneType = prim::Constant()
  %r : Tensor = {node}
  return (%r)
""", engine_options={"timing": False})
    assert "[numba]" in sm.partition.engines[0].description
    assert np.isnan(sm(np.array([-2.0, 0.0, 0.5, 3.0], np.float32))).all()


def test_gelu_with_an_unknown_approximation_is_an_error_naming_the_node():
    """``approximate="sigmoid"`` is an error in torch; the engine computed the exact gelu instead."""
    sm = module("""graph(%x : Float(2, 3)):
  %a : str = prim::Constant[value="sigmoid"]()
  %r : Tensor = aten::gelu(%x, %a)
  return (%r)
""")
    assert not sm.partition.engines, sm.partition.format()
    with pytest.raises(srcore.SrcoreError, match="aten::gelu"):
        sm(np.ones((2, 3), np.float32))


@pytest.mark.parametrize("node, consts", [
    ("aten::avg_pool2d(%x, %k, %k, %z, %f, %t, %zero)", "%k : int[] = prim::Constant[value=[2, 2]]()"),
    ("aten::avg_pool2d(%x, %k, %s, %z, %f, %t, %n)", "%k : int[] = prim::Constant[value=[0, 2]]()"),
    ("aten::max_pool2d(%x, %k, %z, %z, %s, %f)", "%k : int[] = prim::Constant[value=[2, 2]]()"),
    ("aten::dropout(%x, %p, %f)", "%k : int[] = prim::Constant[value=[2, 2]]()"),
])
def test_invalid_pool_and_dropout_arguments_are_errors_naming_the_node(node, consts):
    """A zero divisor_override, kernel size or stride, or a dropout probability outside [0, 1], are
    errors in torch; engines and the cpu kernels computed inf/NaN windows or the input."""
    text = f"""graph(%x : Float(1, 1, 4, 4)):
  {consts}
  %s : int[] = prim::Constant[value=[1, 1]]()
  %z : int[] = prim::Constant[value=[0, 0]]()
  %f : bool = prim::Constant[value=0]()
  %t : bool = prim::Constant[value=1]()
  %zero : int = prim::Constant[value=0]()
  %p : float = prim::Constant[value=1.5]()
  %n : NoneType = prim::Constant()
  %r : Tensor = {node}
  return (%r)
"""
    with pytest.raises(srcore.SrcoreError, match=node.split("(")[0]):
        module(text)(np.ones((1, 1, 4, 4), np.float32))


def test_byte_swapped_float32_inputs():
    """A big-endian float32 array passes the runtime's dtype check once a native call has made the
    signature (its key is the dtype number, the same for both byte orders); the engine then handed
    it to kernels compiled for native float32 (KernelError) while the cpu kernels took it."""
    sm = module("""graph(%x : Float(2, 3), %y : Float(3)):
  %a : Tensor = aten::mul(%x, %y)
  %d : int = prim::Constant[value=1]()
  %n : NoneType = prim::Constant()
  %s : Tensor = aten::softmax(%a, %d, %n)
  return (%s)
""")
    assert engine_ops(sm) == ["aten::mul", "aten::softmax"], sm.partition.format()
    sm(np.ones((2, 3), np.float32), np.ones(3, np.float32))
    x = np.arange(6, dtype=">f4").reshape(2, 3)
    y = np.array([1.0, -2.0, 0.5], ">f4")
    want = torch.softmax(torch.from_numpy(x.astype(np.float32) * y.astype(np.float32)), 1).numpy()
    np.testing.assert_allclose(sm(x, y), want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("node, want", [
    ("aten::view(%w, %s)", lambda w: w.reshape(6)),
    ("aten::transpose(%w, %zero, %one)", lambda w: w.T),
    ("aten::softmax(%w, %one, %none)", lambda w: torch.softmax(torch.from_numpy(w), 1).numpy()),
])
def test_layout_and_reduction_layers_read_constant_tensors(node, want):
    """A view, transpose or softmax of a parameter: the converters looked the constant up as an
    engine tensor and the builder failed ("internal: value %w has no engine tensor")."""
    w = np.arange(6, dtype=np.float32).reshape(2, 3) - 3
    sm = module(f"""graph(%x : Float(2, 3)):
  %w : Float(2, 3) = prim::Constant[param="w"]()
  %s : int[] = prim::Constant[value=[6]]()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %y : Tensor = {node}
  %r : Tensor = aten::relu(%y)
  %c : Tensor = aten::logcumsumexp(%x, %one)
  return (%r, %y, %c)
""", params={"w": w})
    assert engine_ops(sm) == [node.split("(")[0], "aten::relu"], sm.partition.format()
    r, y, _ = sm(np.ones((2, 3), np.float32))
    np.testing.assert_allclose(y, want(w), rtol=1e-6)
    np.testing.assert_allclose(r, np.maximum(want(w), 0), rtol=1e-6)
    y[...] = 100      # the engine returns copies: the parameter is untouched
    np.testing.assert_allclose(sm(np.ones((2, 3), np.float32))[1], want(w), rtol=1e-6)


def test_fused_functions_round_their_results_like_separate_ops():
    """gelu then hardsigmoid in one kernel: LLVM fused gelu's last multiply with hardsigmoid's
    ``+ 3`` into an FMA (both intrinsics' instructions allow contraction), so the result differed
    by an ulp from torch's hardsigmoid of the (rounded) gelu output, and from the same ops unfused."""
    text = """graph(%x : Float(1000)):
  %a : str = prim::Constant[value="none"]()
  %g : Tensor = aten::gelu(%x, %a)
  %h : Tensor = aten::hardsigmoid(%g)
  return ({})
"""
    fused = module(text.format("%h"), engine_options={"timing": False})
    assert "fused_pointwise (2 ops" in fused.partition.engines[0].description
    gelu = module(text.format("%g"), engine_options={"timing": False})
    x = (np.random.default_rng(0).standard_normal(1000) * 3).astype(np.float32)
    want = torch.nn.functional.hardsigmoid(torch.from_numpy(gelu(x))).numpy()
    np.testing.assert_array_equal(fused(x), want)
