"""The wider benchmark set: one model per architecture family beyond the seven of bench-models.md.

Same rules as ``models.py``: plain torch (no torchvision), fixed seeds, eval mode, float32, every
builder returns ``(module, example_inputs)``. Batch-norm statistics are drawn (non-trivial), so
folding does real work. ``FAMILIES`` maps a name to ``(builder, meta)`` like ``models.MODELS``;
``meta["small_inputs"]`` makes inputs of the same kinds at smaller sizes (fewer pixels, tokens,
steps or samples), on which the parity tests check the same modules cheaply.

- ``mobilenet_v3``: MobileNetV3-Small layout (depthwise 3x3/5x5, squeeze-excite with hardsigmoid,
  hardswish), 1x3x224x224.
- ``unet_small``: encoder-decoder (group norm, SiLU, max pool, bilinear and nearest upsampling,
  skip concatenation), 1x3x128x128.
- ``bert_encoder``: 4-layer BERT-style encoder (word/position/type embeddings, int64 ids, an
  attention mask with padding, exact GELU, layer norm), 1x128 tokens.
- ``lstm_gru``: 2-layer LSTM then GRU over 1x100x40 features, a classifier on the last step.
- ``detection_head``: a small backbone with three scales and YOLO-style heads (reshape / permute,
  sigmoid, grid decoding, concatenation of the anchors), 1x3x256x256.
- ``index_ops``: a top-k / top-p sampling step (topk, softmax, cumsum, where, masked_fill, argmax,
  gather, index_select, embedding) over 8x4000 logits.
- ``audio_conv1d``: a wav2vec-style 1-D conv feature extractor (7 strided convs, group norm, GELU)
  and a projection, 1x1x16000 samples.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _seed(s: int) -> None:
    torch.manual_seed(s)


def _draw_norm_stats(m: nn.Module) -> None:
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
            if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d, nn.GroupNorm, nn.LayerNorm)) and mod.weight is not None:
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.1, 0.1)


def _divisible(v: float, d: int = 8) -> int:
    n = max(d, int(v + d / 2) // d * d)
    return n + d if n < 0.9 * v else n


# --- mobile convnet -------------------------------------------------------------------------------

class SqueezeExcite(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        r = _divisible(c / 4)
        self.fc1 = nn.Conv2d(c, r, 1)
        self.fc2 = nn.Conv2d(r, c, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class InvertedResidualV3(nn.Module):
    def __init__(self, cin: int, k: int, exp: int, cout: int, se: bool, hs: bool, stride: int):
        super().__init__()
        act = nn.Hardswish if hs else nn.ReLU
        layers: list[nn.Module] = []
        if exp != cin:
            layers += [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), act()]
        layers += [nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), act()]
        if se:
            layers.append(SqueezeExcite(exp))
        layers += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return x + y if self.residual else y


class MobileNetV3Small(nn.Module):
    #: (kernel, expansion, out, squeeze-excite, hardswish, stride), as the paper's small model
    CONFIG = [(3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2), (3, 88, 24, False, False, 1),
              (5, 96, 40, True, True, 2), (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
              (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1), (5, 288, 96, True, True, 2),
              (5, 576, 96, True, True, 1), (5, 576, 96, True, True, 1)]

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish()]
        cin = 16
        for k, exp, cout, se, hs, s in self.CONFIG:
            layers.append(InvertedResidualV3(cin, k, exp, cout, se, hs, s))
            cin = cout
        layers += [nn.Conv2d(cin, 576, 1, bias=False), nn.BatchNorm2d(576), nn.Hardswish()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Dropout(0.2),
                                        nn.Linear(1024, num_classes))

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


def build_mobilenet_v3():
    _seed(21)
    m = MobileNetV3Small()
    _draw_norm_stats(m)
    return m.eval(), (torch.randn(1, 3, 224, 224),)


# --- encoder-decoder convnet ----------------------------------------------------------------------

class DoubleConv(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.n1 = nn.GroupNorm(8, cout)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.n2 = nn.GroupNorm(8, cout)

    def forward(self, x):
        return F.silu(self.n2(self.c2(F.silu(self.n1(self.c1(x))))))


class UNetSmall(nn.Module):
    def __init__(self, cin: int = 3, cout: int = 2, width: int = 16):
        super().__init__()
        w = width
        self.e1, self.e2, self.e3 = DoubleConv(cin, w), DoubleConv(w, 2 * w), DoubleConv(2 * w, 4 * w)
        self.mid = DoubleConv(4 * w, 8 * w)
        self.d3, self.d2, self.d1 = DoubleConv(12 * w, 4 * w), DoubleConv(6 * w, 2 * w), DoubleConv(3 * w, w)
        self.out = nn.Conv2d(w, cout, 1)

    def forward(self, x):
        s1 = self.e1(x)
        s2 = self.e2(F.max_pool2d(s1, 2))
        s3 = self.e3(F.max_pool2d(s2, 2))
        y = self.mid(F.max_pool2d(s3, 2))
        y = self.d3(torch.cat([F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False), s3], 1))
        y = self.d2(torch.cat([F.interpolate(y, scale_factor=2.0, mode="nearest"), s2], 1))
        y = self.d1(torch.cat([F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=True), s1], 1))
        return self.out(y)


def build_unet_small():
    _seed(22)
    m = UNetSmall()
    _draw_norm_stats(m)
    return m.eval(), (torch.randn(1, 3, 128, 128),)


# --- BERT-style encoder ---------------------------------------------------------------------------

class BertLayer(nn.Module):
    def __init__(self, d: int, heads: int, ff: int):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.q, self.k, self.v, self.o = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d, eps=1e-12)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.ln2 = nn.LayerNorm(d, eps=1e-12)

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.dh).transpose(1, 2)

    def forward(self, x, bias):
        b, t, d = x.shape
        scores = torch.matmul(self.split(self.q(x)), self.split(self.k(x)).transpose(-1, -2))
        probs = torch.softmax(scores / math.sqrt(self.dh) + bias, dim=-1)
        ctx = torch.matmul(probs, self.split(self.v(x))).transpose(1, 2).reshape(b, t, d)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


class BertEncoder(nn.Module):
    def __init__(self, vocab: int = 8000, d: int = 256, layers: int = 4, heads: int = 4, ff: int = 1024,
                 max_len: int = 512):
        super().__init__()
        self.word = nn.Embedding(vocab, d, padding_idx=0)
        self.position = nn.Embedding(max_len, d)
        self.token_type = nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d, eps=1e-12)
        self.layers = nn.ModuleList([BertLayer(d, heads, ff) for _ in range(layers)])
        self.pool = nn.Linear(d, d)

    def forward(self, input_ids, attention_mask):
        t = input_ids.shape[1]
        pos = torch.arange(t, device=input_ids.device).unsqueeze(0)
        x = self.word(input_ids) + self.position(pos) + self.token_type(torch.zeros_like(input_ids))
        x = self.ln(x)
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return x, torch.tanh(self.pool(x[:, 0]))


def build_bert_encoder():
    _seed(23)
    m = BertEncoder()
    _draw_norm_stats(m)
    ids = torch.randint(1, 8000, (1, 128))
    mask = torch.ones(1, 128, dtype=torch.int64)
    mask[:, 100:] = 0  # padding: the last 28 positions
    ids[:, 100:] = 0
    return m.eval(), (ids, mask)


# --- recurrent ------------------------------------------------------------------------------------

class LstmGru(nn.Module):
    def __init__(self, features: int = 40, hidden: int = 128, classes: int = 12):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=2, batch_first=True)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x):
        y, _ = self.lstm(x)
        y, h = self.gru(y)
        return self.fc(h[-1])


def build_lstm_gru():
    _seed(24)
    return LstmGru().eval(), (torch.randn(1, 100, 40),)


# --- detection-style heads ------------------------------------------------------------------------

def _cbr(cin: int, cout: int, stride: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(0.1))


class DetectionHead(nn.Module):
    """Three scales (strides 8, 16, 32), 3 anchors per cell, 20 classes, decoded as YOLOv3/v5 do."""

    def __init__(self, classes: int = 20, anchors_per_cell: int = 3):
        super().__init__()
        self.na, self.no = anchors_per_cell, classes + 5
        self.stem = nn.Sequential(_cbr(3, 16, 2), _cbr(16, 32, 2), _cbr(32, 64, 2))      # stride 8
        self.s16 = nn.Sequential(_cbr(64, 128, 2), _cbr(128, 128, 1))                   # stride 16
        self.s32 = nn.Sequential(_cbr(128, 256, 2), _cbr(256, 256, 1))                  # stride 32
        self.heads = nn.ModuleList([nn.Conv2d(c, self.na * self.no, 1) for c in (64, 128, 256)])
        anchors = torch.tensor([[[10., 13.], [16., 30.], [33., 23.]], [[30., 61.], [62., 45.], [59., 119.]],
                                [[116., 90.], [156., 198.], [373., 326.]]])
        self.register_buffer("anchors", anchors)
        self.strides = (8, 16, 32)

    def forward(self, x):
        f8 = self.stem(x)
        f16 = self.s16(f8)
        f32 = self.s32(f16)
        outs = []
        for i, (f, head) in enumerate(zip((f8, f16, f32), self.heads)):
            p = head(f)
            b, _, h, w = p.shape
            p = p.view(b, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
            gy, gx = torch.meshgrid(torch.arange(h, dtype=p.dtype), torch.arange(w, dtype=p.dtype), indexing="ij")
            grid = torch.stack((gx, gy), -1).view(1, 1, h, w, 2)
            xy = (p[..., :2] * 2.0 - 0.5 + grid) * self.strides[i]
            wh = (p[..., 2:4] * 2.0) ** 2 * self.anchors[i].view(1, self.na, 1, 1, 2)
            outs.append(torch.cat((xy, wh, p[..., 4:]), -1).view(b, -1, self.no))
        return torch.cat(outs, 1)


def build_detection_head():
    _seed(25)
    m = DetectionHead()
    _draw_norm_stats(m)
    return m.eval(), (torch.randn(1, 3, 256, 256),)


# --- small index-heavy graphs ---------------------------------------------------------------------

class SamplingStep(nn.Module):
    """One decoding step: top-k, then top-p (nucleus) filtering on the sorted probabilities, the
    greedy pick among what is left, its embedding, and the count of kept candidates."""

    def __init__(self, vocab: int = 4000, d: int = 64, k: int = 50, p: float = 0.9):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.k, self.p = k, p

    def forward(self, logits, penalty_ids):
        # a repetition penalty on ids already emitted: scatter a mark, where
        seen = torch.zeros_like(logits).scatter(1, penalty_ids, 1.0) > 0.5
        logits = torch.where(seen, logits - 2.0, logits)
        top, idx = torch.topk(logits, self.k, dim=-1)
        probs = torch.softmax(top, dim=-1)
        cum = torch.cumsum(probs, dim=-1)
        drop = (cum - probs) > self.p
        top = top.masked_fill(drop, float("-inf"))
        choice = torch.argmax(top, dim=-1, keepdim=True)
        token = torch.gather(idx, 1, choice).squeeze(1)
        vec = self.embed(token)
        rows = torch.index_select(logits, 0, torch.argsort(token))
        return token, vec, (~drop).sum(-1), rows.amax(-1)


def build_index_ops():
    _seed(26)
    return SamplingStep().eval(), (torch.randn(8, 4000) * 3.0, torch.randint(0, 4000, (8, 16)))


# --- 1-D conv / audio -----------------------------------------------------------------------------

class AudioConv1d(nn.Module):
    """wav2vec 2.0's feature-extractor layout (7 strided 1-D convs, group norm after the first, GELU),
    narrower (128 channels), then layer norm and a projection."""

    def __init__(self, c: int = 128, d: int = 256):
        super().__init__()
        spec = [(3, 2), (3, 2), (3, 2), (3, 2), (2, 2), (2, 2)]
        self.conv0 = nn.Conv1d(1, c, 10, 5, bias=False)
        self.convs = nn.ModuleList([nn.Conv1d(c, c, k, s, bias=False) for k, s in spec])
        self.norm = nn.GroupNorm(c, c)
        self.ln = nn.LayerNorm(c)
        self.proj = nn.Linear(c, d)

    def forward(self, wave):
        x = F.gelu(self.norm(self.conv0(wave)))
        for conv in self.convs:
            x = F.gelu(conv(x))
        return self.proj(self.ln(x.transpose(1, 2)))


def build_audio_conv1d():
    _seed(27)
    m = AudioConv1d()
    _draw_norm_stats(m)
    return m.eval(), (torch.randn(1, 1, 16000),)


def _small_tokens(t: int = 32, pad: int = 8):
    g = torch.Generator().manual_seed(123)
    ids = torch.randint(1, 8000, (1, t), generator=g)
    mask = torch.ones(1, t, dtype=torch.int64)
    mask[:, t - pad:] = 0
    ids[:, t - pad:] = 0
    return ids, mask


def _small(*shapes):
    def make():
        g = torch.Generator().manual_seed(123)
        return tuple(torch.randn(s, generator=g) for s in shapes)
    return make


def _meta(compute_bound: bool, small, torchscript: str = "script") -> dict:
    return {"compute_bound": compute_bound, "torchscript": torchscript, "family": True, "small_inputs": small}


FAMILIES = {
    "mobilenet_v3": (build_mobilenet_v3, _meta(True, _small((1, 3, 64, 64)))),
    "unet_small": (build_unet_small, _meta(True, _small((1, 3, 32, 32)))),
    "bert_encoder": (build_bert_encoder, _meta(True, _small_tokens)),
    "lstm_gru": (build_lstm_gru, _meta(True, _small((1, 20, 40)))),
    "detection_head": (build_detection_head, _meta(True, _small((1, 3, 64, 64)))),
    "index_ops": (build_index_ops, _meta(False, lambda: build_index_ops()[1])),
    "audio_conv1d": (build_audio_conv1d, _meta(True, _small((1, 1, 4000)))),
}
