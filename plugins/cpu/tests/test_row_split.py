"""The timed row-block splits of layer_norm, group_norm, softmax and elementwise binary ops at more
than one intra-op thread (``srcore_cpu/kernels/row_split.py``): every split gives the same bits as
the 1-thread kernel (which is checked against torch), the matchers split only where the timing at
load (injected here) says so, and at 1 thread nothing is timed."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import srcore
from srcore.ir.types import TensorType
from srcore.plugin import Specialized
from srcore.testing import node_info
from srcore_cpu.kernels import jit_norm, norm, row_split as RS, softmax as SM
from srcore_cpu.kernels.elementwise import binary_matcher

pytestmark = pytest.mark.one_pass   # kernel calls (the model test's kernels do not depend on the executor)


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a, b, equal_nan=True), "the split changed the values"


@st.composite
def broadcast_pair(draw):
    out = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=4)))
    def operand():
        k = draw(st.integers(0, len(out)))
        return tuple(1 if draw(st.booleans()) else d for d in out[len(out) - k:])
    return out, operand(), operand()


@settings(max_examples=40, deadline=None)
@given(case=broadcast_pair(), ufunc=st.sampled_from(RS.SPLITTABLE_UFUNCS), threads=st.sampled_from([2, 3]))
def test_binary_split_gives_the_ufuncs_bits_under_broadcasting(case, ufunc, threads):
    out_shape, sa, sb = case
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    want = ufunc(a, b)
    if want.shape != out_shape:
        return        # both operands broadcast along an axis: not this node's output shape
    fn = RS.split_binary(ufunc, out_shape, [sa, sb], threads)
    if fn is None:
        assert RS.binary_rows(out_shape, [sa, sb], threads) is None
        return
    out = np.empty(out_shape, np.float32)
    assert fn(a, b, out) is out
    _same(out, want)
    if sa == out_shape:     # a scalar operand
        _same(fn(a, np.float32(0.5), np.empty(out_shape, np.float32)), ufunc(a, np.float32(0.5)))


def test_binary_split_cuts_rows_and_leaves_other_layouts_to_one_call():
    assert RS.binary_rows((1, 512, 768), [(1, 512, 768), (768,)], 2) == (2, 512)
    assert RS.binary_rows((4, 8), [(4, 1), (1, 8)], 2) == (1, 4)
    assert RS.binary_rows((1, 8), [(1, 1), (1, 8)], 2) == (2, 8)      # (1, 1) broadcast over both
    assert RS.binary_rows((2, 8), [(2, 1), (1, 8)], 2) is None        # 2 rows, then a broadcast axis
    fn = RS.split_binary(np.add, (6, 5), [(6, 5), (6, 5)], 2)
    a = np.arange(60, dtype=np.float32).reshape(6, 10)[:, ::2]    # not contiguous: one ufunc call
    _same(fn(a, a, np.empty((6, 5), np.float32)), a + a)


@pytest.mark.parametrize("into, ref", [(SM._softmax_into, F.softmax), (SM._log_softmax_into, F.log_softmax)])
@pytest.mark.parametrize("shape, dim", [((3, 12, 17, 9), -1), ((1, 16, 7, 5), 1), ((2, 3, 40), 0)])
def test_softmax_split_gives_the_same_bits(into, ref, shape, dim):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32) * 4
    want = into(x, dim, np.empty(shape, np.float32))
    np.testing.assert_allclose(want, ref(torch.from_numpy(x), dim).numpy(), rtol=1e-5, atol=1e-6)
    fn = RS.split_softmax(into, shape, dim, 2)
    _same(fn(x), want)


@pytest.mark.parametrize("shape", [(1, 4, 128, 128), (3, 12, 17, 9), (4, 33, 40)])
def test_compiled_softmax_split_gives_the_same_bits(monkeypatch, shape):
    monkeypatch.setattr(RS._par, "intra_op_threads", lambda: 1)
    t = TensorType("float32", shape)
    into = SM._compiled_into(node_info("aten::softmax.int", self=t, dim=-1, dtype=None, outputs=(t,)), -1)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32) * 4
    want = into(x, -1, np.empty(shape, np.float32))
    np.testing.assert_allclose(want, F.softmax(torch.from_numpy(x), -1).numpy(), rtol=1e-5, atol=1e-6)
    calls = []
    monkeypatch.setattr(RS._par, "run_parts", lambda fn, parts, threads: (calls.append(parts), [fn(i) for i in range(parts)]))
    _same(RS.split_softmax(into, shape, -1, 2)(x), want)
    assert calls == [2]


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_split_gives_the_same_bits(affine):
    shape, ns = (3, 50, 4, 24), (4, 24)
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32) + 3
    w, b = (rng.standard_normal(ns).astype(np.float32), rng.standard_normal(ns).astype(np.float32)) if affine \
        else (None, None)
    want = norm.layer_norm(x, ns, w, b, 1e-5)
    ref = F.layer_norm(torch.from_numpy(x), ns, None if w is None else torch.from_numpy(w),
                       None if b is None else torch.from_numpy(b), 1e-5).numpy()
    np.testing.assert_allclose(want, ref, rtol=1e-4, atol=1e-5)
    _same(RS.split_layer_norm(norm.layer_norm, shape, ns, 1e-5, 2)(x, w, b), want)
    assert RS.split_layer_norm(norm.layer_norm, (1, 24), (24,), 1e-5, 2) is None   # one row


@pytest.mark.parametrize("N, threads", [(1, 2), (3, 2), (2, 3)])
def test_group_norm_split_gives_the_same_bits_and_statistics(N, threads):
    C, G = 12, 4
    rng = np.random.default_rng(3)
    x = rng.standard_normal((N, C, 5, 7)).astype(np.float32) * 2 + 1
    w, b = rng.standard_normal(C).astype(np.float32), rng.standard_normal(C).astype(np.float32)
    kernel = jit_norm.GroupNorm()
    outs = [(np.empty_like(x), np.empty(N * G, np.float32), np.empty(N * G, np.float32)) for _ in range(2)]
    kernel(x, G, w, b, 1e-5, *outs[0])
    RS.split_group_norm(kernel, threads)(x, G, w, b, 1e-5, *outs[1])
    ref = F.group_norm(torch.from_numpy(x), G, torch.from_numpy(w), torch.from_numpy(b), 1e-5).numpy()
    np.testing.assert_allclose(outs[0][0], ref, rtol=1e-4, atol=1e-5)
    for one, split in zip(*outs):
        _same(split, one)


BIG = (1, 512, 768)


@pytest.mark.parametrize("pays", [True, False])
def test_matchers_split_a_large_node_only_where_timing_says(monkeypatch, pays):
    t, w = TensorType("float32", BIG), TensorType("float32", (768,))
    timed = []

    def split_pays(one, split, args, timer=None):
        timed.append(len(args))
        return pays
    monkeypatch.setattr(RS, "split_pays", split_pays)
    monkeypatch.setattr(RS._par, "intra_op_threads", lambda: 2)
    ln = norm.layer_norm_matcher(node_info("aten::layer_norm", input=t, normalized_shape=[768], weight=w, bias=w,
                                           eps=1e-5, cudnn_enable=True, outputs=(t,)))
    sm = SM.softmax_matcher(node_info("aten::softmax.int", self=t, dim=-1, dtype=None, outputs=(t,)))
    add = binary_matcher(node_info("aten::add.Tensor", self=t, other=w, alpha=1, outputs=(t,)))
    assert isinstance(ln, Specialized) and isinstance(sm, Specialized) and isinstance(add, Specialized)
    names = [f.fn.__qualname__ for f in (ln, sm, add)]
    assert len(timed) == 3
    if pays:
        assert names == ["split_layer_norm.<locals>.fn", "split_softmax.<locals>.fn", "split_binary.<locals>.fn"]
    else:
        assert names[2] == "add" and "split" not in names[0] + names[1]
    # a small node or 1 thread: nothing timed, the plain kernels (a small layer norm's compiled one)
    timed.clear()
    small = TensorType("float32", (1, 768))
    late = norm.layer_norm_matcher(node_info("aten::layer_norm", input=small, normalized_shape=[768], weight=w,
                                             bias=w, eps=1e-5, cudnn_enable=True, outputs=(small,)))
    assert callable(late.fn.choose)   # (numpy's or the compiled kernel at the first call: late_compiled.py)
    small = TensorType("float32", (4, 768))
    ln = norm.layer_norm_matcher(node_info("aten::layer_norm", input=small, normalized_shape=[768], weight=w,
                                           bias=w, eps=1e-5, cudnn_enable=True, outputs=(small,)))
    assert isinstance(ln, Specialized) and "split" not in ln.fn.__qualname__
    monkeypatch.setattr(RS._par, "intra_op_threads", lambda: 1)
    assert binary_matcher(node_info("aten::add.Tensor", self=t, other=w, alpha=1, outputs=(t,))).fn is np.add
    assert timed == []


def test_a_model_at_two_threads_split_everywhere_matches_one_thread_bits(monkeypatch):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln, self.gn = torch.nn.LayerNorm(256), torch.nn.GroupNorm(4, 16)

        def forward(self, x, y, bias):
            a = self.ln(x * x + bias)
            return a, torch.softmax(a.reshape(2, 4, 128, 256), -1), self.gn(y + y) / (y * y + 1.0)

    torch.manual_seed(0)
    args = (torch.randn(1, 1024, 256), torch.randn(1, 16, 128, 128), torch.randn(256))
    m = M().eval()
    ts = srcore.from_torchscript(torch.jit.script(m), args)
    feeds = [a.numpy() for a in args]
    monkeypatch.setattr(RS._par, "intra_op_threads", lambda: 1)
    want = srcore.StaticModule(ts)(*feeds)
    for g, w in zip(want, m(*args)):
        np.testing.assert_allclose(g, w.detach().numpy(), rtol=1e-4, atol=1e-4)
    monkeypatch.setattr(RS._par, "intra_op_threads", lambda: 2)
    monkeypatch.setattr(RS, "split_pays", lambda *a, **k: True)
    calls = []
    real = RS._par.run_parts
    monkeypatch.setattr(RS._par, "run_parts", lambda *a: (calls.append(a[1:]), real(*a))[1])
    sm = srcore.StaticModule(ts)
    got = sm(*feeds)
    for g, w in zip(got, want):
        _same(g, w)
    assert len(calls) >= 7 and all(c == (2, 2) for c in calls), calls    # mul, add, ln, softmax, add, gn, mul, add, div
