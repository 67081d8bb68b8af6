"""2-D resizes (compiled bilinear / bicubic, numpy nearest) split by (sample, channel) planes over the
intra-op threads (``upsample._plane_threads``): every split gives torch's values and the bits of one
thread, on real part-pool runs of 2 and 3 threads; the matchers split only where the timing at load
(injected here) says so, only at more than one thread and for a static shape; a call of another
shape takes the one-thread path; ``SRCORE_CPU_RESIZE_SPLIT=0`` turns it off."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from srcore.ir.types import TensorType  # noqa: E402
from srcore.plugin import Specialized  # noqa: E402
from srcore.testing import node_info  # noqa: E402
from srcore_cpu.kernels import jit_upsample as JU  # noqa: E402
from srcore_cpu.kernels import row_split as RS  # noqa: E402
from srcore_cpu.kernels import upsample as UK  # noqa: E402

pytestmark = pytest.mark.one_pass   # kernel calls (and one model, whose kernels do not depend on the executor)

F = torch.nn.functional
T = torch.from_numpy


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a, b), "the split changed the values"


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 3), c=st.integers(1, 7), h=st.integers(1, 9), w=st.integers(1, 9),
       oh=st.integers(1, 13), ow=st.integers(1, 13), ac=st.booleans(), threads=st.sampled_from([2, 3]),
       mode=st.sampled_from(["bilinear", "bicubic"]))
def test_compiled_resize_split_by_planes_gives_torchs_values_and_one_threads_bits(n, c, h, w, oh, ow, ac, threads,
                                                                                 mode):
    x = np.random.default_rng(n * 100 + c).standard_normal((n, c, h, w)).astype(np.float32)
    kernel = JU.Bilinear2d() if mode == "bilinear" else JU.Bicubic2d()
    one = kernel(x, (oh, ow), ac, [None, None], np.empty((n, c, oh, ow), np.float32))
    want = F.interpolate(T(x), size=(oh, ow), mode=mode, align_corners=ac).numpy()
    np.testing.assert_allclose(one, want, rtol=1e-5, atol=1e-5)
    out = np.full((n, c, oh, ow), np.nan, np.float32)
    assert kernel(x, (oh, ow), ac, [None, None], out, threads) is out
    _same(out, one)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 3), c=st.integers(1, 7), h=st.integers(1, 9), w=st.integers(1, 9),
       oh=st.integers(1, 19), ow=st.integers(1, 19), threads=st.sampled_from([2, 3]))
def test_nearest_split_by_planes_gives_torchs_values(n, c, h, w, oh, ow, threads):
    x = np.random.default_rng(c).standard_normal((n, c, h, w)).astype(np.float32)
    want = F.interpolate(T(x), size=(oh, ow), mode="nearest").numpy()
    out = np.full((n, c, oh, ow), np.nan, np.float32)
    assert UK._nearest_planes(x, (oh, ow), [None, None], out, threads) is out
    _same(out, want)


SHAPE = (1, 32, 64, 64)


def _nodes(shape=SHAPE):
    t, o = TensorType("float32", shape), TensorType("float32", shape[:2] + (2 * shape[2], 2 * shape[3]))
    return {
        "bilinear": (UK.bilinear2d_matcher, node_info("aten::upsample_bilinear2d.vec", input=t, output_size=None,
                                                      align_corners=False, scale_factors=[2.0, 2.0], outputs=(o,))),
        "bicubic": (UK.bicubic2d_matcher, node_info("aten::upsample_bicubic2d", self=t, output_size=list(o.shape[2:]),
                                                    align_corners=True, scales_h=None, scales_w=None, outputs=(o,))),
        "nearest": (UK.nearest2d_matcher, node_info("aten::upsample_nearest2d.vec", input=t, output_size=None,
                                                    scale_factors=[2.0, 2.0], outputs=(o,))),
    }


def _torch(mode, x):
    kw = {} if mode == "nearest" else {"align_corners": mode == "bicubic"}
    return F.interpolate(T(x), scale_factor=2.0, mode=mode, **kw).numpy()


def _call(mode, fn, x, out=None):
    if mode == "bilinear":
        return fn(x, None, False, [2.0, 2.0], out=out)
    if mode == "bicubic":
        return fn(x, [2 * x.shape[2], 2 * x.shape[3]], True, None, None, out=out)
    return fn(x, None, [2.0, 2.0], out=out)


@pytest.mark.parametrize("pays", [True, False])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest"])
def test_matchers_split_a_static_resize_only_where_timing_says(monkeypatch, mode, pays):
    timed, parts = [], []
    monkeypatch.setattr(RS, "split_pays", lambda one, split, args, timer=None: (timed.append(args), pays)[1])
    monkeypatch.setattr(RS._par, "intra_op_threads", lambda: 2)
    real = RS._par.run_parts
    monkeypatch.setattr(RS._par, "run_parts", lambda fn, n, t: (parts.append((n, t)), real(fn, n, t))[1])
    matcher, node = _nodes()[mode]
    answer = matcher(node)
    assert len(timed) == 1 and timed[0][0].shape == SHAPE
    if mode == "nearest" and not pays:
        assert answer is None          # the numpy kernel
        return
    assert isinstance(answer, Specialized)
    x = np.random.default_rng(3).standard_normal(SHAPE).astype(np.float32)
    parts.clear()
    got = _call(mode, answer.fn, x)
    np.testing.assert_allclose(got, _torch(mode, x), rtol=1e-5, atol=1e-5)
    assert parts == ([(2, 2)] if pays else [])
    out = np.empty_like(got)
    assert _call(mode, answer.fn, x, out) is out
    _same(out, got)
    # another shape (a dynamic call): one thread, torch's values
    parts.clear()
    x2 = np.random.default_rng(4).standard_normal((2, 3, 5, 6)).astype(np.float32)
    np.testing.assert_allclose(_call(mode, answer.fn, x2), _torch(mode, x2), rtol=1e-5, atol=1e-5)
    assert parts == []


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest"])
def test_nothing_is_timed_at_one_thread_for_dynamic_shapes_or_when_switched_off(monkeypatch, mode):
    timed = []
    monkeypatch.setattr(RS, "split_pays", lambda *a, **k: timed.append(a) or True)
    monkeypatch.setattr(RS._par, "intra_op_threads", lambda: 1)
    matcher, node = _nodes()[mode]
    assert (matcher(node) is None) == (mode == "nearest")
    monkeypatch.setattr(RS._par, "intra_op_threads", lambda: 2)
    matcher, node = _nodes(("n", 32, 64, 64))[mode]
    assert (matcher(node) is None) == (mode == "nearest")
    monkeypatch.setenv(UK.PLANES_SPLIT_ENV, "0")
    matcher, node = _nodes()[mode]
    assert (matcher(node) is None) == (mode == "nearest")
    assert timed == []


def test_a_decoder_at_two_threads_split_everywhere_gives_one_threads_bits(monkeypatch):
    import srcore

    class M(torch.nn.Module):
        def forward(self, x, s):
            up = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=True)
            return torch.cat([F.interpolate(up, scale_factor=2.0, mode="nearest"), s], 1)

    x, s = torch.randn(1, 16, 32, 32), torch.randn(1, 4, 128, 128)
    ts = srcore.from_torchscript(torch.jit.script(M().eval()), (x, s))
    monkeypatch.setattr(RS._par, "intra_op_threads", lambda: 1)
    want = srcore.StaticModule(ts)(x.numpy(), s.numpy())
    np.testing.assert_allclose(want, M()(x, s).numpy(), rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(RS._par, "intra_op_threads", lambda: 2)
    monkeypatch.setattr(RS, "split_pays", lambda *a, **k: True)
    sm = srcore.StaticModule(ts)
    chosen = [getattr(pn.fn.fn, "__qualname__", "") for b in sm.blocks for pn in b.nodes
              if pn.fn is not None and pn.node.kind.startswith("aten::upsample")]
    assert chosen == ["bilinear2d_jit", "nearest2d_matcher.<locals>.nearest2d_split"], chosen
    _same(sm(x.numpy(), s.numpy()), want)
