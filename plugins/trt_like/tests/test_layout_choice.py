"""Each run of NCHW16c layers keeps the layout only when it timed faster than NCHW at build
(``tactics/layout_choice.py``): a run that times slower blocked goes back to NCHW (the timing is
faked here, never measured in a test), the decision is served from the timing cache on a rebuild,
the runs are split where a layer of another kind cuts them, and results match torch either way."""
from __future__ import annotations

import attrs
import numpy as np
import pytest

import srcore
from srcore_trt_like.builder.layout import apply_nchwc, clear_nchwc, nchwc_runs, nchwc_tensors
from srcore_trt_like.builder.network import Network
from srcore_trt_like.tactics import layout_choice, timing_cache

torch = pytest.importorskip("torch")
nn = torch.nn
TRT = ("trt_like", "cpu")


class Block(nn.Module):
    """A stem into an inverted residual (1x1, depthwise, 1x1 + residual), a grouped 3x3 conv that cuts
    the run, then a second 1x1 / depthwise run into a pool."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, 1, 1)
        self.block = nn.Sequential(nn.Conv2d(16, 48, 1), nn.ReLU6(), nn.Conv2d(48, 48, 3, 1, 1, groups=48),
                                   nn.Hardswish(), nn.Conv2d(48, 16, 1))
        self.dense = nn.Conv2d(16, 24, 3, 1, 1, groups=2)
        self.tail = nn.Sequential(nn.Conv2d(24, 32, 1), nn.ReLU(), nn.Conv2d(32, 32, 3, 1, 1, groups=32))

    def forward(self, x):
        x = self.stem(x)
        x = self.dense(self.block(x) + x)
        return nn.functional.adaptive_avg_pool2d(self.tail(x), 1)


@pytest.fixture
def cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(timing_cache, "_tags", {})
    monkeypatch.setattr(timing_cache, "_caches", {})
    return tmp_path


@pytest.fixture(scope="module")
def block():
    torch.manual_seed(3)
    m = Block().eval()
    x = torch.randn(1, 3, 12, 12)
    with torch.no_grad():
        want = m(x).numpy()
    return srcore.from_torchscript(torch.jit.script(m), (x,)), x.numpy(), want


def _fake(monkeypatch, blocked_s: float, nchw_s: float) -> list:
    """``time_run`` answering the given times (recording its calls) instead of timing."""
    calls = []

    def fake(net, layers, blocked, plain, shapes):
        calls.append(len(layers))
        return blocked_s, nchw_s
    monkeypatch.setattr(layout_choice, "time_run", fake)
    monkeypatch.setattr(layout_choice, "_threads", _Threads(1))    # a run is timed alone at 1 thread
    return calls


def _build(model, **options):
    sm = srcore.StaticModule(model, options=srcore.Options(backends=TRT, engine_options=options))
    return sm, sm.partition.engines[0].description


def test_a_run_slower_blocked_goes_back_to_nchw(block, cache_dir, monkeypatch):
    model, x, want = block
    calls = _fake(monkeypatch, 2e-3, 1e-3)
    sm, text = _build(model)
    # the block's run (1x1, depthwise, 1x1: its residual, the stem's output, is NCHW as the grouped
    # conv reads its output) and the tail's (1x1, depthwise into the NCHW engine output)
    assert calls == [3, 2], text
    assert "nchw16c" not in text and text.count("-> NCHW: NCHW16c 2.000 ms, NCHW 1.000 ms [timed]") == 2, text
    np.testing.assert_allclose(sm(x), want, rtol=1e-4, atol=1e-5)


def test_a_run_faster_blocked_keeps_the_layout_and_a_rebuild_does_not_time_it(block, cache_dir, monkeypatch):
    model, x, want = block
    _fake(monkeypatch, 1e-3, 2e-3)
    sm, text = _build(model)
    assert text.count("-> NCHW16c: NCHW16c 1.000 ms, NCHW 2.000 ms [timed]") == 2, text
    assert "[depthwise_nchw16c]" in text, text
    np.testing.assert_allclose(sm(x), want, rtol=1e-4, atol=1e-5)
    calls = _fake(monkeypatch, 9.0, 1.0)             # not asked: the timing cache has the decision
    again, text2 = _build(model)
    assert calls == [] and text2.count("-> NCHW16c: NCHW16c 1.000 ms, NCHW 2.000 ms [timed]") == 2, text2
    np.testing.assert_array_equal(again(x), sm(x))


def test_the_option_forces_the_layout_either_way(block, cache_dir, monkeypatch):
    model, x, want = block
    calls = _fake(monkeypatch, 2e-3, 1e-3)
    on, text = _build(model, nchwc=True)
    assert calls == [] and text.count("-> NCHW16c [forced]") == 2 and "[depthwise_nchw16c]" in text, text
    off, text = _build(model, nchwc=False)
    assert calls == [] and "NCHW16c" not in text and "nchw16c" not in text, text
    np.testing.assert_allclose(on(x), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(off(x), want, rtol=1e-4, atol=1e-5)


def _conv(net: Network, x: int, out_c: int, k: int = 1, groups: int = 1) -> int:
    N, C, H, W = net.shape(x)
    w = np.zeros((out_c, C // groups, k, k), np.float32)
    return net.add("conv", [x], (N, out_c, H, W), weight=w, bias=None, stride=(1, 1), padding=(k // 2,) * 2,
                   dilation=(1, 1), groups=groups, relu=False, residual=False)


@pytest.mark.one_pass
def test_runs_split_at_a_grouped_conv_and_go_back_one_at_a_time():
    net = Network()
    x = net.new_tensor((1, 24, 8, 8), "x")
    net.inputs = [x]
    a = _conv(net, x, 48)
    b = _conv(net, a, 24)                  # blocked -> NCHW: the grouped conv reads it
    c = _conv(net, b, 24, 3, groups=2)     # a grouped 3x3: not a member
    d = _conv(net, c, 32)
    e = _conv(net, d, 32, 3, groups=32)    # -> NCHW: the engine output
    net.outputs = [e]
    blocked = nchwc_tensors(net)
    assert blocked == {a, d} and net.shape(a) == (1, 48, 8, 8)   # not marked yet
    runs = nchwc_runs(net, blocked)
    by_out = {layer.outputs[0]: layer for layer in net.layers}
    assert [(t, [layer.outputs[0] for layer in ls]) for t, ls in runs] == [({a}, [a, b]), ({d}, [d, e])]
    shapes = {t: net.shape(t) for t in blocked}
    apply_nchwc(net, blocked)
    clear_nchwc(net, *runs[0], shapes)
    assert net.shape(a) == (1, 48, 8, 8) and "nchwc" not in by_out[a].attrs and "nchwc" not in by_out[b].attrs
    assert net.shape(d) == (1, 2, 8, 8, 16) and by_out[e].attrs["nchwc"] == (True, False)


@pytest.mark.one_pass
@pytest.mark.parametrize("tb, tp, bb, bp, keep", [
    (1.0, 2.0, None, None, True),       # run alone (1 thread): the faster
    (2.0, 1.0, None, None, False),
    (1.0, 2.0, 1.9, 2.2, True),         # neither over the 2 cores (+0.5): the faster
    (1.0, 2.0, 2.9, 2.0, False),        # NCHW16c faster but three busy threads on two cores: a loss
    (2.0, 1.0, 2.0, 2.8, True),         # the other way round
    (1.0, 2.0, 3.0, 2.9, True),         # both over: the faster
])
def test_a_plan_keeping_more_busy_threads_than_cores_loses(tb, tp, bb, bp, keep):
    assert layout_choice.keeps_blocked(tb, tp, bb, bp, cores=2) is keep


class _Threads:
    """Stands in for ``kernels.threads`` in ``layout_choice``: the intra-op thread count."""

    def __init__(self, n):
        self.n = n

    def count(self):
        return self.n


def _fake_engine(monkeypatch, blocked, nchw) -> list:
    """``time_in_engine`` answering ``(seconds, busy threads)`` of each plan (recording the runs' sizes)."""
    calls = []

    def fake(net, steps, plain, tensors, shapes):
        calls.append(len(plain))
        return blocked, nchw
    monkeypatch.setattr(layout_choice, "time_in_engine", fake)
    monkeypatch.setattr(layout_choice, "_threads", _Threads(2))
    monkeypatch.setattr(layout_choice.os, "sched_getaffinity", lambda pid: {0, 1})
    return calls


def test_at_two_threads_runs_are_timed_in_the_engine_and_busy_threads_decide(block, cache_dir, monkeypatch):
    model, x, want = block
    calls = _fake_engine(monkeypatch, (1e-3, 2.9), (2e-3, 2.0))
    sm, text = _build(model)
    assert calls == [3, 2], text
    assert "nchw16c" not in text and text.count(
        "-> NCHW: NCHW16c 1.000 ms, NCHW 2.000 ms, busy threads 2.90 / 2.00 [timed in sequence]") == 2, text
    np.testing.assert_allclose(sm(x), want, rtol=1e-4, atol=1e-5)
    calls = _fake_engine(monkeypatch, (1e-3, 2.0), (2e-3, 2.0))   # cached: decided by the busy threads
    again, text2 = _build(model)
    assert calls == [] and "nchw16c" not in text2, text2


def test_too_close_in_the_engine_is_not_cached(block, cache_dir, monkeypatch):
    model, x, want = block
    _fake_engine(monkeypatch, (1.00e-3, 2.0), (1.02e-3, 2.0))
    _, text = _build(model)
    assert text.count("-> NCHW16c: NCHW16c 1.000 ms, NCHW 1.020 ms") == 2, text
    calls = _fake_engine(monkeypatch, (2e-3, 2.0), (1e-3, 2.0))
    _, text2 = _build(model)
    assert calls == [3, 2] and "nchw16c" not in text2, text2


class _StandInClock:
    """``wall_ns_busy`` that runs the calls and answers scripted ``(ns, busy)`` readings in turn."""

    def __init__(self, readings):
        self.readings = list(readings)

    def wall_ns_busy(self, call, n):
        for _ in range(n):
            call()
        return self.readings.pop(0)


def test_time_in_engine_alternates_the_plans_and_keeps_the_best_round(block, monkeypatch):
    """Both plans of the block's first run are called over the whole engine (real kernels), rounds
    alternating NCHW16c-first and NCHW-first; seconds: the best round, busy threads: the median."""
    model, x, want = block
    from srcore_trt_like import engine
    built = []

    def choose(net, options, name="engine"):
        steps, runs = layout_choice.choose_layout(net, options, name)
        built.append((net, steps))
        return steps, runs
    monkeypatch.setattr(engine, "choose_layout", choose)
    _build(model, nchwc=True, timing_cache=False)
    net, steps = built[0]
    run_tensors = {t for t in net.tensors if len(net.shape(t)) == 5}
    shapes = {t: net.shape(t) for t in run_tensors}
    # the "NCHW" plan's run steps: stand-ins (the same kernels, not counted) for the blocked layers
    plain = {id(s.layer): s for s in steps if "nchwc" in s.layer.attrs}
    assert plain
    ran = {id(s.layer): 0 for s in steps}

    def counted(s):
        def fn(*args):
            ran[id(s.layer)] += 1
            return s.fn(*args)
        return attrs.evolve(s, fn=fn if s.fn is not None else None)
    steps = [counted(s) for s in steps]
    # rounds: (B, P), (P, B), (B, P), (P, B), (B, P): readings in that order
    order = ["B", "P", "P", "B", "B", "P", "P", "B", "B", "P"]
    ns = {"B": iter([3e6, 2e6, 4e6, 2.5e6, 5e6]), "P": iter([6e6, 1.5e6, 7e6, 8e6, 9e6])}
    busy = {"B": iter([2.0, 3.0, 2.9, 2.8, 1.0]), "P": iter([1.9, 2.1, 2.0, 2.2, 2.3])}
    stand_in = _StandInClock([(next(ns[k]), next(busy[k])) for k in order])
    monkeypatch.setattr(layout_choice, "_clock", stand_in)
    (tb, bb), (tp, bp) = layout_choice.time_in_engine(net, steps, plain, run_tensors, shapes)
    assert (tb, bb) == (pytest.approx(2e-3), 2.8) and (tp, bp) == (pytest.approx(1.5e-3), 2.1)
    # every kernel step ran in both plans: one settling call + SEQ_CALLS timed, per round
    per_plan = layout_choice.SEQ_ROUNDS * (1 + layout_choice.SEQ_CALLS)
    for s in steps:
        if s.fn is not None:
            assert ran[id(s.layer)] == (per_plan if id(s.layer) in plain else 2 * per_plan), s.tactic
