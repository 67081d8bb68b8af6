"""The cpu plugin's constant-weight convs on srcore's SIMD direct conv (``srcore.plugin.simd_conv``):
chosen by timing at load for a static input shape (either layout of its input copy, or output
channels in the lanes on a 16-lane CPU); forced here so
each path runs, against torch; ``SRCORE_CPU_SIMD_CONV=0`` turns it off."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from srcore_cpu.kernels import conv as _conv
from srcore_cpu.kernels import tactic as _tactic

pytestmark = pytest.mark.one_pass


def _fake_rounds(monkeypatch, times):
    """Every load-time timing round answers ``times(candidates)`` (``{name: seconds}``), in one pass or
    two (``tactic.deferred``); no wait for OpenBLAS's worker. The candidate sets, in the order timed."""
    from srcore_cpu.kernels import parallel

    seen = []
    monkeypatch.setattr(parallel, "wait_blas_idle", lambda: None)
    monkeypatch.setattr(_tactic, "_rounds", lambda cands, args, *a, **kw: seen.append(set(cands)) or times(cands))
    return seen


def _chosen(fn):
    """The kernel ``make_conv`` chose: a two-pass one's after the second pass."""
    _tactic.run_deferred()
    return getattr(fn, "chosen", None) or fn


@pytest.mark.parametrize(("nd", "shape", "o", "k", "s", "p", "d", "g", "way"), [
    (2, (2, 5, 19, 23), 13, 3, 2, 1, 1, 1, "simd"),
    (2, (2, 5, 19, 23), 13, 3, 2, 1, 1, 1, "simd_rows"),
    (2, (1, 8, 16, 30), 8, 3, 1, 2, 2, 2, "simd_rows"),
    (1, (2, 6, 50), 10, 5, 2, 2, 1, 1, "simd"),
    (1, (2, 6, 1200), 10, 3, 2, 1, 1, 1, "simd_tiled"),   # 600 outputs: a long row in pieces
    (2, (2, 5, 19, 23), 37, 3, 2, 1, 1, 1, "simd_oc"),
    (2, (1, 8, 16, 30), 8, 3, 1, 2, 2, 2, "simd_oc"),
    (1, (1, 1, 3000), 12, 10, 5, 0, 1, 1, "simd_tiled"),   # one input channel: audio_conv1d's first conv
    (1, (2, 1, 90), 9, 4, 3, 1, 2, 1, "simd"),              # one channel, dilated
    (2, (1, 1, 20, 21), 7, 3, 2, 1, 1, 1, "simd_rows"),     # a grayscale stem
])
def test_simd_path_matches_torch_and_other_shapes_fall_back(monkeypatch, nd, shape, o, k, s, p, d, g, way):
    from srcore.plugin import simd_conv

    if way == "simd_oc" and simd_conv.lanes() != 16:
        pytest.skip("output channels in the lanes are a candidate on 16-lane CPUs only")
    monkeypatch.delenv("SRCORE_CPU_SIMD_CONV", raising=False)   # on by default
    monkeypatch.delenv("SRCORE_CPU_THREADS", raising=False)
    monkeypatch.setattr(_conv._par, "intra_op_threads", lambda: 1)
    monkeypatch.setattr(_conv._small, "SMALL_COLS_MAX", 0)   # (small inputs keep their gather + GEMM)
    # the chosen layout at half the other paths' time (inside the margin)
    monkeypatch.setattr(_tactic, "timings", lambda cands, args, **kw: {k: 0.5 if k == way else 1.0 for k in cands})
    rng = np.random.default_rng(0)
    w = rng.standard_normal((o, shape[1] // g) + (k,) * nd, np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    fn = _conv.make_conv(nd, w, b, s, p, d, g, input_shape=shape)
    assert fn.__name__ == "conv_simd" and fn.tactic == way
    ref_fn = F.conv1d if nd == 1 else F.conv2d
    for sh in (shape, (1, *shape[1:-1], shape[-1] + 3)):   # the second shape takes the other paths
        x = rng.standard_normal(sh, np.float32)
        ref = ref_fn(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), s, p, d, g).numpy()
        np.testing.assert_allclose(fn(x), ref, rtol=1e-5, atol=1e-4)


def test_off_with_the_variable_at_0(monkeypatch):
    monkeypatch.setenv("SRCORE_CPU_SIMD_CONV", "0")
    monkeypatch.setattr(_conv._small, "SMALL_COLS_MAX", 0)
    monkeypatch.setattr(_tactic, "timings", lambda cands, args, **kw: {k: 0.5 if k == "simd" else 1.0 for k in cands})
    w = np.ones((4, 3, 3, 3), np.float32)
    assert _conv.make_conv(2, w, None, 1, 1, 1, 1, input_shape=(1, 3, 20, 20)).__name__ != "conv_simd"


@pytest.mark.parametrize(("simd_s", "rows_s", "other_s", "want"), [
    (0.92, 0.95, 1.0, "conv_const"),      # faster, but by less than the margin: the other paths stay
    (0.95, 0.80, 1.0, "simd_rows"),
    (0.70, 0.80, 1.0, "simd"),
])
def test_the_simd_conv_must_win_by_the_margin(monkeypatch, simd_s, rows_s, other_s, want):
    monkeypatch.delenv("SRCORE_CPU_SIMD_CONV", raising=False)
    monkeypatch.delenv("SRCORE_CPU_THREADS", raising=False)
    monkeypatch.setattr(_conv._par, "intra_op_threads", lambda: 1)
    times = {"simd": simd_s, "simd_rows": rows_s, "simd_oc": 2.0, "other": other_s}
    monkeypatch.setattr(_conv._small, "SMALL_COLS_MAX", 0)
    # other timed choices (numpy's or MKL's GEMM under im2col, where MKL loads) tie at 1 s
    monkeypatch.setattr(_tactic, "timings", lambda cands, args, **kw: {k: times.get(k, 1.0) for k in cands})
    w = np.random.default_rng(1).standard_normal((6, 4, 3, 3)).astype(np.float32)
    fn = _conv.make_conv(2, w, None, 2, 1, 1, 1, input_shape=(1, 4, 17, 20))
    assert getattr(fn, "tactic", fn.__name__) == want
    x = np.random.default_rng(2).standard_normal((1, 4, 17, 20)).astype(np.float32)
    ref = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), None, 2, 1).numpy()
    np.testing.assert_allclose(fn(x), ref, rtol=1e-5, atol=1e-4)


def test_small_inputs_keep_their_gather_and_gemm(monkeypatch):
    monkeypatch.delenv("SRCORE_CPU_SIMD_CONV", raising=False)
    monkeypatch.delenv("SRCORE_CPU_THREADS", raising=False)
    monkeypatch.setattr(_conv._par, "intra_op_threads", lambda: 1)
    monkeypatch.setattr(_tactic, "timings", lambda cands, args, **kw: {k: 0.1 if k == "simd" else 1.0 for k in cands})
    w = np.ones((4, 3, 3, 3), np.float32)
    assert _conv.make_conv(2, w, None, 1, 1, 1, 1, input_shape=(1, 3, 8, 8)).__name__ == "conv_const"
    # unless its work is large (audio_conv1d's first conv, 4.1M multiply-adds, a small-input plan too)
    w = np.ones((128, 1, 10), np.float32)
    assert _conv._small.SmallConv(w, None, (5,), ((0, 0),), (1,), 1).plan((1, 1, 16000), np.float32) is not None
    assert _conv.make_conv(1, w, None, 5, 0, 1, 1, input_shape=(1, 1, 16000)).__name__ == "conv_simd"


@pytest.mark.parametrize("way", ["simd@2", "simd_rows@2", "simd_oc@2", "simd"])
def test_at_two_intra_op_threads_the_split_layouts_are_candidates(monkeypatch, way):
    """At 2 intra-op threads each layout is also timed split over them (its tasks on the part pool);
    the chosen one runs with that count, with torch's results."""
    from srcore.plugin import simd_conv

    if way.startswith("simd_oc") and simd_conv.lanes() != 16:
        pytest.skip("output channels in the lanes are a candidate on 16-lane CPUs only")
    monkeypatch.delenv("SRCORE_CPU_SIMD_CONV", raising=False)
    monkeypatch.delenv("SRCORE_CPU_THREADS", raising=False)
    monkeypatch.setattr(_conv._par, "intra_op_threads", lambda: 2)
    monkeypatch.setattr(_conv._small, "SMALL_COLS_MAX", 0)
    runs = []
    seen = _fake_rounds(monkeypatch, lambda cands: {k: 0.5 if k == way else 1.0 for k in cands})
    real_parts = _conv._par.run_parts
    monkeypatch.setattr(_conv._par, "run_parts", lambda fn, parts, threads: runs.append(parts) or real_parts(
        fn, parts, threads))
    rng = np.random.default_rng(4)
    w = rng.standard_normal((16, 8, 3, 3), np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    fn = _conv.make_conv(2, w, b, 1, 1, 1, 1, input_shape=(1, 8, 24, 20))
    assert {"simd", "simd@2", "simd_rows@2"} <= seen[-1] and "other" not in seen[-1]
    assert _chosen(fn).tactic == fn.tactic == way and seen[-1] == {"other"}   # the second pass
    x = rng.standard_normal((1, 8, 24, 20), np.float32)
    runs.clear()
    ref = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), 1, 1).numpy()
    np.testing.assert_allclose(fn(x), ref, rtol=1e-5, atol=1e-4)
    assert runs == ([2] if way.endswith("@2") else [])


@pytest.mark.parametrize(("times", "want", "parts"), [
    ({"other": 1.0, "other@2": 1.0}, "other@2", [2]),      # a tie keeps the part-pool split
    ({"other": 0.9, "other@2": 1.0}, "conv_const", []),    # threaded BLAS clearly faster
    ({"other": 1.0, "other@2": 0.8, "simd@2": 0.75}, "other@2", [2]),   # the SIMD conv misses the margin
    ({"other": 1.0, "other@2": 0.8, "simd@2": 0.7}, "simd@2", [2]),
    # threaded BLAS faster than the split but not than the SIMD conv on the part pool: the SIMD conv
    ({"other": 0.95, "other@2": 1.2, "simd@2": 0.96}, "simd@2", [2]),
])
def test_at_two_threads_the_other_paths_split_on_the_part_pool(monkeypatch, times, want, parts):
    """At 2 intra-op threads the other paths (Winograd, im2col) are also timed split in 2 parts on the
    part pool, after the candidates that do not call threaded BLAS; threaded BLAS kept only where 3 %
    faster than every part-pool candidate; the SIMD conv must beat the split by its margin; torch's
    results either way."""
    monkeypatch.delenv("SRCORE_CPU_SIMD_CONV", raising=False)
    monkeypatch.delenv("SRCORE_CPU_THREADS", raising=False)
    monkeypatch.setattr(_conv._par, "intra_op_threads", lambda: 2)
    monkeypatch.setattr(_conv._small, "SMALL_COLS_MAX", 0)
    seen = _fake_rounds(monkeypatch, lambda cands: {k: times.get(k, 2.0) for k in cands})
    runs = []
    real_parts = _conv._par.run_parts
    monkeypatch.setattr(_conv._par, "run_parts", lambda fn, n, threads: runs.append(n) or real_parts(fn, n, threads))
    rng = np.random.default_rng(5)
    w = rng.standard_normal((16, 16, 3, 3), np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    shape = (1, 16, 24, 24)
    fn = _conv.make_conv(2, w, b, 1, 1, 1, 1, input_shape=shape)
    assert {"other@2", "simd@2"} <= seen[-1] and "other" not in seen[-1]   # threaded BLAS: the second pass
    chosen = _chosen(fn)
    assert seen[-1] == {"other"} and getattr(chosen, "tactic", chosen.__name__) == want
    x = rng.standard_normal(shape, np.float32)
    runs.clear()
    ref = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), 1, 1).numpy()
    np.testing.assert_allclose(fn(x), ref, rtol=1e-4, atol=1e-3)
    assert sorted(set(runs)) == parts
    x2 = rng.standard_normal((1, 16, 9, 10), np.float32)   # another shape: the paths of one thread
    runs.clear()
    ref2 = F.conv2d(torch.from_numpy(x2), torch.from_numpy(w), torch.from_numpy(b), 1, 1).numpy()
    np.testing.assert_allclose(fn(x2), ref2, rtol=1e-4, atol=1e-3)
    assert runs == []


def test_at_two_threads_the_convs_threaded_blas_timings_wait_for_the_second_pass(monkeypatch):
    """At 2 intra-op threads (the wall clock) building a module's convs times none of their threaded-BLAS
    candidates (``other``; the im2col copies split against one thread; numpy's GEMM against MKL's
    split, whose split half is timed then); the first call of any of them times those of all, in the
    order built; each then gives torch's result."""
    from srcore_cpu.kernels import mkl_gemm

    monkeypatch.delenv("SRCORE_CPU_SIMD_CONV", raising=False)
    monkeypatch.delenv("SRCORE_CPU_THREADS", raising=False)
    monkeypatch.setattr(_conv._par, "intra_op_threads", lambda: 2)
    monkeypatch.setattr(_conv._small, "SMALL_COLS_MAX", 0)
    _tactic.run_deferred()                      # (nothing of another test's left queued)
    seen = _fake_rounds(monkeypatch, lambda cands: {k: 1.0 for k in cands})
    halves = []
    real_split, real_blas = _tactic.split_rounds, _tactic.blas_rounds
    monkeypatch.setattr(_tactic, "split_rounds", lambda *a, **kw: halves.append("mkl") or real_split(*a, **kw))
    monkeypatch.setattr(_tactic, "blas_rounds", lambda *a, **kw: halves.append("numpy") or real_blas(*a, **kw))
    rng = np.random.default_rng(6)
    wa, wb = rng.standard_normal((16, 16, 3, 3), np.float32), rng.standard_normal((32, 32, 3, 3), np.float32)
    a = _conv.make_conv(2, wa, None, 1, 1, 1, 1, input_shape=(1, 16, 24, 24))     # Winograd
    b = _conv.make_conv(2, wb, None, 2, 1, 1, 1, input_shape=(1, 32, 64, 64))     # im2col, large columns
    built = len(seen)
    assert not any(c & {"other", "one"} for c in seen)
    mkl = mkl_gemm.matmul_rows() is not None and mkl_gemm.matmul_rows().threads > 1
    assert halves == (["mkl"] if mkl else [])
    xb = rng.standard_normal((1, 32, 64, 64), np.float32)
    ref = F.conv2d(torch.from_numpy(xb), torch.from_numpy(wb), None, 2, 1).numpy()
    np.testing.assert_allclose(b(xb), ref, rtol=1e-4, atol=1e-3)
    assert seen[built:] == [{"other"}, {"one", "split"}, {"other"}]
    assert halves == (["mkl", "numpy"] if mkl else [])
    assert a.chosen is not None and b.chosen is not None
    xa = rng.standard_normal((1, 16, 24, 24), np.float32)
    ref = F.conv2d(torch.from_numpy(xa), torch.from_numpy(wa), None, 1, 1).numpy()
    np.testing.assert_allclose(a(xa), ref, rtol=1e-4, atol=1e-3)
    assert len(seen) == built + 3


@pytest.mark.parametrize("add", [True, False])
@pytest.mark.parametrize("simd_wins", [True, False])
def test_fused_conv_relu_in_the_simd_convs_store(monkeypatch, add, simd_wins):
    """srcore::conv2d_relu / conv2d_add_relu: where the SIMD conv wins, it adds ``other`` and clamps
    at 0 in its own store (the separate epilogue never runs; a NaN stays NaN, as torch's relu);
    an ``other`` it cannot take (non-contiguous) and the other paths get conv + epilogue;
    torch's result every way."""
    from srcore.ir.types import TensorType
    from srcore.testing import node_info
    from srcore_cpu.kernels import fused_conv as FU
    from srcore_cpu.kernels import linalg

    monkeypatch.delenv("SRCORE_CPU_SIMD_CONV", raising=False)
    monkeypatch.delenv("SRCORE_CPU_THREADS", raising=False)
    monkeypatch.setattr(_conv._par, "intra_op_threads", lambda: 1)
    monkeypatch.setattr(_conv._small, "SMALL_COLS_MAX", 0)
    timed = []

    def timings(cands, args, **kw):
        timed.append({k: cands[k](*args) is not None for k in cands})   # every candidate runs
        return {k: (0.5 if k == "simd" else 1.0) if simd_wins else (0.5 if k == "other" else 1.0) for k in cands}
    monkeypatch.setattr(_tactic, "timings", timings)
    relus = []
    real_relu = linalg.relu_
    monkeypatch.setattr(FU, "_relu_", lambda o: relus.append(1) or real_relu(o))
    rng = np.random.default_rng(8)
    w = rng.standard_normal((16, 8, 3, 3), dtype=np.float32)
    b = rng.standard_normal(16, dtype=np.float32)
    x = rng.standard_normal((1, 8, 12, 11), dtype=np.float32)
    x[0, 3, 5, 5] = np.nan
    shape = (1, 16, 12, 11)
    t = TensorType("float32", shape)
    other = rng.standard_normal(shape, dtype=np.float32)
    hp = dict(weight=w, bias=b, stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1, outputs=(t,))
    if add:
        fn = FU.conv2d_add_relu_matcher(node_info("srcore::conv2d_add_relu", input=TensorType("float32", x.shape),
                                                  other=t, **hp)).fn
        run = lambda o: fn(x, o)   # noqa: E731
    else:
        fn = FU.conv2d_relu_matcher(node_info("srcore::conv2d_relu", input=TensorType("float32", x.shape), **hp)).fn
        run = lambda o: fn(x)      # noqa: E731
    assert timed
    ref = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), padding=1)
    ref = torch.relu(ref + torch.from_numpy(other) if add else ref).numpy()
    relus.clear()
    got = run(other)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)
    assert np.isnan(got).sum() == np.isnan(ref).sum() > 0
    assert relus == ([] if simd_wins else [1])
    if add:
        strided = np.empty((1, 16, 12, 22), np.float32)[..., ::2]
        strided[...] = other
        relus.clear()
        np.testing.assert_allclose(run(strided), ref, rtol=1e-5, atol=1e-4)
        assert relus == [1]
