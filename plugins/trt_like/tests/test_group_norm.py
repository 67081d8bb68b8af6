"""group_norm in trt_like engines (compiled and numpy tactics) against torch: affine or not, 4-D and
3-D inputs, eps, between convs (so a whole UNet-style block stays in one engine); and the refusal
of a channel count the groups do not divide."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import srcore
from srcore.ir.types import TensorType
from srcore.testing import node_info
from srcore_trt_like.builder.support import supports

TRT = ("trt_like", "cpu")


class Block(torch.nn.Module):
    def __init__(self, affine: bool):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 12, 3, padding=1)
        self.gn = torch.nn.GroupNorm(3, 12, affine=affine)
        self.gn2 = torch.nn.GroupNorm(12, 12, eps=1e-2)      # one channel per group (instance-norm-like)

    def forward(self, x):
        return self.gn2(torch.nn.functional.silu(self.gn(self.conv(x))))


class Seq(torch.nn.Module):   # (N, C, L): audio models' group norm
    def __init__(self):
        super().__init__()
        self.gn = torch.nn.GroupNorm(2, 6)

    def forward(self, x):
        return torch.relu(self.gn(x * 2.0))


def _randomize(m):
    torch.manual_seed(1)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return m.eval()


@pytest.mark.parametrize("tactic", ["numba", "numpy"])
@pytest.mark.parametrize("model,shape", [(lambda: Block(True), (2, 4, 9, 7)), (lambda: Block(False), (1, 4, 5, 5)),
                                         (Seq, (3, 6, 40))], ids=["affine", "plain", "1d"])
def test_group_norm_layer_matches_torch(model, shape, tactic):
    m = _randomize(model())
    x = torch.randn(shape) * 4 + 2
    opts = srcore.Options(backends=TRT, engine_options={"exclude_tactics": ["numpy" if tactic == "numba" else "numba"]})
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(m), (x,)), options=opts)
    assert {n.kind for n in sm.graph.all_nodes()} <= {"srcore::engine", "prim::Constant"}, "all in one engine"
    (seg,) = sm.partition.engines
    assert "group_norm" in seg.description and f"[{tactic}]" in seg.description
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=2e-5)


def test_channels_not_divisible_by_groups_are_refused():
    t = TensorType("float32", (1, 10, 4, 4))
    node = node_info("aten::group_norm", input=t, num_groups=4, weight=None, bias=None, eps=1e-5,
                     cudnn_enabled=True, outputs=(t,))
    assert "not divisible" in supports(node)
    ok = node_info("aten::group_norm", input=t, num_groups=5, weight=None, bias=None, eps=1e-5,
                   cudnn_enabled=True, outputs=(t,))
    assert supports(ok) is True


NORM_ACTS = {"relu": torch.relu, "leaky_relu": lambda y: torch.nn.functional.leaky_relu(y, 0.2),
             "silu": torch.nn.functional.silu, "relu6": torch.nn.functional.relu6,
             "gelu_tanh": lambda y: torch.nn.functional.gelu(y, approximate="tanh")}


class NormAct(torch.nn.Module):   # a U-Net block's instance norm + activation, and a group norm's
    def __init__(self, act):
        super().__init__()
        self.act = act
        self.inorm = torch.nn.InstanceNorm2d(6, affine=True)
        self.gn = torch.nn.GroupNorm(2, 6)

    def forward(self, x):
        return self.act(self.gn(self.act(self.inorm(x * 1.5))))


@pytest.mark.parametrize("act,tactic", [(a, "numba") for a in sorted(NORM_ACTS)] + [("leaky_relu", "numpy"),
                                                                                   ("relu", "numpy")])
def test_norm_carries_the_activation_that_follows_it(act, tactic):
    m = _randomize(NormAct(NORM_ACTS[act]))
    x = torch.randn(2, 6, 7, 5) * 3
    opts = srcore.Options(backends=TRT, engine_options={"exclude_tactics": ["numpy" if tactic == "numba" else "numba"]})
    with torch.no_grad():   # traced: the activations are lambdas
        sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.trace(m, (x,)), (x,)), options=opts)
    (seg,) = sm.partition.engines
    assert seg.description.count(f"group_norm + {act} -> ") == 2, seg.description
    assert seg.description.count("fused_pointwise") == 1, seg.description   # x * 1.5 only
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=2e-5)


class GlobalNorm(torch.nn.Module):
    """Conv-TasNet's gLN written out: statistics over every dim but the batch, a per-channel affine
    (``form``: "tasnet" multiplies the weight first and takes ``** 0.5``; "after" scales the
    normalised tensor; "plain" has none, on a 4-D tensor)."""

    def __init__(self, form: str, c: int = 6):
        super().__init__()
        self.form = form
        shape = (1, c, 1) if form != "plain" else (1, c, 1, 1)
        self.conv = torch.nn.Conv1d(4, c, 1) if form != "plain" else torch.nn.Conv2d(4, c, 1)
        self.gamma = torch.nn.Parameter(torch.rand(shape) + 0.5)
        self.beta = torch.nn.Parameter(torch.randn(shape) * 0.1)

    def forward(self, x):
        x = self.conv(x)
        dims = [1, 2] if x.dim() == 3 else [1, 2, 3]
        mean = x.mean(dim=dims, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
        if self.form == "tasnet":
            return self.gamma * (x - mean) / torch.pow(var + 1e-8, 0.5) + self.beta
        if self.form == "after":
            return (x - mean) / torch.sqrt(var + 1e-5) * self.gamma + self.beta
        return (x - mean) / torch.sqrt(var + 1e-5)


@pytest.mark.parametrize("form,shape", [("tasnet", (2, 4, 15)), ("after", (3, 4, 7)), ("plain", (2, 4, 3, 5))])
def test_written_out_global_norm_is_one_group_norm_layer(form, shape):
    m = _randomize(GlobalNorm(form))
    x = torch.randn(shape) * 3 + 1
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.script(m), (x,)), options=srcore.Options(backends=TRT))
    (seg,) = sm.partition.engines
    assert "group_norm" in seg.description and "mean" not in seg.description, seg.description
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=2e-5)
