"""The AVX2 int8 GEMM (``vpmaddubsw``/``vpmaddwd``, kernels/int8_gemm.py): exact int32 sums
against int64 numpy, the int16-saturation split included; quantized linear and conv on it bit for
bit with the float32-SGEMM path (itself bit for bit with torch, test_kernels.py / test_fast_int8.py)
and with ``torch.ops.quantized``."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from srcore.cpu_features import cpu_features
from srcore.plugin import QParams, QuantizedArray, int8_gemm
from srcore_quantized.kernels import conv as qconv
from srcore_quantized.kernels import linear as qlinear

pytestmark = [pytest.mark.one_pass,
              pytest.mark.skipif("AVX2" not in cpu_features(), reason="the int8 GEMM needs AVX2 (a feature test)")]
SETTINGS = settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))


def _ref(a, x_zp, w, zw):
    return (a.astype(np.int64) - x_zp) @ (w.astype(np.int64) - np.asarray(zw, np.int64)[:, None]).T


@SETTINGS
@given(seed=st.integers(0, 2**31), m=st.integers(1, 23), k=st.integers(1, 300), n=st.integers(1, 40),
       amax=st.sampled_from([1, 127, 128, 129, 255]), x_zp=st.integers(0, 255), wzp=st.booleans(),
       outliers=st.integers(0, 3))
@example(seed=0, m=9, k=260, n=33, amax=255, x_zp=255, wzp=False, outliers=0)   # every pair at the int16 limit
@example(seed=1, m=40, k=100, n=20, amax=127, x_zp=3, wzp=False, outliers=2)    # a few rows above the limit
# more rows than two blocks of 128 kB (the rows in blocks), a few bytes above the limit
@example(seed=2, m=1000, k=300, n=20, amax=127, x_zp=5, wzp=True, outliers=3)
def test_int8_gemm_is_exact(seed, m, k, n, amax, x_zp, wzp, outliers):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, amax + 1, (m, k)).astype(np.uint8)
    a[rng.integers(0, m, outliers), rng.integers(0, k, outliers)] = 255   # as after percentile clipping
    w = rng.integers(-128, 128, (n, k)).astype(np.int8)
    if seed % 3 == 0:   # worst case: every product at its largest
        a[:] = amax
        w[:] = -128
    zw = rng.integers(-128, 128, n) if wzp else np.zeros(n, np.int64)
    p = int8_gemm.pack(w, zw)
    ap = np.zeros((m, p.kp), np.uint8)
    ap[:, :k] = a
    got = int8_gemm.gemm(ap, x_zp, p)
    assert got.dtype == np.int32 and np.array_equal(got, _ref(a, x_zp, w, zw))


@pytest.fixture
def both_paths(monkeypatch):
    """Run a kernel once on the int8 GEMM and once on the float32-SGEMM path."""
    def run(fn):
        monkeypatch.setattr(int8_gemm, "faster_than_sgemm", lambda: True)
        fast = fn()
        monkeypatch.setattr(int8_gemm, "faster_than_sgemm", lambda: False)
        slow = fn()
        return fast, slow
    return run


def _qa(rng, shape, zp, hi=256):
    return QuantizedArray(rng.integers(0, hi, shape).astype(np.uint8), "quint8", QParams(0.02, zp))


def _qw(rng, shape, zp=False):
    w = rng.integers(-128 if zp else -127, 128, shape).astype(np.int8)
    scales = tuple(float(s) for s in rng.uniform(0.001, 0.01, shape[0]))
    zps = tuple(int(z) for z in rng.integers(-4, 5, shape[0])) if zp else (0,) * shape[0]
    return QuantizedArray(w, "qint8", QParams(scales, zps, axis=0))


@SETTINGS
@given(seed=st.integers(0, 2**31), c=st.integers(1, 19), cout=st.integers(1, 20), k=st.sampled_from([1, 2, 3]),
       stride=st.sampled_from([1, 2]), pad=st.integers(0, 2), dil=st.sampled_from([1, 2]), zp=st.integers(0, 255),
       hi=st.sampled_from([128, 256]), relu=st.booleans())
def test_qconv_on_the_int8_gemm_matches_the_sgemm_path(both_paths, seed, c, cout, k, stride, pad, dil, zp, hi, relu):
    rng = np.random.default_rng(seed)
    x = _qa(rng, (2, c, 9, 8), zp, hi)
    w = _qw(rng, (cout, c, k, k))
    bias = rng.normal(0, 0.1, cout).astype(np.float32)
    op = qconv.qconv_relu_out if relu else qconv.qconv_out
    fast, slow = both_paths(lambda: np.asarray(op(x, w, bias, stride, pad, dil, 1, 0.05, 10)).copy())
    assert np.array_equal(fast, slow)


@SETTINGS
@given(seed=st.integers(0, 2**31), c=st.integers(1, 24), cout=st.integers(1, 20), k=st.sampled_from([1, 3, 5]),
       stride=st.sampled_from([1, 2]), pad=st.integers(0, 2), dil=st.sampled_from([1, 2]), zp=st.integers(0, 129),
       outliers=st.sampled_from([0, 1, 5, 40, 400]), conv1d=st.booleans(), channels_first=st.booleans())
@example(seed=3, c=16, cout=20, k=3, stride=1, pad=1, dil=1, zp=0, outliers=5, conv1d=False, channels_first=False)
@example(seed=5, c=3, cout=8, k=3, stride=1, pad=1, dil=1, zp=0, outliers=1, conv1d=False, channels_first=False)
@example(seed=4, c=7, cout=9, k=5, stride=2, pad=2, dil=2, zp=129, outliers=40, conv1d=False, channels_first=True)
def test_conv_requantize_scans_the_input_for_bytes_above_the_limit(both_paths, seed, c, cout, k, stride, pad, dil, zp,
                                                                   outliers, conv1d, channels_first):
    """The conv's exactness scan on its input (bytes above the int16 pair's limit clamped there, each
    one's excess added to every output position whose window reads it, at its tap): bit for bit with
    the SGEMM path, for few such bytes, none, and more than the scan holds (then the rows' scan)."""
    shape = (2, c, 11) if conv1d else (2, c, 9, 8)
    assume(all(s + 2 * pad - dil * (k - 1) > 0 for s in shape[2:]))
    rng = np.random.default_rng(seed)
    x = _qa(rng, shape, zp, 128)
    flat = np.asarray(x).reshape(-1)
    flat[rng.integers(0, flat.size, outliers)] = rng.integers(130, 256, outliers)   # as after percentile clipping
    if outliers:            # the first and the last byte too (the scan's first block and its tail)
        flat[[0, -1]] = 255
    w = _qw(rng, (cout, c) + ((k,) if conv1d else (k, k)))
    if seed % 2:            # every pair of products at its largest: a byte left unclamped saturates int16
        np.asarray(w)[...] = 127
    bias = rng.normal(0, 0.1, cout).astype(np.float32)
    fast, slow = both_paths(lambda: np.asarray(qconv.qconv_out(x, w, bias, stride, pad, dil, 1, 0.05, 10)).copy())
    assert np.array_equal(fast, slow)
    # the function itself, into an NCHW or a channels-last target (trt_like's and quantized_cpu's)
    p8 = qconv.packed_int8(w, k if conv1d else k * k)
    n_sp = len(shape) - 2
    tgt = np.empty(slow.shape if channels_first else (slow.shape[0],) + slow.shape[2:] + (cout,), np.uint8)
    int8_gemm.conv_requantize(np.asarray(x), zp, p8, (k,) * n_sp, (stride,) * n_sp, (pad,) * n_sp, (dil,) * n_sp,
                              0.02, qconv.packed(w).scales, bias, 0.05, 10, False, tgt, channels_first)
    assert np.array_equal(tgt if channels_first else np.moveaxis(tgt, -1, 1), slow)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**31), c=st.integers(1, 20), cout=st.integers(1, 40), k=st.sampled_from([1, 3]),
       stride=st.sampled_from([1, 2]), pad=st.integers(0, 1), zp=st.integers(0, 128),
       outliers=st.sampled_from([0, 3, 30]),
       block=st.sampled_from([64, 1000, 1 << 17]), channels_first=st.booleans())
# pixels as rows
@example(seed=0, c=16, cout=16, k=1, stride=1, pad=0, zp=3, outliers=30, block=64, channels_first=False)
def test_one_call_conv_layer_in_row_blocks(monkeypatch, seed, c, cout, k, stride, pad, zp, outliers, block,
                                           channels_first):
    """The whole layer in one compiled call (``_kernels.conv_layer_u8``: scan, gathering, GEMM,
    corrections and requantization per block of rows), with blocks down to 4 rows (each clamped
    byte's corrections land in the blocks that hold its output rows): bit for bit with the steps
    one by one (``ConvPlan._run_steps``) and with the SGEMM path."""
    monkeypatch.setattr(int8_gemm, "faster_than_sgemm", lambda: True)
    monkeypatch.setattr(int8_gemm, "C_BLOCK_BYTES", block)
    rng = np.random.default_rng(seed)
    x = _qa(rng, (2, c, 7, 9), zp, 128)
    flat = np.asarray(x).reshape(-1)
    flat[rng.integers(0, flat.size, outliers)] = rng.integers(130, 256, outliers)
    w = _qw(rng, (cout, c, k, k))
    if seed % 2:
        np.asarray(w)[...] = 127
    bias = rng.normal(0, 0.1, cout).astype(np.float32)
    p8 = qconv.packed_int8(w, k * k)
    out_sp = tuple((s + 2 * pad - k) // stride + 1 for s in (7, 9))
    shape = (2, cout) + out_sp if channels_first else (2,) + out_sp + (cout,)
    plan = int8_gemm.conv_plan(x.shape, zp, p8, (k, k), (stride,) * 2, (pad,) * 2, (1, 1), 0.02, qconv.packed(w).scales,
                               bias, 0.05, 10, True, shape, channels_first)
    assert plan.geo is not None                 # no weight zero points: the one-call path applies
    fused, steps = np.empty(shape, np.uint8), np.empty(shape, np.uint8)
    assert plan._run_fused(np.asarray(x), fused) is fused
    plan._run_steps(np.asarray(x), steps)
    assert np.array_equal(fused, steps)
    monkeypatch.setattr(int8_gemm, "faster_than_sgemm", lambda: False)
    slow = np.asarray(qconv.qconv_relu_out(x, w, bias, stride, pad, 1, 1, 0.05, 10))
    assert np.array_equal(fused if channels_first else np.moveaxis(fused, -1, 1), slow)


@SETTINGS
@given(seed=st.integers(0, 2**31), rows=st.integers(1, 9), k=st.integers(1, 200), n=st.integers(1, 40),
       zp=st.integers(0, 255), hi=st.sampled_from([128, 256]), wzp=st.booleans())
def test_qlinear_on_the_int8_gemm_matches_the_sgemm_path(both_paths, seed, rows, k, n, zp, hi, wzp):
    rng = np.random.default_rng(seed)
    x = _qa(rng, (rows, k), zp, hi)
    w = _qw(rng, (n, k), wzp)
    bias = rng.normal(0, 0.1, n).astype(np.float32)
    fast, slow = both_paths(lambda: np.asarray(qlinear.qlinear_out(x, w, bias, 0.07, 3)).copy())
    assert np.array_equal(fast, slow)


def test_qconv_and_qlinear_on_the_int8_gemm_match_torch(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(int8_gemm, "faster_than_sgemm", lambda: True)
    torch.backends.quantized.engine = "fbgemm"
    rng = np.random.default_rng(5)
    xf = torch.from_numpy(rng.uniform(-0.6, 0.67, (2, 13, 10, 10)).astype(np.float32))
    tx = torch.quantize_per_tensor(xf, 0.01, 60, torch.quint8)     # in [0, 127]: fbgemm does not saturate
    assert int(tx.int_repr().max()) <= 127
    wf = torch.from_numpy(rng.normal(0, 0.1, (24, 13, 3, 3)).astype(np.float32))
    tw = torch.quantize_per_channel(wf, torch.full((24,), 0.002, dtype=torch.double), torch.zeros(24, dtype=torch.long),
                                    0, torch.qint8)
    b = torch.from_numpy(rng.normal(0, 0.1, 24).astype(np.float32))
    packed = torch.ops.quantized.conv2d_prepack(tw, b, [1, 1], [1, 1], [1, 1], 1)
    ref = torch.ops.quantized.conv2d(tx, packed, 0.08, 5).int_repr().numpy()
    x = QuantizedArray(tx.int_repr().numpy(), "quint8", QParams(0.01, 60))
    w = QuantizedArray(tw.int_repr().numpy(), "qint8", QParams((0.002,) * 24, (0,) * 24, axis=0))
    assert np.array_equal(np.asarray(qconv.qconv_out(x, w, b.numpy(), 1, 1, 1, 1, 0.08, 5)), ref)
    lin_w = torch.quantize_per_channel(wf.reshape(24, -1)[:, :100].contiguous(),
                                       torch.full((24,), 0.002, dtype=torch.double), torch.zeros(24, dtype=torch.long),
                                       0, torch.qint8)
    lx = torch.quantize_per_tensor(xf.reshape(-1)[:700].reshape(7, 100), 0.01, 60, torch.quint8)
    ref = torch.ops.quantized.linear(lx, torch.ops.quantized.linear_prepack(lin_w, b), 0.08, 5).int_repr().numpy()
    got = qlinear.qlinear_out(QuantizedArray(lx.int_repr().numpy(), "quint8", QParams(0.01, 60)),
                              QuantizedArray(lin_w.int_repr().numpy(), "qint8",
                                             QParams((0.002,) * 24, (0,) * 24, axis=0)), b.numpy(), 0.08, 5)
    assert np.array_equal(np.asarray(got), ref)


def test_qconv1d_on_the_int8_gemm_matches_torch(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(int8_gemm, "faster_than_sgemm", lambda: True)
    torch.backends.quantized.engine = "fbgemm"
    rng = np.random.default_rng(8)
    tx = torch.quantize_per_tensor(torch.from_numpy(rng.uniform(-0.2, 0.3, (2, 6, 21)).astype(np.float32)),
                                   0.004, 50, torch.quint8)
    assert int(tx.int_repr().max()) <= 127
    tw = torch.quantize_per_channel(torch.from_numpy(rng.normal(0, 0.1, (8, 6, 3)).astype(np.float32)),
                                    torch.full((8,), 0.003, dtype=torch.double), torch.zeros(8, dtype=torch.long), 0,
                                    torch.qint8)
    b = torch.from_numpy(rng.normal(0, 0.1, 8).astype(np.float32))
    packed = torch.ops.quantized.conv1d_prepack(tw, b, [2], [1], [2], 1)
    ref = torch.ops.quantized.conv1d_relu(tx, packed, 0.05, 7).int_repr().numpy()
    x = QuantizedArray(tx.int_repr().numpy(), "quint8", QParams(0.004, 50))
    w = QuantizedArray(tw.int_repr().numpy(), "qint8", QParams((0.003,) * 8, (0,) * 8, axis=0))
    assert np.array_equal(np.asarray(qconv.qconv_relu_out(x, w, b.numpy(), 2, 1, 2, 1, 0.05, 7)), ref)


@SETTINGS
@given(seed=st.integers(0, 2**31), c=st.integers(1, 40), k=st.sampled_from([1, 3, 5]), stride=st.sampled_from([1, 2]),
       pad=st.integers(0, 2), dil=st.sampled_from([1, 2]), zp=st.integers(0, 255), wzp=st.booleans(),
       relu=st.booleans(), wide=st.booleans())
@example(seed=1, c=37, k=3, stride=2, pad=1, dil=1, zp=255, wzp=True, relu=False, wide=False)   # SIMD body and remainder
# stride 1: runs of 64 / C interior pixels (4 of 16 channels, 21 of 3), the edges pixel by pixel
@example(seed=2, c=16, k=3, stride=1, pad=1, dil=1, zp=3, wzp=False, relu=True, wide=True)
@example(seed=3, c=3, k=5, stride=1, pad=2, dil=1, zp=200, wzp=True, relu=False, wide=True)
def test_depthwise_in_numba_matches_the_float_path(monkeypatch, seed, c, k, stride, pad, dil, zp, wzp, relu, wide):
    rng = np.random.default_rng(seed)
    x = _qa(rng, (2, c, 11, 70 if wide else 9), zp)
    w = _qw(rng, (c, 1, k, k), wzp)
    bias = rng.normal(0, 0.1, c).astype(np.float32)
    op = qconv.qconv_relu_out if relu else qconv.qconv_out

    def run(enabled):
        monkeypatch.setattr(int8_gemm, "numba_enabled", lambda: enabled)
        return np.asarray(op(x, w, bias, stride, pad, dil, c, 0.05, 10)).copy()
    assert np.array_equal(run(True), run(False))


def test_the_gemm_path_is_chosen_by_cpu_features(monkeypatch):
    monkeypatch.delenv("SRCORE_INT8_GEMM", raising=False)
    vnni = frozenset({"AVX", "AVX2", "FMA3"}) | int8_gemm.VNNI_FEATURES
    assert int8_gemm.simd_path(frozenset({"AVX", "AVX2", "FMA3"})) == "avx2"
    assert int8_gemm.simd_path(vnni) == "vnni"
    # vpdpbusd on ymm registers needs AVX512VL too
    assert int8_gemm.simd_path(frozenset({"AVX2", "AVX512F", "AVX512BW", "AVX512VNNI"})) == "avx2"
    assert int8_gemm.simd_path(frozenset({"SSE42", "AVX"})) is None
    monkeypatch.setenv("SRCORE_INT8_GEMM", "avx2")
    assert int8_gemm.simd_path(vnni) == "avx2"
    monkeypatch.setenv("SRCORE_INT8_GEMM", "sgemm")
    assert int8_gemm.simd_path(vnni) is None


def test_the_vnni_kernel_is_vpdpbusd_and_exact_where_it_runs():
    """Compiled here whatever the CPU (its function is compiled for AVX512-VNNI); run only where
    the CPU has it (not on the AVX2 machine this was written on: there the test checks the code)."""
    import numba
    from srcore.int8 import _kernels

    rng = np.random.default_rng(3)
    m, k, n = 9, 136, 40
    a = rng.integers(0, 256, (m, k), dtype=np.uint8)      # bytes above the AVX2 pair's limit too
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    p = int8_gemm.pack(w, np.zeros(n), align=4)
    c = np.zeros((m, p.n_panels * 16), np.int32)
    args = (a.reshape(-1), p.kp, m, p.panels, p.n_panels, c.reshape(-1), 8)
    sig = tuple(numba.typeof(v) for v in args)
    for kernel, vnni in ((_kernels.gemm_u8s8_vnni, True), (_kernels.gemm_u8s8, False)):    # one factory
        fresh = numba.njit(nogil=True, boundscheck=False)(kernel.py_func)   # the cache keeps no asm
        fresh.compile(sig)
        asm = fresh.inspect_asm(sig)
        assert ("vpdpbusd" in asm, "vpmaddubsw" in asm) == (vnni, not vnni)
        # the AVX2 kernel is not compiled for AVX-512 (numba pruned the vpdpbusd branch)
        assert ("avx512vnni" in fresh.inspect_llvm(sig)) == vnni
    if int8_gemm.simd_path() == "vnni":
        _kernels.gemm_u8s8_vnni(*args)
        assert np.array_equal(c[:, :n], a.astype(np.int64) @ w.T.astype(np.int64))


def test_the_zmm_vnni_kernel_is_512_bit_vpdpbusd_and_exact_where_it_runs():
    """8 rows x 2 panels, with the tails: 9 rows (a block of 8 and one row), 3 panels (a pair and
    one), a depth not a multiple of 16 quads; bytes up to 255 and weights down to -128."""
    import numba
    from srcore.int8 import _kernels

    rng = np.random.default_rng(5)
    m, k, n = 9, 138, 40
    a = np.zeros((m, -(-k // 4) * 4), np.uint8)
    a[:, :k] = rng.integers(0, 256, (m, k), dtype=np.uint8)
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    p = int8_gemm.pack(w, np.zeros(n), align=4)
    c = np.full((m, p.n_panels * 16), -1, np.int32)
    args = (a.reshape(-1), p.kp, m, p.panels, p.n_panels, c.reshape(-1), 8)
    sig = tuple(numba.typeof(v) for v in args)
    fresh = numba.njit(nogil=True, boundscheck=False)(_kernels.gemm_u8s8_vnni512.py_func)
    fresh.compile(sig)
    asm = fresh.inspect_asm(sig)
    # zmm operands: LLVM did not split the 512-bit values in two ymm halves
    assert any("vpdpbusd" in line and "zmm" in line for line in asm.splitlines())
    if int8_gemm.simd_path() == "vnni":
        _kernels.gemm_u8s8_vnni512(*args)
        assert np.array_equal(c[:, :n], a[:, :k].astype(np.int64) @ w.T.astype(np.int64))


def test_the_vnni_kernel_is_chosen_by_timing(monkeypatch):
    """On a VNNI CPU the fastest of the ymm, zmm and (where permitted) AMX kernels wins (timed here by
    a fake clock that says which is faster); the environment picks one without timing, AMX only
    where the operating system lends the tiles."""
    monkeypatch.delenv("SRCORE_INT8_GEMM", raising=False)
    monkeypatch.setattr(int8_gemm, "_kernels", lambda path: lambda *args: path)     # nothing runs
    for amx in (False, True):
        monkeypatch.setattr(int8_gemm, "_amx_permitted", lambda amx=amx: amx)
        for fast in ("vnni", "vnni512", "amx"):
            got = int8_gemm.vnni_kernel(timer=lambda fn: 1.0 if fn() == fast else 2.0)
            assert got == (fast if amx or fast != "amx" else got) and (amx or got != "amx")
        for env, want in (("vnni256", "vnni"), ("vnni512", "vnni512"), ("amx", "amx")):
            monkeypatch.setenv("SRCORE_INT8_GEMM", env)
            if amx or env != "amx":
                assert int8_gemm.vnni_kernel(timer=lambda fn: pytest.fail("timed")) == want
            else:       # not permitted: timed among the others
                assert int8_gemm.vnni_kernel(timer=lambda fn: 1.0 if fn() == "vnni" else 2.0) == "vnni"
        monkeypatch.delenv("SRCORE_INT8_GEMM")


def test_the_amx_kernel_is_tdpbusd_and_exact_where_it_runs():
    """Blocks of 32 rows x 2 panels with every edge: 16-row and 9-row remainders (a single tile of
    rows; the rest on the zmm kernel), an odd last panel, two row blocks; a depth padded to 64."""
    import numba
    from srcore.int8 import _kernels, amx

    rng = np.random.default_rng(6)
    m, k, n = 57, 150, 40
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    p = int8_gemm.pack(w, np.zeros(n), align=64)
    assert p.kp == 192
    a = np.zeros((m, p.kp), np.uint8)
    a[:, :k] = rng.integers(0, 256, (m, k), dtype=np.uint8)
    c = np.full((m, p.n_panels * 16), -1, np.int32)
    args = (a.reshape(-1), p.kp, m, p.panels, p.n_panels, c.reshape(-1), 48)
    sig = tuple(numba.typeof(v) for v in args)
    fresh = numba.njit(nogil=True, boundscheck=False)(_kernels.gemm_u8s8_amx.py_func)
    fresh.compile(sig)
    asm = fresh.inspect_asm(sig)
    assert "tdpbusd" in asm and "ldtilecfg" in asm and "tilerelease" in asm
    if int8_gemm.simd_path() == "vnni" and amx.permitted():
        _kernels.gemm_u8s8_amx(*args)
        assert np.array_equal(c[:, :n], a[:, :k].astype(np.int64) @ w.T.astype(np.int64))
        # a depth of a multiple of 1 kB: the rows are relaid as contiguous tiles first
        w2 = rng.integers(-128, 128, (n, 1024), dtype=np.int8)
        a2 = rng.integers(0, 256, (m, 1024), dtype=np.uint8)
        p2 = int8_gemm.pack(w2, np.zeros(n), align=64)
        c2 = np.full((m, p2.n_panels * 16), -1, np.int32)
        _kernels.gemm_u8s8_amx(a2.reshape(-1), p2.kp, m, p2.panels, p2.n_panels, c2.reshape(-1), 48)
        assert np.array_equal(c2[:, :n], a2.astype(np.int64) @ w2.T.astype(np.int64))


def test_both_gemm_kernels_load_from_numba_s_cache_in_a_new_process():
    """The kernels come from one factory (a closure per multiply-accumulate step): numba's on-disk
    cache keys a closure on its bytecode and cell values, so another process loads, not compiles."""
    import subprocess
    import sys

    import numba
    from srcore.int8 import _kernels

    code = ("import numpy as np, numba\n"
            "from srcore.int8 import _kernels\n"
            "args = (np.zeros(16, np.uint8), 16, 1, np.zeros(256, np.int8), 1,\n"
            "        np.zeros(64, np.int32), 8)\n"
            "ks = (_kernels.gemm_u8s8, _kernels.gemm_u8s8_vnni)\n"
            "for k in ks:\n    k.compile(tuple(numba.typeof(v) for v in args))\n"
            "print(sum(sum(k.stats.cache_hits.values()) for k in ks),\n"
            "      sum(sum(k.stats.cache_misses.values()) for k in ks))\n")
    args = (np.zeros(16, np.uint8), 16, 1, np.zeros(256, np.int8), 1, np.zeros(64, np.int32), 8)
    for k in (_kernels.gemm_u8s8, _kernels.gemm_u8s8_vnni):     # in the cache now (compiled or loaded)
        k.compile(tuple(numba.typeof(v) for v in args))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["2", "0"]     # two loads, no compilation


def test_an_empty_batch_on_the_int8_gemm(monkeypatch):
    monkeypatch.setattr(int8_gemm, "faster_than_sgemm", lambda: True)
    rng = np.random.default_rng(4)
    w = _qw(rng, (8, 4, 3, 3))
    y = qconv.qconv_out(_qa(rng, (0, 4, 5, 5), 3, 256), w, None, [1, 1], [1, 1], [1, 1], 1, 0.05, 2)
    assert y.shape == (0, 8, 5, 5)
    y = qlinear.qlinear_out(_qa(rng, (0, 20), 3, 256), _qw(rng, (8, 20)), None, 0.05, 2)
    assert y.shape == (0, 8)
    assert int8_gemm.gemm(np.zeros((0, 20), np.uint8), 3, int8_gemm.pack(np.ones((8, 20), np.int8), np.zeros(8))).shape == (0, 8)
