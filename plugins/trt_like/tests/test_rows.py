"""The compiled row kernels (kernels/rows.py) against torch: softmax (scaled) and log-softmax rows
with the values attention feeds them (masked keys at -10000, -inf, NaN, +inf, rows shorter than a
vector, a tail past the last full vector)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from srcore_trt_like.kernels import rows

pytestmark = pytest.mark.one_pass


def _rows(m):
    x = np.random.default_rng(m).standard_normal((9, m)).astype(np.float32) * 4
    x[0, m // 2] = np.nan             # NaN row: all NaN
    x[1] = -np.inf                    # every key masked: NaN (0 / 0), as torch
    x[2, m - 1] = np.inf              # +inf: NaN (inf - inf)
    x[3, : m // 2] = -np.inf          # partly masked: zeros there
    x[4, m // 3:] -= 10000.0          # BERT's additive mask: exp far below float32's normals
    x[5] = 1e4                        # far from zero
    x[6, m - 1] = 90.0                # the max in the tail
    x[7, : m // 2] = -95.0            # exp(x - max) around float32's smallest subnormals
    x[8] = 0.0
    x[8, m // 2] = 95.0               # exp(-95): subnormal results, as torch's
    return x


@pytest.mark.parametrize("m", [5, 16, 37, 128])
@pytest.mark.parametrize("scale", [1.0, 0.125])
def test_softmax_rows_match_torch(m, scale):
    x = _rows(m)
    out = np.full_like(x, -1.0)
    rows.softmax_rows(x, out, np.float32(scale))
    want = torch.softmax(torch.from_numpy(x) * scale, -1).numpy()
    assert np.array_equal(np.isnan(out), np.isnan(want))
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=3e-44)   # ~20 subnormal ulps


@pytest.mark.parametrize("m", [5, 16, 37, 128])
def test_log_softmax_rows_match_torch(m):
    x = _rows(m)[[0, 1, 2, 3, 5, 6, 8]]
    out = np.full_like(x, -1.0)
    rows.log_softmax_rows(x, out)
    want = torch.log_softmax(torch.from_numpy(x), -1).numpy()
    assert np.array_equal(np.isnan(out), np.isnan(want))
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-5)


@pytest.mark.parametrize("m", [5, 16, 37, 128])
@pytest.mark.parametrize("divide", [True, False])
def test_softmax_rows_biased_match_torch(m, divide):
    """Attention's scale, additive mask and softmax in one pass: one mask row for all rows (step 0)
    and a row per row (step 1), torch's order (scale, add, softmax)."""
    x = _rows(m)
    c = np.float32(8.0 if divide else 0.125)
    t = torch.from_numpy(x)
    for bias in (_rows(m + 1)[4:5, :m].copy(), np.random.default_rng(m).standard_normal((9, m)).astype(np.float32)):
        bias[:, : m // 4] = -10000.0                      # masked keys
        bias[3:4] = -np.inf                               # every key masked (a row of -inf when step 1)
        scaled = t / float(c) if divide else t * float(c)
        biased = scaled + torch.from_numpy(bias)
        step = 1 if bias.shape[0] > 1 else 0
        for safe in (False, True):   # softmax's NaN rows, or scaled_dot_product_attention's zeros
            # SDPA's weights as its output: zero scores plus the biased ones as its mask, an identity's values
            want = torch.softmax(biased, -1) if not safe else torch.nn.functional.scaled_dot_product_attention(
                torch.zeros(1, len(x), 1), torch.zeros(1, m, 1), torch.eye(m)[None], attn_mask=biased[None])[0]
            want = want.numpy()
            if step:
                assert (np.isnan(want[3]) if not safe else want[3] == 0).all()
            for fn in (rows.softmax_rows_biased,   # the block form (short rows) too, at every width
                       lambda *a: rows.softmax_block_biased(*a[:-1], np.empty(len(x), np.float32), a[-1])):
                out = np.full_like(x, -1.0)
                fn(x, out, c, divide, bias, step, safe)
                assert np.array_equal(np.isnan(out), np.isnan(want))
                np.testing.assert_allclose(out, want, rtol=2e-6, atol=3e-44)   # ~20 subnormal ulps


@pytest.mark.parametrize("m", [1, 5, 15])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_short_rows_match_torch(m, log):
    """The across-rows form for rows under a vector (SSD's 5 classes): the hard rows above among
    many ordinary ones (the transposed passes' vector body and tail)."""
    x = np.concatenate([_rows(m) if m > 1 else np.array([[np.nan], [-np.inf], [np.inf], [1e4]], np.float32),
                        np.random.default_rng(m).standard_normal((40, m)).astype(np.float32) * 4])
    n = len(x)
    out = np.full_like(x, -1.0)
    rows.softmax_short_rows(x, out, log, np.empty(n * m, np.float32), np.empty(n, np.float32),
                            np.empty(n, np.float32))
    want = (torch.log_softmax if log else torch.softmax)(torch.from_numpy(x), -1).numpy()
    assert np.array_equal(np.isnan(out), np.isnan(want))
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-5 if log else 3e-44)


@pytest.mark.parametrize("m", [16, 20, 49, 64])
@pytest.mark.parametrize("kind", ["softmax", "log_softmax"])
@pytest.mark.parametrize("lead", [(3,), (5, 97)])
def test_softmax_layer_block_rows_match_torch(m, kind, lead):
    """The softmax layer's block path (rows of 16-64: full blocks of rows, then the rest) on rows
    of every special kind spread over blocks, against torch."""
    from srcore_trt_like.builder.network import Layer, Network
    from srcore_trt_like.tactics import nn

    n = int(np.prod(lead))
    x = np.random.default_rng(n + m).standard_normal((n, m)).astype(np.float32) * 4
    special = _rows(m)
    at = np.random.default_rng(m).choice(n, size=min(n, 2 * len(special)), replace=False)
    x[at] = np.resize(special, (len(at), m))
    x = x.reshape(*lead, m)
    net = Network()
    src, dst = net.new_tensor(x.shape), net.new_tensor(x.shape)
    run = nn.softmax(Layer(kind, [src], [dst], {"dim": x.ndim - 1}), net)
    out = np.full_like(x, -1.0)
    run(x, out)
    fn = torch.softmax if kind == "softmax" else torch.log_softmax
    want = fn(torch.from_numpy(x), -1).numpy()
    assert np.array_equal(np.isnan(out), np.isnan(want))
    if kind == "softmax":
        np.testing.assert_allclose(out, want, rtol=2e-6, atol=3e-44)
    else:
        np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-5)


@pytest.mark.parametrize("m", [1, 5, 16, 40, 128])
def test_max_rows_match_torch(m):
    """``amax`` / ``amin`` rows (a point cloud's max over its points): NaN anywhere, -inf / +inf,
    rows shorter than a vector, a tail past the last full one."""
    x = _rows(m)
    x[3, m - 1] = -7e4                # the extreme in the tail
    for sign, ref in ((1.0, torch.amax), (-1.0, torch.amin)):
        out = np.full(x.shape[0], 3.0, np.float32)
        rows.max_rows(x, out, np.float32(sign))
        np.testing.assert_array_equal(out, ref(torch.from_numpy(x), -1).numpy())
