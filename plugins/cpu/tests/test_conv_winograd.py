"""Winograd F(2x2, 3x3) and F(4x4, 3x3), the algorithm choice, and the shared per-thread conv
workspace, against torch."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from cpu_kernel_util import node  # noqa: E402
from srcore.ir.types import TensorType  # noqa: E402
from srcore.plugin import ArgInfo, NodeInfo  # noqa: E402
from srcore_cpu.kernels import conv as K  # noqa: E402
from srcore_cpu.kernels import conv_im2col as IM  # noqa: E402
from srcore_cpu.kernels import conv_small as S  # noqa: E402
from srcore_cpu.kernels import conv_winograd as WG  # noqa: E402
from srcore_cpu.kernels import fused as FU  # noqa: E402
from srcore_cpu.kernels.workspace import SharedWorkspace, pad_into  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

F = torch.nn.functional
rng = np.random.default_rng(0)
TILES = (2, 4)


def _ref(x, w, b, padding):
    return F.conv2d(torch.from_numpy(x), torch.from_numpy(w), None if b is None else torch.from_numpy(b),
                    padding=padding).numpy()


def _rel_err(y, ref):
    return float(np.abs(y - ref).max() / np.abs(ref).max())


def _term_scale(x, w, b, padding) -> float:
    """The largest sum of |terms| of an output: rounding errors scale with it, not with the output,
    which cancellation can make arbitrarily small (1 output of -0.045 failed a bound of 1e-5 of
    itself)."""
    return float(_ref(np.abs(x), np.abs(w), None if b is None else np.abs(b), padding).max())


@pytest.mark.parametrize("m", TILES)
def test_transform_matrices_compute_the_correlation_exactly(m):
    # A^T [(G g G^T) . (B^T d B)] A is the valid 3x3 correlation of an n x n tile (float64)
    bt, g, at = WG.matrices(m)
    n = m + 2
    for _ in range(5):
        d, k = rng.standard_normal((n, n)), rng.standard_normal((3, 3))
        y = at @ ((g @ k @ g.T) * (bt @ d @ bt.T)) @ at.T
        ref = np.array([[(d[i:i + 3, j:j + 3] * k).sum() for j in range(m)] for i in range(m)])
        np.testing.assert_allclose(y, ref, rtol=0, atol=1e-12)
    # the bias goes to the point whose A^T column is all ones
    assert (at[:, WG._BIAS_POINT] == 1).all()


@pytest.mark.parametrize("N,C,O,H,W,padding,bias", [
    (1, 8, 16, 16, 16, 1, True), (2, 5, 7, 15, 18, 1, False), (1, 3, 4, 16, 17, 0, True),
    (1, 4, 6, 14, 15, (1, 0), True), (1, 4, 4, 16, 16, 2, False), (1, 6, 3, 20, 20, "same", True),
    (3, 7, 5, 9, 11, 2, True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", TILES)
def test_winograd_matches_torch(N, C, O, H, W, padding, bias, dtype, m):
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((O, C, 3, 3)).astype(dtype)
    b = rng.standard_normal(O).astype(dtype) if bias else None
    ref = _ref(x, w, b, padding)
    pads = K._pads(padding, (3, 3), (1, 1), (1, 1), 2)
    out = np.full(ref.shape, np.nan, dtype)
    y = WG.conv3x3(x, WG.transform_weight(w, m), b, pads, out, SharedWorkspace())
    assert y is out
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y, ref, rtol=0, atol=tol * _term_scale(x, w, b, padding))


@settings(max_examples=60, deadline=None)
@given(m=st.sampled_from(TILES), N=st.integers(1, 3), C=st.integers(1, 9), O=st.integers(1, 9),
       H=st.integers(1, 23), W=st.integers(1, 23), ph=st.integers(0, 2), pw=st.integers(0, 2),
       bias=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_winograd_any_shape_matches_torch(m, N, C, O, H, W, ph, pw, bias, seed):
    if H + 2 * ph < 3 or W + 2 * pw < 3:
        return
    r = np.random.default_rng(seed)   # drawn by hypothesis: a failure replays exactly
    x = r.standard_normal((N, C, H, W)).astype(np.float32)
    w = r.standard_normal((O, C, 3, 3)).astype(np.float32)
    b = r.standard_normal(O).astype(np.float32) if bias else None
    ref = _ref(x, w, b, (ph, pw))
    out = np.full(ref.shape, np.nan, np.float32)
    WG.conv3x3(x, WG.transform_weight(w, m), b, [(ph, ph), (pw, pw)], out, K.SHARED_WS)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5 * _term_scale(x, w, b, (ph, pw)))


@pytest.fixture
def algo(monkeypatch):
    """Force make_conv's algorithm for 3x3 stride-1 convs (0: im2col) and keep small convs off
    the small-input path."""
    monkeypatch.setattr(S, "SMALL_COLS_MAX", 0)

    def force(m):
        monkeypatch.setattr(WG, "choose", lambda *a: m)
    return force


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.sampled_from((0,) + TILES), N=st.integers(1, 3), C=st.integers(1, 8), O=st.integers(1, 8),
       H=st.integers(1, 19), W=st.integers(1, 19), p=st.integers(0, 2), bias=st.booleans(),
       epilogue=st.sampled_from(("none", "relu", "add_relu")))
def test_const_conv_with_epilogues_matches_torch(algo, m, N, C, O, H, W, p, bias, epilogue):
    # through the matchers the graph uses: aten::conv2d, srcore::conv2d_relu / conv2d_add_relu
    if H + 2 * p < 3 or W + 2 * p < 3:
        return
    algo(m)
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = rng.standard_normal((O, C, 3, 3)).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32) if bias else None
    hp = dict(stride=[1, 1], padding=[p, p], dilation=[1, 1], groups=1)
    conv = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), None if b is None else torch.from_numpy(b),
                    padding=p)
    other = rng.standard_normal(tuple(conv.shape)).astype(np.float32)
    if epilogue == "none":
        fn = K.conv2d_matcher(node("aten::conv2d", input="<var>", weight=w, bias=b, **hp)).fn
        args, ref = (x,), conv.numpy()
    elif epilogue == "relu":
        fn = FU.conv2d_relu_matcher(node("srcore::conv2d_relu", input="<var>", weight=w, bias=b, **hp)).fn
        args, ref = (x,), F.relu(conv).numpy()
    else:
        fn = FU.conv2d_add_relu_matcher(node("srcore::conv2d_add_relu", input="<var>", weight=w, bias=b,
                                             other="<var>", **hp)).fn
        args, ref = (x, other), F.relu(conv + torch.from_numpy(other)).numpy()
    tol = 1e-5 * max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(fn(*args), ref, rtol=0, atol=tol)
    out = np.full(ref.shape, np.nan, np.float32)
    assert fn(*args, out=out) is out
    np.testing.assert_allclose(out, ref, rtol=0, atol=tol)


@pytest.mark.parametrize("m,bound", [(2, 1e-6), (4, 1e-5)])
def test_float32_error_on_resnet_like_data(m, bound):
    # relu'd activations, He-initialised weights, a small bias: the error budget per layer
    # (max |err| / max |y| against float64) is 1e-5; measured ~1e-6 for F(4x4), ~3e-7 for F(2x2)
    r = np.random.default_rng(1)
    for C, H in ((64, 28), (128, 14)):
        x = np.maximum(r.standard_normal((1, C, H, H)), 0).astype(np.float32)
        w = (r.standard_normal((C, C, 3, 3)) * np.sqrt(2 / (9 * C))).astype(np.float32)
        b = (0.1 * r.standard_normal(C)).astype(np.float32)
        ref = F.conv2d(*(torch.from_numpy(a).double() for a in (x, w, b)), padding=1).numpy()
        out = np.empty(ref.shape, np.float32)
        WG.conv3x3(x, WG.transform_weight(w, m), b, [(1, 1)] * 2, out, SharedWorkspace())
        assert _rel_err(out, ref) <= bound


def test_choose_by_tiles():
    # resnet_small: 56x56 and 28x28 F(4x4), 14x14 F(2x2), 7x7 im2col
    assert [WG.choose(1, c, c, h, h) for c, h in ((64, 56), (128, 28), (256, 14), (512, 7))] == [4, 4, 2, 0]
    assert WG.choose(4, 512, 512, 7, 7) == 2      # a batch gives the GEMMs enough tiles
    assert WG.choose(1, 64, 64, 26, 26) == 2      # F(4x4) would waste too much of its 28x28 tiles
    assert WG.choose(1, 64, 64, 4, 4) == 0
    assert WG.choose(360, 1, 16, 8, 8) == 0       # the digits demo's first conv: too few channels
    assert WG.choose(360, 16, 32, 4, 4) == 4


def _close(got, want):
    """Within F(4x4)'s float32 accuracy bar: 1e-5 of the output's largest magnitude (an absolute
    1e-4 failed on |y| ~ 29 with a 4e-6 relative error, depending on the random draw)."""
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


def _static_node(w, b, shape, op="aten::conv2d"):
    args = [ArgInfo("input", TensorType("float32", shape)), ArgInfo("weight", TensorType(), True, w),
            ArgInfo("bias", TensorType(), True, b)]
    args += [ArgInfo(n, TensorType(), True, v) for n, v in
             (("stride", [1, 1]), ("padding", [1, 1]), ("dilation", [1, 1]), ("groups", 1))]
    return NodeInfo(op, None, tuple(args), ())


def test_weight_transformed_once_per_tile_size_at_load_for_static_shapes(monkeypatch):
    calls = []
    real = WG.transform_weight
    monkeypatch.setattr(WG, "transform_weight", lambda w, m=2: (calls.append(m), real(w, m))[1])
    monkeypatch.setattr(S, "SMALL_COLS_MAX", 0)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    fn = K.conv2d_matcher(_static_node(w, b, (1, 16, 32, 32))).fn
    assert calls == [4]                      # at load: 32x32 -> F(4x4)
    x = rng.standard_normal((2, 16, 32, 32)).astype(np.float32)
    _close(fn(x), _ref(x, w, b, 1))
    fn(x)
    assert calls == [4]
    fn2 = K.conv2d_matcher(node("aten::conv2d", input="<var>", weight=w, bias=b, stride=[1, 1],
                                padding=[1, 1], dilation=[1, 1], groups=1)).fn
    assert calls == [4]                      # no static shape: chosen at the first call of a size
    x14 = rng.standard_normal((1, 16, 14, 14)).astype(np.float32)
    x30 = rng.standard_normal((1, 16, 30, 30)).astype(np.float32)
    for x in (x14, x30, x14, x30):
        _close(fn2(x), _ref(x, w, b, 1))
    assert calls == [4, 2, 4]
    # the fused conv + relu matcher passes the static shape too: transformed at load
    calls.clear()
    fn3 = FU.conv2d_relu_matcher(_static_node(w, b, (1, 16, 14, 14), "srcore::conv2d_relu")).fn
    assert calls == [2]
    _close(fn3(x14), np.maximum(_ref(x14, w, b, 1), 0))
    assert calls == [2]


def test_static_small_input_plans_the_small_path_not_winograd(monkeypatch):
    calls = []
    real = WG.transform_weight
    monkeypatch.setattr(WG, "transform_weight", lambda w, m=2: (calls.append(m), real(w, m))[1])
    w = rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    fn = K.conv2d_matcher(_static_node(w, None, (1, 8, 16, 16))).fn     # 73 x 256 columns: small
    assert calls == []
    x = rng.standard_normal((1, 8, 16, 16)).astype(np.float32)
    _close(fn(x), _ref(x, w, None, 1))
    assert calls == []


def test_concurrent_winograd_calls_on_two_threads_are_identical():
    # each thread has its own workspace: results equal the single-threaded ones bit for bit
    convs = []
    for C, H in ((16, 48), (24, 16), (16, 40)):      # F(4x4), F(2x2), F(4x4) (odd tiles: 43 columns)
        w = rng.standard_normal((16, C, 3, 3)).astype(np.float32)
        b = rng.standard_normal(16).astype(np.float32)
        x = rng.standard_normal((1, C, H, H + 3)).astype(np.float32)
        convs.append((K.make_conv(2, w, b, 1, 1, 1, 1), x))
    refs = [fn(x).copy() for fn, x in convs]
    errors = []

    def work(order):
        try:
            for _ in range(15):
                for i in order:
                    fn, x = convs[i]
                    np.testing.assert_array_equal(fn(x), refs[i])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(o,)) for o in ((0, 1, 2), (2, 1, 0))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


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
    monkeypatch.setattr(IM, "COLS_CAP_BYTES", 3000)  # forces several chunks, some of uneven size
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


@pytest.mark.parametrize("m", TILES)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_nan_or_inf_input_keeps_the_other_outputs_of_its_tiles(algo, m, bad):
    # Winograd would spread one non-finite value over its whole tile: such inputs run im2col
    algo(m)
    r = np.random.default_rng(7)
    x = r.standard_normal((1, 4, 12, 12)).astype(np.float32)
    x[0, 1, 5, 6] = bad
    w = r.standard_normal((3, 4, 3, 3)).astype(np.float32)
    b = r.standard_normal(3).astype(np.float32)
    fn = K.conv2d_matcher(node("aten::conv2d", input="<var>", weight=w, bias=b, stride=[1, 1], padding=[1, 1],
                               dilation=[1, 1], groups=1)).fn
    ref = _ref(x, w, b, 1)
    got = fn(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    finite = np.isfinite(ref)
    assert finite.sum() > ref.size // 2
    np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-5, atol=1e-5)
    x[0, 1, 5, 6] = 0.0   # the same kernel still takes Winograd on finite inputs
    np.testing.assert_allclose(fn(x), _ref(x, w, b, 1), rtol=0, atol=1e-4)


def test_all_finite_sees_nan_and_both_infinities():
    x = np.zeros((2, 3, 4, 4), np.float32)
    assert WG.all_finite(x) and WG.all_finite(x[:0])
    for bad in (np.nan, np.inf, -np.inf):
        y = x.copy()
        y[1, 2, 3, 0] = bad
        assert not WG.all_finite(y)


@pytest.mark.parametrize("winner", ["winograd", "im2col"])
def test_few_channels_time_winograd_against_im2col_at_load(monkeypatch, winner):
    from srcore_cpu.kernels import tactic as TA

    timed, wg_calls = [], []
    monkeypatch.setenv("SRCORE_CPU_SIMD_CONV", "0")   # (the SIMD conv's own timing: test_conv_simd.py)
    monkeypatch.setenv("SRCORE_CPU_MKL", "0")         # (im2col's MKL GEMM timing: test_mkl_gemm.py)
    monkeypatch.setattr(TA, "fastest", lambda cands, args, **kw: (timed.append(sorted(cands)), winner)[1])
    real = WG.conv3x3
    monkeypatch.setattr(WG, "conv3x3", lambda *a, **kw: (wg_calls.append(1), real(*a, **kw))[1])
    monkeypatch.setattr(S, "SMALL_COLS_MAX", 0)
    from srcore_cpu.kernels import parallel as P

    monkeypatch.setattr(P, "intra_op_threads", lambda: 1)   # (no im2col gather split to time)
    w = rng.standard_normal((16, 24, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    fn = K.conv2d_matcher(_static_node(w, b, (1, 24, 32, 32))).fn
    assert timed == [["im2col", "winograd"]]        # at load, for the static shape
    wg_calls.clear()
    x = rng.standard_normal((1, 24, 32, 32)).astype(np.float32)
    _close(fn(x), _ref(x, w, b, 1))
    assert len(wg_calls) == (winner == "winograd")
    # enough channels: the rule alone, no timing
    timed.clear()
    w = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    K.conv2d_matcher(_static_node(w, None, (1, 64, 32, 32)))
    assert timed == []
