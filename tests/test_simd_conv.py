"""srcore.conv.direct (``srcore.plugin.simd_conv``): the explicit-SIMD float32 direct conv against
torch's conv1d/conv2d over shapes, strides, padding, dilation, groups, both vector widths."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from srcore import SrcoreError
from srcore.plugin import simd_conv

pytestmark = pytest.mark.one_pass


@st.composite
def convs(draw):
    nd = draw(st.sampled_from([1, 2]))
    g = draw(st.sampled_from([1, 1, 2, 3]))
    cg, og = draw(st.integers(2, 9)), draw(st.integers(1, 14))
    k = tuple(draw(st.integers(1, 4)) for _ in range(nd))
    s = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    d = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    p = tuple(draw(st.integers(0, 2)) for _ in range(nd))
    size = tuple(draw(st.integers(dd * (kk - 1) + 1 - 2 * pp if dd * (kk - 1) + 1 > 2 * pp else 1, 40))
                 for kk, dd, pp in zip(k, d, p))
    n = draw(st.integers(1, 2))
    return nd, g, cg, og, k, s, d, p, size, n


def _reference(x, w, b, s, p, d, g, res=None, lo=-math.inf, hi=math.inf, slope=None):
    f = F.conv1d if w.ndim == 3 else F.conv2d
    y = f(torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(w), torch.from_numpy(b), s, p, d, g)
    if res is not None:
        y = y + torch.from_numpy(res)
    if slope is not None:
        y = F.leaky_relu(y, slope)
    return torch.clamp(y, lo, hi).numpy()


@settings(max_examples=40, deadline=None)
@given(case=convs(), seed=st.integers(0, 2**16), lanes=st.sampled_from([8, 16]),
       act=st.sampled_from(["none", "relu", "relu6", "leaky"]), residual=st.booleans(), transposed=st.booleans(),
       rows=st.booleans(), oc=st.booleans(), tile=st.sampled_from([0, 0, 1, 17]))
def test_matches_torch(case, seed, lanes, act, residual, transposed, rows, oc, tile):
    nd, g, cg, og, k, s, d, p, size, n = case
    rng = np.random.default_rng(seed)
    C, O = g * cg, g * og
    shape = (n, C, *size)
    # a non-contiguous input: the last two axes swapped in memory
    x = (np.swapaxes(rng.standard_normal(shape[:-2] + shape[:-3:-1], np.float32), -1, -2) if transposed and nd == 2
         else rng.standard_normal(shape, np.float32)[..., ::1])
    w = rng.standard_normal((O, cg, *k), np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    lo, hi = {"none": (-math.inf, math.inf), "relu": (0.0, math.inf), "relu6": (0.0, 6.0),
              "leaky": (-math.inf, math.inf)}[act]
    slope = 0.1 if act == "leaky" else None
    conv = simd_conv.SimdDirectConv(w, b, s, p, d, g, lo=lo, hi=hi, lanes_=lanes, negative_slope=slope,
                                    rows_interleaved=rows, oc_lanes=oc, row_tile=tile)
    out_shape = conv.out_shape(x.shape)
    if min(out_shape[2:]) < 1:
        return
    res = rng.standard_normal(out_shape, np.float32) if residual else None
    out = np.full(out_shape, np.nan, np.float32)
    conv(x, out, res)
    ref = _reference(x, w, b, s, p, d, g, res, lo, hi, slope)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4 * math.sqrt(cg * math.prod(k)))


def test_two_threads_asymmetric_padding_and_nan_like_torch():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 23, 37), np.float32)
    x[0, 1, 4, 7] = np.nan
    w = rng.standard_normal((13, 5, 3, 3), np.float32)
    b = rng.standard_normal(13).astype(np.float32)
    conv = simd_conv.SimdDirectConv(w, b, (2, 1), ((1, 0), (2, 1)), 1, lo=0.0)
    out = np.empty(conv.out_shape(x.shape), np.float32)
    conv(x, out, threads=2)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 0), (2, 1)))
    ref = torch.relu(F.conv2d(torch.from_numpy(xp), torch.from_numpy(w), torch.from_numpy(b), (2, 1))).numpy()
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4, equal_nan=True)
    assert np.isnan(out).any()


def test_lanes_follow_cpu_features_not_vendor():
    assert simd_conv.lanes({"AVX2", "FMA3"}) == 8
    assert simd_conv.lanes({"AVX2", "FMA3", "AVX512F", "AVX512BW"}) == 16
    assert simd_conv.lanes(set()) == 8
    w = np.ones((2, 2, 3), np.float32)
    assert simd_conv.SimdDirectConv(w, None, 1, 0, 1, lanes_=16).tag.ndim == 2
    assert simd_conv.SimdDirectConv(w, None, 1, 0, 1, lanes_=8).tag.ndim == 1


def test_bad_weight_rank_is_an_error():
    with pytest.raises(SrcoreError, match="3-D or 4-D"):
        simd_conv.SimdDirectConv(np.ones((2, 2), np.float32), None, 1, 0, 1)


@settings(max_examples=30, deadline=None)
@given(s=st.tuples(st.integers(1, 3), st.integers(1, 3)), p=st.tuples(st.integers(0, 3), st.integers(0, 3)),
       hw=st.tuples(st.integers(1, 9), st.integers(1, 80)), extra=st.tuples(st.integers(0, 3), st.integers(0, 20)),
       lanes=st.sampled_from([8, 16]), strided=st.booleans())
def test_phase_copy_is_the_padded_input_split_by_stride(s, p, hw, extra, lanes, strided):
    """The phase-split copy (vector rows at column stride 1 and 2, element by element otherwise and
    at the edges) against numpy's pad and slicing, xq reaching past the input below and right."""
    from srcore.conv.direct import _tag, fill_phases

    (sh, sw), (pt, pl), (H, W) = s, p, hw
    base = np.random.default_rng(H * 100 + W).standard_normal((2, 3, H, 2 * W if strided else W), np.float32)
    x = base[..., ::2] if strided else base
    Hq, Wq = -(-(H + pt) // sh) + extra[0], -(-(W + pl) // sw) + extra[1]
    xq = np.full(3 * sh * sw * Hq * Wq, np.nan, np.float32)
    fill_phases(x, 1, sh, sw, pt, pl, xq, Hq, Wq, _tag(lanes), lanes)
    xp = np.zeros((3, Hq * sh, Wq * sw), np.float32)
    xp[:, pt:pt + H, pl:pl + W] = x[1, :, :Hq * sh - pt, :Wq * sw - pl]
    ref = np.stack([xp[:, a::sh, b::sw] for a in range(sh) for b in range(sw)], 1)
    np.testing.assert_array_equal(xq.reshape(3, sh * sw, Hq, Wq), ref)


@pytest.mark.parametrize("size, stride, lanes, rows", [((8, 8), 1, 8, False), ((15, 9), 2, 8, False), ((7, 5), 1, 16, True),
                                                       ((16, 16), 2, 8, False), ((9, 8), 2, 8, True)])
def test_narrow_planes_two_rows_a_task_match_torch(size, stride, lanes, rows):
    """Output rows no wider than a vector go two to a register block (odd row counts included)."""
    rng = np.random.default_rng(sum(size))
    x = rng.standard_normal((2, 11, *size), np.float32)
    w = rng.standard_normal((14, 11, 3, 3), np.float32)
    b = rng.standard_normal(14).astype(np.float32)
    conv = simd_conv.SimdDirectConv(w, b, stride, 1, 1, lo=0.0, lanes_=lanes, rows_interleaved=rows)
    res = rng.standard_normal(conv.out_shape(x.shape), np.float32)
    out = np.full(res.shape, np.nan, np.float32)
    conv(x, out, res, threads=2)
    np.testing.assert_allclose(out, _reference(x, w, b, stride, 1, 1, 1, res, 0.0), rtol=1e-5, atol=1e-3)


def test_one_conv_on_several_shapes_and_threads_matches_torch():
    """The per-shape tap table and the per-thread phase buffer: shapes alternate, and two Python
    threads call one conv object at once."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(3)
    w = rng.standard_normal((10, 7, 3, 3), np.float32)
    b = rng.standard_normal(10).astype(np.float32)
    conv = simd_conv.SimdDirectConv(w, b, 2, 1, 1)
    xs = [rng.standard_normal(s, np.float32) for s in [(1, 7, 30, 41), (2, 7, 9, 9), (1, 7, 30, 41), (1, 7, 64, 20)] * 2]

    def run(x):
        out = np.empty(conv.out_shape(x.shape), np.float32)
        return conv(x, out), _reference(x, w, b, 2, 1, 1, 1)

    with ThreadPoolExecutor(2) as pool:
        for got, ref in pool.map(run, xs):
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("stride, transposed, rows", [(1, False, False), (2, True, False), (2, False, True),
                                                      (1, True, True)])
def test_bound_call_in_ranges_on_threads_gives_the_call_bits(stride, transposed, rows):
    """``bind``: each image's input fill by channel ranges and its tasks by ranges, ragged parts run
    at once on threads (what a caller splitting the work does), write the bits of ``conv(x, out)``;
    leaky relu and a residual in the stores."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(stride)
    shape = (2, 11, 19, 21)
    x = (np.swapaxes(rng.standard_normal((2, 11, 21, 19), np.float32), -1, -2) if transposed
         else rng.standard_normal(shape, np.float32))
    w = rng.standard_normal((14, 11, 3, 3), np.float32)
    b = rng.standard_normal(14).astype(np.float32)
    conv = simd_conv.SimdDirectConv(w, b, stride, 1, 1, negative_slope=0.1, rows_interleaved=rows)
    res = rng.standard_normal(conv.out_shape(x.shape), np.float32)
    want = np.empty_like(res)
    conv(x, want, res)
    out = np.full_like(res, np.nan)
    run = conv.bind(x, out, res)
    assert (run.images, run.channels) == (2, 11)
    cuts = lambda total: [(0, 1), (1, total // 3), (total // 3, total - 2), (total - 2, total)]
    with ThreadPoolExecutor(4) as pool:
        for n in range(run.images):
            list(pool.map(lambda r, n=n: run.fill(n, *r), cuts(run.channels)[::-1]))
            list(pool.map(lambda r, n=n: run.run_tasks(n, *r), cuts(run.tasks)[::-1]))
    np.testing.assert_array_equal(out, want)
    ref = _reference(x, w, b, stride, 1, 1, 1, res, slope=0.1)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("size, stride, dilation, lanes, oc", [
    ((8, 8), 1, 1, 16, False), ((7, 7), 1, 1, 16, False), ((15, 16), 2, 1, 16, False), ((12, 10), 1, 2, 16, False),
    ((9, 5), 1, 1, 8, False), ((8, 8), 1, 1, 16, True), ((15, 16), 2, 1, 16, True), ((12, 10), 1, 2, 8, True)])
def test_flat_spans_and_oc_lanes_give_the_bits_of_row_blocks(size, stride, dilation, lanes, oc):
    """Small planes: tasks over spans of the plane at the input's row pitch (FLAT), or with output
    channels in the lanes (OC_LANES), against rows/pairs of rows (the same sums in the same order:
    the same bits) and torch; residual, leaky relu and clamp in the epilogue, a partial channel block."""
    from srcore.conv import direct

    rng = np.random.default_rng(sum(size) + lanes)
    x = rng.standard_normal((2, 9, *size), np.float32)
    w = rng.standard_normal((37, 9, 3, 3), np.float32)
    b = rng.standard_normal(37).astype(np.float32)
    kw = dict(lo=-1.5, hi=2.0, lanes_=lanes, negative_slope=0.2)
    conv = simd_conv.SimdDirectConv(w, b, stride, 1, dilation, oc_lanes=oc, **kw)
    blocks = simd_conv.SimdDirectConv(w, b, stride, 1, dilation, **kw)
    blocks.flat = False
    assert conv._geometry(x.shape)[2] == (direct.OC_LANES if oc else direct.FLAT)
    assert blocks._geometry(x.shape)[2] in (direct.ROWS, direct.PAIRS)
    res = rng.standard_normal(conv.out_shape(x.shape), np.float32)
    out, ref_out = np.full(res.shape, np.nan, np.float32), np.full(res.shape, np.nan, np.float32)
    conv(x, out, res, threads=2)
    blocks(x, ref_out, res)
    np.testing.assert_array_equal(out, ref_out)
    np.testing.assert_allclose(out, _reference(x, w, b, stride, 1, dilation, 1, res, -1.5, 2.0, 0.2), rtol=1e-5,
                               atol=1e-3)


@pytest.mark.parametrize("length, tile, lanes, rows, threads", [
    (1000, 64, 16, False, 1), (1000, 100, 16, True, 2), (333, 16, 8, False, 2), (77, 500, 16, False, 1)])
def test_row_pieces_give_the_bits_of_whole_rows(length, tile, lanes, rows, threads):
    """A long 1-D row cut into pieces of ``row_tile`` outputs (rounded up to two vectors; the last
    piece partial, a partial channel block; a tile longer than the row: one piece) against whole-row
    tasks (the same sums: the same bits) and torch, with a residual and the fused clamp; and a
    2-D plane's rows cut the same way."""
    from srcore.conv import direct

    rng = np.random.default_rng(length + tile)
    x = rng.standard_normal((2, 12, length), np.float32)
    w = rng.standard_normal((21, 12, 3), np.float32)
    b = rng.standard_normal(21).astype(np.float32)
    kw = dict(lo=-1.0, hi=3.0, lanes_=lanes, rows_interleaved=rows)
    pieces = simd_conv.SimdDirectConv(w, b, 2, 1, 1, row_tile=tile, **kw)
    whole = simd_conv.SimdDirectConv(w, b, 2, 1, 1, **kw)
    geo, geo_whole = pieces._geometry((2, 12, 1, length)), whole._geometry((2, 12, 1, length))
    assert geo[2] == geo_whole[2] == direct.ROWS
    wo = pieces.out_shape(x.shape)[-1]
    assert geo[8] == min(wo, -(-tile // (2 * lanes)) * 2 * lanes) and geo[6] == geo_whole[6] * -(-wo // geo[8])
    res = rng.standard_normal(pieces.out_shape(x.shape), np.float32)
    out, ref_out = np.full(res.shape, np.nan, np.float32), np.full(res.shape, np.nan, np.float32)
    pieces(x, out, res, threads=threads)
    whole(x, ref_out, res)
    np.testing.assert_array_equal(out, ref_out)
    np.testing.assert_allclose(out, _reference(x, w, b, 2, 1, 1, 1, res, -1.0, 3.0), rtol=1e-5, atol=1e-3)
    x2 = rng.standard_normal((1, 12, 5, length // 4), np.float32)
    w2 = rng.standard_normal((21, 12, 3, 3), np.float32)
    two = simd_conv.SimdDirectConv(w2, b, 1, 1, 1, row_tile=tile, **kw)
    two.flat = False
    out2 = np.full(two.out_shape(x2.shape), np.nan, np.float32)
    two(x2, out2, threads=threads)
    np.testing.assert_allclose(out2, _reference(x2, w2, b, 1, 1, 1, 1, None, -1.0, 3.0), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("oc", [False, True])
def test_reused_bound_call_reads_new_values_and_settings(oc):
    """A second call on the same array objects reuses the bound call (and from then on the kernels'
    compiled entry points): it reads the arrays' new values, follows a changed setting, and a call on
    another thread binds its own (its own phase buffer)."""
    import threading

    rng = np.random.default_rng(5)
    w = rng.standard_normal((12, 5, 3, 3), np.float32)
    b = rng.standard_normal(12).astype(np.float32)
    conv = simd_conv.SimdDirectConv(w, b, 1, 1, 1, lanes_=8, oc_lanes=oc)
    x = np.empty((2, 5, 9, 11), np.float32)
    res = np.empty((2, 12, 9, 11), np.float32)
    out = np.empty((2, 12, 9, 11), np.float32)
    for i in range(4):
        x[...] = rng.standard_normal(x.shape, np.float32)
        res[...] = rng.standard_normal(res.shape, np.float32)
        conv.rows_interleaved = bool(i % 2) and not oc
        conv(x, out, res)
        np.testing.assert_allclose(out, _reference(x, w, b, 1, 1, 1, 1, res), rtol=1e-4, atol=1e-4)
    assert conv.bind(x, out, res) is conv.bind(x, out, res)
    # a fresh output array each call (an engine's returned tensor): the bound call is carried over
    for _ in range(3):
        fresh = np.empty_like(out)
        conv(x, fresh, res)
        np.testing.assert_allclose(fresh, _reference(x, w, b, 1, 1, 1, 1, res), rtol=1e-4, atol=1e-4)
    seen = []
    t = threading.Thread(target=lambda: seen.append(conv.bind(x, out, res)))
    t.start()
    t.join()
    assert seen[0] is not conv.bind(x, out, res)


def test_exact_entry_is_the_compiled_overload_or_the_dispatcher():
    import numba

    from srcore.conv.direct import exact_entry

    @numba.njit
    def pick(a, n):
        return a[n] * 2.0

    a = np.arange(4, dtype=np.float32)
    assert exact_entry(pick, (a, 1)) is pick            # nothing compiled yet
    assert pick(a, 1) == 2.0
    entry = exact_entry(pick, (a, 1))
    assert entry is not pick and entry(a, 3) == 6.0     # the compiled code, called directly
    assert exact_entry(pick, (a.astype(np.float64), 1)) is pick   # other types: not compiled
    plain = lambda *args: None   # noqa: E731 - not numba's: returned as it is
    assert exact_entry(plain, (a,)) is plain


def test_split_parts_are_claimed_once_and_a_late_worker_is_not_waited_for():
    """``run_split``: every part runs once, on the caller or the team's worker, whichever claims it
    first; a worker that joins after the caller claimed every part is not waited for; an error in a
    part is raised on the caller after every started part ended; a split conv gives the 1-thread bits."""
    import threading
    import time

    from srcore.conv import team
    from srcore.conv.direct import run_split

    seen = {}
    run_split(lambda i: seen.setdefault(i, []).append(threading.get_ident()), 2, 64)
    assert sorted(seen) == list(range(64)) and all(len(v) == 1 for v in seen.values())
    # the worker held by another call's slow part: the caller runs all of this call's parts itself
    # and returns without waiting for the worker
    gate, started = threading.Event(), threading.Event()
    held = team.Claims(1)
    team.team(2)._queues[0].put((held, lambda i: (started.set(), gate.wait(5))))
    assert started.wait(5)
    mine = []
    run_split(lambda i: mine.append(threading.get_ident()), 2, 4)
    assert mine == [threading.get_ident()] * 4 and not gate.is_set()
    gate.set()
    ended = []

    def part(i):
        if i == 0:
            raise ValueError("part 0")
        time.sleep(0.01)
        ended.append(i)
    with pytest.raises(ValueError, match="part 0"):
        run_split(part, 2)
    assert ended == [1]
    with pytest.raises(KeyError):
        run_split(lambda i: {}[i] if i == 1 else None, 2)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 8, 17, 19), dtype=np.float32)
    w = rng.standard_normal((24, 8, 3, 3), dtype=np.float32)
    b = rng.standard_normal(24).astype(np.float32)
    conv = simd_conv.SimdDirectConv(w, b, 1, 1, 1)
    one, three = (np.empty(conv.out_shape(x.shape), np.float32) for _ in range(2))
    conv(x, one)
    conv(x, three, threads=3)
    np.testing.assert_array_equal(three, one)
    np.testing.assert_allclose(one, _reference(x, w, b, 1, 1, 1, 1), rtol=1e-5, atol=1e-3)
