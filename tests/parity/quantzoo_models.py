"""Quantized models of forms the other zoos do not test (test_quantzoo.py): each built float with seeded
weights, quantized by one of torch's workflows, and returned with seeded example inputs.

``MODELS[name]()`` -> ``(quantized module, inputs, engine)``; the test scripts, freezes or traces it as
its entry says and compares srcore with torch under ``engine``. Calibration and training data are
seeded, so the quantization parameters are reproducible. Activations use torch's default qconfigs
(x86: ``reduce_range`` 7-bit activations, so fbgemm's AVX2 int16 pair sums never saturate on CPUs
without VNNI; qnnpack: 8-bit activations, its own exact kernels).
"""
from __future__ import annotations

import warnings

import torch
import torch.ao.quantization as tq
import torch.nn as nn
from torch.ao.nn.quantized import FloatFunctional


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(shape, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed))


def _calibrate(m, shape, n: int = 4, seed: int = 0) -> None:
    with torch.no_grad():
        for s in range(n):
            m(_randn(shape, seed + s))


def _train(m, shape, steps: int = 3) -> None:
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    for s in range(steps):
        loss = m(_randn(shape, 100 + s)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


# -- float models ------------------------------------------------------------------------------------


class BasicBlock(nn.Module):
    """torchvision's BasicBlock: conv-bn-relu, conv-bn, downsample (1x1 conv-bn) when strided,
    ``relu(out + identity)`` (FX: add_relu)."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNetSmall(nn.Module):
    """A ResNet-10-ish net: 7x7/2 stem, max pool, four stages of one BasicBlock, global pool, fc."""

    def __init__(self, width: int = 8, classes: int = 10):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width)
        self.relu, self.pool = nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
        chans = [width, width * 2, width * 4, width * 8]
        self.layers = nn.Sequential(*[BasicBlock(chans[max(i - 1, 0)], c, 1 if i == 0 else 2) for i, c in enumerate(chans)])
        self.avgpool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(chans[-1], classes)

    def forward(self, x):
        x = self.pool(self.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(self.avgpool(self.layers(x)), 1))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expand conv-bn-relu6, 3x3 depthwise conv-bn-relu6, 1x1 project conv-bn,
    a residual add (no relu) when the shapes agree."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int, act=nn.ReLU6):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), act(inplace=True)]
        layers += [nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
                   act(inplace=True), nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2Small(nn.Module):
    """MobileNetV2 narrowed: stem conv-bn-relu6, inverted residuals (expand 1 and 6, strided and
    residual), a 1x1 conv-bn-hardswish head (MobileNetV3's), global pool, dropout, linear. ``act``: the
    activation after the convs (ReLU6; ReLU for the qnnpack engine, whose clamp torch 2.13 computes on
    a channels-last conv output as if it were NCHW: see test_quantzoo.py)."""

    def __init__(self, classes: int = 10, act=nn.ReLU6):
        super().__init__()
        cfg = [(8, 8, 1, 1), (8, 12, 2, 6), (12, 12, 1, 6), (12, 16, 2, 6), (16, 16, 1, 6)]
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), act(inplace=True))
        self.blocks = nn.Sequential(*[InvertedResidual(*c, act=act) for c in cfg])
        self.head = nn.Sequential(nn.Conv2d(16, 32, 1, bias=False), nn.BatchNorm2d(32), nn.Hardswish())
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(32, classes))

    def forward(self, x):
        x = self.head(self.blocks(self.stem(x)))
        return self.classifier(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


class SqueezeExcite(nn.Module):
    def __init__(self, c: int, r: int = 4):
        super().__init__()
        self.fc1, self.relu, self.fc2 = nn.Conv2d(c, c // r, 1), nn.ReLU(), nn.Conv2d(c // r, c, 1)
        self.gate = nn.Hardsigmoid()

    def forward(self, x):
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(self.relu(self.fc1(s))))


class MobileNetV3Small(nn.Module):
    """MobileNetV3-ish: conv-bn-hardswish stem, depthwise conv-bn-relu, squeeze-excite (hardsigmoid
    gate, mul), a residual block with hardswish, global pool, linear-hardswish-linear."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, groups=16, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.se = SqueezeExcite(16)
        self.pw = nn.Sequential(nn.Conv2d(16, 16, 1, bias=False), nn.BatchNorm2d(16))
        self.expand = nn.Sequential(nn.Conv2d(16, 48, 1, bias=False), nn.BatchNorm2d(48), nn.Hardswish())
        self.head = nn.Sequential(nn.Linear(48, 32), nn.Hardswish(), nn.Linear(32, classes))

    def forward(self, x):
        x = self.stem(x)
        x = x + self.pw(self.se(self.dw(x)))
        x = self.expand(x)
        return self.head(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


class EagerFunctional(nn.Module):
    """Eager mode with QuantStub / DeQuantStub and every FloatFunctional op: add, add_relu, mul, cat,
    add_scalar, mul_scalar; two inputs quantized by two stubs; quantized LeakyReLU, ELU, Hardswish,
    LayerNorm, a linear on the channels."""

    def __init__(self):
        super().__init__()
        self.qa, self.qb, self.dq = tq.QuantStub(), tq.QuantStub(), tq.DeQuantStub()
        self.conv_a = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.conv_b = nn.Conv2d(3, 8, 3, padding=1)
        self.f_add, self.f_add_relu, self.f_mul = FloatFunctional(), FloatFunctional(), FloatFunctional()
        self.f_cat, self.f_adds, self.f_muls = FloatFunctional(), FloatFunctional(), FloatFunctional()
        self.act1, self.act2, self.act3 = nn.LeakyReLU(0.1), nn.ELU(), nn.Hardswish()
        self.norm = nn.LayerNorm([16, 6, 6])
        self.fc = nn.Linear(6, 4)

    def forward(self, a, b):
        a, b = self.conv_a(self.qa(a)), self.conv_b(self.qb(b))
        s = self.f_add_relu.add_relu(a, b)
        m = self.f_mul.mul(self.act1(a), self.act2(b))
        y = self.f_cat.cat([self.f_add.add(s, m), self.act3(b)], 1)
        y = self.f_muls.mul_scalar(self.f_adds.add_scalar(self.norm(y), 0.5), 0.75)
        return self.dq(self.fc(y))

    def fuse(self):
        tq.fuse_modules(self, [["conv_a.0", "conv_a.1", "conv_a.2"]], inplace=True)


class EagerQATResNet(nn.Module):
    """Eager QAT: stubs, fused conv-bn-relu / conv-bn (fuse_modules_qat), FloatFunctional add_relu, a
    strided downsample, global pool, linear."""

    def __init__(self):
        super().__init__()
        self.q, self.dq = tq.QuantStub(), tq.DeQuantStub()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.c1 = nn.Sequential(nn.Conv2d(8, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.c2 = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16))
        self.down = nn.Sequential(nn.Conv2d(8, 16, 1, 2, bias=False), nn.BatchNorm2d(16))
        self.skip = FloatFunctional()
        self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(16, 5)

    def forward(self, x):
        x = self.stem(self.q(x))
        y = self.skip.add_relu(self.c2(self.c1(x)), self.down(x))
        return self.dq(self.fc(self.pool(y).flatten(1)))

    def fuse(self, qat: bool):
        fuse = tq.fuse_modules_qat if qat else tq.fuse_modules
        fuse(self, [["stem.0", "stem.1", "stem.2"], ["c1.0", "c1.1", "c1.2"], ["c2.0", "c2.1"], ["down.0", "down.1"]],
             inplace=True)


class EncoderDecoder(nn.Module):
    """A U-Net-ish pair: strided conv-relu encoder, ConvTranspose2d decoders (stride 2, output_padding,
    groups), a skip cat, a final conv."""

    def __init__(self):
        super().__init__()
        self.q, self.dq = tq.QuantStub(), tq.DeQuantStub()
        self.enc1 = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv2d(8, 16, 3, 2, 1), nn.ReLU())
        self.up1 = nn.ConvTranspose2d(16, 8, 3, 2, 1, output_padding=1)
        self.up2 = nn.ConvTranspose2d(16, 8, 4, 2, 1, groups=2)
        self.cat = FloatFunctional()
        self.out = nn.Conv2d(8, 2, 3, padding=1)

    def forward(self, x):
        e1 = self.enc1(self.q(x))
        d1 = self.up1(self.enc2(e1))
        return self.dq(self.out(self.up2(self.cat.cat([d1, e1], 1))))


class Recommender(nn.Module):
    """DLRM-ish: dense features through an MLP, two sparse features through EmbeddingBags (sum, mean
    of offsets; one 8-bit, one 4-bit), an Embedding lookup, dot-product interactions, a top MLP."""

    def __init__(self):
        super().__init__()
        self.bot = nn.Sequential(nn.Linear(13, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU())
        self.bag_a = nn.EmbeddingBag(200, 16, mode="sum")
        self.bag_b = nn.EmbeddingBag(120, 16, mode="sum")
        self.emb = nn.Embedding(50, 16)
        self.top = nn.Sequential(nn.Linear(16 + 6, 32), nn.ReLU(), nn.Linear(32, 1))
        self.register_buffer("pairs", torch.triu_indices(4, 4, 1))

    def forward(self, dense, ids_a, off_a, ids_b, off_b, ids_c):
        d = self.bot(dense)
        feats = torch.stack([d, self.bag_a(ids_a, off_a), self.bag_b(ids_b, off_b), self.emb(ids_c)], 1)
        inter = torch.bmm(feats, feats.transpose(1, 2))
        return torch.sigmoid(self.top(torch.cat([d, inter[:, self.pairs[0], self.pairs[1]]], 1)))


class Seq2Vec(nn.Module):
    """Embedding, a 2-layer LSTM, a GRU, linears: for ``quantize_dynamic`` per channel."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(40, 12)
        self.lstm = nn.LSTM(12, 16, num_layers=2, batch_first=True)
        self.gru = nn.GRU(16, 10, batch_first=True, bidirectional=True)
        self.fc1, self.fc2 = nn.Linear(20, 24), nn.Linear(24, 3)

    def forward(self, ids):
        y, _ = self.lstm(self.emb(ids))
        y, h = self.gru(y)
        return self.fc2(torch.relu(self.fc1(y[:, -1]))), h


class LinearStack(nn.Module):
    """Linear layers of odd sizes, a 3-D input (batched tokens), relu and gelu between."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(20, 37), nn.Linear(37, 64), nn.Linear(64, 7)

    def forward(self, x):
        return self.c(nn.functional.gelu(self.b(torch.relu(self.a(x)))))


# -- workflows --------------------------------------------------------------------------------------


def _quiet(fn):
    def wrapped(*a, **k):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*a, **k)
    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


def _fx_ptq(model, engine, shape):
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    torch.backends.quantized.engine = engine
    prepared = prepare_fx(model.eval(), tq.get_default_qconfig_mapping(engine), (_randn(shape, 0),))
    _calibrate(prepared, shape)
    return convert_fx(prepared)


@_quiet
def resnet_fx_x86():
    """FX PTQ (x86) of :class:`ResNetSmall`: conv-bn-relu fused, add_relu, max pool, global pool."""
    torch.manual_seed(1)
    return _fx_ptq(ResNetSmall(), "x86", (2, 3, 48, 48)), (_randn((2, 3, 48, 48), 7),), "x86"


@_quiet
def mobilenetv2_fx_x86():
    """FX PTQ (x86) of :class:`MobileNetV2Small`: relu6, depthwise, residual add, hardswish, dropout."""
    torch.manual_seed(2)
    return _fx_ptq(MobileNetV2Small(), "x86", (2, 3, 32, 32)), (_randn((2, 3, 32, 32), 7),), "x86"


@_quiet
def mobilenetv2_fx_qnnpack():
    """The same under the qnnpack engine and qconfig (8-bit activations, QNNPACK's kernels in torch), with
    ReLU: torch's QNNPACK clamp (ReLU6) scrambles a channels-last input (tested on its own)."""
    torch.manual_seed(2)
    return _fx_ptq(MobileNetV2Small(act=nn.ReLU), "qnnpack", (2, 3, 32, 32)), (_randn((2, 3, 32, 32), 7),), "qnnpack"


@_quiet
def mobilenetv3_fx_qat():
    """FX QAT (x86) of :class:`MobileNetV3Small`: three SGD steps with fake quantization, converted."""
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_qat_fx

    torch.backends.quantized.engine = "x86"
    torch.manual_seed(3)
    shape = (4, 3, 16, 16)
    m = prepare_qat_fx(MobileNetV3Small().train(), tq.get_default_qat_qconfig_mapping("x86"), (_randn(shape, 0),))
    _train(m, shape)
    return convert_fx(m.eval()), (_randn((2, 3, 16, 16), 7),), "x86"


@_quiet
def resnet_eager_qat():
    """Eager QAT (x86) of :class:`EagerQATResNet`: fuse_modules_qat, prepare_qat, three steps, convert."""
    torch.backends.quantized.engine = "x86"
    torch.manual_seed(4)
    m = EagerQATResNet().train()
    m.fuse(qat=True)
    m.qconfig = tq.get_default_qat_qconfig("x86")
    tq.prepare_qat(m, inplace=True)
    _train(m, (4, 3, 12, 12))
    return tq.convert(m.eval()), (_randn((2, 3, 12, 12), 7),), "x86"


@_quiet
def eager_functional_qnnpack():
    """Eager PTQ of :class:`EagerFunctional` with the qnnpack engine and qconfig: two stubs, every
    FloatFunctional op, quantized LeakyReLU / ELU / Hardswish / LayerNorm."""
    torch.backends.quantized.engine = "qnnpack"
    torch.manual_seed(5)
    m = EagerFunctional().eval()
    m.fuse()
    m.qconfig = tq.get_default_qconfig("qnnpack")
    tq.prepare(m, inplace=True)
    with torch.no_grad():
        for s in range(4):
            m(_randn((2, 3, 6, 6), s), _randn((2, 3, 6, 6), 10 + s))
    return tq.convert(m), (_randn((2, 3, 6, 6), 7), _randn((2, 3, 6, 6), 8)), "qnnpack"


@_quiet
def convtranspose_eager_fbgemm():
    """Eager PTQ (fbgemm engine: torch's oneDNN deconvolution is refused, see docs) of
    :class:`EncoderDecoder`: ConvTranspose2d with output_padding and groups, a skip cat."""
    torch.backends.quantized.engine = "fbgemm"
    torch.manual_seed(6)
    m = EncoderDecoder().eval()
    m.qconfig = tq.get_default_qconfig("fbgemm")
    # ConvTranspose takes per-tensor weights only (torch's fbgemm deconvolution)
    m.up1.qconfig = m.up2.qconfig = tq.QConfig(activation=m.qconfig.activation, weight=tq.default_weight_observer)
    tq.prepare(m, inplace=True)
    _calibrate(m, (2, 3, 16, 16))
    return tq.convert(m), (_randn((2, 3, 16, 16), 7),), "fbgemm"


def _recommender_inputs(seed: int, batch: int = 3):
    g = _gen(seed)
    offs = lambda n: torch.cat([torch.zeros(1, dtype=torch.long), torch.sort(torch.randint(0, n, (batch - 1,), generator=g))[0]])  # noqa: E731
    return (torch.randn(batch, 13, generator=g), torch.randint(0, 200, (11,), generator=g), offs(11),
            torch.randint(0, 120, (7,), generator=g), offs(7), torch.randint(0, 50, (batch,), generator=g))


@_quiet
def recommender_mixed():
    """:class:`Recommender` quantized three ways at once: EmbeddingBag 8-bit and 4-bit and Embedding
    8-bit weight-only (float_qparams), the MLPs' Linears dynamic (per channel)."""
    torch.backends.quantized.engine = "x86"
    torch.manual_seed(7)
    m = Recommender().eval()
    m.bag_a.qconfig = tq.float_qparams_weight_only_qconfig
    m.bag_b.qconfig = tq.float_qparams_weight_only_qconfig_4bit
    m.emb.qconfig = tq.float_qparams_weight_only_qconfig
    tq.prepare(m, inplace=True)
    tq.convert(m, inplace=True)
    m = tq.quantize_dynamic(m, {nn.Linear: tq.per_channel_dynamic_qconfig})
    return m, _recommender_inputs(8), "x86"


@_quiet
def seq2vec_dynamic_per_channel():
    """``quantize_dynamic`` of :class:`Seq2Vec` with per-channel int8 weights (LSTM, GRU, Linear)."""
    torch.backends.quantized.engine = "x86"
    torch.manual_seed(8)
    spec = {nn.LSTM: tq.per_channel_dynamic_qconfig, nn.GRU: tq.per_channel_dynamic_qconfig,
            nn.Linear: tq.per_channel_dynamic_qconfig}
    m = tq.quantize_dynamic(Seq2Vec().eval(), spec)
    return m, (torch.randint(0, 40, (3, 7), generator=_gen(9)),), "x86"


@_quiet
def linear_dynamic_fx_per_channel():
    """FX dynamic quantization (prepare_fx with the per-channel dynamic qconfig, no calibration)."""
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    torch.backends.quantized.engine = "x86"
    torch.manual_seed(9)
    qmap = tq.QConfigMapping().set_object_type(nn.Linear, tq.per_channel_dynamic_qconfig)
    m = convert_fx(prepare_fx(LinearStack().eval(), qmap, (_randn((2, 5, 20), 0),)))
    return m, (_randn((2, 5, 20), 7),), "x86"


@_quiet
def linear_reference_fx():
    """FX PTQ (x86) of :class:`LinearStack` converted to a *reference* model (convert_to_reference_fx):
    quantize_per_tensor / dequantize pairs around float linears on dequantized int8 weights."""
    from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx

    torch.backends.quantized.engine = "x86"
    torch.manual_seed(10)
    prepared = prepare_fx(LinearStack().eval(), tq.get_default_qconfig_mapping("x86"), (_randn((2, 5, 20), 0),))
    _calibrate(prepared, (2, 5, 20))
    return convert_to_reference_fx(prepared), (_randn((2, 5, 20), 7),), "x86"


#: name -> (builder, how the test hands it to srcore: "script", "frozen", "trace", "saved" (torch.jit.save'd
#: frozen script, loaded from the file), "module"), how it compares: "exact" or a relative tolerance
MODELS = {
    "resnet_fx_x86": (resnet_fx_x86, "frozen", "exact"),
    "mobilenetv2_fx_x86": (mobilenetv2_fx_x86, "script", "exact"),
    "mobilenetv2_fx_qnnpack": (mobilenetv2_fx_qnnpack, "frozen", "exact"),
    "mobilenetv3_fx_qat": (mobilenetv3_fx_qat, "saved", "exact"),
    "resnet_eager_qat": (resnet_eager_qat, "trace", "exact"),
    "eager_functional_qnnpack": (eager_functional_qnnpack, "script", "exact"),
    "convtranspose_eager_fbgemm": (convtranspose_eager_fbgemm, "frozen", "exact"),
    "recommender_mixed": (recommender_mixed, "script", 1e-5),
    "seq2vec_dynamic_per_channel": (seq2vec_dynamic_per_channel, "frozen", 1e-5),
    "linear_dynamic_fx_per_channel": (linear_dynamic_fx_per_channel, "module", 1e-5),
    "linear_reference_fx": (linear_reference_fx, "script", 1e-5),
}
