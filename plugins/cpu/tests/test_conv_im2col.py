"""The im2col engine (``conv_im2col.py``): column-phase sources for wide strided kernels, against torch."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from srcore_cpu.kernels import conv as K  # noqa: E402
from srcore_cpu.kernels import conv_im2col as IM  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

F = torch.nn.functional
rng = np.random.default_rng(3)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kh=st.integers(1, 7), kw=st.integers(1, 8), sh=st.integers(1, 3), sw=st.integers(1, 4),
       dw=st.integers(1, 2), H=st.integers(1, 20), W=st.integers(1, 26), p=st.integers(0, 3),
       N=st.integers(1, 3), bias=st.booleans(), cap=st.sampled_from((3000, 2 << 20)))
def test_strided_im2col_matches_torch(monkeypatch, kh, kw, sh, sw, dw, H, W, p, N, bias, cap):
    # wide kernels with a stride (kw > 2 sw) copy from column phases; small caps chunk the rows
    if H + 2 * p < kh or W + 2 * p < dw * (kw - 1) + 1:
        return
    monkeypatch.setattr(IM, "COLS_CAP_BYTES", cap)
    x = rng.standard_normal((N, 3, H, W)).astype(np.float32)
    w = rng.standard_normal((5, 3, kh, kw)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32) if bias else None
    ref = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), None if b is None else torch.from_numpy(b),
                   (sh, sw), p, (1, dw)).numpy()
    got = IM.conv_forward(x, w, b, (sh, sw), [(p, p)] * 2, (1, dw), 1, ws=K.SHARED_WS)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * max(1.0, float(np.abs(ref).max())))


def test_column_phases_only_for_kernels_wider_than_twice_the_stride():
    xp = np.zeros((1, 1, 12, 12), np.float32)
    taps = [(0, j) for j in range(7)]
    srcs = IM._tap_sources(xp, taps, (1, 1), (2, 2), (3, 3), K.SHARED_WS, None)
    assert all(src is not xp and src.shape[-1] == 6 for _, src, _ in srcs)
    taps3 = [(0, j) for j in range(3)]
    assert all(src is xp for _, src, _ in IM._tap_sources(xp, taps3, (1, 1), (2, 2), (5, 5), K.SHARED_WS, None))


def test_resnet_stem_shape_matches_torch():
    x = rng.standard_normal((1, 3, 64, 66)).astype(np.float32)
    w = rng.standard_normal((16, 3, 7, 7)).astype(np.float32)
    ref = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), None, 2, 3).numpy()
    fn = K.make_conv(2, w, None, 2, 3, 1, 1)
    np.testing.assert_allclose(fn(x), ref, rtol=0, atol=1e-5 * np.abs(ref).max())
