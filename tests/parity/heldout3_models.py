"""The third held-out zoo: architectures and idioms in neither held-out zoo (heldout_models.py,
heldout2_models.py), to find what a model srcore has never seen breaks.

Each builder returns ``(module in eval mode, example inputs)``: fixed seeds, small sizes (one
torch call well under a few ms); every model takes every import path (heldout_paths.PATHS).
The quantized nets (eager and FX static, dynamic) are built by :func:`build_quantized`.
"""
from __future__ import annotations

import math
import warnings
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from heldout2_models import _norm_stats, _seed




# --- convnets ------------------------------------------------------------------------------


class Fire(nn.Module):
    """SqueezeNet fire module: 1x1 squeeze, 1x1 and 3x3 expands, cat over channels."""

    def __init__(self, cin: int, squeeze: int, e1: int, e3: int):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.e1 = nn.Conv2d(squeeze, e1, 1)
        self.e3 = nn.Conv2d(squeeze, e3, 3, padding=1)

    def forward(self, x):
        x = F.relu(self.squeeze(x), inplace=True)
        return torch.cat([F.relu(self.e1(x)), F.relu(self.e3(x))], 1)


class SqueezeNet(nn.Module):
    """SqueezeNet 1.1: max pools with ``ceil_mode=True`` on odd sizes, a conv classifier with dropout,
    global average pool and flatten."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(16, 8, 16, 16), Fire(32, 8, 16, 16), nn.MaxPool2d(3, 2, ceil_mode=True), Fire(32, 12, 24, 24))
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(48, 10, 1), nn.ReLU(inplace=True),
                                        nn.AdaptiveAvgPool2d((1, 1)))

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


def build_squeezenet():
    _seed(301)
    return SqueezeNet().eval(), (torch.randn(2, 3, 39, 39),)


class ResNetDBlock(nn.Module):
    """ResNet-D / RegNet bottleneck: grouped 3x3 (RegNet's group width), squeeze-excite, and an
    avg-pool shortcut (``ceil_mode=True, count_include_pad=False``) before the 1x1 projection."""

    def __init__(self, cin: int, cout: int, stride: int, group_width: int = 8):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride, 1, groups=cout // group_width, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.se_reduce = nn.Conv2d(cout, cin // 4, 1)
        self.se_expand = nn.Conv2d(cin // 4, cout, 1)
        self.conv3 = nn.Conv2d(cout, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.pool = nn.AvgPool2d(2, stride, ceil_mode=True, count_include_pad=False) if stride > 1 else nn.Identity()
        self.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        s = y.mean((2, 3), keepdim=True)
        y = y * torch.sigmoid(self.se_expand(F.relu(self.se_reduce(s))))
        y = self.bn3(self.conv3(y))
        return F.relu(y + self.proj(self.pool(x)))


class ResNetD(nn.Module):
    """ResNet-D stem (three 3x3 convs) and two bottlenecks, the second strided on an odd size."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.b1 = ResNetDBlock(16, 16, 1)
        self.b2 = ResNetDBlock(16, 32, 2)
        self.pool = nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.b2(self.b1(self.stem(x)))
        return self.fc(self.pool(x).flatten(2).amax(2))


def build_resnet_d():
    _seed(302)
    m = ResNetD()
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 3, 29, 29),)


def drop_path(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Stochastic depth: identity in eval."""
    if p == 0.0 or not training:
        return x
    keep = 1.0 - p
    mask = x.new_empty((x.shape[0], 1, 1, 1)).bernoulli_(keep)
    return x * mask / keep


class MBConvB0(nn.Module):
    """EfficientNet-B0 MBConv variants: expand (ReLU6 / clamp(0, 6) / hardswish), depthwise,
    squeeze-excite pooled by ``adaptive_avg_pool2d(x, 1)`` or ``mean((2, 3), keepdim=True)``,
    gated by sigmoid or ``F.hardsigmoid``; stochastic depth on the residual."""

    def __init__(self, cin: int, cout: int, k: int, stride: int, variant: int):
        super().__init__()
        mid = cin * 4
        self.variant = variant
        self.expand = nn.Sequential(nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid))
        self.act6 = nn.ReLU6(inplace=True)
        self.dw = nn.Sequential(nn.Conv2d(mid, mid, k, stride, k // 2, groups=mid, bias=False), nn.BatchNorm2d(mid))
        self.se1 = nn.Conv2d(mid, max(1, cin // 4), 1)
        self.se2 = nn.Conv2d(max(1, cin // 4), mid, 1)
        self.project = nn.Sequential(nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout
        self.p = 0.2

    def forward(self, x):
        y = self.expand(x)
        if self.variant == 0:
            y = self.act6(y)
        elif self.variant == 1:
            y = torch.clamp(y, 0, 6)
        else:
            y = F.hardswish(y)
        y = self.dw(y)
        y = F.silu(y) if self.variant != 1 else F.relu6(y)
        if self.variant == 0:
            s = F.adaptive_avg_pool2d(y, 1)
        else:
            s = y.mean((2, 3), keepdim=True)
        s = self.se2(F.silu(self.se1(s)))
        y = y * (torch.sigmoid(s) if self.variant == 0 else F.hardsigmoid(s))
        y = self.project(y)
        if self.residual:
            y = drop_path(y, self.p, self.training) + x
        return y


class EfficientNetB0(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU())
        self.blocks = nn.Sequential(MBConvB0(16, 16, 3, 1, 0), MBConvB0(16, 24, 5, 2, 1), MBConvB0(24, 24, 3, 1, 2),
                                    MBConvB0(24, 24, 5, 1, 1))
        self.head = nn.Sequential(nn.Conv2d(24, 64, 1, bias=False), nn.BatchNorm2d(64), nn.Hardswish())
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.head(self.blocks(self.stem(x)))
        return self.fc(F.dropout(F.adaptive_avg_pool2d(x, 1).flatten(1), 0.2, self.training))


def build_efficientnet_b0():
    _seed(303)
    m = EfficientNetB0()
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 3, 32, 32),)


# --- mixers and hybrids ----------------------------------------------------------------------


class MixerBlock(nn.Module):
    """MLP-Mixer: token mixing is a Linear over the token dim (``transpose(1, 2)`` around it)."""

    def __init__(self, tokens: int, dim: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.tok = nn.Sequential(nn.Linear(tokens, 2 * tokens), nn.GELU(), nn.Linear(2 * tokens, tokens))
        self.ch = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(approximate="tanh"), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.tok(self.ln1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.ch(self.ln2(x))


class MLPMixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 24, 4, 4)
        self.blocks = nn.Sequential(MixerBlock(16, 24), MixerBlock(16, 24))
        self.ln = nn.LayerNorm(24)
        self.head = nn.Linear(24, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        return self.head(self.ln(self.blocks(x)).mean(1))


def build_mlp_mixer():
    _seed(304)
    return MLPMixer().eval(), (torch.randn(2, 3, 16, 16),)


class MobileViTBlock(nn.Module):
    """MobileViT: local conv, unfold into 2x2 patches by reshape/permute, attention across patches
    at each pixel offset (computed with ``torch.baddbmm`` on a relative bias), fold back, cat with
    the input, fuse conv."""

    def __init__(self, c: int, d: int, heads: int = 2):
        super().__init__()
        self.local = nn.Sequential(nn.Conv2d(c, c, 3, 1, 1), nn.SiLU(), nn.Conv2d(c, d, 1))
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.proj = nn.Conv2d(d, c, 1)
        self.fuse = nn.Conv2d(2 * c, c, 3, 1, 1)
        self.heads = heads
        self.bias = nn.Parameter(torch.randn(16, 16) * 0.1)

    def forward(self, x):
        b, c, h, w = x.shape
        y = self.local(x)
        d = y.shape[1]
        ph, pw = 2, 2
        nh, nw = h // ph, w // pw
        # (B, D, H, W) -> (B * P, N, D): P pixels per patch, N patches
        p = y.reshape(b, d, nh, ph, nw, pw).permute(0, 3, 5, 2, 4, 1).reshape(b * ph * pw, nh * nw, d)
        t = p.shape[1]
        q, k, v = self.qkv(self.ln(p)).chunk(3, dim=-1)
        hd = d // self.heads
        q = q.reshape(-1, t, self.heads, hd).transpose(1, 2).reshape(-1, t, hd)
        k = k.reshape(-1, t, self.heads, hd).transpose(1, 2).reshape(-1, t, hd)
        v = v.reshape(-1, t, self.heads, hd).transpose(1, 2).reshape(-1, t, hd)
        bias = self.bias[:t, :t].unsqueeze(0).expand(q.shape[0], t, t)
        att = torch.baddbmm(bias, q, k.transpose(1, 2), beta=1.0, alpha=1.0 / math.sqrt(hd)).softmax(-1)
        o = torch.bmm(att, v).reshape(-1, self.heads, t, hd).transpose(1, 2).reshape(-1, t, d)
        p = p + self.out(o)
        y = p.reshape(b, ph, pw, nh, nw, d).permute(0, 5, 3, 1, 4, 2).reshape(b, d, h, w)
        return self.fuse(torch.cat([x, self.proj(y)], 1))


class MobileViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.SiLU())
        self.block = MobileViTBlock(8, 16)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        return self.head(self.block(self.stem(x)).mean((2, 3)))


def build_mobilevit():
    _seed(305)
    m = MobileViT()
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 3, 16, 16),)


# --- attention idioms ------------------------------------------------------------------------


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat([-x2, x1], -1)


class RotaryAlibiAttention(nn.Module):
    """LLaMA/GPT-NeoX rotary embeddings (sin/cos buffers, ``rotate_half``), GPT-J's interleaved
    rotary (``x[..., ::2]``, ``x[..., 1::2]``, stack, flatten), ALiBi slopes, ``einsum``
    scores, a bool key padding mask through ``masked_fill``."""

    def __init__(self, d: int = 32, heads: int = 4, max_len: int = 16):
        super().__init__()
        self.h, self.hd = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d)
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        freqs = torch.outer(torch.arange(max_len).float(), inv)
        emb = torch.cat([freqs, freqs], -1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        self.register_buffer("cos_i", freqs.cos(), persistent=False)
        self.register_buffer("sin_i", freqs.sin(), persistent=False)
        slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / heads) for i in range(heads)])
        self.register_buffer("slopes", slopes, persistent=False)

    def forward(self, x, pad):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.h, self.hd).permute(2, 0, 3, 1, 4).unbind(0)
        cos, sin = self.cos[:t], self.sin[:t]
        q = q * cos + rotate_half(q) * sin
        # GPT-J style on the keys: pairs (even, odd)
        k1, k2 = k[..., ::2], k[..., 1::2]
        ci, si = self.cos_i[:t], self.sin_i[:t]
        k = torch.stack([k1 * ci - k2 * si, k1 * si + k2 * ci], -1).flatten(-2)
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.hd)
        pos = torch.arange(t, device=x.device)
        dist = (pos[None, :] - pos[:, None]).abs().to(x.dtype)
        s = s - self.slopes.view(1, -1, 1, 1) * dist
        s = s.masked_fill(pad[:, None, None, :], float("-inf"))
        a = torch.softmax(s, -1)
        y = torch.einsum("bhqk,bhkd->bqhd", a, v).reshape(b, t, d)
        return self.o(y)


def build_rotary_alibi():
    _seed(306)
    pad = torch.zeros(2, 12, dtype=torch.bool)
    pad[1, 9:] = True
    return RotaryAlibiAttention().eval(), (torch.randn(2, 12, 32), pad)


class MHANoWeights(nn.Module):
    """nn.MultiheadAttention (sequence first, so never torch's fast path) with
    ``need_weights=False`` and a bool key padding mask; a cross attention with different
    key/value sizes (kdim, vdim) and averaged weights returned."""

    def __init__(self):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(24, 3)
        self.cross = nn.MultiheadAttention(24, 2, kdim=16, vdim=12)
        self.ln = nn.LayerNorm(24)

    def forward(self, x, mem_k, mem_v, pad):
        y, _ = self.self_attn(x, x, x, key_padding_mask=pad, need_weights=False)
        x = self.ln(x + y)
        z, w = self.cross(x, mem_k, mem_v)
        return x + z, w


def build_mha_no_weights():
    _seed(307)
    pad = torch.tensor([[False] * 7, [False] * 5 + [True] * 2])
    return MHANoWeights().eval(), (torch.randn(7, 2, 24), torch.randn(5, 2, 16), torch.randn(5, 2, 12), pad)


class KVCacheStep(nn.Module):
    """One decoder step with a KV cache: the new token's key and value are cat onto the past ones
    (sequence length varies per call), attention over all of them, the new cache returned."""

    def __init__(self, d: int = 32, heads: int = 4):
        super().__init__()
        self.h, self.hd = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)
        self.ln = nn.LayerNorm(d)

    def forward(self, x, past_k, past_v):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, dim=-1)
        q = q.view(b, t, self.h, self.hd).transpose(1, 2)
        k = torch.cat([past_k, k.view(b, t, self.h, self.hd).transpose(1, 2)], dim=2)
        v = torch.cat([past_v, v.view(b, t, self.h, self.hd).transpose(1, 2)], dim=2)
        s = q @ k.transpose(-2, -1) * (self.hd ** -0.5)
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        return x + self.o(y), k, v


def build_kv_cache():
    _seed(308)
    return KVCacheStep().eval(), (torch.randn(2, 1, 32), torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8))


# --- recurrent and audio ---------------------------------------------------------------------


class CellLoop(nn.Module):
    """A GRUCell and an LSTMCell stepped in a Python for-loop over time (a ``prim::Loop`` when
    scripted, unrolled when traced), a masked update (``torch.where`` on a per-step mask) instead of
    packed sequences, the outputs stacked."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRUCell(10, 16)
        self.lstm = nn.LSTMCell(16, 12)
        self.fc = nn.Linear(12, 4)

    def forward(self, x, mask):
        b = x.shape[0]
        h = torch.zeros(b, 16)
        h2 = torch.zeros(b, 12)
        c2 = torch.zeros(b, 12)
        outs: List[torch.Tensor] = []
        for t in range(x.shape[1]):
            m = mask[:, t].unsqueeze(1)
            h = torch.where(m, self.gru(x[:, t], h), h)
            nh, nc = self.lstm(h, (h2, c2))
            h2 = torch.where(m, nh, h2)
            c2 = torch.where(m, nc, c2)
            outs.append(self.fc(h2))
        return torch.stack(outs, 1), h, c2


def build_cell_loop():
    _seed(309)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    return CellLoop().eval(), (torch.randn(2, 6, 10), mask)


class LogMel(nn.Module):
    """A stft-free log-mel front end: framing and a real DFT as a conv1d with fixed cos/sin filters
    (a Hann window folded in), power, a mel matrix, ``log(clamp(min=1e-5))``; then 1-D upsampling by
    ``F.interpolate(scale_factor=2, mode='linear')`` and ``nn.Upsample(mode='linear',
    align_corners=True)``, a nearest one by 1.5."""

    def __init__(self, n_fft: int = 32, hop: int = 8, n_mels: int = 8):
        super().__init__()
        n = torch.arange(n_fft).float()
        f = torch.arange(n_fft // 2 + 1).float()
        win = torch.hann_window(n_fft, periodic=True)
        ang = 2 * math.pi * f[:, None] * n[None, :] / n_fft
        self.register_buffer("cos_k", (torch.cos(ang) * win).unsqueeze(1))
        self.register_buffer("sin_k", (-torch.sin(ang) * win).unsqueeze(1))
        self.register_buffer("mel", torch.rand(n_mels, n_fft // 2 + 1))
        self.hop = hop
        self.up = nn.Upsample(scale_factor=3, mode="linear", align_corners=True)
        self.conv = nn.Conv1d(n_mels, 6, 3, padding=1)

    def forward(self, wav):
        x = F.pad(wav.unsqueeze(1), (16, 16), mode="reflect")
        re = F.conv1d(x, self.cos_k, stride=self.hop)
        im = F.conv1d(x, self.sin_k, stride=self.hop)
        power = re.pow(2) + im * im
        mel = torch.matmul(self.mel, power)
        logmel = torch.log(torch.clamp(mel, min=1e-5))
        y = self.conv(logmel - logmel.mean(-1, keepdim=True))
        return (F.interpolate(y, scale_factor=2.0, mode="linear", align_corners=False), self.up(y),
                F.interpolate(y, scale_factor=1.5, mode="nearest"))


def build_logmel():
    _seed(310)
    return LogMel().eval(), (torch.randn(2, 160),)


# --- detection and index -----------------------------------------------------------------------


def box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Pairwise IoU of (..., N, 4) and (..., M, 4) boxes (x1, y1, x2, y2) by broadcasting."""
    area_a = (a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1])
    area_b = (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    lt = torch.max(a[..., :, None, :2], b[..., None, :, :2])
    rb = torch.min(a[..., :, None, 2:], b[..., None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    return inter / (area_a[..., :, None] + area_b[..., None, :] - inter)


class DetectPost(nn.Module):
    """Detection post-processing without torchvision: ``meshgrid(indexing='ij')`` anchors, box
    decoding, scores sorted by ``argsort(descending=True)``, ``gather`` of the boxes, a pairwise
    IoU matrix by broadcasting, a greedy-free suppression mask (upper triangle), ranks by
    ``cumsum`` of bools cast to long, ``one_hot`` class ids, ``flip``, ``roll``, ``//`` and ``%``."""

    def __init__(self, n_cls: int = 3):
        super().__init__()
        self.n_cls = n_cls
        self.head = nn.Conv2d(8, 4 + n_cls, 1)

    def forward(self, feat):
        b, _, h, w = feat.shape
        out = self.head(feat).flatten(2).transpose(1, 2)                      # (B, H*W, 4 + C)
        ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        ctr = torch.stack([xs, ys], -1).reshape(-1, 2).to(feat.dtype) + 0.5   # (H*W, 2)
        wh = out[..., 2:4].exp()
        boxes = torch.cat([ctr - wh / 2, ctr + wh / 2], -1)                  # (B, N, 4)
        logits = out[..., 4:]
        scores, cls = logits.sigmoid().max(-1)
        order = scores.argsort(dim=1, descending=True)
        top = order[:, :8]
        sb = torch.gather(boxes, 1, top.unsqueeze(-1).expand(-1, -1, 4))
        ss = torch.gather(scores, 1, top)
        sc = torch.gather(cls, 1, top)
        iou = box_iou(sb, sb)                                                 # (B, 8, 8)
        upper = torch.ones(8, 8, dtype=torch.bool).triu(1)
        suppressed = ((iou > 0.3) & upper).any(1)
        keep = ~suppressed
        rank = torch.cumsum(keep.long(), 1) - 1
        kept = torch.where(keep, ss, torch.zeros_like(ss))
        onehot = F.one_hot(sc, self.n_cls) * keep.long().unsqueeze(-1)
        cell = top // w, top % w
        return (kept, rank, onehot, cell[0], cell[1], torch.flip(sb, [1]), torch.roll(ss, 2, 1),
                torch.roll(sb, shifts=(1, -1), dims=(1, 2)))


def build_detect_post():
    _seed(311)
    return DetectPost().eval(), (torch.randn(2, 8, 4, 5),)


class GQADecoder(nn.Module):
    """A LLaMA-style decoder layer with grouped-query attention: RMSNorm by ``rsqrt`` of the mean
    square, KV heads repeated by ``repeat_interleave`` (and by expand/reshape), SDPA with an
    additive float mask from ``triu(diagonal=1)``, SwiGLU feed-forward, logits ``logsumexp``."""

    def __init__(self, d: int = 32, heads: int = 4, kv_heads: int = 2):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, d // heads
        self.wq = nn.Linear(d, d, bias=False)
        self.wkv = nn.Linear(d, 2 * kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        self.w1, self.w3 = nn.Linear(d, 48, bias=False), nn.Linear(d, 48, bias=False)
        self.w2 = nn.Linear(48, d, bias=False)
        self.g1, self.g2 = nn.Parameter(torch.rand(d) + 0.5), nn.Parameter(torch.rand(d) + 0.5)
        self.lm = nn.Linear(d, 20, bias=False)

    def rms(self, x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * g

    def forward(self, x):
        b, t, d = x.shape
        h = self.rms(x, self.g1)
        q = self.wq(h).view(b, t, self.h, self.hd).transpose(1, 2)
        k, v = self.wkv(h).view(b, t, 2, self.kv, self.hd).permute(2, 0, 3, 1, 4).unbind(0)
        rep = self.h // self.kv
        k = k.repeat_interleave(rep, dim=1)
        v = v[:, :, None].expand(b, self.kv, rep, t, self.hd).reshape(b, self.h, t, self.hd)
        mask = torch.full((t, t), float("-inf")).triu(diagonal=1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.wo(y.transpose(1, 2).reshape(b, t, d))
        h = self.rms(x, self.g2)
        x = x + self.w2(F.silu(self.w1(h)) * self.w3(h))
        logits = self.lm(x)
        return logits, torch.logsumexp(logits, -1)


def build_gqa_decoder():
    _seed(312)
    return GQADecoder().eval(), (torch.randn(2, 9, 32),)


class CoAtUnfold(nn.Module):
    """A CoAtNet/ViT-ish patch path by ``F.unfold`` (im2col of 2x2 patches, stride 2) and back by
    ``F.fold`` of overlapping 3x3 windows (overlaps summed), with ``F.normalize`` and cosine
    attention scaled by a clamped, exponentiated learned logit (Swin-V2)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.GELU())
        self.embed = nn.Linear(32, 24)
        self.qkv = nn.Linear(24, 72)
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones(1, 1, 1)))
        self.back = nn.Linear(24, 8 * 9)

    def forward(self, x):
        b, _, h, w = x.shape
        y = self.stem(x)
        p = F.unfold(y, kernel_size=2, stride=2).transpose(1, 2)      # (B, L, 8*4)
        t = self.embed(p)
        q, k, v = self.qkv(t).chunk(3, -1)
        att = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        att = att * torch.clamp(self.logit_scale, max=math.log(100.0)).exp()
        t = t + att.softmax(-1) @ v
        cols = self.back(t).transpose(1, 2)                          # (B, 8*9, L)
        z = F.fold(cols, output_size=(h // 2 + 2, w // 2 + 2), kernel_size=3, stride=1)
        return z, F.fold(F.unfold(x, 3, padding=1, stride=1), (h, w), 3, padding=1)


def build_coat_unfold():
    _seed(313)
    m = CoAtUnfold()
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 3, 8, 10),)


class STN(nn.Module):
    """A spatial transformer / flow warp: a localisation net regresses a 2x3 affine, the sampling grid
    is a base grid of normalized pixel centres (``meshgrid(indexing='ij')``, ``linspace``) times
    ``theta`` transposed, plus a predicted flow; ``F.grid_sample`` (bilinear, zeros padding;
    nearest, border padding; bilinear, reflection padding) resamples the input."""

    def __init__(self):
        super().__init__()
        self.loc = nn.Sequential(nn.Conv2d(2, 4, 3, 2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                 nn.Linear(4, 6))
        self.flow = nn.Conv2d(2, 2, 3, padding=1)
        with torch.no_grad():
            self.loc[-1].weight.mul_(0.1)
            self.loc[-1].bias.copy_(torch.tensor([0.9, 0.1, 0.05, -0.1, 1.1, 0.0]))
            self.flow.weight.mul_(0.1)

    def forward(self, x):
        n, _, h, w = x.shape
        theta = self.loc(x).view(-1, 2, 3)
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, h) * (h - 1) / h, torch.linspace(-1, 1, w) * (w - 1) / w,
                                indexing="ij")
        base = torch.stack([xs, ys, torch.ones_like(xs)], -1).reshape(1, h * w, 3)
        grid = torch.bmm(base.expand(n, h * w, 3), theta.transpose(1, 2)).view(n, h, w, 2)
        a = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        b = F.grid_sample(x, grid * 1.2, mode="nearest", padding_mode="border", align_corners=True)
        c = F.grid_sample(x, grid + self.flow(x).permute(0, 2, 3, 1), padding_mode="reflection", align_corners=False)
        return a, b, c


def build_stn():
    _seed(314)
    return STN().eval(), (torch.randn(2, 2, 9, 11),)


class Retrieval(nn.Module):
    """Embedding retrieval: ``F.normalize`` embeddings, ``torch.cdist`` to a codebook, ``topk``
    (smallest), ``bucketize``/``searchsorted`` of the distances into bins, ``F.embedding_bag`` of
    the nearest codes (mean), a ``cummax`` and ``diff`` over the sorted distances."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(12, 8)
        self.codebook = nn.Parameter(torch.randn(16, 8))
        self.bag = nn.EmbeddingBag(16, 6, mode="mean")
        self.register_buffer("edges", torch.tensor([0.5, 1.0, 1.5, 2.0]))

    def forward(self, x):
        e = F.normalize(self.proj(x), p=2.0, dim=1)
        d = torch.cdist(e, F.normalize(self.codebook, dim=1))
        vals, idx = torch.topk(d, 3, dim=1, largest=False)
        bins = torch.bucketize(vals, self.edges)
        pos = torch.searchsorted(self.edges, vals.contiguous(), right=True)
        emb = self.bag(idx)
        run_max, _ = torch.cummax(d, 1)
        return vals, idx, bins, pos, emb, run_max, torch.diff(vals, dim=1)


def build_retrieval():
    _seed(315)
    return Retrieval().eval(), (torch.randn(5, 12),)


# --- quantized ---------------------------------------------------------------------------------


class EagerQuantNet(nn.Module):
    """Eager-mode static quantization (x86): fused conv-bn-relu (``quantized::conv2d_relu``), a
    FloatFunctional ``add_relu`` and ``cat`` of conv outputs, hardswish, an average pool
    (``ceil_mode``, ``count_include_pad=False``) of the cat, a global pool and a linear."""

    def __init__(self):
        super().__init__()
        import torch.ao.quantization as tq
        from torch.ao.nn.quantized import FloatFunctional

        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv1 = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.conv2 = nn.Sequential(nn.Conv2d(8, 8, 3, 1, 1), nn.BatchNorm2d(8))
        self.conv3 = nn.Conv2d(8, 8, 1)
        self.hs = nn.Hardswish()
        self.add, self.cat = FloatFunctional(), FloatFunctional()
        self.pool = nn.AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        y = self.conv1(self.quant(x))
        z = self.add.add_relu(self.conv2(y), y)
        z = self.cat.cat([z, self.hs(self.conv3(y))], 1)
        z = self.gap(self.pool(z)).flatten(1)
        return self.dequant(self.fc(z))


def build_eager_quant():
    """:class:`EagerQuantNet` fused, calibrated on four seeded batches and converted (the caller sets
    torch's quantized engine to x86), and its example input."""
    import torch.ao.quantization as tq

    _seed(320)
    m = EagerQuantNet()
    _norm_stats(m)
    m.eval()
    tq.fuse_modules(m, [["conv1.0", "conv1.1", "conv1.2"], ["conv2.0", "conv2.1"]], inplace=True)
    m.qconfig = tq.get_default_qconfig("x86")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tq.prepare(m, inplace=True)
        with torch.no_grad():
            for s in range(4):
                m(torch.randn(2, 3, 11, 11, generator=torch.Generator().manual_seed(s)))
        tq.convert(m, inplace=True)
    return m, (torch.randn(2, 3, 11, 11),)


class RNNTagger(nn.Module):
    """A tagger for ``quantize_dynamic``: a 2-layer bidirectional batch-first LSTM (its cells become
    ``CellParamsBase``, the op ``aten::quantized_lstm``) and Linear heads (``quantized::linear_dynamic``)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(32, 4)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        return self.fc(y), h, c


def build_dynamic_lstm():
    """:class:`RNNTagger` through ``quantize_dynamic`` (qint8; the caller sets torch's engine to x86)."""
    import torch.ao.quantization as tq

    _seed(321)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = tq.quantize_dynamic(RNNTagger().eval(), {nn.LSTM, nn.Linear}, dtype=torch.qint8)
    return m, (torch.randn(3, 6, 8),)


# --- registry ------------------------------------------------------------------------------------


MODELS: Dict[str, Callable[[], Tuple[nn.Module, tuple]]] = {
    "squeezenet": build_squeezenet,
    "resnet_d": build_resnet_d,
    "efficientnet_b0": build_efficientnet_b0,
    "mlp_mixer": build_mlp_mixer,
    "mobilevit": build_mobilevit,
    "rotary_alibi": build_rotary_alibi,
    "mha_no_weights": build_mha_no_weights,
    "kv_cache": build_kv_cache,
    "cell_loop": build_cell_loop,
    "logmel": build_logmel,
    "detect_post": build_detect_post,
    "gqa_decoder": build_gqa_decoder,
    "coat_unfold": build_coat_unfold,
    "stn": build_stn,
    "retrieval": build_retrieval,
}
