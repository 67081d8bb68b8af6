"""``quantized::add/mul(_relu)`` with either operand broadcast (FX-quantized ConvNeXt's layer scale
is ``gamma (C, 1, 1) * x (N, C, H, W)``): torch's result bit for bit. Its TensorIterator runs the
vectorized loop per inner loop (the trailing dims over which no operand switches between broadcast
and not) and the scalar path on each loop's tail, so the rounding split is per inner loop."""
from __future__ import annotations

import numpy as np
import pytest

from srcore_quantized.kernels import binary
from _torch_quant import srq  # noqa: E402  (conftest.py puts this folder on sys.path)

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.one_pass, pytest.mark.usefixtures("fbgemm")]

SHAPES = [((16, 1, 1), (1, 16, 8, 8)), ((1, 16, 8, 8), (16, 1, 1)), ((2, 3, 5, 70), (70,)),
          ((2, 3, 5, 70), (3, 1, 1)), ((2, 3, 130), (2, 1, 130)), ((4, 1), (1, 67)), ((200,), (1,))]
OPS = {"mul": (binary.mul_out, 0.07, 64), "mul_relu": (binary.mul_relu_out, 0.07, 64),
       "add": (binary.add_out, 0.04, 70), "add_relu": (binary.add_relu_out, 0.04, 70)}


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("sa,sb", SHAPES, ids=[f"{a}x{b}" for a, b in SHAPES])
def test_broadcast_binary_matches_torch(op, sa, sb):
    g = torch.Generator().manual_seed(1)
    qa = torch.quantize_per_tensor(torch.randn(sa, generator=g) * 3, 0.05, 60, torch.quint8)
    qb = torch.quantize_per_tensor(torch.randn(sb, generator=g) * 3, 0.03, 128, torch.quint8)
    kernel, scale, zp = OPS[op]
    want = getattr(torch.ops.quantized, op)(qa, qb, scale, zp)
    got = kernel(srq(qa), srq(qb), scale, zp)
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(np.asarray(got.view(np.ndarray)), want.int_repr().numpy())
