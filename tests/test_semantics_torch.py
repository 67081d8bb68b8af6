"""Semantics Static Runtime's own tests check, each against torch: identity of detach, container inputs
copied as torch's Python API copies them, indexing with a mask and None, index_put with a tuple of
indices, the empty cat error, integer division by zero, float16 arithmetic, singular matrices."""
from __future__ import annotations

import warnings
from typing import Dict, List

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402


def _load(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return srcore.StaticModule(srcore.from_torchscript(torch.jit.script(fn)))


def _np(args):
    return [a.numpy() if isinstance(a, torch.Tensor) else a for a in args]


def detach_is(x: torch.Tensor) -> bool:
    a = x.detach()
    return x is a


def dict_set(d: Dict[int, torch.Tensor], a: torch.Tensor):
    d[1] = a
    return d[1] + 1


def list_append(xs: List[torch.Tensor], a: torch.Tensor):
    xs.append(a)
    return len(xs)


def mask_none(a: torch.Tensor, idx: torch.Tensor):
    return a[idx, None]


def index_put_tuple(a: torch.Tensor, idx: torch.Tensor, v: torch.Tensor):
    return torch.index_put(a, (idx,), v, False)


def cat_empty(x: torch.Tensor):
    ts: List[torch.Tensor] = []
    return torch.cat(ts)


def test_detach_is_a_new_tensor():
    x = torch.ones(3)
    assert _load(detach_is)(x.numpy()) is detach_is(x) is False


def test_container_inputs_are_copied_as_torch_copies_them():
    scripted = torch.jit.script(dict_set)
    td = {1: torch.zeros(2), 2: torch.ones(2)}
    scripted(td, torch.full((2,), 5.0))
    assert torch.equal(td[1], torch.zeros(2))  # torch's API gave the model a copy
    sm = _load(dict_set)
    d = {1: np.zeros(2, np.float32), 2: np.ones(2, np.float32)}
    for _ in range(2):  # again: the fast path copies as well
        np.testing.assert_array_equal(sm(d, np.full(2, 5, np.float32)), [6, 6])
        assert list(d) == [1, 2] and np.array_equal(d[1], np.zeros(2))
    xs = [np.zeros(1, np.float32)]
    assert _load(list_append)(xs, np.ones(1, np.float32)) == 2 and len(xs) == 1


def test_mask_and_none_index():
    a, idx = torch.rand(4, 3), torch.tensor([True, False, True, True])
    np.testing.assert_array_equal(_load(mask_none)(*_np([a, idx])), mask_none(a, idx).numpy())


def test_index_put_with_a_tuple_of_indices():
    args = [torch.zeros(5), torch.tensor([1, 3]), torch.tensor([1.0, 2.0])]
    np.testing.assert_array_equal(_load(index_put_tuple)(*_np(args)), index_put_tuple(*args).numpy())


def test_empty_cat_raises_torchs_error():
    with pytest.raises((RuntimeError, ValueError), match="expected a non-empty list of Tensors"):
        cat_empty(torch.ones(1))
    with pytest.raises(srcore.KernelError) as got:
        _load(cat_empty)(np.ones(1, np.float32))
    assert "aten::cat" in str(got.value) and "expected a non-empty list of Tensors" in str(got.value)


@pytest.mark.parametrize("op", ["aten::floor_divide", "aten::remainder", "aten::fmod", "aten::div"])
def test_integer_division_by_zero_raises_as_torch(op):
    a, b = torch.tensor([4, -3]), torch.tensor([0, 2])
    extra = ', %mode' if op == "aten::div" else ""
    text = (f'graph(%a : Long(2), %b : Long(2)):\n  %mode : str = prim::Constant[value="floor"]()\n'
            f'  %r : Tensor = {op}(%a, %b{extra})\n  return (%r)\n')
    fn = {"aten::floor_divide": torch.floor_divide, "aten::remainder": torch.remainder, "aten::fmod": torch.fmod,
          "aten::div": lambda x, y: torch.div(x, y, rounding_mode="floor")}[op]
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(a, b)
    sm = srcore.StaticModule(srcore.Model.from_graph(srcore.parse_graph(text)))
    with pytest.raises(srcore.KernelError, match=f"(?s){op}.*ZeroDivisionError"):
        sm(a.numpy(), b.numpy())
    # a float division by zero is torch's inf/nan, not an error
    fa, fb = a.float(), b.float()
    fsm = srcore.StaticModule(srcore.Model.from_graph(srcore.parse_graph(text.replace("Long", "Float"))))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(fsm(fa.numpy(), fb.numpy()), fn(fa, fb).numpy())


def test_float16_arithmetic_matches_torch():
    text = """graph(%a : Half(4), %b : Half(4)):
  %one : int = prim::Constant[value=1]()
  %r : Tensor = aten::add(%a, %b, %one)
  %s : Tensor = aten::mul(%r, %b)
  %t : Tensor = aten::sub(%s, %a, %one)
  %u : Tensor = aten::div(%t, %b)
  return (%u)
"""
    a = torch.tensor([1.1, 2.7, -3.3, 0.5], dtype=torch.float16)
    b = torch.tensor([2.3, 0.1, 7.0, -1.0], dtype=torch.float16)
    ref = (((a + b) * b) - a) / b
    got = srcore.StaticModule(srcore.Model.from_graph(srcore.parse_graph(text)))(a.numpy(), b.numpy())
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, ref.numpy())  # one rounding per op, as torch


def test_singular_matrix_is_torchs_error_naming_the_node():
    text = "graph(%a : Float(3, 3)):\n  %r : Tensor = aten::linalg_inv(%a)\n  return (%r)\n"
    a = torch.ones(3, 3)
    with pytest.raises(RuntimeError, match="singular"):
        torch.linalg.inv(a)
    sm = srcore.StaticModule(srcore.Model.from_graph(srcore.parse_graph(text, filename="inv.ir")))
    with pytest.raises(srcore.KernelError, match=r"(?s)inv.ir:2:3.*singular"):
        sm(a.numpy())


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_inverse_and_solve_with_real_factors(upper):
    g = torch.Generator().manual_seed(0)
    m = torch.randn(4, 4, generator=g, dtype=torch.float64)
    spd = m @ m.T + 4 * torch.eye(4, dtype=torch.float64)
    L = torch.linalg.cholesky(spd, upper=upper)
    b = torch.randn(4, 2, generator=g, dtype=torch.float64)
    up = "1" if upper else "0"
    inv = srcore.StaticModule(srcore.Model.from_graph(srcore.parse_graph(
        f"graph(%L : Double(4, 4)):\n  %u : bool = prim::Constant[value={up}]()\n"
        "  %r : Tensor = aten::cholesky_inverse(%L, %u)\n  return (%r)\n")))
    np.testing.assert_allclose(inv(L.numpy()), torch.cholesky_inverse(L, upper=upper).numpy(), rtol=1e-10)
    solve = srcore.StaticModule(srcore.Model.from_graph(srcore.parse_graph(
        f"graph(%b : Double(4, 2), %L : Double(4, 4)):\n  %u : bool = prim::Constant[value={up}]()\n"
        "  %r : Tensor = aten::cholesky_solve(%b, %L, %u)\n  return (%r)\n")))
    np.testing.assert_allclose(solve(b.numpy(), L.numpy()), torch.cholesky_solve(b, L, upper=upper).numpy(),
                               rtol=1e-10)


def _both(text, *args):
    """(srcore's result, torch's) for IR text torch reads too."""
    g = torch._C.parse_ir(text)
    ref = torch._C._create_function_from_graph("f", g)(*[torch.from_numpy(a) if isinstance(a, np.ndarray) else a
                                                         for a in args])
    got = srcore.StaticModule(srcore.Model.from_graph(srcore.parse_graph(text)))(*args)
    return got, ref


@pytest.mark.parametrize("text,args", [
    ("graph(%c : bool, %x : Tensor, %y : Tensor):\n  %r : Tensor = prim::IfThenElse(%c, %x, %y)\n  return (%r)\n",
     (False, np.ones(2, np.float32), np.zeros(2, np.float32))),
    ("graph(%x : Float(3)):\n  %r : bool = prim::isinstance[types=[Tensor]](%x)\n  return (%r)\n",
     (np.ones(3, np.float32),)),
    ("graph(%x : Float(2, 2)):\n  %d : int = prim::Constant[value=2]()\n  %t : int = prim::Constant[value=1]()\n"
     "  %r : float[][] = prim::tolist(%x, %d, %t)\n  return (%r)\n", (np.arange(4, dtype=np.float32).reshape(2, 2),)),
    ('graph(%s : str):\n  %r : str[] = aten::list(%s)\n  return (%r)\n', ("abc",)),
    ('graph(%s : str):\n  %a : int = prim::Constant[value=1]()\n  %n : NoneType = prim::Constant()\n'
     '  %c : int = prim::Constant[value=2]()\n  %r : str = aten::slice(%s, %a, %n, %c)\n  return (%r)\n', ("abcdef",)),
    ("graph(%x : Long()):\n  %r : int = aten::IntImplicit(%x)\n  return (%r)\n", (np.array(7),)),
    ("graph(%x : Float(3), %o : Float(3)):\n  %r : Tensor = aten::sigmoid(%x, %o)\n"
     "  %t : (Tensor, Tensor) = prim::TupleConstruct(%r, %o)\n  return (%t)\n",
     (np.array([-1, 0, 2], np.float32), np.zeros(3, np.float32))),
    ("graph(%x : Float(3)):\n  %r : Tensor = aten::cpu(%x)\n  return (%r)\n", (np.ones(3, np.float32),)),
], ids=["IfThenElse", "isinstance", "tolist", "list.str", "slice.str", "IntImplicit", "sigmoid.out", "cpu"])
def test_prim_nodes_and_explicit_out_overloads(text, args):
    got, ref = _both(text, *args)
    refs, gots = (ref, got) if isinstance(ref, tuple) else ((ref,), (got,))
    for g_, r_ in zip(gots, refs):
        if isinstance(r_, torch.Tensor):
            np.testing.assert_allclose(g_, r_.numpy(), rtol=1e-6)
        else:
            assert g_ == r_


class _BF16(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([0.3, -1.7, 2.2, 9.1], dtype=torch.bfloat16), requires_grad=False)

    def forward(self, x, y):
        return (x * self.w + y) / y - x, x > y


def test_bfloat16_through_ml_dtypes(tmp_path):
    """A bfloat16 model (parameters and inputs) converts, saves and runs: one rounding per op, as torch."""
    ml_dtypes = pytest.importorskip("ml_dtypes")  # a dependency of srcore-cpu: always there in CI
    m = _BF16().eval()
    x = torch.tensor([1.1, 2.3, -0.7, 5.0], dtype=torch.bfloat16)
    y = torch.tensor([3.3, 4.7, 0.9, -2.0], dtype=torch.bfloat16)

    def bf(t):
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = srcore.from_torchscript(torch.jit.script(m))
    srcore.save(model, tmp_path / "bf16.srm")
    ref, ref_mask = m(x, y)
    for mod in (model, srcore.load(tmp_path / "bf16.srm")):
        got, mask = srcore.StaticModule(mod)(bf(x), bf(y))
        assert got.dtype == np.dtype(ml_dtypes.bfloat16)
        np.testing.assert_array_equal(got.view(np.int16), ref.view(torch.int16).numpy())  # bit-exact
        np.testing.assert_array_equal(mask, ref_mask.numpy())
