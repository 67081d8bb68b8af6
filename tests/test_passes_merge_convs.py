"""merge_parallel_convs against torch: RepVGG / ACNet / MobileOne-style sums of parallel convs become
one conv with the same output; sums that are not exact merges keep their convs."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import srcore
from srcore.passes import prepare_for_static_runtime

pytestmark = pytest.mark.one_pass


def _bn(c):
    bn = nn.BatchNorm2d(c)
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    return bn


class RepBlock(nn.Module):
    """RepVGG train form: kxk conv+BN, 1x1 conv+BN, identity BN (or plain x, or none)."""

    def __init__(self, c=4, k=3, stride=1, groups=1, identity="bn", p1=0, pk=None, extra_read=False):
        super().__init__()
        self.k3 = nn.Sequential(nn.Conv2d(c, c, k, stride, k // 2 if pk is None else pk, groups=groups, bias=False),
                                _bn(c))
        self.k1 = nn.Sequential(nn.Conv2d(c, c, 1, stride, p1, groups=groups, bias=False), _bn(c))
        self.id = _bn(c) if identity == "bn" else nn.Identity()
        self.identity, self.extra_read = identity, extra_read

    def forward(self, x):
        a, b = self.k3(x), self.k1(x)
        y = a + b
        if self.identity != "none":
            y = y + self.id(x)
        return (F.relu(y), b) if self.extra_read else F.relu(y)


class ACBlock(nn.Module):
    """ACNet: 3x3 + 1x3 + 3x1, with biases, and an unrelated residual term."""

    def __init__(self, c=4):
        super().__init__()
        self.sq = nn.Conv2d(c, c, 3, 1, 1)
        self.hor = nn.Conv2d(c, c, (1, 3), 1, (0, 1))
        self.ver = nn.Conv2d(c, c, (3, 1), 1, (1, 0))

    def forward(self, x, r):
        return self.hor(x) + r + self.sq(x) + self.ver(x)


class Functional(nn.Module):
    """Weights as inputs: not constants, never merged."""

    def forward(self, x, w3, w1):
        return F.conv2d(x, w3, padding=1) + F.conv2d(x, w1)


def _run(module, inputs, path="frozen"):
    torch.manual_seed(0)
    module = module.eval()
    if path == "frozen":
        with torch.no_grad():
            model = srcore.from_torchscript(torch.jit.freeze(torch.jit.trace(module, inputs)), inputs)
    else:
        model = srcore.from_torch(module, inputs)
    g = prepare_for_static_runtime(model.graph, fuse=False)
    convs = sum("conv" in n.kind for n in g.all_nodes())
    with torch.no_grad():
        want = module(*inputs)
    want = [w.numpy() for w in (want if isinstance(want, tuple) else (want,))]
    got = srcore.StaticModule(model)(*[x.numpy() for x in inputs])
    got = got if isinstance(got, (tuple, list)) else (got,)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    return convs


def _x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1))


FULL = pytest.mark.full


@pytest.mark.parametrize("kw", [dict(), pytest.param(dict(identity="x", groups=2), marks=FULL),
                                pytest.param(dict(k=5, identity="none", stride=2), marks=FULL),
                                pytest.param(dict(k=5, groups=4), marks=FULL)],
                         ids=["bn_identity", "x_identity_groups", "k5_stride2", "dw"])
def test_repvgg_blocks_merge_into_one_conv(kw):
    torch.manual_seed(0)
    assert _run(RepBlock(**kw), (_x(2, 4, 9, 9),)) == 1


def test_acnet_block_merges_and_keeps_the_other_term():
    torch.manual_seed(0)
    assert _run(ACBlock(), (_x(1, 4, 7, 8), _x(1, 4, 7, 8))) == 1


def test_a_branch_read_elsewhere_keeps_its_conv():
    torch.manual_seed(0)
    assert _run(RepBlock(extra_read=True), (_x(2, 4, 9, 9),)) == 2


class Pair(nn.Module):
    def __init__(self, a, b, step=1):
        super().__init__()
        self.a, self.b, self.step = a, b, step

    def forward(self, x):
        b = self.b(x)
        return self.a(x) + (b if self.step == 1 else b[..., ::self.step, ::self.step])


@pytest.mark.full
@pytest.mark.parametrize("a, b, step", [((3, 2, 1), (2, 2, 1), 1), ((3, 2, 1), (3, 1, 1), 2),
                                        ((3, 1, 2), (1, 1, 0), 1)], ids=["off_centre", "strides", "centred_pad2"])
def test_pairs(a, b, step):
    """An even kernel off the centre and different strides keep their convs; a 3x3 padded by 2 and
    a 1x1 (same centre, output 2 wider) merge."""
    torch.manual_seed(0)
    merged = step == 1 and a[2] == 2
    x = _x(1, 4, 9, 9)
    if merged:  # 3x3 pad 2 and 1x1 pad 1: both 11x11
        m = Pair(nn.Conv2d(4, 4, 3, 1, 2), nn.Conv2d(4, 4, 1, 1, 1))
    else:
        m = Pair(nn.Conv2d(4, 4, *a), nn.Conv2d(4, 4, *b), step)
    assert _run(m, (x,)) == (1 if merged else 2)


def test_non_constant_weights_keep_their_convs():
    assert _run(Functional(), (_x(1, 4, 6, 6), _x(4, 4, 3, 3), _x(4, 4, 1, 1))) == 2
