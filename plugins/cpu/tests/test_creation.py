"""Creation kernels vs torch: arange overloads and dtype inference, zeros/ones/full/empty (+_like)
with ScalarType codes, aten::tensor, prim::NumToTensor; out=None and a preallocated out."""
from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore.testing import check_kernel  # noqa: E402
from srcore_cpu.kernels import creation as C  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

CODES = {None: None, 6: torch.float32, 7: torch.float64, 4: torch.int64, 3: torch.int32, 11: torch.bool}


@pytest.mark.parametrize("args", [(5,), (2.5,), (1, 7), (-3, 4, 2), (0.0, 1.0, 0.1), (10, 0, -3), (1, 2.5, 0.5),
                                  (0, 0), (np.array(4),), (3.1,), (0.5, 3.1, 0.7), (5.5, 0.1, -1.5)])
@pytest.mark.parametrize("code", [None, 6, 7, 4, 3])  # int32 (3): length from the uncast bounds (regression)
def test_arange(args, code):
    targs = [a.item() if isinstance(a, np.ndarray) else a for a in args]
    try:
        torch.arange(*targs, dtype=CODES[code])
    except (RuntimeError, ValueError):  # torch rejects it (a step that truncates to 0): so must we
        with pytest.raises(KernelError, match="step"):
            C.arange(*args, dtype=code)
        return
    check_kernel(C.arange, lambda *a: torch.arange(*targs, dtype=CODES[code]), *args, dtype=code)


def test_arange_zero_step():
    with pytest.raises(KernelError, match="step"):
        C.arange(0, 3, 0)


@pytest.mark.parametrize("code", [None, 6, 7, 4, 3, 11])
@pytest.mark.parametrize("size", [[2, 3], [], [0, 4]])
def test_fill_ops(size, code):
    dt = CODES[code]
    check_kernel(C.zeros, lambda s: torch.zeros(s, dtype=dt), size, dtype=code)
    check_kernel(C.ones, lambda s: torch.ones(s, dtype=dt), size, dtype=code)
    check_kernel(C.full, lambda s, v: torch.full(s, v, dtype=dt), size, 3, dtype=code)
    e = C.empty(size, dtype=code)
    assert e.shape == tuple(size) and e.dtype == np.dtype(str(torch.empty(0, dtype=dt).dtype)[6:])
    out = np.empty(size, e.dtype)
    assert C.empty(size, dtype=code, out=out) is out


@pytest.mark.parametrize("value", [2, 2.5, True])
def test_full_infers_dtype(value):
    check_kernel(C.full, torch.full, [2, 2], value)


@pytest.mark.parametrize("code", [None, 7, 4])
def test_like_ops(code):
    x = np.ones((2, 3), np.float32)
    dt = CODES[code]
    check_kernel(C.zeros_like, lambda t: torch.zeros_like(t, dtype=dt), x, dtype=code)
    check_kernel(C.ones_like, lambda t: torch.ones_like(t, dtype=dt), x, dtype=code)
    check_kernel(C.full_like, lambda t, v: torch.full_like(t, v, dtype=dt), x, 7, dtype=code)
    e = C.empty_like(x, dtype=code)
    assert e.shape == x.shape and e.dtype == torch.empty_like(torch.from_numpy(x), dtype=dt).numpy().dtype


def test_device_checks():
    assert C.zeros([2], device="cpu").shape == (2,)
    with pytest.raises(KernelError, match="cuda"):
        C.ones([2], device="cuda:0")


@pytest.mark.parametrize("data", [[1, 2, 3], [[1.5, 2.0], [3.0, 4.0]], [True, False], 3, 2.5, True, []])
@pytest.mark.parametrize("code", [None, 7])
def test_tensor(data, code):
    check_kernel(C.tensor, lambda d: torch.tensor(d, dtype=CODES[code]), data, dtype=code, kind="native")


@pytest.mark.parametrize("v", [3, -2.5, True])
def test_num_to_tensor(v):
    check_kernel(C.num_to_tensor, torch.ops.prim.NumToTensor, v, kind="native")


def test_num_to_tensor_numpy_scalars():
    assert C.num_to_tensor(np.int64(3)).dtype == np.int64
    assert C.num_to_tensor(np.float32(1.5)).dtype == np.float64
    assert C.num_to_tensor(np.bool_(True)).dtype == np.bool_


@pytest.mark.parametrize("code", [None, 7, 4])
def test_new_ops(code):
    x = np.ones((4,), np.float64)
    dt = CODES[code]
    check_kernel(C.new_zeros, lambda t, s: t.new_zeros(s, dtype=dt), x, [2, 3], dtype=code)
    check_kernel(C.new_ones, lambda t, s: t.new_ones(s, dtype=dt), x, [2, 3], dtype=code)
    check_kernel(C.new_full, lambda t, s, v: t.new_full(s, v, dtype=dt), x, [3], 5, dtype=code)
    e = C.new_empty(x, [2, 2], dtype=code)
    assert e.shape == (2, 2)
    assert e.dtype == np.dtype(str(torch.from_numpy(x).new_empty(1, dtype=dt).dtype)[6:])
