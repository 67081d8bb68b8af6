"""Each run of NCHW16c layers keeps the layout only when it timed faster than NCHW at build
(``tactics/layout_choice.py``): a run that times slower blocked goes back to NCHW (the timing is
faked here, never measured in a test), the decision is served from the timing cache on a rebuild,
the runs are split where a layer of another kind cuts them, and results match torch either way."""
from __future__ import annotations

import numpy as np
import pytest

import srcore
from srcore_trt_like.builder.layout import apply_nchwc, clear_nchwc, nchwc_runs, nchwc_tensors
from srcore_trt_like.builder.network import Network
from srcore_trt_like.tactics import layout_choice, timing, timing_cache

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
    # every layer's tactic timing is kept, as on an idle machine: on a loaded one a timing with a
    # core taken is not cached, a rebuild re-times it and may pick another tactic, and a run of
    # other tactics is rightly a new layout decision (its cache key names them)
    monkeypatch.setattr(timing, "trusted", lambda found: True)
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
    # (no run kept blocked; a 1x1 may still run on pointwise_nchw16c, whose sides may both be NCHW,
    # if its timing says so)
    assert "-> NCHW16c" not in text and text.count("-> NCHW: NCHW16c 2.000 ms, NCHW 1.000 ms [timed]") == 2, text
    assert "[depthwise_nchw16c]" not in text, text
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


def test_disturbed_builds_pool_the_runs_evidence(block, cache_dir, monkeypatch):
    """Timed while a core was taken (not trusted), a run's layout is not cached but its times are
    kept: the next build decides on each layout's least time so far, not on its own timing alone."""
    model, x, want = block
    monkeypatch.setattr(timing, "trusted", lambda found: False)
    _fake(monkeypatch, 1e-3, 2e-3)
    _, text = _build(model)
    assert text.count("-> NCHW16c: NCHW16c 1.000 ms, NCHW 2.000 ms [timed]") == 2, text
    calls = _fake(monkeypatch, 9.0, 1.0)             # a build that alone would go back to NCHW
    sm, text = _build(model)
    assert calls == [3, 2] and text.count("-> NCHW16c: NCHW16c 1.000 ms, NCHW 2.000 ms [timed]") == 2, text
    np.testing.assert_allclose(sm(x), want, rtol=1e-4, atol=1e-5)
