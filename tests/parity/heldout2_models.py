"""The second held-out zoo: architectures in neither the bench set, the parity zoo nor the first
held-out zoo (heldout_models.py), to find what a model srcore has never seen breaks.

Each builder returns ``(module in eval mode, example inputs)``: fixed seeds, small sizes (one
torch call well under a few ms); every model takes every import path (heldout_paths.PATHS).
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


def _seed(s: int) -> None:
    torch.manual_seed(s)


def _norm_stats(m: nn.Module) -> None:
    """Non-trivial batch-norm statistics, so folding does real work."""
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)


# --- convnets ------------------------------------------------------------------------------


class ResNeXtBlock(nn.Module):
    """Bottleneck with a grouped 3x3 conv (cardinality 8, then 32 with a strided projection)."""

    def __init__(self, cin: int, width: int, cout: int, groups: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)), inplace=True)
        y = F.relu(self.bn2(self.conv2(y)), inplace=True)
        y = self.bn3(self.conv3(y))
        idt = x if self.down is None else self.down(x)
        return F.relu(y + idt)


class ResNeXt(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, 2, 1))
        self.b1 = ResNeXtBlock(32, 32, 32, 8, 1)
        self.b2 = ResNeXtBlock(32, 64, 64, 32, 2)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.b2(self.b1(self.stem(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build_resnext():
    _seed(201)
    m = ResNeXt()
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 3, 32, 32),)


class DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int):
        super().__init__()
        self.norm1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, 4 * growth, 1, bias=False)
        self.norm2, self.conv2 = nn.BatchNorm2d(4 * growth), nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)

    def forward(self, feats: List[torch.Tensor]) -> torch.Tensor:
        x = torch.cat(feats, 1)
        x = self.conv1(F.relu(self.norm1(x)))
        return self.conv2(F.relu(self.norm2(x)))


class DenseNet(nn.Module):
    """A dense block (bn-relu-conv, every layer reads the cat of all before it), a transition
    (bn-relu-1x1 conv, 2x2 average pool) and a second dense block."""

    def __init__(self):
        super().__init__()
        g = 8
        self.stem = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.block1 = nn.ModuleList([DenseLayer(16 + i * g, g) for i in range(3)])
        self.trans = nn.Sequential(nn.BatchNorm2d(40), nn.ReLU(), nn.Conv2d(40, 20, 1, bias=False), nn.AvgPool2d(2, 2))
        self.block2 = nn.ModuleList([DenseLayer(20 + i * g, g) for i in range(2)])
        self.norm = nn.BatchNorm2d(36)
        self.fc = nn.Linear(36, 5)

    def forward(self, x):
        feats = [self.stem(x)]
        for layer in self.block1:
            feats.append(layer(feats))
        x = self.trans(torch.cat(feats, 1))
        feats = [x]
        for layer in self.block2:
            feats.append(layer(feats))
        x = F.relu(self.norm(torch.cat(feats, 1)))
        return self.fc(F.adaptive_avg_pool2d(x, (1, 1)).flatten(1))


def build_densenet():
    _seed(202)
    m = DenseNet()
    _norm_stats(m)
    return m.eval(), (torch.randn(1, 3, 16, 16),)


class GhostModule(nn.Module):
    """GhostNet: a primary 1x1 conv, a cheap depthwise 3x3 on its output, cat, slice to ``oup``."""

    def __init__(self, inp: int, oup: int, relu: bool = True):
        super().__init__()
        self.oup = oup
        init = math.ceil(oup / 2)
        self.primary = nn.Sequential(nn.Conv2d(inp, init, 1, bias=False), nn.BatchNorm2d(init),
                                     nn.ReLU(inplace=True) if relu else nn.Identity())
        self.cheap = nn.Sequential(nn.Conv2d(init, init, 3, 1, 1, groups=init, bias=False), nn.BatchNorm2d(init),
                                   nn.ReLU(inplace=True) if relu else nn.Identity())

    def forward(self, x):
        x1 = self.primary(x)
        x2 = self.cheap(x1)
        out = torch.cat([x1, x2], dim=1)
        return out[:, :self.oup, :, :]


class GhostNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True))
        self.g1 = GhostModule(16, 23)
        self.dw = nn.Sequential(nn.Conv2d(23, 23, 3, 2, 1, groups=23, bias=False), nn.BatchNorm2d(23))
        self.g2 = GhostModule(23, 16, relu=False)
        self.short = nn.Sequential(nn.Conv2d(16, 16, 3, 2, 1, groups=16, bias=False), nn.BatchNorm2d(16))
        self.head = nn.Linear(16, 7)

    def forward(self, x):
        x = self.stem(x)
        y = self.g2(self.dw(self.g1(x))) + self.short(x)
        return self.head(y.mean((2, 3)))


def build_ghostnet():
    _seed(203)
    m = GhostNet()
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 3, 24, 24),)


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.rand(dim) * 0.5 + 0.5)

    def forward(self, x):
        y = self.dwconv(x)
        y = y.permute(0, 2, 3, 1)
        y = self.pwconv2(F.gelu(self.pwconv1(self.norm(y))))
        y = self.gamma * y
        return x + y.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    """ConvNeXt: patchify stem (4x4 stride 4) + channels-first LayerNorm written out, blocks of
    depthwise 7x7 / channels-last LayerNorm / 4x MLP with erf GELU / layer scale, a downsample."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 4, 4)
        self.ln_w, self.ln_b = nn.Parameter(torch.rand(16) + 0.5), nn.Parameter(torch.randn(16) * 0.1)
        self.s1 = nn.Sequential(ConvNeXtBlock(16), ConvNeXtBlock(16))
        self.down = nn.Conv2d(16, 32, 2, 2)
        self.s2 = ConvNeXtBlock(32)
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, 6)

    def forward(self, x):
        x = self.stem(x)
        u = x.mean(1, keepdim=True)                     # channels-first LayerNorm, as ConvNeXt writes it
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + 1e-6)
        x = self.ln_w[:, None, None] * x + self.ln_b[:, None, None]
        x = self.s2(self.down(self.s1(x)))
        return self.head(self.norm(x.mean([-2, -1])))


def build_convnext():
    _seed(204)
    return ConvNeXt().eval(), (torch.randn(1, 3, 32, 32),)


# --- transformers --------------------------------------------------------------------------


class SDPABlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln = nn.LayerNorm(dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(self.ln(x)).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        y = F.scaled_dot_product_attention(q, k, v)
        return x + self.proj(y.transpose(1, 2).reshape(b, n, c))


class ViTTiny(nn.Module):
    """ViT: patch conv stride 16, flatten(2).transpose(1, 2), an expanded cls token cat, learned
    position embedding, one nn.MultiheadAttention(batch_first) block and one
    scaled_dot_product_attention block, LayerNorm, cls + mean pooling."""

    def __init__(self):
        super().__init__()
        d = 32
        self.patch = nn.Conv2d(3, d, 16, 16)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.5)
        self.pos = nn.Parameter(torch.randn(1, 17, d) * 0.1)
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 64), nn.GELU(), nn.Linear(64, d))
        self.block2 = SDPABlock(d, 2)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(2 * d, 5)

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        x = x + self.mlp(self.ln2(x))
        x = self.norm(self.block2(x))
        return self.head(torch.cat([x[:, 0], x[:, 1:].mean(dim=1)], dim=-1))


def build_vit_tiny():
    _seed(205)
    return ViTTiny().eval(), (torch.randn(2, 3, 64, 64),)


class GPT2Block(nn.Module):
    """A GPT-2 decoder: token + arange position embeddings, a causal mask from torch.ones(...).tril()
    and masked_fill(-inf), tanh-approximate GELU, a tied-embedding head ``x @ wte.weight.T``."""

    def __init__(self):
        super().__init__()
        d, self.h = 32, 4
        self.wte = nn.Embedding(50, d)
        self.wpe = nn.Embedding(16, d)
        self.ln1, self.ln2, self.lnf = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, ids):
        b, t = ids.shape
        pos = torch.arange(0, t, dtype=torch.long, device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        q, k, v = self.c_attn(self.ln1(x)).split(32, dim=2)
        q = q.view(b, t, self.h, 8).transpose(1, 2)
        k = k.view(b, t, self.h, 8).transpose(1, 2)
        v = v.view(b, t, self.h, 8).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(8))
        causal = torch.ones(t, t, device=ids.device).tril().view(1, 1, t, t)
        att = att.masked_fill(causal == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, 32)
        x = x + self.c_proj(y)
        x = x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        x = self.lnf(x)
        future = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        return x @ self.wte.weight.T, future


def build_gpt2_block():
    _seed(206)
    return GPT2Block().eval(), (torch.randint(0, 50, (2, 12)),)


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(d) + 0.5)
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class T5Layer(nn.Module):
    """T5 encoder layer: RMSNorm, attention without scaling plus a bucketed relative position bias
    (arange differences, sign, log bucket, clamp, an embedding, permute), gated-GELU FFN."""

    def __init__(self):
        super().__init__()
        d, self.h = 32, 4
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.rel = nn.Embedding(16, self.h)
        self.wi0, self.wi1 = nn.Linear(d, 64, bias=False), nn.Linear(d, 64, bias=False)
        self.wo = nn.Linear(64, d, bias=False)

    def bias(self, n: int) -> torch.Tensor:
        ctx = torch.arange(n, dtype=torch.long)[:, None]
        mem = torch.arange(n, dtype=torch.long)[None, :]
        rp = mem - ctx
        buckets = (rp > 0).to(torch.long) * 8
        rp = torch.abs(rp)
        large = 4 + (torch.log(rp.float() / 4) / math.log(16 / 4) * 4).to(torch.long)
        large = torch.min(large, torch.full_like(large, 7))
        buckets = buckets + torch.where(rp < 4, rp, large)
        return self.rel(buckets).permute(2, 0, 1).unsqueeze(0)

    def forward(self, x):
        b, n, d = x.shape
        h = self.n1(x)
        q = self.q(h).view(b, n, self.h, -1).transpose(1, 2)
        k = self.k(h).view(b, n, self.h, -1).transpose(1, 2)
        v = self.v(h).view(b, n, self.h, -1).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(3, 2)) + self.bias(n)
        w = F.softmax(scores.float(), dim=-1).type_as(scores)
        x = x + self.o(torch.matmul(w, v).transpose(1, 2).reshape(b, n, d))
        h = self.n2(x)
        return x + self.wo(F.gelu(self.wi0(h), approximate="tanh") * self.wi1(h))


def build_t5_layer():
    _seed(207)
    return T5Layer().eval(), (torch.randn(2, 20, 32),)


class ConformerConv(nn.Module):
    """Conformer convolution module: LayerNorm, pointwise conv1d to 2C, GLU over channels,
    depthwise conv1d, BatchNorm1d, Swish, pointwise conv1d, residual; then a Swish FFN half-step."""

    def __init__(self):
        super().__init__()
        c = 24
        self.ln = nn.LayerNorm(c)
        self.pw1 = nn.Conv1d(c, 2 * c, 1)
        self.dw = nn.Conv1d(c, c, 15, padding=7, groups=c)
        self.bn = nn.BatchNorm1d(c)
        self.pw2 = nn.Conv1d(c, c, 1)
        self.ff = nn.Sequential(nn.LayerNorm(c), nn.Linear(c, 48), nn.SiLU(), nn.Linear(48, c))

    def forward(self, x):  # (B, T, C)
        y = self.ln(x).transpose(1, 2)
        y = F.glu(self.pw1(y), dim=1)
        y = self.bn(self.dw(y))
        y = y * torch.sigmoid(y)
        x = x + self.pw2(y).transpose(1, 2)
        return x + 0.5 * self.ff(x)


def build_conformer_conv():
    _seed(208)
    m = ConformerConv()
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 30, 24),)


# --- audio / sequence ----------------------------------------------------------------------


class Wav2VecFeatures(nn.Module):
    """wav2vec 2.0 feature encoder: conv1d stack without bias, GroupNorm(C, C) (per channel) on
    the first layer only, erf GELU; then LayerNorm over the transposed features and a projection."""

    def __init__(self):
        super().__init__()
        c = 32
        self.convs = nn.ModuleList([nn.Conv1d(1, c, 10, 5, bias=False), nn.Conv1d(c, c, 3, 2, bias=False),
                                    nn.Conv1d(c, c, 3, 2, bias=False), nn.Conv1d(c, c, 2, 2, bias=False)])
        self.gn = nn.GroupNorm(c, c, affine=True)
        with torch.no_grad():
            self.gn.weight.uniform_(0.5, 1.5)
            self.gn.bias.uniform_(-0.2, 0.2)
        self.ln = nn.LayerNorm(c)
        self.proj = nn.Linear(c, 16)

    def forward(self, wav):  # (B, S)
        x = wav.unsqueeze(1)
        for i, conv in enumerate(self.convs):
            x = conv(x)
            if i == 0:
                x = self.gn(x)
            x = F.gelu(x)
        return self.proj(self.ln(x.transpose(1, 2)))


def build_wav2vec_fe():
    _seed(209)
    return Wav2VecFeatures().eval(), (torch.randn(2, 800),)


class CRNN(nn.Module):
    """CRNN text recognizer: conv2d/bn/relu/maxpool (last pool (2, 1)), permute + reshape the
    height into features, a bidirectional 2-layer LSTM over width, linear, log_softmax."""

    def __init__(self):
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(1, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU(True), nn.MaxPool2d(2, 2),
            nn.Conv2d(16, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(True), nn.MaxPool2d((2, 1), (2, 1)))
        self.rnn = nn.LSTM(32 * 4, 24, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(48, 11)

    def forward(self, img):  # (B, 1, 16, W)
        f = self.cnn(img)
        b, c, h, w = f.shape
        seq = f.permute(3, 0, 1, 2).reshape(w, b, c * h)
        out, _ = self.rnn(seq)
        return F.log_softmax(self.fc(out), dim=2)


def build_crnn():
    _seed(210)
    m = CRNN()
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 1, 16, 40),)


# --- detection heads -----------------------------------------------------------------------


class SSDHead(nn.Module):
    """SSD/RetinaNet head: per-level conv towers (shared across levels for the classes, one per
    level for the boxes), permute + view(N, -1, K), cat across levels, softmax over classes."""

    def __init__(self):
        super().__init__()
        self.k, self.a = 5, 3
        self.cls_tower = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                                       nn.Conv2d(16, self.a * self.k, 3, padding=1))
        self.box = nn.ModuleList([nn.Conv2d(16, self.a * 4, 3, padding=1) for _ in range(3)])

    def forward(self, p3, p4, p5):
        feats = [p3, p4, p5]
        cls, box = [], []
        for i, head in enumerate(self.box):
            f = feats[i]
            n = f.shape[0]
            cls.append(self.cls_tower(f).permute(0, 2, 3, 1).contiguous().view(n, -1, self.k))
            box.append(head(f).permute(0, 2, 3, 1).reshape(n, -1, 4))
        return F.softmax(torch.cat(cls, 1), dim=-1), torch.cat(box, 1)


def build_ssd_head():
    _seed(211)
    return SSDHead().eval(), (torch.randn(2, 16, 8, 8), torch.randn(2, 16, 4, 4), torch.randn(2, 16, 2, 2))


class CenterNetHead(nn.Module):
    """CenterNet decoding: sigmoid heatmap, 3x3 stride-1 max pool as NMS (``hmax == heat``),
    topk over the flattened heatmap, // and % for class and position, gather of offsets/sizes."""

    def __init__(self):
        super().__init__()
        self.heat = nn.Conv2d(8, 3, 3, padding=1)
        self.reg = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        heat = torch.sigmoid(self.heat(x))
        b, c, h, w = heat.shape
        hmax = F.max_pool2d(heat, 3, stride=1, padding=1)
        keep = (hmax == heat).float()
        heat = heat * keep
        scores, inds = torch.topk(heat.view(b, -1), 10)
        cls = torch.div(inds, h * w, rounding_mode="floor")
        pix = inds % (h * w)
        ys = torch.div(pix, w, rounding_mode="floor").float()
        xs = (pix % w).float()
        reg = self.reg(x).view(b, 4, -1).permute(0, 2, 1)
        reg = reg.gather(1, pix.unsqueeze(2).expand(b, 10, 4))
        boxes = torch.stack([xs + reg[..., 0] - reg[..., 2] / 2, ys + reg[..., 1] - reg[..., 3] / 2,
                             xs + reg[..., 0] + reg[..., 2] / 2, ys + reg[..., 1] + reg[..., 3] / 2], dim=2)
        return scores, cls, boxes


def build_centernet_head():
    _seed(212)
    return CenterNetHead().eval(), (torch.randn(2, 8, 12, 12),)


# --- index / masked graphs -----------------------------------------------------------------


class IndexGraph2(nn.Module):
    """torch.where with broadcasting, clamp with tensor bounds, index_put_ with an accumulate,
    scatter_reduce(amax), argsort, one_hot, an embedding-bag-like gather + sum, bucketize,
    searchsorted, repeat_interleave."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(12, 6))
        self.register_buffer("edges", torch.tensor([-1.0, -0.3, 0.0, 0.4, 1.2]))

    def forward(self, x, idx):
        # x: (4, 6) float, idx: (4, 3) int64 in [0, 6)
        lo = x.mean(dim=0, keepdim=True) - 0.5
        hi = torch.full((4, 1), 0.7)
        c = torch.clamp(x, min=lo, max=hi)
        w = torch.where(x > 0, x, torch.zeros(1, 6) - 0.1 * x.abs().mean())
        y = torch.zeros(4, 6)
        y[torch.arange(4).unsqueeze(1), idx] = 1.0
        z = torch.zeros(4, 6).index_put_((torch.arange(4).unsqueeze(1), idx), x[:, :3], accumulate=True)
        m = torch.zeros(4, 6).scatter_reduce(1, idx, x[:, :3], reduce="amax", include_self=False)
        order = torch.argsort(x, dim=1)
        oh = F.one_hot(idx[:, 0], 6)
        bag = self.table[idx + 3].sum(dim=1)
        buck = torch.bucketize(x, self.edges)
        ss = torch.searchsorted(self.edges, x.contiguous(), right=True)
        rep = torch.repeat_interleave(x[:, :2], 3, dim=1)
        return c, w, y, z, m, order, oh, bag, buck, ss, rep


def build_index_graph2():
    _seed(213)
    x = torch.randn(4, 6)
    idx = torch.stack([torch.randperm(6)[:3] for _ in range(4)])
    return IndexGraph2().eval(), (x, idx)


class DynamicGraph(nn.Module):
    """Data-dependent shapes: nonzero and boolean indexing ``x[mask]`` (srcore plans static
    shapes: a clear refusal or a correct answer)."""

    def forward(self, x):
        mask = x > 0
        return x[mask] * 2.0, torch.nonzero(mask)


def build_dynamic_graph():
    _seed(214)
    return DynamicGraph().eval(), (torch.randn(3, 5),)


# --- more transformers ---------------------------------------------------------------------


class SwinBlock(nn.Module):
    """Swin: window partition (view/permute/contiguous/view), torch.roll cyclic shift, relative
    position bias gathered from a table by a buffer index, the shifted-window mask added, reverse."""

    def __init__(self, dim: int = 16, heads: int = 2, win: int = 4, shift: int = 2, res: int = 8):
        super().__init__()
        self.dim, self.heads, self.win, self.shift = dim, heads, win, shift
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.table = nn.Parameter(torch.randn((2 * win - 1) ** 2, heads) * 0.5)
        coords = torch.stack(torch.meshgrid(torch.arange(win), torch.arange(win), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (win - 1)
        self.register_buffer("rel_index", rel[:, :, 0] * (2 * win - 1) + rel[:, :, 1])
        img = torch.zeros(1, res, res, 1)
        cnt = 0
        for hs in (slice(0, -win), slice(-win, -shift), slice(-shift, None)):
            for ws in (slice(0, -win), slice(-win, -shift), slice(-shift, None)):
                img[:, hs, ws, :] = cnt
                cnt += 1
        mw = img.view(1, res // win, win, res // win, win, 1).permute(0, 1, 3, 2, 4, 5).reshape(-1, win * win)
        mask = mw.unsqueeze(1) - mw.unsqueeze(2)
        self.register_buffer("attn_mask", mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0))
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):  # (B, H, W, C)
        b, h, w, c = x.shape
        win = self.win
        y = torch.roll(self.norm1(x), shifts=(-self.shift, -self.shift), dims=(1, 2))
        y = y.view(b, h // win, win, w // win, win, c).permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, win * win, c)
        bw, n, _ = y.shape
        qkv = self.qkv(y).reshape(bw, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = torch.einsum("bhid,bhjd->bhij", q * (c // self.heads) ** -0.5, k)
        bias = self.table[self.rel_index.view(-1)].view(n, n, -1).permute(2, 0, 1)
        attn = attn + bias.unsqueeze(0)
        nw = self.attn_mask.shape[0]
        attn = attn.view(bw // nw, nw, self.heads, n, n) + self.attn_mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, self.heads, n, n).softmax(dim=-1)
        y = (attn @ v).transpose(1, 2).reshape(bw, n, c)
        y = self.proj(y).view(b, h // win, w // win, win, win, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)
        x = x + torch.roll(y, shifts=(self.shift, self.shift), dims=(1, 2))
        return x + self.mlp(self.norm2(x))


def build_swin_block():
    _seed(215)
    return SwinBlock().eval(), (torch.randn(2, 8, 8, 16),)


class TransformerEncoderModel(nn.Module):
    """nn.TransformerEncoder (pre-norm, gelu, batch_first) with a key padding mask built from
    lengths (``arange < len``), then a causal scaled_dot_product_attention (is_causal, scale=)
    and one with a boolean attn_mask, masked mean pooling."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.qkv = nn.Linear(32, 96)

    def forward(self, x, lengths):
        b, t, _ = x.shape
        valid = torch.arange(t).unsqueeze(0) < lengths.unsqueeze(1)          # (B, T)
        h = self.enc(x, src_key_padding_mask=~valid)
        q, k, v = self.qkv(h).view(b, t, 3, 4, 8).permute(2, 0, 3, 1, 4).unbind(0)
        causal = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.2)
        keep = valid[:, None, None, :].expand(b, 4, t, t)
        masked = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        y = (causal + masked).transpose(1, 2).reshape(b, t, 32)
        w = valid.unsqueeze(-1).to(y.dtype)
        return (y * w).sum(1) / w.sum(1), h


def build_transformer_encoder():
    _seed(216)
    return TransformerEncoderModel().eval(), (torch.randn(3, 10, 32), torch.tensor([10, 7, 3]))


# --- assorted ops ----------------------------------------------------------------------------


class MathGraph(nn.Module):
    """Integer arithmetic on negatives (%, floor and trunc division, fmod, remainder), type
    promotion, cumprod, flip, logsumexp, F.normalize, cdist, var/std with a correction, max over a
    dim (values and indices), amax over two dims, take_along_dim, index_add, Tensor.unfold,
    narrow, and the activations PReLU (per channel), ELU, SELU, Softplus(beta), Mish, Hardswish,
    LogSigmoid, Softsign."""

    def __init__(self):
        super().__init__()
        self.prelu = nn.PReLU(5, init=0.1)
        with torch.no_grad():
            self.prelu.weight.uniform_(0.05, 0.5)

    def forward(self, x, k):
        # x: (3, 5, 6) float; k: (3, 5) int64 with negatives
        ints = (k % 4, k // 3, torch.div(k, 3, rounding_mode="trunc"), torch.fmod(k, 3), torch.remainder(k, -3),
                k * 2.5, k / 2, (k > 0).sum(1), torch.cumprod(k.clamp(-2, 2), 1))
        y = torch.flip(x, dims=[0, 2])
        lse = torch.logsumexp(x, dim=-1)
        nrm = F.normalize(x, p=2.0, dim=1)
        d = torch.cdist(x[0], x[1])
        vs = (torch.var(x, dim=2, correction=0), torch.std(x, dim=(0, 2), keepdim=True))
        mx, arg = torch.max(x, dim=1)
        am = torch.amax(x, dim=(0, 2))
        tad = torch.take_along_dim(x, arg.unsqueeze(1), dim=1)
        ia = torch.zeros(3, 5, 4).index_add(2, torch.tensor([0, 2, 2, 3, 1, 0]), x, alpha=0.5)
        win = x.unfold(2, 3, 2)
        nar = x.narrow(1, 1, 3)
        acts = (self.prelu(x), F.elu(x, 0.7), F.selu(x), F.softplus(x, beta=2.0), F.mish(x), F.hardswish(x),
                F.logsigmoid(x), F.softsign(x))
        return ints, y, lse, nrm, d, vs, mx, arg, am, tad, ia, win, nar, acts


def build_math_graph():
    _seed(217)
    return MathGraph().eval(), (torch.randn(3, 5, 6), torch.randint(-9, 10, (3, 5)))


class VideoR21D(nn.Module):
    """R(2+1)D video block: Conv3d (1,3,3) spatial + (3,1,1) temporal, BatchNorm3d, ReLU, a strided
    Conv3d, MaxPool3d, AdaptiveAvgPool3d, linear."""

    def __init__(self):
        super().__init__()
        self.s = nn.Conv3d(3, 8, (1, 3, 3), padding=(0, 1, 1), bias=False)
        self.bn1 = nn.BatchNorm3d(8)
        self.t = nn.Conv3d(8, 8, (3, 1, 1), padding=(1, 0, 0), bias=False)
        self.bn2 = nn.BatchNorm3d(8)
        self.down = nn.Conv3d(8, 16, 3, stride=(1, 2, 2), padding=1)
        self.pool = nn.MaxPool3d((1, 2, 2))
        self.fc = nn.Linear(16, 4)

    def forward(self, v):  # (B, C, T, H, W)
        x = F.relu(self.bn1(self.s(v)))
        x = F.relu(self.bn2(self.t(x)) + x)
        x = self.pool(F.relu(self.down(x)))
        return self.fc(F.adaptive_avg_pool3d(x, 1).flatten(1))


def build_video_r21d():
    _seed(218)
    m = VideoR21D()
    with torch.no_grad():
        for bn in (m.bn1, m.bn2):
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 1.5)
    return m.eval(), (torch.randn(1, 3, 4, 16, 16),)


class SegHead(nn.Module):
    """A segmentation decoder: GroupNorm(4, 16), dilated conv, reflect and replicate padding,
    InstanceNorm2d (affine), a grouped ConvTranspose2d with output_padding, bilinear interpolation
    with and without align_corners, PixelShuffle, bicubic upsampling."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(8, 16, 3, padding=2, dilation=2)
        self.gn = nn.GroupNorm(4, 16)
        self.c2 = nn.Conv2d(16, 16, 3)
        self.inorm = nn.InstanceNorm2d(16, affine=True)
        self.up = nn.ConvTranspose2d(16, 16, 3, stride=2, padding=1, output_padding=1, groups=4)
        self.ps = nn.Conv2d(16, 4 * 4, 1)
        with torch.no_grad():
            self.gn.weight.uniform_(0.5, 1.5)
            self.inorm.weight.uniform_(0.5, 1.5)
            self.inorm.bias.uniform_(-0.2, 0.2)

    def forward(self, x):
        y = F.relu(self.gn(self.c1(x)))
        y = self.c2(F.pad(y, (1, 1, 1, 1), mode="reflect"))
        y = F.relu(self.inorm(F.pad(y, (0, 0, 0, 0)) + 0.0))
        a = self.up(y)                                           # 2x
        b = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
        c = F.interpolate(y, size=(a.shape[2], a.shape[3]), mode="bilinear", align_corners=True)
        d = F.pixel_shuffle(self.ps(F.pad(y, (1, 0, 0, 1), mode="replicate")[:, :, 1:, :-1]), 2)
        e = F.interpolate(d, scale_factor=0.5, mode="bicubic", align_corners=False)
        return a + b - c, d, e


def build_seg_head():
    _seed(219)
    return SegHead().eval(), (torch.randn(2, 8, 10, 12),)


class RNNStates(nn.Module):
    """An LSTM with proj_size and given (h0, c0), batch_first; a GRU fed its final state; masked
    mean pooling by lengths."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(12, 20, num_layers=2, batch_first=True, proj_size=8)
        self.gru = nn.GRU(8, 10, batch_first=True)
        self.init = nn.Linear(8, 10)

    def forward(self, x, h0, c0, lengths):
        y, (h, c) = self.lstm(x, (h0, c0))
        g, hg = self.gru(y, torch.tanh(self.init(h[-1:])))
        t = x.shape[1]
        w = (torch.arange(t)[None, :] < lengths[:, None]).float().unsqueeze(-1)
        return (g * w).sum(1) / w.sum(1), h, c, hg


def build_rnn_states():
    _seed(220)
    return RNNStates().eval(), (torch.randn(3, 7, 12), torch.randn(2, 3, 8), torch.randn(2, 3, 20),
                                torch.tensor([7, 5, 2]))


class Preprocess(nn.Module):
    """Input preprocessing and masks: a uint8 image normalised (``float() / 255``, mean/std
    buffers), uint8 arithmetic that wraps, ``where`` with Python numbers, int x float promotion,
    ``masked_fill`` with a mask of higher rank than ``self`` (the result takes the mask's shape),
    ``nan_to_num``, ``round``, a count over two dims."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))

    def forward(self, img, x, i):
        # img: (N, 3, H, W) uint8, x: (3, 6) float, i: (3, 6) int64
        a = (img.float() / 255.0 - self.mean) / self.std
        b = img - 128
        c = img // 3 + img % 7
        d = torch.where(x > 0, x, 0.0)
        e = torch.where(i > 2, i, -1)
        f = i * 0.5 + (i > 1)
        g = x.clamp(min=-0.5) * 2 + 1
        h = i.sum() / i.numel()
        k = torch.full_like(x, 3) // 2
        r = (x * 100).round() / 100
        m = (img > 100).sum(dim=(2, 3))
        n = x.masked_fill(i.unsqueeze(0) > 2, float("nan")).nan_to_num(0.0)
        return a, b, c, d, e, f, g, h, k, r, m, n


def build_preprocess():
    _seed(221)
    return Preprocess().eval(), (torch.randint(0, 256, (2, 3, 4, 5), dtype=torch.uint8), torch.randn(3, 6),
                                 torch.randint(0, 5, (3, 6)))


#: name -> builder of ``(module in eval mode, example inputs)``
MODELS: Dict[str, Callable[[], Tuple[nn.Module, tuple]]] = {
    "resnext": build_resnext,
    "densenet": build_densenet,
    "ghostnet": build_ghostnet,
    "convnext": build_convnext,
    "vit_tiny": build_vit_tiny,
    "gpt2_block": build_gpt2_block,
    "t5_layer": build_t5_layer,
    "conformer_conv": build_conformer_conv,
    "wav2vec_fe": build_wav2vec_fe,
    "crnn": build_crnn,
    "ssd_head": build_ssd_head,
    "centernet_head": build_centernet_head,
    "index_graph2": build_index_graph2,
    "dynamic_graph": build_dynamic_graph,
    "swin_block": build_swin_block,
    "transformer_encoder": build_transformer_encoder,
    "math_graph": build_math_graph,
    "video_r21d": build_video_r21d,
    "seg_head": build_seg_head,
    "rnn_states": build_rnn_states,
    "preprocess": build_preprocess,
}
