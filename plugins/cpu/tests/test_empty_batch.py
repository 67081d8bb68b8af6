"""An empty batch (a dynamic batch dim at 0) through every conv path and the kernels that
reshaped with ``-1``: the result has torch's shape and dtype, and the model's other batch
sizes still match torch on the same module."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import srcore


class Fn(nn.Module):
    def __init__(self, f, *mods):
        super().__init__()
        self.f = f
        self.mods = nn.ModuleList(mods)

    def forward(self, x):
        return self.f(x, *self.mods)


def _bn(c):
    bn = nn.BatchNorm2d(c)
    with torch.no_grad():
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 1.5)
    return bn


CASES = {
    # conv_small's planned gather + GEMM (8x8 input)
    "conv_small": (lambda: nn.Conv2d(3, 6, 3, padding=1), (3, 8, 8)),
    # Winograd-size 3x3 stride 1, im2col stride 2, 1x1 GEMM, depthwise, dilated, no bias
    "conv_winograd": (lambda: nn.Conv2d(8, 8, 3, padding=1), (8, 40, 40)),
    "conv_stride2": (lambda: nn.Conv2d(4, 6, 3, 2, 1), (4, 33, 33)),
    "conv_1x1": (lambda: nn.Conv2d(16, 8, 1), (16, 30, 30)),
    "conv_depthwise": (lambda: nn.Conv2d(8, 8, 3, padding=1, groups=8), (8, 30, 30)),
    "conv_dilated_nobias": (lambda: nn.Conv2d(4, 4, 3, dilation=2, bias=False), (4, 30, 30)),
    "conv1d": (lambda: nn.Conv1d(5, 3, 3), (5, 20)),
    "conv3d": (lambda: nn.Conv3d(2, 3, 3), (2, 6, 6, 6)),
    "conv_transpose1d": (lambda: nn.ConvTranspose1d(5, 3, 3, 2), (5, 9)),
    "conv_transpose2d": (lambda: nn.ConvTranspose2d(4, 3, 3, 2, 1, 1), (4, 9, 9)),
    # fused conv + bn + relu and conv + add + relu (srcore::conv2d_relu / conv2d_add_relu)
    "conv_bn_relu": (lambda: Fn(lambda x, c, bn: torch.relu(bn(c(x))), nn.Conv2d(4, 4, 3, padding=1), _bn(4)),
                     (4, 30, 30)),
    "conv_add_relu": (lambda: Fn(lambda x, c: torch.relu(c(x) + x), nn.Conv2d(4, 4, 3, padding=1)), (4, 30, 30)),
    "group_norm": (lambda: nn.GroupNorm(2, 4), (4, 5, 5)),
    "adaptive_max_pool2d": (lambda: Fn(lambda x: F.adaptive_max_pool2d(x, 3)), (4, 9, 9)),
    "cnn": (lambda: nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), _bn(8), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten(), nn.Linear(8, 3)), (3, 16, 16)),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    torch.manual_seed(0)
    make, shape = CASES[request.param]
    m = Fn(lambda x, inner: inner(x), make()).eval()   # one input named x, whatever the module
    x = torch.randn((2,) + shape)
    model = srcore.from_torchscript(torch.jit.trace(m, x), (x,), dynamic_dims={"x": {0: "batch"}})
    return m, shape, model


@pytest.mark.parametrize("executor", ["codegen", "interpreter"])
def test_empty_batch_matches_torch_and_other_batches_still_do(case, executor):
    m, shape, model = case
    sm = srcore.StaticModule(model, options=srcore.Options(executor=executor), backends=("cpu",))
    for batch in (0, 3, 0):
        x = torch.randn((batch,) + shape)
        with torch.no_grad():
            want = m(x).numpy()
        got = sm(x.numpy())
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_native_mha_with_a_3d_mask_and_an_empty_batch():
    from srcore_cpu.kernels.attention import native_multi_head_attention

    torch.manual_seed(1)
    E, H, L = 8, 2, 4
    mha = nn.MultiheadAttention(E, H, batch_first=True).eval()
    q = torch.zeros(0, L, E)
    mask = torch.zeros(0, L, L, dtype=torch.bool)
    args = (q, q, q, E, H, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias, mask)
    with torch.no_grad():
        want = torch.ops.aten._native_multi_head_attention(*args, need_weights=False)[0]
    got = native_multi_head_attention(*(a.detach().numpy() if torch.is_tensor(a) else a for a in args),
                                      need_weights=False)
    got = got[0] if isinstance(got, tuple) else got
    assert got.shape == tuple(want.shape) == (0, L, E)
