"""Quantized models for the parity zoo: each built float, then quantized by one of torch's workflows.

``build(name)`` returns ``(quantized torch module, example input)``; ``WORKFLOWS`` says how each
was quantized. Calibration uses fixed seeds, so the quantization parameters are reproducible.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.ao.quantization as tq
from torch.ao.nn.quantized import FloatFunctional


class ResBlockNet(nn.Module):
    """A resnet-ish CNN: conv-bn-relu stem, a residual block (add_relu), pool, linear."""

    def __init__(self):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, stride=2), nn.BatchNorm2d(16), nn.ReLU())
        self.c1 = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.c2 = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16))
        self.skip = FloatFunctional()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(self.quant(x))
        x = self.skip.add_relu(self.c2(self.c1(x)), x)
        return self.dequant(self.fc(self.pool(x).flatten(1)))

    def fuse(self):
        tq.fuse_modules(self, [["stem.0", "stem.1", "stem.2"], ["c1.0", "c1.1", "c1.2"], ["c2.0", "c2.1"]],
                        inplace=True)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        return self.net(x)


class DepthwiseSeparable(nn.Module):
    """MobileNet-style blocks: depthwise 3x3 + pointwise 1x1, hardswish, a squeeze-excite gate
    (mean, linear, hardsigmoid-like sigmoid, mul), concat, upsample, max pool."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.ReLU())
        self.pw = nn.Sequential(nn.Conv2d(16, 32, 1), nn.BatchNorm2d(32), nn.ReLU())
        self.dw2 = nn.Conv2d(32, 32, 3, padding=2, dilation=2, groups=32)
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        y = self.stem(x)
        y = self.pw(self.dw(y))
        z = self.dw2(y)
        y = torch.cat([y, torch.sigmoid(z)], 1)
        y = nn.functional.max_pool2d(y, 2)
        y = nn.functional.interpolate(y, scale_factor=2.0, mode="nearest")
        return self.head(y.mean((2, 3)))


class AttentionBlock(nn.Module):
    """A transformer-ish block of Linear layers (q, k, v, out, feed-forward) with layer norm."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ff1, self.ff2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.n1(x)
        q = self.q(h).reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = self.k(h).reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = self.v(h).reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.o((a @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.ff2(torch.relu(self.ff1(self.n2(x))))


def _calibrate(model, shape, n=4):
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _ in range(n):
            model(torch.randn(*shape, generator=g))


def _eager(model, engine, shape):
    torch.backends.quantized.engine = engine
    model.eval()
    model.fuse()
    model.qconfig = tq.get_default_qconfig(engine)
    tq.prepare(model, inplace=True)
    _calibrate(model, shape)
    return tq.convert(model, inplace=True)


def _fx(model, engine, shape):
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    torch.backends.quantized.engine = engine
    example = (torch.randn(*shape),)
    prepared = prepare_fx(model.eval(), tq.get_default_qconfig_mapping(engine), example)
    _calibrate(prepared, shape)
    return convert_fx(prepared)


def _dynamic(model, engine, shape):
    torch.backends.quantized.engine = engine
    return tq.quantize_dynamic(model.eval(), {nn.Linear}, dtype=torch.qint8)


#: name -> (float model class, workflow, engine, input shape)
ZOO = {
    "resnet_eager_x86": (ResBlockNet, _eager, "x86", (2, 3, 16, 16)),
    "resnet_eager_qnnpack": (ResBlockNet, _eager, "qnnpack", (2, 3, 16, 16)),
    "mlp_fx_qnnpack": (MLP, _fx, "qnnpack", (8, 32)),
    "mlp_fx_x86": (MLP, _fx, "x86", (8, 32)),
    "dwsep_fx_x86": (DepthwiseSeparable, _fx, "x86", (2, 3, 16, 16)),
    "attention_dynamic": (AttentionBlock, _dynamic, "x86", (2, 6, 32)),
}


def build(name: str):
    """The quantized model and an example input (seeded)."""
    cls, workflow, engine, shape = ZOO[name]
    torch.manual_seed(0)
    model = workflow(cls(), engine, shape)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    return model, x, engine


class ConvChain(nn.Module):
    """For PT2E: conv-relu chains and a linear-relu-linear head, so that X86InductorQuantizer quantizes
    op outputs (foldable) as well as leaving some float (a residual add, the logits)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1, groups=4)
        self.c3 = nn.Conv2d(16, 16, 1)
        self.fc1, self.fc2 = nn.Linear(16 * 4 * 4, 32), nn.Linear(32, 10)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        y = torch.relu(self.c2(y))
        y = self.c3(y) + y
        y = nn.functional.max_pool2d(y, 2).flatten(1)
        return self.fc2(torch.relu(self.fc1(y)))


def pt2e(shape=(2, 3, 8, 8)):
    """ConvChain quantized by PT2E with the X86 inductor quantizer (torchao), and an example input."""
    import logging

    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq

    logging.getLogger("torchao").setLevel(logging.ERROR)
    torch.manual_seed(0)
    example = (torch.randn(*shape),)
    exported = torch.export.export(ConvChain().eval(), example).module()
    quantizer = xiq.X86InductorQuantizer()
    quantizer.set_global(xiq.get_default_x86_inductor_quantization_config())
    prepared = prepare_pt2e(exported, quantizer)
    _calibrate(prepared, shape)
    return convert_pt2e(prepared), torch.randn(*shape, generator=torch.Generator().manual_seed(1))
