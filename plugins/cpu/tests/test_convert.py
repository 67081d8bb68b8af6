"""Conversion kernels vs torch: every aten::to overload (aliasing when nothing changes), type_as,
detach, clone, copy_, and tensor -> Python number conversions."""
from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore.testing import check_kernel  # noqa: E402
from srcore_cpu.kernels import convert as V  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(5)
X = (RNG.standard_normal((2, 3)) * 3).astype(np.float32)


@pytest.mark.parametrize("code,tdt", [(6, torch.float32), (7, torch.float64), (4, torch.int64), (3, torch.int32),
                                      (11, torch.bool)])
def test_to_overloads(code, tdt):
    ref = lambda t, *a: t.to(tdt)  # noqa: E731
    check_kernel(V.to_dtype, ref, X, code, kind="native")
    check_kernel(V.to_device, ref, X, "cpu", code, kind="native")
    check_kernel(V.to_other, lambda t, o: t.to(o), X, np.zeros(1, np.dtype(str(tdt)[6:])), kind="native")
    check_kernel(V.to_dtype_layout, ref, X, dtype=code, device="cpu", kind="native")
    check_kernel(V.to_prim_device, ref, X, "cpu", code, kind="native")
    check_kernel(V.to_prim_dtype, ref, X, code, kind="native")


def test_to_aliases_unless_copy():
    assert V.to_dtype(X, 6) is X
    assert V.to_dtype(X, 6, False, True) is not X
    assert V.to_prim_dtype(X, None) is X
    assert V.to_prim_other(X) is X and V.to_prim_other(X, False, True) is not X
    assert V.to_other(X, np.zeros(1, np.float32)) is X
    assert V.to_dtype_layout(X) is X
    assert V.type_as(X, X) is X
    with pytest.raises(KernelError, match="cuda"):
        V.to_device(X, "cuda", 6)


def test_type_as_detach_clone():
    check_kernel(V.type_as, lambda t, o: t.type_as(o), X, np.zeros(1, np.int64), kind="native")
    d = check_kernel(V.detach, torch.detach, X, kind="native")
    assert np.shares_memory(d, X) and d is not X
    c = check_kernel(V.clone, torch.clone, X.T)
    assert not np.shares_memory(c, X) and c.flags.c_contiguous


def test_copy_():
    y = np.zeros((2, 3), np.int64)
    assert V.copy_(y, X) is y
    np.testing.assert_array_equal(y, torch.zeros(2, 3, dtype=torch.int64).copy_(torch.from_numpy(X)).numpy())
    z = np.zeros((2, 3), np.float32)
    V.copy_(z, np.arange(3, dtype=np.float32))  # broadcast
    np.testing.assert_array_equal(z, np.broadcast_to(np.arange(3), (2, 3)))
    V.copy_(z, 4)
    assert (z == 4).all()


@pytest.mark.parametrize("v", [np.array(2.75, np.float32), np.array([-3], np.int64), np.array(True),
                               np.array([[0.0]], np.float64)])
def test_number_conversions(v):
    t = torch.from_numpy(v)
    for k, ref in [(V.item, lambda a: a.item()), (V.int_, int), (V.float_, float), (V.bool_, bool)]:
        r = k(v)
        assert r == ref(t) and type(r) is type(ref(t))
    assert V.int_(-2.7) == -2 and V.float_(3) == 3.0 and V.bool_(0.0) is False and V.int_(True) == 1
    with pytest.raises(KernelError, match="2 elements"):
        V.int_(np.zeros(2))
