"""8- and 16-bit integers, promotion and integer sums inside one engine, against torch: uint8 / int8 /
int16 arithmetic wrapping in its dtype (numbers cast to it first, as torch: ``u8 // 300`` divides by
44, ``u8 < -1`` compares with 255), floor ``//`` and Python-signed ``%`` with negative operands,
integer and bool tensors promoted to a float32 or wider integer result (``i * 0.5 + (i > 1)``),
``where`` on integers and int64 sums, float ``//`` and ``%`` (torch's formulas: Python's signs). Each model runs layer by layer (the numpy tactics), as the
compiled segment's generated code run as Python, and compiled by numba (the real engine)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import srcore
from srcore_trt_like.builder import support
from srcore_trt_like.tactics import segment
from _trt_segment import segment_as_python as _as_python

pytestmark = pytest.mark.one_pass   # engines do not depend on the executor or the memory planner


class Wrapping(torch.nn.Module):
    def forward(self, u8, i8, i16, d8, i):
        return (u8 - 128, u8 + 300, u8 * 3, u8 // 3, u8 % 7, u8 // 300, u8 % 300, u8 > 100, u8 < -1, u8 + u8,
                -u8, u8 - u8.flip(1),
                i8 - 100, i8 * 3, i8 // -3, i8 % -3, i8 % 5, i8 // d8, i8 % d8, i8.sub(d8, alpha=100), i8 >= -5,
                i16 * 300, i16 // -7, i16 % 7, i16 - i16.flip(0), i16 % -300,
                i % -3, i // -3, torch.remainder(i, -7), u8.to(torch.int8), i.to(torch.uint8), i.to(torch.int16))


class Promotion(torch.nn.Module):
    def forward(self, u8, i8, i, x, m):
        return (u8.float() / 255.0, i * 0.5 + (i > 1), x + m, i + m, u8 + m, i8 * 2.5, x * i, i / 3,
                i.sum() / i.numel(), i.sum(), u8.sum(dim=1), i8.sum(), (u8 > 100).sum(dim=(0, 1)),
                torch.where(i > 2, i, -1), torch.where(u8 > 3, u8, -1), torch.where(m, i8, 5),
                torch.where(m, i16_like(i), i16_like(i).flip(1)), torch.where(x > 0, x, 0.0))


def i16_like(i: torch.Tensor) -> torch.Tensor:
    return (i * 1000).to(torch.int16)


def _wrapping_inputs(seed: int):
    rng = np.random.default_rng(seed)
    d8 = rng.integers(1, 10, (2, 8)) * rng.choice([-1, 1], (2, 8))
    return (rng.integers(0, 256, (2, 8)).astype(np.uint8), rng.integers(-128, 128, (2, 8)).astype(np.int8),
            rng.integers(-32768, 32768, (2, 8)).astype(np.int16), d8.astype(np.int8),
            rng.integers(-300, 300, (2, 8)).astype(np.int64))


def _promotion_inputs(seed: int):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 256, (2, 8)).astype(np.uint8), rng.integers(-128, 128, (2, 8)).astype(np.int8),
            rng.integers(-6, 7, (2, 8)).astype(np.int64), rng.standard_normal((2, 8)).astype(np.float32),
            rng.random((2, 8)) < 0.5)


TRT = ("trt_like", "cpu")


def _build(mode: str, module: torch.nn.Module, example) -> srcore.StaticModule:
    """``numpy``: layer by layer; ``segment``: the segment's source run as Python; ``numba``: compiled."""
    model = srcore.from_torchscript(torch.jit.script(module), example)
    if mode == "numpy":
        options = {"timing": False, "exclude_tactics": ("segment",)}
        return srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options=options))
    if mode == "numba":
        return srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={"timing": False}))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(segment, "compiled", _as_python)
        return srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options={"timing": False}))


class FloatFloor(torch.nn.Module):
    def forward(self, x, y):
        return (x % 3, x % -3, x // 2, x // -2.5, torch.remainder(x, y), torch.floor_divide(x, y),
                torch.div(x, 4, rounding_mode="floor"), torch.full_like(x, 3) // 2, (x * 7) % 0.5)


def _float_inputs(seed: int):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((2, 8)) * 10).astype(np.float32)
    x[0, :6] = [0.0, -0.0, 6.0, -6.0, np.inf, np.nan]
    y = rng.choice(np.array([-3, -2.5, -1, 0, 1, 2.5, 3, -0.0], np.float32), (2, 8))
    return x, y


CASES = {"wrapping": (Wrapping, _wrapping_inputs), "promotion": (Promotion, _promotion_inputs),
         "float_floor": (FloatFloor, _float_inputs)}


@pytest.fixture(scope="module", params=[(case, mode) for case in CASES for mode in ("numpy", "segment", "numba")],
                ids=lambda p: "-".join(p))
def built(request):
    case, mode = request.param
    cls, inputs = CASES[case]
    return case, mode, _build(mode, cls(), tuple(torch.from_numpy(x) for x in inputs(0)))


def test_every_node_is_in_one_engine(built):
    case, mode, sm = built
    text = sm.partition.format()
    assert len(sm.partition.engines) == 1 and not sm.partition.refused, text
    if case != "float_floor":   # (pointwise ops only: one fused pointwise layer, no segment)
        assert ("segment -> " in text) == (mode != "numpy"), text


@pytest.mark.parametrize("seed", [1, 2])
def test_results_are_torchs(built, seed):
    case, _, sm = built
    cls, inputs = CASES[case]
    xs = inputs(seed)
    want = cls()(*(torch.from_numpy(x) for x in xs))
    got = sm(*xs)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        w = w.numpy()
        assert g.dtype == w.dtype and g.shape == w.shape, (k, g.dtype, w.dtype, g.shape, w.shape)
        if case == "float_floor":   # torch's float formulas bit for bit: signed zeros, NaN and inf too
            np.testing.assert_array_equal(g, w, err_msg=f"output {k}")
            signed = ~np.isnan(w)   # (a NaN's sign bit means nothing)
            np.testing.assert_array_equal(np.signbit(g[signed]), np.signbit(w[signed]), err_msg=f"output {k}: signs")
        elif w.dtype == np.float32:   # (a division by a constant may multiply by its reciprocal)
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=0, err_msg=f"output {k}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {k}")


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32])
def test_where_takes_the_numbers_torch_converts(dtype):
    """``support._fits`` is torch's checked conversion: ``where`` with a number outside it raises in torch."""
    info = torch.iinfo(dtype)
    x, m = torch.zeros(3, dtype=dtype), torch.tensor([True, False, True])
    for v in (info.min - 1, info.min, -info.max - 1, -info.max, -1, 0, info.max, info.max + 1):
        try:
            torch.where(m, x, v)
            ok = True
        except RuntimeError:
            ok = False
        assert support._fits(v, str(dtype).split(".")[1]) == ok, v


class BigNumber(torch.nn.Module):
    def forward(self, u8):
        return torch.where(u8 > 3, u8, 300) + 1


def test_a_where_number_out_of_range_stays_out_of_engines():
    sm = _build("numpy", BigNumber(), (torch.zeros(2, 8, dtype=torch.uint8),))
    assert "out of uint8's range" in sm.partition.format(), sm.partition.format()
