"""linalg kernels vs torch: linear (+ matcher), addmm, baddbmm, matmul, mm, bmm, dot, einsum."""
from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.ir.types import TensorType  # noqa: E402
from srcore.plugin import ArgInfo, NodeInfo, Specialized  # noqa: E402
from srcore_cpu.kernels import linalg as K  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def node(op, **args):
    infos = []
    for name, v in args.items():
        if isinstance(v, str) and v == "<var>":
            infos.append(ArgInfo(name, TensorType(), False, None))
        else:
            infos.append(ArgInfo(name, TensorType(), True, v))
    return NodeInfo(op, None, tuple(infos), ())


def both(fn, expected, *args, **kw):
    """Check ``fn`` with out=None and with a preallocated out against ``expected``."""
    tol = dict(rtol=1e-4, atol=1e-4) if expected.dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    r = fn(*args, **kw)
    assert isinstance(r, np.ndarray) and r.dtype == expected.dtype and r.shape == expected.shape
    np.testing.assert_allclose(r, expected, **tol)
    buf = np.full(expected.shape, np.nan if expected.dtype.kind == "f" else 7, expected.dtype)
    r2 = fn(*args, out=buf, **kw)
    assert r2 is buf
    np.testing.assert_allclose(buf, expected, **tol)


T = torch.from_numpy


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xshape", [(5,), (3, 5), (2, 3, 5), (1, 5)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_and_matcher(dtype, xshape, with_bias):
    x, w = rand(*xshape, dtype=dtype), rand(7, 5, dtype=dtype)
    b = rand(7, dtype=dtype) if with_bias else None
    exp = torch.nn.functional.linear(T(x), T(w), None if b is None else T(b)).numpy()
    both(K.linear, exp, x, w, b)
    spec = K.linear_matcher(node("aten::linear", input="<var>", weight=w, bias=b))
    assert isinstance(spec, Specialized) and spec.args == (0,)
    both(spec.fn, exp, x)
    # a non-contiguous out still works (np.dot refuses it; the kernel falls back)
    if len(xshape) >= 2:
        big = np.zeros(exp.shape[:-1] + (14,), dtype)
        view = big[..., ::2]
        assert spec.fn(x, out=view) is view
        np.testing.assert_allclose(view, exp, rtol=1e-4, atol=1e-4)


def test_linear_matcher_falls_back_to_generic():
    assert K.linear_matcher(node("aten::linear", input="<var>", weight="<var>", bias=None)) is K.linear
    assert K.linear_matcher(node("aten::linear", input="<var>", weight=rand(3, 2), bias="<var>")) is K.linear


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1), (1, 0.25)])
def test_addmm(beta, alpha):
    s, a, b = rand(4, 6), rand(4, 3), rand(3, 6)
    if beta == 0:
        s[0, 0] = np.nan  # ignored by torch when beta == 0
    exp = torch.addmm(T(s), T(a), T(b), beta=beta, alpha=alpha).numpy()
    both(K.addmm, exp, s, a, b, beta=beta, alpha=alpha)
    s1 = rand(6)  # broadcast self
    exp1 = torch.addmm(T(s1), T(a), T(b), beta=beta, alpha=alpha).numpy()
    both(K.addmm, exp1, s1, a, b, beta=beta, alpha=alpha)


def test_addmm_matcher():
    spec = K.addmm_matcher(node("aten::addmm", self="<var>", mat1="<var>", mat2="<var>", beta=1, alpha=1))
    assert isinstance(spec, Specialized) and spec.args == (0, 1, 2)
    s, a, b = rand(6), rand(4, 3), rand(3, 6)
    both(spec.fn, torch.addmm(T(s), T(a), T(b)).numpy(), s, a, b)
    assert K.addmm_matcher(node("aten::addmm", self="<var>", mat1="<var>", mat2="<var>", beta=2, alpha=1)) is K.addmm
    assert K.addmm_matcher(node("aten::addmm", self="<var>", mat1="<var>", mat2="<var>",
                                beta=1, alpha="<var>")) is K.addmm


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 3)])
def test_baddbmm(beta, alpha):
    s, a, b = rand(2, 4, 6), rand(2, 4, 3), rand(2, 3, 6)
    exp = torch.baddbmm(T(s), T(a), T(b), beta=beta, alpha=alpha).numpy()
    both(K.baddbmm, exp, s, a, b, beta=beta, alpha=alpha)


@pytest.mark.parametrize("sa,sb", [
    ((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
    ((5, 2, 3), (3,)), ((3,), (5, 3, 4)), ((2, 1, 2, 3), (5, 3, 4)), ((1, 2, 3), (6, 3, 2)),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_matmul(sa, sb, dtype):
    a, b = rand(*sa, dtype=dtype), rand(*sb, dtype=dtype)
    if dtype == np.int64:
        a, b = RNG.integers(-5, 5, sa), RNG.integers(-5, 5, sb)
    exp = torch.matmul(T(a), T(b)).numpy()
    both(K.matmul, exp, a, b)


def test_mm_bmm_dot():
    a, b = rand(4, 3), rand(3, 5)
    both(K.mm, torch.mm(T(a), T(b)).numpy(), a, b)
    a3, b3 = rand(2, 4, 3, dtype=np.float64), rand(2, 3, 5, dtype=np.float64)
    both(K.bmm, torch.bmm(T(a3), T(b3)).numpy(), a3, b3)
    v, u = rand(7), rand(7)
    both(K.dot, torch.dot(T(v), T(u)).numpy(), v, u)
    vi, ui = RNG.integers(-9, 9, 5), RNG.integers(-9, 9, 5)
    both(K.dot, torch.dot(T(vi), T(ui)).numpy(), vi, ui)


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("i,i->", [(5,), (5,)]),
    ("ii->i", [(4, 4)]),
    ("...ij->...ji", [(2, 3, 4)]),
    ("bhqd, bhkd -> bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("bthd,bhde,bth->bthe", [(2, 7, 2, 4), (2, 2, 4, 4), (2, 7, 2)]),   # small: numpy's plain loop
    ("ij,jk,kl->il", [(40, 30), (30, 40), (40, 50)]),                   # 2.4M iterations: a searched path
    ("...j,jk,k->...", [(2, 3, 4), (4, 5), (5,)]),                      # an ellipsis: a searched path
])
def test_einsum(eq, shapes):
    ts = [rand(*s) for s in shapes]
    exp = torch.einsum(eq, *[T(t) for t in ts]).numpy()
    both(K.einsum, exp, eq, ts)


def test_decl_lists_kernels():
    from srcore_cpu.decl import linalg as D
    ops = {k.op for k in D.KERNELS}
    assert {"aten::linear", "aten::addmm", "aten::matmul", "aten::einsum", "aten::dot"} <= ops
    for k in D.KERNELS:
        mod, _, attr = k.impl.partition(":")
        assert callable(getattr(__import__(mod, fromlist=[attr]), attr))


@pytest.mark.parametrize("eq", ["ij->i", "ij->", "i->", "ij->ji", "ii->i"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_einsum_single_operand_integer_sums_are_int64_like_torch(eq, dtype):
    a = (np.arange(16).reshape(4, 4) % 3).astype(dtype)
    if eq == "i->":
        a = a[0]
    ref = torch.einsum(eq, torch.from_numpy(a))
    got = K.einsum(eq, [a])
    assert got.dtype == ref.numpy().dtype
    np.testing.assert_array_equal(got, ref.numpy())


@pytest.mark.parametrize("shape", [(3, 5), (1100, 1000), (1024, 1025), (64, 20000)])
def test_transposed_is_the_contiguous_transpose(shape):
    w = RNG.standard_normal(shape).astype(np.float32)
    t = K.transposed(w)
    assert t.flags.c_contiguous and np.array_equal(t, w.T)


@pytest.mark.parametrize("op", ["addmm", "baddbmm", "addmv", "addbmm", "addr"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
@pytest.mark.parametrize("beta", [0.0, 1.0, 0.5])
def test_alpha_zero_reads_the_product_exactly_as_torch(op, bad, beta):
    """With alpha == 0, torch's BLAS-backed addmm / addmv / addbmm never read the product (a NaN or inf
    in a matrix does not reach the result), while baddbmm and addr compute 0 * NaN = NaN."""
    import srcore_cpu.kernels.linalg as L
    import srcore_cpu.kernels.matrix as M

    rng = np.random.default_rng(3)
    shapes = {"addmm": ((2, 3), (2, 4), (4, 3)), "baddbmm": ((2, 2, 3), (2, 2, 4), (2, 4, 3)),
              "addmv": ((2,), (2, 4), (4,)), "addbmm": ((2, 3), (5, 2, 4), (5, 4, 3)),
              "addr": ((2, 3), (2,), (3,))}[op]
    self_, a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    a.flat[0] = bad
    want = getattr(torch, op)(*(torch.from_numpy(x) for x in (self_, a, b)), beta=beta, alpha=0.0).numpy()
    fn = getattr(L, op, None) or getattr(M, op)
    got = fn(self_, a, b, beta=beta, alpha=0.0)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
