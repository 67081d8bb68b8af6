"""torch models of the eighth held-out zoo (test_heldout8_zoo.py), each for the import path it
stresses: torch.export programs (dynamic ``Dim``s with derived sizes, symbolic size arithmetic,
buffers mutated in forward, nested tuple/dict/list outputs, 0-d outputs, keyword inputs) and frozen
TorchScript of scripted modules (``if`` on shapes, loops over ModuleLists, early returns, Optional
arguments; ``torch.jit.freeze`` with and without ``optimize_numerics``, ``optimize_for_inference``;
eager- and dynamic-quantized modules frozen).

``EXPORT``: name -> factory giving ``(module, args, kwargs, dynamic_shapes, other_inputs)``;
``FROZEN``: name -> factory giving ``(module, inputs, dynamic_dims, other_inputs)``. Small shapes.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim


def _seed(s):
    torch.manual_seed(s)


# --- torch.export ----------------------------------------------------------------------------------


class SymArith(nn.Module):
    """Reshapes by symbolic arithmetic on a dynamic batch and an even length (a derived Dim)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        b, t, c = x.shape
        y = self.proj(x).reshape(b, t // 2, 2 * c)           # t = 2 * k
        z = y.transpose(1, 2).reshape(b * 2, c, t // 2)
        pooled = F.adaptive_avg_pool1d(z, 1).reshape(b, -1)
        return pooled + t, y.flatten(0, 1)[: b * (t // 2) - 1]


def sym_arith():
    _seed(80)
    k = Dim("k", min=1, max=32)
    shapes = ({0: Dim("batch", min=1, max=16), 1: 2 * k},)
    return SymArith(), (torch.randn(3, 6, 8),), {}, shapes, [(torch.randn(2, 10, 8),)]


class BufferMutation(nn.Module):
    """BatchNorm in eval (running stats read, not updated) and buffers updated in forward: a call
    counter and an exponential moving average of the input's mean."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))
        self.register_buffer("ema", torch.zeros(4))
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        y = self.bn(self.conv(x))
        self.calls += 1
        self.ema.mul_(0.9).add_(0.1 * y.mean((0, 2, 3)))
        return y * self.ema.view(1, -1, 1, 1), self.calls.clone()


def buffer_mutation():
    _seed(81)
    return BufferMutation().eval(), (torch.randn(2, 3, 5, 5),), {}, None, []


class NestedOutputs(nn.Module):
    """A tuple holding a dict of a list and a tensor, a 0-d tensor and an int tensor."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 4)
        self.b = nn.Linear(6, 3)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        g = self.b(x)
        return ({"feats": [h, h.sum(-1)], "logits": g}, g.max(), g.argmax(-1))


def nested_outputs():
    _seed(82)
    return NestedOutputs(), (torch.randn(3, 6),), {}, ({0: Dim("batch", max=64)},), [(torch.randn(5, 6),)]


class KwargsInputs(nn.Module):
    """Keyword inputs, one of them optional (a mask) and a float scale."""

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(8, 8)
        self.k = nn.Linear(8, 8)

    def forward(self, x, *, memory, mask: Optional[torch.Tensor] = None):
        s = self.q(x) @ self.k(memory).transpose(-1, -2) / 8 ** 0.5
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return s.softmax(-1) @ memory


def kwargs_inputs():
    _seed(83)
    mask = torch.rand(2, 3, 5) > 0.3
    mask[..., 0] = True
    return KwargsInputs(), (torch.randn(2, 3, 8),), {"memory": torch.randn(2, 5, 8), "mask": mask}, None, []


class ScalarOutputs(nn.Module):
    """Only 0-d outputs: a loss-like mean, a norm and a count."""

    def forward(self, x, y):
        d = x - y
        return (d * d).mean(), torch.linalg.vector_norm(d), (d > 0).sum()


def scalar_outputs():
    _seed(84)
    return ScalarOutputs(), (torch.randn(4, 5), torch.randn(4, 5)), {}, None, []


class SymFloats(nn.Module):
    """A dynamic batch size used as a float (``n * 1.0``, ``n / 4``, ``n ** 0.5``): export writes
    ``torch.sym_float`` (from_torch refused it: 'target sym_float is not supported')."""

    def forward(self, x):
        n = x.shape[0]
        return x * (n * 1.0), torch.full((2,), n / 4), x.sum(0) / (n ** 0.5)


def sym_floats():
    _seed(90)
    return (SymFloats(), (torch.randn(6, 3),), {}, ({0: Dim("b", min=2, max=32)},),
            [(torch.randn(9, 3),), (torch.randn(2, 3),)])


class PytreeInputs(nn.Module):
    """A list and a dict of tensors as arguments, a keyword tensor: export flattens them to inputs
    ``feats_0``, ``feats_1``, ``norm_scale``, ``norm_shift``, ``bias`` (srcore took only those)."""

    def forward(self, feats: List[torch.Tensor], norm: Dict[str, torch.Tensor], *, bias):
        h = torch.cat(feats, -1)
        return F.layer_norm(h, h.shape[-1:]) * norm["scale"] + norm["shift"] + bias


def pytree_inputs():
    _seed(91)
    args = ([torch.randn(2, 3), torch.randn(2, 4)], {"scale": torch.randn(7), "shift": torch.randn(7)})
    return PytreeInputs(), args, {"bias": torch.randn(2, 1)}, None, []


EXPORT = {"sym_arith": sym_arith, "sym_floats": sym_floats, "pytree_inputs": pytree_inputs,
          "buffer_mutation": buffer_mutation, "nested_outputs": nested_outputs,
          "kwargs_inputs": kwargs_inputs, "scalar_outputs": scalar_outputs}


# --- frozen TorchScript of scripted modules ---------------------------------------------------------


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x))) + x


class ShapeControl(nn.Module):
    """``if`` on the input's shape, a loop over a ModuleList skipping blocks by a shape test, an
    early return on an Optional argument."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.blocks = nn.ModuleList([Block(6) for _ in range(3)])
        self.head = nn.Linear(6, 5)
        self.limit: int = 2
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.uniform_(-0.3, 0.3)
                    m.running_var.uniform_(0.5, 1.5)

    def forward(self, x, bias: Optional[torch.Tensor] = None):
        if x.size(-1) > 8:
            x = F.avg_pool2d(x, 2)
        h = F.relu(self.bn(self.stem(x)))
        i = 0
        for blk in self.blocks:   # unrolled by TorchScript (no break there): a guard on the shape
            if i < self.limit or h.size(2) >= 8:
                h = blk(h)
            i += 1
        pooled = h.mean((2, 3))
        if bias is None:
            return self.head(pooled)
        return self.head(pooled) + bias


def shape_control():
    _seed(85)
    return (ShapeControl().eval(), (torch.randn(2, 3, 12, 12), torch.randn(5)), {"x": {0: "b", 2: "h", 3: "w"}},
            [(torch.randn(1, 3, 16, 16), torch.randn(5)), (torch.randn(3, 3, 6, 8), torch.randn(5))])


class ListLoopLSTM(nn.Module):
    """A scripted loop over time steps of an LSTMCell, appending to a list, stacked; a while loop
    halving the sequence while it is long."""

    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(4, 6)
        self.out = nn.Linear(6, 3)

    def forward(self, x):
        while x.size(1) > 4:
            x = x[:, ::2]
        h = torch.zeros(x.size(0), 6)
        c = torch.zeros(x.size(0), 6)
        outs: List[torch.Tensor] = []
        for t in range(x.size(1)):
            h, c = self.cell(x[:, t], (h, c))
            outs.append(self.out(h))
        return torch.stack(outs, 1)


def list_loop_lstm():
    _seed(86)
    return ListLoopLSTM().eval(), (torch.randn(2, 9, 4),), {"x": {0: "b", 1: "t"}}, [(torch.randn(3, 3, 4),)]


class ConvBnChain(nn.Module):
    """Conv + BN + hardswish, depthwise conv + BN, conv-transpose, linear: what freeze's and
    optimize_for_inference's folding passes rewrite (MKLDNN layouts for the latter)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.b1 = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.b2 = nn.BatchNorm2d(8)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.fc = nn.Linear(4, 2)
        with torch.no_grad():
            for b in (self.b1, self.b2):
                b.running_mean.uniform_(-0.3, 0.3)
                b.running_var.uniform_(0.5, 1.5)
                b.weight.uniform_(0.5, 1.5)

    def forward(self, x):
        h = F.hardswish(self.b1(self.c1(x)))
        h = F.relu6(self.b2(self.dw(h)))
        h = self.up(h)
        return self.fc(h.permute(0, 2, 3, 1)).sum(-1)


def conv_bn_chain():
    _seed(87)
    return ConvBnChain().eval(), (torch.randn(2, 3, 8, 8),), {"x": {0: "b"}}, [(torch.randn(1, 3, 8, 8),)]


FROZEN = {"shape_control": shape_control, "list_loop_lstm": list_loop_lstm, "conv_bn_chain": conv_bn_chain}


# --- quantized, then scripted and frozen -------------------------------------------------------------


class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(6, 4)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        h = self.pool(self.relu(self.conv(self.quant(x))))
        return self.dequant(self.fc(torch.flatten(h, 1)))


def eager_static_quant():
    """Eager static quantization (fbgemm, conv+relu fused), calibrated on seeded batches."""
    import torch.ao.quantization as tq

    _seed(88)
    m = QNet().eval()
    m.qconfig = tq.get_default_qconfig("fbgemm")
    tq.fuse_modules(m, [["conv", "relu"]], inplace=True)
    tq.prepare(m, inplace=True)
    with torch.no_grad():
        for _ in range(4):
            m(torch.randn(2, 3, 6, 6))
    tq.convert(m, inplace=True)
    return m, (torch.randn(2, 3, 6, 6),)


class DynLinearLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(5, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def dynamic_quant():
    """``quantize_dynamic`` of Linear layers (int8 weights, activations quantized per call)."""
    _seed(89)
    m = torch.ao.quantization.quantize_dynamic(DynLinearLSTM().eval(), {nn.Linear}, dtype=torch.qint8)
    return m, (torch.randn(3, 5),)


QUANTIZED = {"eager_static_quant": eager_static_quant, "dynamic_quant": dynamic_quant}
