"""Python-number natives vs torch's own TorchScript implementations (torch.ops.aten.<op> on numbers)."""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore_cpu.kernels import convert as V  # noqa: E402
from srcore_cpu.kernels import scalar as S  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

A = torch.ops.aten
PAIRS = [(7, 2), (-7, 2), (7, -2), (7.5, 2), (-7.5, 2.0), (3, 0.5), (0, 5), (6, 3)]


def ref(name, *args):
    """torch's own TorchScript overload for these Python number types (int, float, int_float, ...)."""
    packet = getattr(A, name)
    kinds = "_".join("int" if isinstance(a, int) and not isinstance(a, bool) else "float" for a in args)
    if len(set(kinds.split("_"))) == 1:
        kinds = kinds.split("_")[0]
    for ov in (kinds, "default", "Scalar_Scalar"):
        if ov in packet.overloads():
            try:
                return getattr(packet, ov)(*args)
            except RuntimeError:
                continue
    raise LookupError(name, kinds)


def same(got, exp):
    assert type(got) is type(exp), (got, exp)
    assert got == exp or (isinstance(exp, float) and math.isclose(got, exp, rel_tol=1e-12)), (got, exp)


@pytest.mark.parametrize("a,b", PAIRS)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "floordiv", "remainder", "eq", "ne", "lt", "le",
                                  "gt", "ge"])
def test_binary_numbers(name, a, b):
    same(getattr(S, name)(a, b), ref(name, a, b))


@pytest.mark.parametrize("a,b", [(2, 3), (2.0, 3), (2, 0.5), (4.0, -1.0), (2, -1)])
def test_pow(a, b):
    same(S.pow(a, b), ref("pow", a, b))


def test_pow_int_to_int_and_zero_division():
    assert S.pow_int(3, 4) == 81 and type(S.pow_int(3, 4)) is int
    with pytest.raises(KernelError, match="negative"):
        S.pow_int(2, -1)
    for fn in (S.div, S.floordiv, S.remainder):
        with pytest.raises(KernelError, match="ZeroDivision"):
            fn(1, 0)


@pytest.mark.parametrize("v", [2, 0.5, 3.7, -2.5, 2.5])
@pytest.mark.parametrize("name", ["exp", "log1p", "expm1", "sin", "cos", "tanh", "erf", "neg", "floor", "ceil",
                                  "round"])
def test_unary_numbers(name, v):
    if name == "log1p" and v < -1:
        return
    same(getattr(S, name)(v), ref(name, v))


@pytest.mark.parametrize("v", [4, 2.25])
def test_sqrt_log(v):
    same(S.sqrt(v), ref("sqrt", v))
    same(S.log(v), ref("log", v))
    same(S.log(v, 2), ref("log", v, 2))


def test_abs_min_max_lists():
    assert S.abs(-3) == 3 and S.abs(2.5) == 2.5
    assert S.min(3, 2) == 2 and S.max(3, 2.5) == 3 and S.max(1, 2.5) == 2.5
    assert S.max([3, 9, 2]) == 9 and S.min([3.5, -1.0]) == -1.0
    assert S.max([1, 2], [1, 3]) == [1, 3] and S.min([1, 2], [1, 3]) == [1, 2]
    with pytest.raises(KernelError, match="empty"):
        S.max([])
    assert S.sum([1, 2, 3]) == 6 and S.sum([True, True]) == 2 and S.all([1, 1]) and not S.any([0, 0])


def test_logic_and_ranges():
    assert S.not_(False) and S.is_(None, None) and S.isnot(1, None) and not S.isnot(None, None)
    for lo, hi, step in [(0, 10, 3), (10, 0, -2), (5, 5, 1), (0, -3, 1)]:
        assert S.range_length(lo, hi, step) == A.__range_length(lo, hi, step)
        assert [S.derive_index(i, lo, step) for i in range(S.range_length(lo, hi, step))] == \
            list(range(lo, hi, step))
    with pytest.raises(KernelError, match="zero"):
        S.range_length(0, 3, 0)
    assert S.isnan(float("nan")) and S.isinf(float("-inf")) and not S.isnan(1.0)


@pytest.mark.parametrize("v", [2.7, -2.7, True, 3])
def test_conversions(v):
    kind = "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "float"
    if kind != "int":
        same(V.int_(v), getattr(A.Int, kind)(v))
    if kind != "float":
        same(V.float_(v), getattr(A.Float, kind)(v))
    if kind != "bool":
        same(V.bool_(v), getattr(A.Bool, kind)(v))
