"""Intra-op threads of the numba tactics (numba's OpenMP layer) and the engine's one-pool rule."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from _shared import conv_case
from srcore_trt_like.conv import ConvSpec
from srcore_trt_like.conv import packed as conv_packed
from srcore_trt_like.conv import winograd_packed
from srcore_trt_like.conv.packed import PackedGemmTactic
from srcore_trt_like.conv.winograd_packed import WinogradPackedTactic
from srcore_trt_like.kernels import threads as parallel
from srcore_trt_like.tactics import choose as tactics

#: kernels and compiled programs are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

SPECS = [ConvSpec((1, 3, 40, 40), 64, 7, 2, 3, relu=True),                   # chunks per thread
         ConvSpec((2, 64, 9, 9), 520, 3, 1, 1, relu=True, residual=True),    # phased, GEMM by row blocks
         ConvSpec((1, 16, 14, 14), 40, 1, 2, 0)]                             # phased, GEMM by column blocks


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(conv_packed, "CHUNK_BYTES", 60000)


def _run(t, x, res):
    out = np.full(t.out_shape, np.nan, np.float32)
    t(x, out, res)
    return out


@pytest.mark.parametrize("spec", SPECS)
def test_threaded_packed_conv_is_bit_identical_to_one_thread(spec):
    x, w, b, res = conv_case(spec)
    one = _run(PackedGemmTactic(spec, w, b, threads=1), x, res)
    for nt in (2, 3):
        t = PackedGemmTactic(spec, w, b, threads=nt)
        np.testing.assert_array_equal(_run(t, x, res), one)
    assert [PackedGemmTactic(s, *conv_case(s)[1:3], threads=2).by_chunks for s in SPECS] == [True, False, False]
    assert [PackedGemmTactic(s, *conv_case(s)[1:3], threads=2).split_rows for s in SPECS[1:]] == [True, False]


WINO = [ConvSpec((2, 16, 30, 29), 24, 3, 1, 1, relu=True, residual=True),     # chunks per thread
        ConvSpec((1, 64, 9, 9), 70, 3, 1, 1)]                                 # one chunk: phases split


@pytest.mark.parametrize("spec", WINO)
@pytest.mark.parametrize("m", [2, 4])
def test_threaded_winograd_packed_is_bit_identical_to_one_thread(spec, m, monkeypatch):
    monkeypatch.setattr(winograd_packed, "CHUNK_BYTES", 20000 if spec is WINO[0] else 1 << 20)
    x, w, b, res = conv_case(spec)
    one = _run(WinogradPackedTactic(spec, w, b, m=m, threads=1), x, res)
    for nt in (2, 3):
        t = WinogradPackedTactic(spec, w, b, m=m, threads=nt)
        assert t.by_chunks == (spec is WINO[0])
        np.testing.assert_array_equal(_run(t, x, res), one)


def test_threaded_packed_conv_from_two_python_threads_at_once(monkeypatch):
    """numba's OpenMP layer takes parallel launches from several Python threads (a RuntimePool)."""
    monkeypatch.setattr(winograd_packed, "CHUNK_BYTES", 20000)
    work = []
    for spec in SPECS:
        x, w, b, res = conv_case(spec, 3)
        t = PackedGemmTactic(spec, w, b, threads=2)
        work.append((t, x, res, _run(PackedGemmTactic(spec, w, b, threads=1), x, res)))
    for spec in WINO:
        x, w, b, res = conv_case(spec, 4)
        t = WinogradPackedTactic(spec, w, b, m=4, threads=2)
        work.append((t, x, res, _run(WinogradPackedTactic(spec, w, b, m=4, threads=1), x, res)))
    errors = []

    def hammer(offset):
        try:
            for _ in range(15):
                for t, x, res, want in work[offset:] + work[:offset]:
                    if not np.array_equal(_run(t, x, res), want):
                        errors.append(t.spec)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors


def test_split_covers_the_range_in_quanta():
    for total, nt, q in [(10, 3, 1), (64, 2, 16), (50, 4, 16), (1, 2, 1)]:
        parts = [parallel.split(total, t, nt, q) for t in range(nt)]
        assert parts[0][0] == 0 and parts[-1][1] == total
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
        assert all(a % q == 0 for a, _ in parts)


def test_on_caller_runs_openblas_on_the_calling_thread_and_restores_it():
    set_local = parallel._set_local()
    if not set_local:
        pytest.skip("numpy's OpenBLAS has no per-thread thread count")
    seen = []

    def probe():
        prev = set_local(1)      # what the wrapper set: 1; put it back as it was
        set_local(prev)
        seen.append(prev)
    wrapped = parallel.on_caller(probe)
    before = set_local(3)
    wrapped()
    after = set_local(before)
    assert seen == [1] and after == 3


def test_threaded_engines_keep_openblas_on_the_caller(monkeypatch):
    """At >1 intra-op thread, an engine with conv layers (packed_gemm threads on OpenMP) wraps every
    candidate that is not on the OpenMP pool; at 1 thread nothing is wrapped."""
    from srcore_trt_like.builder.network import Layer, Network

    net = Network()
    x = net.new_tensor((1, 4, 8, 8))
    y = net.new_tensor((1, 4, 8, 8))
    conv = Layer("conv", [x], [y], {"groups": 1})
    net.layers.append(conv)
    monkeypatch.setattr(parallel, "count", lambda: 1)
    assert tactics._blas_on_caller(net) is None
    monkeypatch.setattr(parallel, "count", lambda: 2)
    assert tactics._blas_on_caller(net) is parallel.on_caller
    conv.attrs["groups"] = 4                  # no packed_gemm: nothing on the OpenMP pool
    assert tactics._blas_on_caller(net) is None
    net.layers.append(Layer("max_pool2d", [y], [net.new_tensor((1, 4, 4, 4))],
                            {"stride": (2, 2), "dilation": (1, 1)}))       # the vector pool threads too
    assert tactics._blas_on_caller(net) is parallel.on_caller


def test_small_layers_stay_on_one_thread(monkeypatch):
    """A parallel region waits for its whole team; below PARALLEL_MIN_WORK a layer is not worth a
    thread that a busy core may keep waiting (the tail latency of small models)."""
    from srcore_trt_like.conv.tactics import conv_tactic_builders

    monkeypatch.setattr(parallel, "count", lambda: 2)
    small = ConvSpec((1, 8, 16, 16), 8, 3, padding=1)              # 0.15 M multiply-adds
    big = ConvSpec((1, 64, 56, 56), 64, 3, padding=1)              # 116 M
    assert small.macs < parallel.PARALLEL_MIN_WORK <= big.macs
    rng = np.random.default_rng(0)
    for spec, want in ((small, 1), (big, 2)):
        w = rng.standard_normal(spec.weight_shape).astype(np.float32)
        (build,) = [b for name, b in conv_tactic_builders(spec, w, None) if name == "packed_gemm"]
        assert build().threads == want


def test_openblas_hold_is_shared_with_the_cpu_plugin():
    """trt_like's regions and the cpu plugin's part runs share the core's one hold: with one each, a
    cpu region left first under a trt_like one put the user's count back inside it, and the trt_like
    one, leaving last, restored the 1 it had saved: numpy's BLAS stayed on one thread."""
    cpu = pytest.importorskip("srcore_cpu.kernels.parallel")
    import threadpoolctl

    if not parallel._set_local() or cpu._blas_controller() is None:
        pytest.skip("numpy's OpenBLAS has no settable count here")
    get = cpu._count_fns(cpu._blas_controller())[0]
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        cpu_token = cpu._blas_one_thread_enter(cpu._blas_controller())
        token = parallel.blas_enter()
        cpu._blas_one_thread_exit(cpu._blas_controller(), cpu_token)
        assert get() == 1 and parallel._blas_threads() == 2 and cpu.blas_threads() == 2
        parallel.blas_exit(token)
        assert get() == 2


def test_plan_holds_openblas_once_around_its_held_layers(monkeypatch):
    """The layers an engine holds to one OpenBLAS thread (``openblas.on_caller``) run inside one hold
    for the whole call, not one per layer (two OpenBLAS count calls, ~2.2 us, a layer): each still
    sees OpenBLAS on one thread, the user's count is back after the call, and the result is the
    layers' own."""
    import threadpoolctl

    from srcore.plugin import openblas
    from srcore_trt_like.builder.network import Network
    from srcore_trt_like.builder.plan import Plan, Step

    ctl = openblas.controller()
    if ctl is None:
        pytest.skip("numpy's BLAS cannot be told apart here")
    c = openblas._count(ctl)

    def current():
        if c.local is None:
            return c.get()
        prev = c.local(1)
        c.local(prev)
        return prev

    net = Network()
    x = net.new_tensor((2, 3), "x")
    y = net.add("relu", [x], (2, 3), "a")
    z = net.add("relu", [y], (2, 3), "b")
    net.inputs, net.outputs = [x], [z]
    seen, enters = [], []

    def probe(a, out):
        seen.append(current())
        np.maximum(a, 0, out=out)
    real_enter = openblas.enter
    monkeypatch.setattr(openblas, "enter", lambda ctl=None: enters.append(1) or real_enter(ctl))
    plan = Plan(net, [Step(layer, "probe", openblas.on_caller(probe)) for layer in net.layers])
    xx = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        out = plan(xx)
        after = current()
    np.testing.assert_array_equal(out, np.maximum(xx, 0))
    assert seen == [1, 1] and len(enters) == 1 and after == 2
