"""Winograd F(2x2, 3x3) and the shared per-thread conv workspace, against torch."""
from __future__ import annotations

import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore_cpu.kernels import conv as K  # noqa: E402
from srcore_cpu.kernels import conv_winograd as WG  # noqa: E402
from srcore_cpu.kernels.workspace import SharedWorkspace, pad_into  # noqa: E402

F = torch.nn.functional
rng = np.random.default_rng(0)


def _ref(x, w, b, padding):
    return F.conv2d(torch.from_numpy(x), torch.from_numpy(w), None if b is None else torch.from_numpy(b),
                    padding=padding).numpy()


@pytest.mark.parametrize("N,C,O,H,W,padding,bias", [
    (1, 8, 16, 16, 16, 1, True), (2, 5, 7, 15, 18, 1, False), (1, 3, 4, 16, 17, 0, True),
    (1, 4, 6, 14, 15, (1, 0), True), (1, 4, 4, 16, 16, 2, False), (1, 6, 3, 20, 20, "same", True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_winograd_matches_torch(N, C, O, H, W, padding, bias, dtype):
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((O, C, 3, 3)).astype(dtype)
    b = rng.standard_normal(O).astype(dtype) if bias else None
    ref = _ref(x, w, b, padding)
    pads = K._pads(padding, (3, 3), (1, 1), (1, 1), 2)
    out = np.full(ref.shape, np.nan, dtype)
    y = WG.conv3x3(x, WG.transform_weight(w), b, pads, out, SharedWorkspace())
    assert y is out
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(y, ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_make_conv_picks_winograd_by_size_and_falls_back():
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    fn = K.make_conv(2, w, b, [1, 1], [1, 1], [1, 1], 1)
    for shape in [(1, 4, 16, 16), (1, 4, 5, 5), (4, 16, 16)]:  # winograd, im2col (small), unbatched
        x = rng.standard_normal(shape).astype(np.float32)
        ref = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), padding=1).numpy()
        np.testing.assert_allclose(fn(x), ref, rtol=1e-4, atol=1e-4)
        out = np.empty(ref.shape, np.float32)
        assert fn(x, out=out) is out
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    x64 = rng.standard_normal((1, 4, 16, 16))   # float64 input, float32 weight: the generic path
    ref = F.conv2d(torch.from_numpy(x64), torch.from_numpy(w).double(), torch.from_numpy(b).double(), padding=1)
    np.testing.assert_allclose(fn(x64), ref.numpy(), rtol=1e-5, atol=1e-5)
    assert not WG.applies(w, (2, 2), [(1, 1)] * 2, (1, 1), 1)
    assert not WG.applies(w, (1, 1), [(1, 1)] * 2, (2, 2), 1)


def test_pad_into_rezeroes_borders_of_a_reused_buffer():
    ws = SharedWorkspace()
    big = ws.get(None, "pad", (1, 2, 9, 9), np.float32)
    big.fill(7.0)  # garbage left by another node
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    xp = pad_into(ws, None, x, [(1, 2), (2, 1)])
    np.testing.assert_array_equal(xp, np.pad(x, [(0, 0), (0, 0), (1, 2), (2, 1)]))


def test_shared_workspace_is_per_thread_and_bounded_by_the_largest_node():
    convs = [(K.make_conv(2, rng.standard_normal((8, c, k, k)).astype(np.float32), None, [1, 1], [k // 2] * 2,
                          [1, 1], 1), c) for c, k in [(4, 3), (8, 5), (2, 3)]]
    xs = [rng.standard_normal((1, c, 24, 24)).astype(np.float32) for _, c in convs]
    refs = [fn(x) for (fn, _), x in zip(convs, xs)]
    errors, sizes = [], []

    def work():
        try:
            for _ in range(20):
                for (fn, _), x, ref in zip(convs, xs, refs):
                    np.testing.assert_array_equal(fn(x), ref)
            sizes.append(K.SHARED_WS.nbytes())
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    # the 5x5 conv's columns (8*25*24*24 floats) dominate; the sum over nodes would be larger
    largest_cols = 8 * 25 * 24 * 24 * 4
    assert all(largest_cols <= s < 2 * largest_cols for s in sizes)


@pytest.mark.parametrize("stride,dilation,groups,padding", [(2, 1, 1, 3), (1, 2, 2, 1), (3, 1, 1, 0)])
def test_im2col_in_row_chunks_matches_torch(monkeypatch, stride, dilation, groups, padding):
    monkeypatch.setattr(K, "COLS_CAP_BYTES", 3000)  # forces several chunks, some of uneven size
    x = rng.standard_normal((2, 4, 23, 19)).astype(np.float32)
    w = rng.standard_normal((6, 4 // groups, 5, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    ref = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), stride, padding, dilation,
                   groups).numpy()
    fn = K.make_conv(2, w, b, stride, padding, dilation, groups)
    np.testing.assert_allclose(fn(x), ref, rtol=1e-4, atol=1e-4)
    x1 = rng.standard_normal((1, 4, 9)).astype(np.float32)   # 1-D: chunks over the only spatial dim
    w1 = rng.standard_normal((6, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(K.conv1d(x1, w1, None, 2, 1), F.conv1d(torch.from_numpy(x1), torch.from_numpy(w1),
                                                                      None, 2, 1).numpy(), rtol=1e-4, atol=1e-4)
