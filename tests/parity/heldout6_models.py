"""The sixth held-out zoo: families and idioms in none of the other zoos (heldout_models.py to
heldout5_models.py): RepVGG's train-form multi-branch blocks, EfficientNetV2's fused MBConv,
MaxViT window + grid attention, PoolFormer, an attention-gated UNet, SegFormer's spatial-reduction
attention, Swin-V2 cosine attention with a log-spaced CPB MLP, non-integer interpolation,
unfold/fold, adaptive max pooling with indices, local response norm, a T5 relative-position
bucket, a LLaMA block (RMSNorm, SwiGLU, GQA, KV cache as inputs, causal SDPA), mean pooling,
beam-search top-k + gather, a weight-normed TCN, N-BEATS, ProbSparse queries, a GCN by
``index_add_``, bucketize/searchsorted/histc binning, cdist kNN, integer division and remainder
signs, NaN/inf through max/min/clamp/sort, Optional arguments and ``@torch.jit.ignore`` methods.

Each builder returns ``(module in eval mode, example inputs)``: fixed seeds, small sizes; every
model takes every import path (heldout_paths.PATHS).
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from heldout2_models import _norm_stats, _seed


def _x(seed: int, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# --- vision ----------------------------------------------------------------------------------


class RepVGGBlock(nn.Module):
    """RepVGG in its training form: 3x3 conv+BN, 1x1 conv+BN and an identity BN, summed, ReLU."""

    def __init__(self, c: int):
        super().__init__()
        self.k3 = nn.Sequential(nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c))
        self.k1 = nn.Sequential(nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c))
        self.id = nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(self.k3(x) + self.k1(x) + self.id(x))


class RepVGG(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU())
        self.blocks = nn.Sequential(RepVGGBlock(8), RepVGGBlock(8))
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


def build_repvgg():
    _seed(601)
    m = RepVGG()
    _norm_stats(m)
    return m.eval(), (_x(1, 2, 3, 16, 16),)


class FusedMBConv(nn.Module):
    """EfficientNetV2 fused MBConv: 3x3 expansion conv, SE, 1x1 projection, residual."""

    def __init__(self, c: int, e: int = 4):
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(c, c * e, 3, 1, 1, bias=False), nn.BatchNorm2d(c * e), nn.SiLU())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c * e, c, 1), nn.SiLU(), nn.Conv2d(c, c * e, 1), nn.Sigmoid())
        self.project = nn.Sequential(nn.Conv2d(c * e, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        y = self.expand(x)
        return x + self.project(y * self.se(y))


class EffNetV2(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.SiLU())
        self.blocks = nn.Sequential(FusedMBConv(8), FusedMBConv(8))
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))


def build_effnetv2():
    _seed(602)
    m = EffNetV2()
    _norm_stats(m)
    return m.eval(), (_x(2, 2, 3, 16, 16),)


class MaxViTBlock(nn.Module):
    """MaxViT: block (window) attention then grid attention, both by view/permute partitions, and a
    shifted window by ``torch.roll``."""

    def __init__(self, c: int = 16, p: int = 4, heads: int = 2):
        super().__init__()
        self.p, self.heads = p, heads
        self.n1 = nn.LayerNorm(c)
        self.qkv1 = nn.Linear(c, 3 * c)
        self.n2 = nn.LayerNorm(c)
        self.qkv2 = nn.Linear(c, 3 * c)
        self.out = nn.Linear(c, c)

    def attend(self, qkv):
        b, n, c3 = qkv.shape
        c = c3 // 3
        q, k, v = qkv.reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        a = (q @ k.transpose(-2, -1) / math.sqrt(c // self.heads)).softmax(-1)
        return (a @ v).transpose(1, 2).reshape(b, n, c)

    def forward(self, x):  # x: B, H, W, C
        b, hh, ww, c = x.shape
        p = self.p
        s = torch.roll(x, shifts=(-1, -1), dims=(1, 2))
        win = s.view(b, hh // p, p, ww // p, p, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, p * p, c)
        win = win + self.attend(self.qkv1(self.n1(win)))
        s = win.view(b, hh // p, ww // p, p, p, c).permute(0, 1, 3, 2, 4, 5).reshape(b, hh, ww, c)
        s = torch.roll(s, shifts=(1, 1), dims=(1, 2))
        grid = s.view(b, p, hh // p, p, ww // p, c).permute(0, 2, 4, 1, 3, 5).reshape(-1, p * p, c)
        grid = grid + self.attend(self.qkv2(self.n2(grid)))
        y = grid.view(b, hh // p, ww // p, p, p, c).permute(0, 3, 1, 4, 2, 5).reshape(b, hh, ww, c)
        return self.out(y)


def build_maxvit():
    _seed(603)
    return MaxViTBlock().eval(), (_x(3, 2, 8, 8, 16),)


class PoolFormer(nn.Module):
    """PoolFormer blocks: GroupNorm(1), token mixing ``avg_pool(x) - x`` (count_include_pad=False),
    a 1x1 MLP, layer-scale parameters."""

    def __init__(self, c: int = 8):
        super().__init__()
        self.n1 = nn.GroupNorm(1, c)
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.n2 = nn.GroupNorm(1, c)
        self.mlp = nn.Sequential(nn.Conv2d(c, 4 * c, 1), nn.GELU(), nn.Conv2d(4 * c, c, 1))
        self.ls1 = nn.Parameter(torch.rand(c) + 0.5)
        self.ls2 = nn.Parameter(torch.rand(c) + 0.5)

    def forward(self, x):
        y = self.n1(x)
        x = x + self.ls1.unsqueeze(-1).unsqueeze(-1) * (self.pool(y) - y)
        return x + self.ls2.view(1, -1, 1, 1) * self.mlp(self.n2(x))


def build_poolformer():
    _seed(604)
    return PoolFormer().eval(), (_x(4, 2, 8, 7, 9),)


class AttentionGate(nn.Module):
    def __init__(self, cg: int, cx: int, ci: int):
        super().__init__()
        self.wg = nn.Sequential(nn.Conv2d(cg, ci, 1), nn.BatchNorm2d(ci))
        self.wx = nn.Sequential(nn.Conv2d(cx, ci, 2, 2), nn.BatchNorm2d(ci))
        self.psi = nn.Sequential(nn.Conv2d(ci, 1, 1), nn.BatchNorm2d(1), nn.Sigmoid())

    def forward(self, g, x):
        a = self.psi(F.relu(self.wg(g) + self.wx(x)))
        return x * F.interpolate(a, size=x.shape[2:], mode="bilinear", align_corners=False)


class AttentionUNet(nn.Module):
    """A two-level UNet whose skip connection passes an attention gate."""

    def __init__(self):
        super().__init__()
        self.e1 = nn.Sequential(nn.Conv2d(2, 8, 3, 1, 1), nn.ReLU())
        self.e2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, 1, 1), nn.ReLU())
        self.gate = AttentionGate(16, 8, 4)
        self.up = nn.ConvTranspose2d(16, 8, 2, 2)
        self.d1 = nn.Conv2d(16, 3, 3, 1, 1)

    def forward(self, x):
        a = self.e1(x)
        b = self.e2(a)
        return self.d1(torch.cat([self.gate(b, a), self.up(b)], 1))


def build_attention_unet():
    _seed(605)
    m = AttentionUNet()
    _norm_stats(m)
    return m.eval(), (_x(5, 2, 2, 12, 16),)


class SegFormerAttention(nn.Module):
    """SegFormer efficient self-attention: keys and values from a strided conv (spatial reduction)
    and a LayerNorm; Mix-FFN with a depthwise 3x3."""

    def __init__(self, c: int = 16, heads: int = 2, sr: int = 2):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(c, c)
        self.kv = nn.Linear(c, 2 * c)
        self.sr = nn.Conv2d(c, c, sr, sr)
        self.norm = nn.LayerNorm(c)
        self.proj = nn.Linear(c, c)
        self.fc1 = nn.Linear(c, 2 * c)
        self.dw = nn.Conv2d(2 * c, 2 * c, 3, 1, 1, groups=2 * c)
        self.fc2 = nn.Linear(2 * c, c)

    def forward(self, x, h: int, w: int):
        b, n, c = x.shape
        d = c // self.heads
        q = self.q(x).reshape(b, n, self.heads, d).permute(0, 2, 1, 3)
        r = self.norm(self.sr(x.permute(0, 2, 1).reshape(b, c, h, w)).reshape(b, c, -1).permute(0, 2, 1))
        k, v = self.kv(r).reshape(b, -1, 2, self.heads, d).permute(2, 0, 3, 1, 4).unbind(0)
        a = (q @ k.transpose(-2, -1) * d ** -0.5).softmax(-1)
        x = x + self.proj((a @ v).transpose(1, 2).reshape(b, n, c))
        y = self.fc1(x).transpose(1, 2).view(b, 2 * c, h, w)
        return x + self.fc2(F.gelu(self.dw(y)).flatten(2).transpose(1, 2))


class SegFormer(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 16, 3, 2, 1)
        self.block = SegFormerAttention()

    def forward(self, img):
        t = self.patch(img)
        b, c, h, w = t.shape
        return self.block(t.flatten(2).transpose(1, 2), h, w)


def build_segformer():
    _seed(606)
    return SegFormer().eval(), (_x(6, 2, 3, 12, 16),)


class SwinV2Attention(nn.Module):
    """Swin-V2 window attention: cosine similarity scaled by a clamped, exponentiated learnt logit
    scale; the relative position bias from a CPB MLP over log-spaced coordinates, 16 * sigmoid."""

    def __init__(self, c: int = 16, heads: int = 2, ws: int = 4):
        super().__init__()
        self.heads, self.ws = heads, ws
        self.qkv = nn.Linear(c, 3 * c, bias=False)
        self.q_bias = nn.Parameter(torch.randn(c) * 0.1)
        self.v_bias = nn.Parameter(torch.randn(c) * 0.1)
        self.logit_scale = nn.Parameter(torch.log(10 * torch.rand(heads, 1, 1) + 1))
        self.cpb = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, heads, bias=False))
        r = torch.arange(-(ws - 1), ws, dtype=torch.float32)
        table = torch.stack(torch.meshgrid(r, r, indexing="ij")).permute(1, 2, 0).unsqueeze(0) / (ws - 1) * 8
        table = torch.sign(table) * torch.log2(table.abs() + 1.0) / math.log2(8)
        self.register_buffer("table", table)
        coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (ws - 1)
        self.register_buffer("index", rel[..., 0] * (2 * ws - 1) + rel[..., 1])
        self.proj = nn.Linear(c, c)

    def forward(self, x):
        b, n, c = x.shape
        bias = torch.cat((self.q_bias, torch.zeros_like(self.v_bias), self.v_bias))
        q, k, v = F.linear(x, self.qkv.weight, bias).reshape(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        a = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        a = a * torch.clamp(self.logit_scale, max=math.log(1.0 / 0.01)).exp()
        rpb = self.cpb(self.table).view(-1, self.heads)[self.index.view(-1)].view(n, n, -1).permute(2, 0, 1)
        a = (a + 16 * torch.sigmoid(rpb).unsqueeze(0)).softmax(-1)
        return self.proj((a @ v).transpose(1, 2).reshape(b, n, c))


def build_swinv2():
    _seed(607)
    return SwinV2Attention().eval(), (_x(7, 3, 16, 16),)


class SuperRes(nn.Module):
    """Super-resolution without PixelShuffle: non-integer ``scale_factor`` (bicubic, bilinear with
    and without align_corners, nearest, nearest-exact, area-free), recompute_scale_factor both ways."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, 1, 1)
        self.c2 = nn.Conv2d(8, 3, 3, 1, 1)

    def forward(self, x):
        y = F.relu(self.c1(x))
        a = F.interpolate(y, scale_factor=1.5, mode="bicubic", align_corners=False)
        b = F.interpolate(y, scale_factor=(1.5, 1.5), mode="bilinear", align_corners=True)
        c = F.interpolate(y, scale_factor=1.5, mode="nearest")
        d = F.interpolate(y, scale_factor=1.5, mode="bilinear", recompute_scale_factor=True)
        e = F.interpolate(y, scale_factor=0.75, mode="nearest-exact")
        return self.c2(a + b + c + d), e


def build_superres():
    _seed(608)
    return SuperRes().eval(), (_x(8, 1, 3, 6, 10),)


class UnfoldFold(nn.Module):
    """``F.unfold`` patches through a Linear, then ``F.fold`` back (overlapping: sums), normalised by
    the fold of ones; dilation and padding on the unfold."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2 * 9, 2 * 9)

    def forward(self, x):
        h, w = x.shape[2], x.shape[3]
        p = F.unfold(x, kernel_size=3, padding=1, stride=2)
        y = self.lin(p.transpose(1, 2)).transpose(1, 2)
        out = F.fold(y, (h, w), kernel_size=3, padding=1, stride=2)
        ones = F.fold(torch.ones_like(y), (h, w), kernel_size=3, padding=1, stride=2)
        d = F.unfold(x, kernel_size=(2, 3), dilation=(2, 1))
        return out / ones.clamp(min=1.0), d


def build_unfold_fold():
    _seed(609)
    return UnfoldFold().eval(), (_x(9, 2, 2, 7, 8),)


class PoolingOddities(nn.Module):
    """``adaptive_max_pool2d`` with indices (uneven bins), ``F.local_response_norm``, a max-norm
    embedding (eval), channel shuffle by view/transpose, ``max_pool2d`` with indices (``max_unpool2d`` is left
    out: torch.jit.trace fails on it)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        with torch.no_grad():
            self.emb.weight.mul_(0.3)  # rows under max_norm: the lookup leaves them as they are

    def forward(self, x, ids):
        v, i = F.adaptive_max_pool2d(x, (3, 2), return_indices=True)
        lrn = F.local_response_norm(x, 3, alpha=1e-2, beta=0.75, k=1.0)
        b, c, h, w = x.shape
        sh = x.view(b, 2, c // 2, h, w).transpose(1, 2).reshape(b, c, h, w)
        m, mi = F.max_pool2d(x, 2, 2, return_indices=True)
        e = F.embedding(ids, self.emb.weight)
        return v, i, lrn + sh, m, mi, e


def build_pooling_oddities():
    _seed(610)
    ids = torch.tensor([[1, 4, 9], [0, 0, 7]])
    return PoolingOddities().eval(), (_x(10, 2, 4, 7, 6), ids)


# --- language ---------------------------------------------------------------------------------


class T5Bias(nn.Module):
    """T5's relative-position bucket (bidirectional): abs, log, int casts, ``torch.min`` with a full
    tensor, ``torch.where`` on ints; the bias added to attention scores."""

    def __init__(self, heads: int = 2, buckets: int = 8, max_distance: int = 20):
        super().__init__()
        self.buckets, self.max_distance = buckets, max_distance
        self.bias = nn.Embedding(buckets, heads)

    def bucket(self, rel):
        nb = self.buckets // 2
        ret = (rel > 0).to(torch.long) * nb
        n = torch.abs(rel)
        max_exact = nb // 2
        is_small = n < max_exact
        large = max_exact + (torch.log(n.float() / max_exact) / math.log(self.max_distance / max_exact)
                             * (nb - max_exact)).to(torch.long)
        large = torch.min(large, torch.full_like(large, nb - 1))
        return ret + torch.where(is_small, n, large)

    def forward(self, q, k):
        lq, lk = q.shape[1], k.shape[1]
        ctx = torch.arange(lq, dtype=torch.long)[:, None]
        mem = torch.arange(lk, dtype=torch.long)[None, :]
        b = self.bias(self.bucket(mem - ctx)).permute(2, 0, 1).unsqueeze(0)
        s = torch.einsum("bhqd,bhkd->bhqk", q.unflatten(-1, (2, -1)).transpose(1, 2),
                         k.unflatten(-1, (2, -1)).transpose(1, 2))
        return (s + b).softmax(-1)


def build_t5_bias():
    _seed(611)
    return T5Bias().eval(), (_x(11, 2, 12, 8), _x(12, 2, 30, 8))


class RMSNorm(nn.Module):
    def __init__(self, c: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.rand(c) + 0.5)

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class LlamaBlock(nn.Module):
    """A LLaMA decoder layer with a KV cache passed as inputs: RMSNorm, rotary by rotate_half, GQA
    (repeat_interleave), causal SDPA over cache + new tokens (an explicit bool mask), SwiGLU; returns
    the new cache."""

    def __init__(self, c: int = 16, heads: int = 4, kv_heads: int = 2):
        super().__init__()
        self.h, self.kvh, self.d = heads, kv_heads, c // heads
        self.n1, self.n2 = RMSNorm(c), RMSNorm(c)
        self.q = nn.Linear(c, c, bias=False)
        self.k = nn.Linear(c, kv_heads * self.d, bias=False)
        self.v = nn.Linear(c, kv_heads * self.d, bias=False)
        self.o = nn.Linear(c, c, bias=False)
        self.gate = nn.Linear(c, 24, bias=False)
        self.up = nn.Linear(c, 24, bias=False)
        self.down = nn.Linear(24, c, bias=False)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, self.d, 2).float() / self.d)))

    def rope(self, t, pos):
        f = pos.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat((f, f), -1)
        half = t.shape[-1] // 2
        rot = torch.cat((-t[..., half:], t[..., :half]), -1)
        return t * emb.cos() + rot * emb.sin()

    def forward(self, x, k_cache, v_cache):
        b, t, c = x.shape
        past = k_cache.shape[2]
        pos = torch.arange(past, past + t)
        h = self.n1(x)
        q = self.rope(self.q(h).view(b, t, self.h, self.d).transpose(1, 2), pos)
        k = self.rope(self.k(h).view(b, t, self.kvh, self.d).transpose(1, 2), pos)
        v = self.v(h).view(b, t, self.kvh, self.d).transpose(1, 2)
        k_all = torch.cat([k_cache, k], 2)
        v_all = torch.cat([v_cache, v], 2)
        rep = self.h // self.kvh
        kk = k_all.repeat_interleave(rep, dim=1)
        vv = v_all.repeat_interleave(rep, dim=1)
        mask = torch.ones(t, past + t, dtype=torch.bool).tril(diagonal=past)
        a = F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, c))
        h = self.n2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h)), k_all, v_all


def build_llama_block():
    _seed(612)
    return LlamaBlock().eval(), (_x(13, 2, 3, 16), _x(14, 2, 2, 5, 4), _x(15, 2, 2, 5, 4))


class CausalSDPA(nn.Module):
    """``scaled_dot_product_attention(is_causal=True, dropout_p=0.0)`` with a custom ``scale``, and
    ALiBi biases with a ``torch.triu`` mask filled with -inf."""

    def __init__(self, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.register_buffer("slopes", torch.tensor([0.5, 0.25]).view(1, heads, 1, 1))

    def forward(self, q, k, v):
        a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=True, scale=0.3)
        n = q.shape[2]
        dist = (torch.arange(n)[None, :] - torch.arange(n)[:, None]).float()
        mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + self.slopes * dist + mask
        return a, s.softmax(-1) @ v


def build_causal_sdpa():
    return CausalSDPA().eval(), (_x(16, 2, 2, 5, 4), _x(17, 2, 2, 5, 4), _x(18, 2, 2, 5, 4))


class MeanPooling(nn.Module):
    """Sentence-transformer pooling: token embeddings mean-pooled under the attention mask (int64),
    ``clamp(min=1e-9)`` on the count, L2-normalised; an optional token-type input defaulted to None."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(30, 16)
        self.types = nn.Embedding(2, 16)
        self.lin = nn.Linear(16, 16)

    def forward(self, ids, mask, token_types: Optional[torch.Tensor] = None):
        t = self.emb(ids)
        if token_types is not None:
            t = t + self.types(token_types)
        t = torch.tanh(self.lin(t))
        m = mask.unsqueeze(-1).expand(t.size()).float()
        pooled = torch.sum(t * m, 1) / torch.clamp(m.sum(1), min=1e-9)
        return F.normalize(pooled, p=2.0, dim=1)


def build_mean_pooling():
    _seed(613)
    ids = torch.randint(0, 30, (3, 7), generator=torch.Generator().manual_seed(613))
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0, 0]])
    return MeanPooling().eval(), (ids, mask)


class BeamStep(nn.Module):
    """One beam-search step: log-softmax, add beam scores, flatten beams x vocab, ``topk``, then
    ``//`` and ``%`` for beam and token, ``gather`` on 3-D histories."""

    def __init__(self, vocab: int = 11, beams: int = 3):
        super().__init__()
        self.vocab, self.beams = vocab, beams
        self.lin = nn.Linear(8, vocab)

    def forward(self, h, scores, hist):
        b = h.shape[0]
        lp = F.log_softmax(self.lin(h), -1) + scores.unsqueeze(-1)
        top, idx = lp.view(b, -1).topk(self.beams, dim=1)
        beam = torch.div(idx, self.vocab, rounding_mode="floor")
        tok = idx % self.vocab
        prev = torch.gather(hist, 1, beam.unsqueeze(-1).expand(-1, -1, hist.shape[2]))
        return top, torch.cat([prev, tok.unsqueeze(-1)], 2)


def build_beam_step():
    _seed(614)
    g = torch.Generator().manual_seed(614)
    hist = torch.randint(0, 11, (2, 3, 4), generator=g)
    return BeamStep().eval(), (_x(19, 2, 3, 8), _x(20, 2, 3), hist)


# --- time series / graph / misc ----------------------------------------------------------------


class WNConv1d(nn.Module):
    """A conv1d whose weight is ``weight_norm``'s g * v / ||v|| (``torch._weight_norm``, what the
    hook of ``nn.utils.weight_norm`` computes), so the parametrisation stays in the graph."""

    def __init__(self, cin: int, cout: int, k: int, dilation: int):
        super().__init__()
        w = torch.randn(cout, cin, k) * 0.3
        self.v = nn.Parameter(w)
        self.g = nn.Parameter(w.flatten(1).norm(dim=1).view(-1, 1, 1) * (torch.rand(cout, 1, 1) + 0.5))
        self.bias = nn.Parameter(torch.randn(cout) * 0.1)
        self.pad, self.dilation = (k - 1) * dilation, dilation

    def forward(self, x):
        w = torch._weight_norm(self.v, self.g, 0)
        return F.conv1d(x, w, self.bias, padding=self.pad, dilation=self.dilation)


class TCNWeightNorm(nn.Module):
    """A TCN of weight-normed causal dilated convs (:class:`WNConv1d`), chomped by slicing, and a
    weight-normed (dim=None: one norm over the whole tensor) 1x1 downsample residual."""

    def __init__(self):
        super().__init__()
        self.c1 = WNConv1d(3, 8, 3, 1)
        self.c2 = WNConv1d(8, 8, 3, 2)
        self.dv = nn.Parameter(torch.randn(8, 3, 1))
        self.dg = nn.Parameter(torch.tensor(2.0))

    def forward(self, x):
        y = F.relu(self.c1(x)[:, :, :-2])
        y = F.relu(self.c2(y)[:, :, :-4])
        down = F.conv1d(x, self.dv * (self.dg / self.dv.norm()))
        return F.relu(y + down)


def build_tcn_weight_norm():
    _seed(615)
    return TCNWeightNorm().eval(), (_x(21, 2, 3, 12),)


class NBeats(nn.Module):
    """N-BEATS: generic blocks (FC stack to theta, backcast/forecast Linears) and a trend block with a
    polynomial basis; residual backcasts subtracted, forecasts summed."""

    def __init__(self, back: int = 12, fore: int = 4):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(back, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
                                     for _ in range(2)])
        self.bc = nn.ModuleList([nn.Linear(32, back) for _ in range(2)])
        self.fc = nn.ModuleList([nn.Linear(32, fore) for _ in range(2)])
        self.trend = nn.Linear(back, 3)
        tb = torch.arange(back).float() / back
        tf = torch.arange(fore).float() / fore
        self.register_buffer("pb", torch.stack([tb ** i for i in range(3)]))
        self.register_buffer("pf", torch.stack([tf ** i for i in range(3)]))

    def forward(self, x):
        fore = torch.zeros(x.shape[0], self.pf.shape[1])
        for blk, bc, fc in zip(self.blocks, self.bc, self.fc):
            h = blk(x)
            x = x - bc(h)
            fore = fore + fc(h)
        th = self.trend(x)
        return fore + th @ self.pf, x - th @ self.pb


def build_nbeats():
    _seed(616)
    return NBeats().eval(), (_x(22, 3, 12),)


class ProbSparse(nn.Module):
    """Informer's ProbSparse attention with a fixed key sample: the sparsity measure max - mean over
    sampled keys, the top-u queries by ``topk``, their attention scattered into a mean-of-values
    context by index assignment."""

    def __init__(self, u: int = 3):
        super().__init__()
        self.u = u
        self.register_buffer("sample", torch.tensor([0, 2, 3, 5, 7]))

    def forward(self, q, k, v):
        b, h, lq, d = q.shape
        ks = k[:, :, self.sample, :]
        qk = q @ ks.transpose(-2, -1)
        m = qk.max(-1)[0] - qk.sum(-1) / k.shape[2]
        top = m.topk(self.u, sorted=False)[1]
        bi = torch.arange(b)[:, None, None]
        hi = torch.arange(h)[None, :, None]
        qr = q[bi, hi, top]
        a = (qr @ k.transpose(-2, -1) / math.sqrt(d)).softmax(-1)
        ctx = v.mean(2, keepdim=True).expand(b, h, lq, d).clone()
        ctx[bi, hi, top] = a @ v
        return ctx


def build_probsparse():
    return ProbSparse().eval(), (_x(23, 2, 2, 8, 4), _x(24, 2, 2, 8, 4), _x(25, 2, 2, 8, 4))


class GCNIndexAdd(nn.Module):
    """A GCN by ``index_add_`` over an edge list with symmetric degree normalisation (degrees by
    ``index_add`` of ones), and a dense-adjacency layer (``torch.eye`` self-loops, D^-1/2 A D^-1/2)."""

    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(5, 8)
        self.l2 = nn.Linear(8, 4)

    def forward(self, x, edges, adj):
        n = x.shape[0]
        src, dst = edges[0], edges[1]
        deg = torch.zeros(n).index_add_(0, dst, torch.ones(dst.shape[0])) + 1.0
        norm = (deg[src] * deg[dst]).rsqrt()
        h = self.l1(x)
        out = (h / deg.unsqueeze(1)).index_add(0, dst, h[src] * norm.unsqueeze(1))
        a = adj + torch.eye(n)
        dinv = a.sum(1).pow(-0.5)
        a = dinv[:, None] * a * dinv[None, :]
        return self.l2(a @ F.relu(out))


def build_gcn():
    _seed(617)
    g = torch.Generator().manual_seed(617)
    edges = torch.randint(0, 6, (2, 14), generator=g)
    adj = (torch.rand(6, 6, generator=g) > 0.6).float()
    return GCNIndexAdd().eval(), (_x(26, 6, 5), edges, adj)


class Binner(nn.Module):
    """Feature binning: ``bucketize`` (right both ways), ``searchsorted`` (side='right', out_int32,
    a sorter-free batched 2-D boundaries), ``histc``, one-hot by comparison, embedding of the bins."""

    def __init__(self):
        super().__init__()
        self.register_buffer("edges", torch.tensor([-1.0, -0.25, 0.0, 0.5, 1.5]))
        self.register_buffer("rows", torch.sort(torch.randn(3, 6, generator=torch.Generator().manual_seed(3)), -1)[0])
        self.emb = nn.Embedding(6, 4)

    def forward(self, x, y):
        b1 = torch.bucketize(x, self.edges)
        b2 = torch.bucketize(x, self.edges, right=True, out_int32=True)
        s = torch.searchsorted(self.rows, y, side="right")
        hist = torch.histc(x, bins=5, min=-2.0, max=2.0)
        return self.emb(b1).sum(1), b2, s, hist


def build_binner():
    _seed(618)
    x = torch.tensor([[-2.0, -1.0, -0.3, 0.0, 0.2, 0.5, 3.0], [1.5, 1.49, -0.25, -0.26, 0.7, 2.0, -1.01]])
    return Binner().eval(), (x, _x(27, 3, 4))


class KNN(nn.Module):
    """``torch.cdist`` (p=2 and p=1) then ``topk(largest=False)`` neighbours, their features gathered
    and max-pooled (a DGCNN-like edge feature)."""

    def forward(self, pts, feats):
        d = torch.cdist(pts, pts)
        _, idx = d.topk(3, dim=-1, largest=False)
        b, n, k = idx.shape
        nb = torch.gather(feats.unsqueeze(1).expand(b, n, n, feats.shape[-1]), 2,
                          idx.unsqueeze(-1).expand(b, n, k, feats.shape[-1]))
        edge = nb - feats.unsqueeze(2)
        return edge.max(2)[0], torch.cdist(pts, pts[:, :3], p=1.0)


def build_knn():
    return KNN().eval(), (_x(28, 2, 7, 3), _x(29, 2, 7, 4))


class IntSemantics(nn.Module):
    """Integer and rounding semantics on negatives: ``//``, ``torch.div`` floor and trunc, ``%``,
    ``remainder`` and ``fmod`` on ints and floats, a uint8 image normalised in the graph, int8 input
    arithmetic, bool arithmetic (sum of a bool tensor, bool & / |, logical_xor)."""

    def forward(self, a, b, fa, img, i8, mask):
        q = a // b
        qf = torch.div(a, b, rounding_mode="floor")
        qt = torch.div(a, b, rounding_mode="trunc")
        r1 = a % b
        r2 = torch.fmod(a, b)
        fr = torch.remainder(fa, -1.5) + torch.fmod(fa, 1.5)
        ff = torch.div(fa, 0.7, rounding_mode="floor") + torch.div(fa, 0.7, rounding_mode="trunc")
        norm = (img.float() / 255.0 - 0.5) / 0.25
        s8 = (i8 * 2 + 1) // 3
        cnt = mask.sum(-1)
        bx = (mask & (a > 0)) | torch.logical_xor(mask, b < 0)
        return q, qf, qt, r1, r2, fr, ff, norm, s8, cnt, bx.float() * 2


def build_int_semantics():
    g = torch.Generator().manual_seed(620)
    a = torch.randint(-20, 20, (3, 5), generator=g)
    b = torch.tensor([3, -3, 4, -7, 5])
    fa = torch.randn(3, 5, generator=g) * 4
    img = torch.randint(0, 256, (1, 3, 4, 4), generator=g, dtype=torch.uint8)
    i8 = torch.randint(-100, 100, (3, 5), generator=g, dtype=torch.int8)
    mask = torch.rand(3, 5, generator=g) > 0.5
    return IntSemantics().eval(), (a, b, fa, img, i8, mask)


class NanInf(nn.Module):
    """NaN and inf through ``max``/``min`` (reductions and binary), ``clamp``, ``sort``, ``amax``,
    ``maximum``/``fmax``, ``nan_to_num``, softmax over -inf rows' neighbours, argmax with NaN."""

    def forward(self, x, y):
        return (x.max(1)[0], x.min(1)[0], torch.clamp(x, -1.0, 1.0), torch.sort(x, 1)[0],
                torch.maximum(x, y), torch.fmax(x, y), torch.fmin(x, y), x.amax(1), torch.nan_to_num(x, 0.0, 9.0, -9.0),
                x.argmax(1), torch.relu(x), F.hardtanh(x), torch.isfinite(x))


def build_nan_inf():
    x = torch.tensor([[1.0, float("nan"), -3.0, 2.0], [float("inf"), 0.5, float("-inf"), -0.5],
                      [0.1, 0.2, -0.3, 5.0]])
    y = torch.tensor([[0.0, 1.0, float("nan"), 3.0], [1.0, float("nan"), 2.0, -1.0], [0.0, 0.0, 0.0, 0.0]])
    return NanInf().eval(), (x, y)


class WithIgnored(nn.Module):
    """A scripted module with an ``@torch.jit.ignore``'d debug method never called in forward, an
    ``@torch.jit.unused`` training branch, and an Optional[Tensor] argument defaulted to None."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 4)

    @torch.jit.ignore
    def debug(self, x):
        print(x.shape)

    @torch.jit.unused
    def train_only(self, x):
        return x * torch.rand_like(x)

    def forward(self, x, bias: Optional[torch.Tensor] = None):
        y = self.lin(x)
        if self.training:
            y = self.train_only(y)
        if bias is None:
            return F.gelu(y, approximate="tanh")
        return F.gelu(y + bias)


def build_with_ignored():
    _seed(621)
    return WithIgnored().eval(), (_x(30, 3, 6),)


# --- op semantics: statistics, special functions, shape and index ops -----------------------------


class Stats(nn.Module):
    """Order statistics and reductions: ``median`` (lower of the two middles) with its index,
    ``quantile`` in every interpolation mode, ``kthvalue``, ``var_mean`` with a correction, ``std``
    unbiased=False, ``nanmean``/``nansum``, ``logsumexp`` over an all -inf row, ``aminmax``,
    ``count_nonzero``, ``cummax``/``cummin``, ``cumprod``, ``logcumsumexp``."""

    def forward(self, x, z):
        med, medi = x.median(1)
        qs = torch.tensor([0.1, 0.5, 0.9])
        out = [med, medi, torch.quantile(x, qs, dim=1, keepdim=True)]
        for mode in ("lower", "higher", "midpoint", "nearest"):
            out.append(torch.quantile(x, 0.35, dim=0, interpolation=mode))
        k, ki = x.kthvalue(2, 1)
        v, m = torch.var_mean(x, dim=1, correction=0)
        mn, mx = torch.aminmax(x, dim=0)
        cmv, cmi = x.cummax(1)
        cnv, cni = x.cummin(0)
        out += [k, ki, v, m, x.std(0, unbiased=False), z.nanmean(1), z.nansum(0), torch.logsumexp(z.nan_to_num(0.0) + torch.tensor([[0.0], [float("-inf")]]), 1),
                mn, mx, torch.count_nonzero(x > 0, dim=1), cmv, cmi, cnv, cni, x.cumprod(1), x.logcumsumexp(0)]
        return out


def build_stats():
    x = _x(31, 4, 6)
    x[1, 2] = x[1, 4]  # a tie: median's and kthvalue's index
    z = torch.tensor([[1.0, float("nan"), 2.0, -1.0], [float("nan"), 3.0, 0.5, 0.25]])
    return Stats().eval(), (x, z)


class SpecialFns(nn.Module):
    """Special and elementwise functions: ``xlogy`` at 0, ``logit(eps)``, ``sinc``, ``i0``,
    ``erfinv``, ``special.ndtri``/``log_ndtr``/``entr``/``erfcx``, ``copysign`` and ``signbit`` of
    -0.0, ``atan2``, ``hypot``, ``ldexp``, ``lerp`` with a tensor weight, ``addcmul``/``addcdiv``,
    ``baddbmm`` with alpha and beta, ``float_power``, ``trunc``/``frac``, ``logaddexp``."""

    def forward(self, x, y, p):
        a = torch.xlogy(torch.relu(x), y.abs())
        b = torch.logit(p, eps=1e-3)
        c = torch.sinc(x) + torch.i0(x) + torch.erfinv(p * 1.8 - 0.9)
        d = torch.special.ndtri(p) + torch.special.log_ndtr(x) + torch.special.entr(p) + torch.special.erfcx(x)
        e = torch.copysign(torch.ones_like(x), x * 0.0 - x.clamp(min=0) * 0.0)
        f = torch.signbit(-torch.zeros_like(x) * x.sign().clamp(min=0))
        g = torch.atan2(x, y) + torch.hypot(x, y) + torch.ldexp(x, torch.full_like(x, 3).int())
        h = torch.lerp(x, y, p) + torch.addcmul(x, y, p, value=0.5) + torch.addcdiv(x, y, p + 1.0, value=-2.0)
        i = torch.baddbmm(x.view(2, 3, 4)[:, :, :3], x.view(2, 3, 4), y.view(2, 4, 3), beta=0.5, alpha=1.5)
        j = torch.float_power(p, 1.5).float() + torch.trunc(x * 3) + torch.frac(x * 3) + torch.logaddexp(x, y)
        return a, b, c, d, e, f, g, h, i, j


def build_special_fns():
    x = _x(32, 6, 4)
    x[0, 0] = 0.0
    p = torch.rand(6, 4, generator=torch.Generator().manual_seed(33)) * 0.98 + 0.01
    return SpecialFns().eval(), (x, _x(34, 6, 4), p)


class ShapeOps(nn.Module):
    """Shape and layout ops: ``triu_indices``-driven gathers, ``diff`` with prepend, ``flip``, ``roll``
    without dims, ``kron``, ``block_diag``, ``cartesian_prod``, ``take_along_dim``, ``pixel_unshuffle``,
    circular and replicate padding, ``glu``, ``movedim``, ``narrow``, ``tensor_split`` at indices,
    ``diag_embed``, ``diagonal`` with an offset, ``tril`` on 3-D, ``repeat`` + ``expand_as``."""

    def forward(self, x, img):
        iu = torch.triu_indices(4, 4, 1)
        a = x[:, iu[0], iu[1]]
        b = torch.diff(x, dim=2, prepend=x[:, :, :1] * 0.5)
        c = torch.roll(x.flip(1), 3)
        d = torch.kron(x[0, :2, :2], x[1, :2, :3])[:, :5] + torch.block_diag(x[0, :2, :2], x[1, :2, :3])[:4, :5]
        e = torch.cartesian_prod(x[0, 0], x[1, 1])
        f = torch.take_along_dim(x, x.argsort(2)[:, :, :2], dim=2)
        g = F.pixel_unshuffle(img, 2)
        h = F.pad(img, (1, 2, 2, 1), mode="circular") + 0.0
        i = F.pad(img, (2, 1, 1, 0), mode="replicate")
        j = F.glu(x, dim=1) + x.movedim(2, 1).narrow(1, 1, 2)
        k = torch.tensor_split(x, [1, 3], dim=2)
        l = torch.diag_embed(x[:, 0], offset=1)[:, 1:, :4] * x.diagonal(offset=1, dim1=1, dim2=2).sum(-1)[:, None, None]
        return a, b, c, d, e, f, g, h, i, j, k[0], k[1], k[2], l, torch.tril(x, -1), x[:, :1].repeat(1, 2, 1).expand_as(x[:, :2])


def build_shape_ops():
    return ShapeOps().eval(), (_x(35, 2, 4, 4), _x(36, 1, 2, 4, 6))


class IndexOps(nn.Module):
    """In-place index ops: ``index_put_`` with accumulate=True (repeated indices), ``scatter_reduce``
    mean and amax with and without include_self, ``masked_scatter``, ``index_fill``, ``index_copy``,
    ``masked_fill`` broadcast from a row mask, boolean-mask assignment."""

    def forward(self, x, idx, src, mask):
        a = torch.zeros(5, 3).index_put_((idx,), src, accumulate=True)
        b = x.scatter_reduce(0, idx.unsqueeze(1).expand(-1, 3), src, "mean", include_self=False)
        c = x.scatter_reduce(0, idx.unsqueeze(1).expand(-1, 3), src, "amax")
        d = x.index_fill(1, torch.tensor([0, 2]), -1.0)
        e = x.index_copy(0, torch.tensor([4, 0]), src[:2])
        f = x.masked_fill(mask.unsqueeze(1), 7.0)
        g = x.clone()
        g[x > 0.5] = 0.0
        h = x.masked_scatter(x < 0, src.flatten().repeat(2))
        return a, b, c, d, e, f, g, h


def build_index_ops():
    idx = torch.tensor([1, 3, 1, 0, 3, 3])
    mask = torch.tensor([True, False, False, True, False])
    return IndexOps().eval(), (_x(37, 5, 3), idx, _x(38, 6, 3), mask)


MODELS: Dict[str, Callable[[], Tuple[nn.Module, tuple]]] = {
    "repvgg": build_repvgg,
    "effnetv2": build_effnetv2,
    "maxvit": build_maxvit,
    "poolformer": build_poolformer,
    "attention_unet": build_attention_unet,
    "segformer": build_segformer,
    "swinv2": build_swinv2,
    "superres": build_superres,
    "unfold_fold": build_unfold_fold,
    "pooling_oddities": build_pooling_oddities,
    "t5_bias": build_t5_bias,
    "llama_block": build_llama_block,
    "causal_sdpa": build_causal_sdpa,
    "mean_pooling": build_mean_pooling,
    "beam_step": build_beam_step,
    "tcn_weight_norm": build_tcn_weight_norm,
    "nbeats": build_nbeats,
    "probsparse": build_probsparse,
    "gcn": build_gcn,
    "binner": build_binner,
    "knn": build_knn,
    "int_semantics": build_int_semantics,
    "nan_inf": build_nan_inf,
    "with_ignored": build_with_ignored,
    "stats": build_stats,
    "special_fns": build_special_fns,
    "shape_ops": build_shape_ops,
    "index_ops": build_index_ops,
}
