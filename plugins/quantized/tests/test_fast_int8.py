"""The fast int8 path (float32 SGEMM on integers, K cut into exact chunks): exact against int64
arithmetic, and bit for bit with torch's fbgemm kernels on contractions deeper than one chunk."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from srcore.ir import QParams
from srcore.qarray import QuantizedArray
from srcore_quantized.kernels import conv, linear
from srcore_quantized.kernels.gemm import F32_EXACT, int_matmul, packed
from _torch_quant import srq  # noqa: E402  (conftest.py puts this folder on sys.path)



def same(got, ref):
    assert isinstance(got, QuantizedArray) and got.qparams == srq(ref).qparams
    np.testing.assert_array_equal(got.int_repr(), ref.int_repr().numpy())

# kernels called directly: independent of the executor and planner
pytestmark = [pytest.mark.one_pass, pytest.mark.usefixtures("fbgemm")]


@settings(max_examples=15, deadline=None)
@given(m=st.integers(1, 4), k=st.integers(1, 2000), n=st.integers(1, 5), amax=st.integers(1, 255),
       bmax=st.integers(1, 255), extreme=st.booleans(), seed=st.integers(0, 2 ** 31))
def test_int_matmul_is_exact(m, k, n, amax, bmax, extreme, seed):
    rng = np.random.default_rng(seed)
    if extreme:   # every product at the bound, one sign: the largest partial sums there are
        a = np.full((m, k), amax, np.int64)
        b = np.full((k, n), -bmax, np.int64)
    else:
        a = rng.integers(-amax, amax + 1, (m, k))
        b = rng.integers(-bmax, bmax + 1, (k, n))
    got = int_matmul(a.astype(np.float32), b.astype(np.float32), float(amax * bmax))
    assert np.array_equal(got.astype(np.int64), a @ b)


def test_one_float32_sum_would_not_be_exact_here():
    """The chunking is needed: a sum near 2^31 is not even a float32 (spacing 128 there)."""
    k = 60000
    a = np.full((1, k), 255, np.float32)
    b = np.full((k, 1), 127, np.float32)
    b[::7] = 126
    exact = int((a.astype(np.int64) @ b.astype(np.int64))[0, 0])
    assert k * 255 * 127 > F32_EXACT and exact % 128 and int((a @ b)[0, 0]) != exact
    assert int(int_matmul(a, b, 255 * 127)[0, 0]) == exact


def _q(x, scale, zp, dtype=torch.quint8):
    return torch.quantize_per_tensor(torch.from_numpy(x), scale, zp, dtype)


def test_deep_linear_matches_fbgemm_bit_for_bit():
    rng = np.random.default_rng(0)
    k, n = 1500, 24
    x = _q(rng.uniform(0, 2, (6, k)).astype(np.float32), 2 / 127, 0)   # 7-bit activations: fbgemm AVX2 exact
    wf = torch.from_numpy(rng.standard_normal((n, k)).astype(np.float32))
    w = torch.quantize_per_channel(wf, torch.from_numpy(rng.uniform(0.01, 0.03, n)), torch.zeros(n, dtype=torch.long),
                                   0, torch.qint8)
    b = torch.randn(n)
    ref = torch.ops.quantized.linear(x, torch.ops.quantized.linear_prepack(w, b), 0.5, 64)
    same(linear.qlinear_out(srq(x), srq(w), b.numpy(), 0.5, 64), ref)


def test_deep_conv_matches_fbgemm_bit_for_bit():
    rng = np.random.default_rng(1)
    c, cout = 160, 8   # K = 160 * 9 = 1440: three chunks
    x = _q(rng.uniform(0, 1, (1, c, 6, 5)).astype(np.float32), 1 / 127, 0)
    w = torch.quantize_per_channel(torch.randn(cout, c, 3, 3), torch.from_numpy(rng.uniform(0.005, 0.02, cout)),
                                   torch.zeros(cout, dtype=torch.long), 0, torch.qint8)
    b = torch.randn(cout)
    packed_w = torch.ops.quantized.conv2d_prepack(w, b, [1, 1], [1, 1], [1, 1], 1)
    ref = torch.ops.quantized.conv2d_relu(x, packed_w, 0.2, 3)
    same(conv.qconv_relu_out(srq(x), srq(w), b.numpy(), [1, 1], [1, 1], [1, 1], 1, 0.2, 3), ref)


def test_weights_are_packed_once_with_their_zero_points():
    w = QuantizedArray(np.array([[1, -2, 3], [4, 5, -6]], np.int8), "qint8", QParams((0.1, 0.2), (1, -1), axis=0))
    p = packed(w)
    assert packed(w) is p
    assert np.array_equal(p.rows, [[0, -3, 2], [5, 6, -5]]) and p.bmax == 6
