"""The SIMD conv kernels split over the intra-op threads at the caller (``conv/simd_split.py``): the
bits of the one-thread tactic on any team, torch's conv, offered beside the one-thread tactic at 2
threads only and chosen between by the builder's timing."""
from __future__ import annotations

import numpy as np
import pytest

from srcore_trt_like.conv import ConvSpec, conv_tactic_builders
from srcore_trt_like.conv.depthwise import DepthwiseSimdTactic
from srcore_trt_like.conv.simd_direct import SimdDirectTactic
from srcore_trt_like.conv.simd_split import DepthwiseSimdSplitTactic, SimdDirectSplitTactic
from srcore_trt_like.kernels import threads as parallel
from srcore_trt_like.tactics import choose
from _shared import conv_case, conv_reference

pytestmark = pytest.mark.one_pass

CASES = [  # (spec, depthwise)
    (ConvSpec((1, 3, 40, 38), 20, 7, 2, 3, relu=True), False),                      # a stem: 3 channels, stride 2
    (ConvSpec((2, 16, 13, 11), 20, 3, 1, 1, relu=True, residual=True), False),       # 2 images, residual
    (ConvSpec((1, 12, 9, 17), 18, 3, 2, 1, groups=3, activation="hardswish"), False),  # groups, activation
    (ConvSpec((1, 24, 6, 6), 30, 1, 1, 0), False),                                   # row pairs (narrow plane)
    (ConvSpec((2, 24, 15, 17), 48, 3, 2, 1, groups=24, relu=True, residual=True), True),  # multiplier 2
    (ConvSpec((1, 40, 14, 14), 40, 5, 1, 2, groups=40, activation="hardswish"), True),
    # leaky relu in the kernels' stores (the one-thread tactic's fused_activations), residual first
    (ConvSpec((2, 10, 11, 13), 14, 3, 2, 1, residual=True, activation="leaky_relu", negative_slope=0.1), False),
    (ConvSpec((1, 16, 12, 12), 16, 3, 1, 1, groups=16, activation="leaky_relu", negative_slope=0.2), True),
]


@pytest.mark.parametrize("spec,depthwise", CASES)
def test_split_gives_the_one_thread_bits_on_any_team(spec, depthwise, monkeypatch):
    one_cls, split_cls = (DepthwiseSimdTactic, DepthwiseSimdSplitTactic) if depthwise else \
        (SimdDirectTactic, SimdDirectSplitTactic)
    x, w, b, res = conv_case(spec)
    want = np.empty(spec.out_shape, np.float32)
    one_cls(spec, w, b)(x, want, res)
    split = split_cls(spec, w, b, threads=2)
    for size in (1, 2, 2, 1, 2):   # every phase alone or on the team of 2 (real threads)
        monkeypatch.setattr(parallel.Governor, "team", lambda self, size=size: size)
        out = np.full(spec.out_shape, np.nan, np.float32)
        split(x, out, res)
        np.testing.assert_array_equal(out, want)
    # a governor per phase of a call: the input copy and the tasks of each image (the depthwise
    # kernel copies each input channel inside its tasks: one phase)
    assert len(split.governors) == (1 if depthwise else 2) * spec.x_shape[0]
    ref = conv_reference(spec, x, w, b, res)
    np.testing.assert_allclose(want, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_split_runs_on_the_layout_of_the_one_thread_tactic():
    """A serialized plan stores the one-thread tactic's packed weights: the split takes them back."""
    spec = CASES[1][0]
    x, w, b, res = conv_case(spec, 1)
    one = SimdDirectTactic(spec, w, b)
    want = np.empty(spec.out_shape, np.float32)
    one(x, want, res)
    zeros = np.zeros_like(w)   # the layout, not the raw weights, must be what computes
    out = np.empty(spec.out_shape, np.float32)
    SimdDirectSplitTactic(spec, zeros, b, layout=one.layout(), threads=2)(x, out, res)
    np.testing.assert_array_equal(out, want)


def test_offered_at_two_threads_beside_the_one_thread_tactic(monkeypatch):
    dense, dw = ConvSpec((1, 16, 20, 20), 16, 3, 1, 1), ConvSpec((1, 16, 20, 20), 16, 3, 1, 1, groups=16)
    names = lambda spec: [n for n, _ in conv_tactic_builders(spec, np.ones(spec.weight_shape, np.float32), None)]
    monkeypatch.setattr(parallel, "count", lambda: 1)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_WORK", 0)
    assert not any(n.endswith("_split") for n in names(dense) + names(dw))
    monkeypatch.setattr(parallel, "count", lambda: 2)
    assert {"simd_direct", "simd_direct_split"} <= set(names(dense))
    assert {"depthwise_simd", "depthwise_simd_split"} <= set(names(dw))
    # every name offered at 2 threads can be named in exclude_tactics (the A/B of the split)
    from srcore_trt_like.options import tactic_names
    assert set(names(dense) + names(dw)) <= set(tactic_names())
    monkeypatch.setattr(parallel, "PARALLEL_MIN_WORK", 10**12)   # small layers stay on one thread
    assert not any(n.endswith("_split") for n in names(dense) + names(dw))


@pytest.mark.parametrize("split_faster", [True, False])
def test_the_builder_keeps_whichever_timed_faster(monkeypatch, split_faster):
    """At 2 threads the engine builder times the split against the one-thread tactic (stubbed
    timings: the real ones are the benchmarks' business) and runs the winner, torch's conv."""
    from srcore_trt_like.builder.network import Layer, Network

    monkeypatch.setattr(parallel, "count", lambda: 2)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_WORK", 0)
    spec = ConvSpec((1, 8, 12, 12), 12, 3, 1, 1, relu=True)
    x, w, b, _ = conv_case(spec, 2)
    net = Network()
    tx, ty = net.new_tensor(spec.x_shape), net.new_tensor(spec.out_shape)
    net.inputs, net.outputs = [tx], [ty]
    net.layers.append(Layer("conv", [tx], [ty], dict(weight=w, bias=b, stride=(1, 1), padding=(1, 1),
                                                     dilation=(1, 1), groups=1, relu=True, residual=False)))
    fast = "simd_direct_split" if split_faster else "simd_direct"

    def rank(cands, layer, net_, seed=0):
        return sorted(((c, 1.0 if c.name == fast else 2.0) for c in cands), key=lambda p: p[1])
    monkeypatch.setattr(choose, "rank", rank)
    # (the split runs on the Python team: a candidate of the team's engine only)
    monkeypatch.setattr(choose, "_choose_pool", lambda pools, cache, name: (choose.BLAS, {}))
    (step,) = choose.choose_tactics(net, {"timing_cache": False})
    assert step.tactic == fast
    out = np.empty(spec.out_shape, np.float32)
    step.fn(x, out)
    ref = conv_reference(spec, x, w, b, None)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
