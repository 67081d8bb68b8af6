"""A conv layer called again on the same arrays (an engine's arena buffers) runs its bound call's
compiled entry points directly (``ConvTactic.serial_calls``, ``tactics/conv.py``'s ``_kernel``): the
result against torch on every call while the inputs change in place, and no such calls where they
would be wrong (a non-contiguous input: the bound call holds a copy of it)."""
from __future__ import annotations

import numpy as np
import pytest

from srcore.conv import nchwc
from srcore_trt_like.conv.depthwise import DepthwiseBlockedTactic, DepthwiseSimdTactic
from srcore_trt_like.conv.nchwc import (ConvNchwcHalvesTactic, ConvNchwcTactic, DenseNchwcHalvesTactic, DenseNchwcTactic,
                                        DepthwiseNchwcHalvesTactic, DepthwiseNchwcTactic, PointwiseNchwcHalvesTactic,
                                        PointwiseNchwcTactic)
from srcore_trt_like.conv.simd_1x1 import Simd1x1Tactic
from srcore_trt_like.conv.simd_direct import SimdDirectTactic
from srcore_trt_like.conv.spec import ConvSpec
from srcore_trt_like.tactics.conv import _kernel

torch = pytest.importorskip("torch")

CASES = {   # name: (tactic, C, O, k, stride, groups, (input blocked, output blocked), residual, activation)
    "pointwise_nchw16c": (PointwiseNchwcTactic, 20, 24, 1, 1, 1, (True, False), True, "relu"),
    "pointwise_nchw16c+silu": (PointwiseNchwcTactic, 20, 24, 1, 1, 1, (True, True), False, "silu"),
    "depthwise_nchw16c": (DepthwiseNchwcTactic, 24, 24, 3, 2, 24, (False, True), False, "relu"),
    "dense_nchw16c": (DenseNchwcTactic, 3, 16, 3, 2, 1, (False, True), False, "relu"),
    "dense_nchw16c_h8": (DenseNchwcHalvesTactic, 3, 20, 3, 2, 1, (False, True), False, "relu"),
    "depthwise_nchw16c_h8": (DepthwiseNchwcHalvesTactic, 24, 24, 3, 2, 24, (True, True), True, "relu"),
    "conv_nchw16c": (ConvNchwcTactic, 20, 18, 3, 1, 1, (True, True), True, "relu"),
    "conv_nchw16c_h8": (ConvNchwcHalvesTactic, 20, 40, 3, 1, 1, (True, False), True, "relu"),
    # NCHW on both sides: a conv outside any blocked run (tactics/conv.py offers these too)
    "conv_nchw16c nchw": (ConvNchwcTactic, 16, 12, 3, 1, 1, (False, False), False, "relu"),
    "pointwise_nchw16c nchw": (PointwiseNchwcTactic, 20, 24, 1, 1, 1, (False, False), True, "relu"),
    "pointwise_nchw16c_h8": (PointwiseNchwcHalvesTactic, 20, 24, 1, 1, 1, (True, False), True, "relu"),
    "pointwise_nchw16c_h8+silu": (PointwiseNchwcHalvesTactic, 20, 24, 1, 1, 1, (True, True), False, "silu"),
    "simd_direct": (SimdDirectTactic, 8, 12, 3, 1, 1, None, True, "relu"),
    "pointwise_simd": (Simd1x1Tactic, 20, 24, 1, 1, 1, None, True, "relu"),
    "depthwise_simd": (DepthwiseSimdTactic, 24, 24, 3, 2, 24, None, False, "relu"),
    "depthwise_simd_blocked": (DepthwiseBlockedTactic, 24, 24, 3, 1, 24, None, True, "relu"),
}


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("name", CASES)
def test_a_conv_layer_called_again_on_its_buffers_gives_torchs_result(name):
    cls, C, O, k, s, g, blocked, residual, act = CASES[name]
    rng = np.random.default_rng(0)
    spec = ConvSpec((2, C, 9, 9), O, (k, k), (s, s), (k // 2, k // 2), (1, 1), g, relu=act == "relu",
                    residual=residual, activation="none" if act == "relu" else act)
    w = rng.standard_normal((O, C // g, k, k)).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    tactic = cls(spec, w, b, blocked) if blocked else cls(spec, w, b)
    fn = _kernel(tactic, residual).fn
    b_in, b_out = blocked or (False, False)
    x = np.zeros(nchwc.blocked_shape(spec.x_shape, 16) if b_in else spec.x_shape, np.float32)
    y = np.zeros(nchwc.blocked_shape(spec.out_shape, 16) if b_out else spec.out_shape, np.float32)
    res = np.zeros_like(y) if residual else None
    for call in range(4):
        xs = rng.standard_normal(spec.x_shape).astype(np.float32)
        x[...] = nchwc.to_blocked(xs, 16) if b_in else xs
        want = torch.nn.functional.conv2d(torch.from_numpy(xs), torch.from_numpy(w), torch.from_numpy(b), s, k // 2,
                                          1, g)
        if residual:
            rs = rng.standard_normal(spec.out_shape).astype(np.float32)
            res[...] = nchwc.to_blocked(rs, 16) if b_out else rs
            want = want + torch.from_numpy(rs)
            fn(x, res, y)
        else:
            fn(x, y)
        got = nchwc.from_blocked(y, O) if b_out else y
        want = torch.relu(want) if act == "relu" else torch.nn.functional.silu(want)
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4, err_msg=f"call {call}")
    assert tactic.serial_calls(x, y, res) is not None   # (the calls above from the third ran them)
    wide = np.zeros(spec.x_shape[:3] + (spec.x_shape[3] + 1,), np.float32)[..., :-1] if not b_in else None
    if wide is not None:
        assert tactic.serial_calls(wide, y, res) is None


@pytest.mark.one_pass   # kernels called directly, no executor or planner: not in the second pass
@pytest.mark.parametrize("name", ["simd_direct", "pointwise_simd", "depthwise_simd"])
def test_a_layer_called_on_two_sets_of_buffers_in_turn_gives_torchs_result_on_each(name):
    """The compiled calls found for one set of arrays are never run for another: a call on other
    arrays in between rebinds the conv (a timing run's random inputs, a second execution context's
    arena on the same thread), and the next call on the first set must read and write the first set."""
    cls, C, O, k, s, g, _, residual, _ = CASES[name]
    rng = np.random.default_rng(1)
    spec = ConvSpec((2, C, 7, 6), O, (k, k), (s, s), (k // 2, k // 2), (1, 1), g, relu=True, residual=residual)
    w = rng.standard_normal((O, C // g, k, k)).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    fn = _kernel(cls(spec, w, b), residual).fn
    sets = [(np.zeros(spec.x_shape, np.float32), np.zeros(spec.out_shape, np.float32),
             np.zeros(spec.out_shape, np.float32) if residual else None) for _ in range(2)]
    # each set three times in a row (its compiled calls found and used), then the two in turn
    for call, which in enumerate([0, 0, 0, 1, 1, 1, 0, 1, 0, 0, 1]):
        x, y, res = sets[which]
        x[...] = rng.standard_normal(spec.x_shape)
        want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), s, k // 2, 1, g)
        if residual:
            res[...] = rng.standard_normal(spec.out_shape)
            want = want + torch.from_numpy(res)
            fn(x, res, y)
        else:
            fn(x, y)
        np.testing.assert_allclose(y, torch.relu(want).numpy(), rtol=1e-4, atol=1e-4, err_msg=f"call {call}")
