"""The fifth held-out zoo: families and idioms in none of the other zoos (heldout_models.py to
heldout4_models.py), to find what a model srcore has never seen breaks: detection idioms (Focus
slicing, CSP/C2f, SPPF, BiFPN), DETR queries, LeViT bias tables, transposed convs with
output_padding/groups/dilation, Conv-TasNet, a selective scan, RWKV, linear attention, a CLIP text
tower, mixture of experts, capsules, VQ-VAE, FT-Transformer, NeRF/SIREN, GAT, half and small-int
dtypes.

Each builder returns ``(module in eval mode, example inputs)``: fixed seeds, small sizes; every
model takes every import path (heldout_paths.PATHS).
"""
from __future__ import annotations

import math
import warnings
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from heldout2_models import _norm_stats, _seed


# --- detection / vision ------------------------------------------------------------------------


class ConvBnSiLU(nn.Sequential):
    def __init__(self, cin: int, cout: int, k: int = 1, s: int = 1):
        super().__init__(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU())


class Bottleneck(nn.Module):
    def __init__(self, c: int, shortcut: bool = True):
        super().__init__()
        self.cv1 = ConvBnSiLU(c, c, 3)
        self.cv2 = ConvBnSiLU(c, c, 3)
        self.add = shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    """YOLOv8 C2f: 1x1 to 2c, ``chunk(2, 1)``, bottlenecks each fed the last piece, cat all, 1x1."""

    def __init__(self, cin: int, cout: int, n: int = 2):
        super().__init__()
        self.c = cout // 2
        self.cv1 = ConvBnSiLU(cin, 2 * self.c)
        self.cv2 = ConvBnSiLU((2 + n) * self.c, cout)
        self.m = nn.ModuleList([Bottleneck(self.c) for _ in range(n)])

    def forward(self, x):
        y: List[torch.Tensor] = list(self.cv1(x).chunk(2, 1))
        for m in self.m:
            y.append(m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    """SPPF: three chained 5x5 stride-1 max pools (padding 2), cat with the input, 1x1."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.cv1 = ConvBnSiLU(cin, cin // 2)
        self.cv2 = ConvBnSiLU(cin * 2, cout)
        self.m = nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat([x, y1, y2, self.m(y2)], 1))


class YoloCSP(nn.Module):
    """YOLOv5 Focus (space to depth by ``x[..., ::2, ::2]`` slicing, cat), C2f blocks, SPPF, a
    nearest 2x upsample cat (a PAN step) and per-level 1x1 heads."""

    def __init__(self):
        super().__init__()
        self.focus = ConvBnSiLU(12, 8, 3)
        self.down = ConvBnSiLU(8, 16, 3, 2)
        self.c2f = C2f(16, 16)
        self.down2 = ConvBnSiLU(16, 24, 3, 2)
        self.sppf = SPPF(24, 24)
        self.up = nn.Upsample(scale_factor=2.0, mode="nearest")
        self.c2f_up = C2f(40, 16, 1)
        self.head_s = nn.Conv2d(16, 7, 1)
        self.head_l = nn.Conv2d(24, 7, 1)

    def forward(self, x):
        x = torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1)
        p3 = self.c2f(self.down(self.focus(x)))
        p4 = self.sppf(self.down2(p3))
        f = self.c2f_up(torch.cat([self.up(p4), p3], 1))
        return self.head_s(f).flatten(2), self.head_l(p4).flatten(2)


def build_yolo_csp():
    _seed(501)
    m = YoloCSP()
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 3, 16, 16),)


class BiFPN(nn.Module):
    """BiFPN fast normalised fusion (``relu`` weights / (sum + eps)), depthwise-separable convs,
    bicubic upsampling (to a size; by a scale with align_corners), adaptive avg/max pools to
    non-divisible sizes (8x10 -> 3x4, 4x5 -> 3x2)."""

    def __init__(self, c: int = 8):
        super().__init__()
        self.w_td = nn.Parameter(torch.tensor([1.0, 0.4]))
        self.w_out = nn.Parameter(torch.tensor([0.7, -0.2, 1.3]))
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False)
        self.pw = nn.Conv2d(c, c, 1)
        self.bn = nn.BatchNorm2d(c)
        self.eps = 1e-4

    def sep(self, x):
        return F.silu(self.bn(self.pw(self.dw(x))))

    def forward(self, p3, p4):
        w = F.relu(self.w_td)
        w = w / (w.sum() + self.eps)
        up = F.interpolate(p4, size=p3.shape[-2:], mode="bicubic", align_corners=False)
        td = self.sep(w[0] * p3 + w[1] * up)
        w2 = F.relu(self.w_out)
        w2 = w2 / (torch.sum(w2, dim=0) + self.eps)
        down = F.max_pool2d(td, 3, 2, 1)
        out4 = self.sep(w2[0] * p4 + w2[1] * down + w2[2] * F.interpolate(td, scale_factor=0.5, mode="bilinear"))
        up2 = F.interpolate(out4, scale_factor=2.0, mode="bicubic", align_corners=True)
        return td, out4, up2, F.adaptive_avg_pool2d(td, (3, 4)), F.adaptive_max_pool2d(out4, (3, 2))


def build_bifpn():
    _seed(502)
    m = BiFPN()
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 8, 8, 10), torch.randn(2, 8, 4, 5))


class TransposedConvs(nn.Module):
    """``ConvTranspose2d`` with output_padding, groups and dilation; a ``ConvTranspose1d`` with
    stride 3 and output_padding 2; a 3-D one; ``F.conv_transpose2d`` with a weight buffer."""

    def __init__(self):
        super().__init__()
        self.t1 = nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1)
        self.t2 = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=2, output_padding=1, groups=2, dilation=2)
        self.t3 = nn.ConvTranspose1d(6, 3, 4, stride=3, padding=1, output_padding=2, bias=False)
        self.t4 = nn.ConvTranspose3d(2, 2, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), output_padding=(0, 1, 0))
        self.register_buffer("w", torch.randn(6, 2, 2, 3))

    def forward(self, x):
        a = F.relu(self.t1(x))
        b = self.t2(a)
        c = self.t3(x.flatten(2))
        d = self.t4(x[:, :4].reshape(2, 2, 2, 5, 6))
        e = F.conv_transpose2d(x, self.w, stride=(1, 2), padding=(0, 1), output_padding=(0, 1), groups=2)
        return b, c, d, e


def build_transposed_convs():
    _seed(503)
    return TransposedConvs().eval(), (torch.randn(2, 6, 5, 6),)


class DETRDecoder(nn.Module):
    """DETR: learned object queries (an ``nn.Embedding`` weight repeated over the batch), a
    positional encoding added to keys/queries, self- then cross-attention (``nn.MultiheadAttention``
    batch_first), FFN, class logits and ``sigmoid`` boxes of an MLP."""

    def __init__(self, d: int = 16, nq: int = 5):
        super().__init__()
        self.query = nn.Embedding(nq, d)
        self.proj = nn.Conv2d(8, d, 1)
        self.self_attn = nn.MultiheadAttention(d, 2, batch_first=True)
        self.cross = nn.MultiheadAttention(d, 2, batch_first=True)
        self.n1, self.n2, self.n3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.ffn = nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, d))
        self.cls = nn.Linear(d, 4)
        self.box = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 4))

    def pos(self, h: int, w: int, d: int):
        y = torch.arange(h, dtype=torch.float32).unsqueeze(1).expand(h, w)
        x = torch.arange(w, dtype=torch.float32).unsqueeze(0).expand(h, w)
        dim_t = 10000 ** (torch.arange(d // 4, dtype=torch.float32) * 4 / d)
        py = y.flatten()[:, None] / dim_t
        px = x.flatten()[:, None] / dim_t
        return torch.cat([py.sin(), py.cos(), px.sin(), px.cos()], 1)

    def forward(self, feat):
        b = feat.shape[0]
        mem = self.proj(feat)
        pos = self.pos(mem.shape[2], mem.shape[3], mem.shape[1])
        mem = mem.flatten(2).permute(0, 2, 1)
        q = self.query.weight.unsqueeze(0).repeat(b, 1, 1)
        t = torch.zeros_like(q)
        a = self.self_attn(t + q, t + q, t)[0]
        t = self.n1(t + a)
        a = self.cross(t + q, mem + pos, mem, need_weights=False)[0]
        t = self.n2(t + a)
        t = self.n3(t + self.ffn(t))
        return self.cls(t), self.box(t).sigmoid()


def build_detr_decoder():
    _seed(504)
    return DETRDecoder().eval(), (torch.randn(2, 8, 3, 4),)


class LeViTAttention(nn.Module):
    """LeViT attention: a bias table per head gathered by an index buffer of relative offsets
    (``self.ab[:, self.idx]``), hardswish on the values, BN-folded linears (Linear + BatchNorm1d on
    flattened tokens)."""

    def __init__(self, d: int = 16, heads: int = 2, res: int = 3):
        super().__init__()
        self.h, self.kd = heads, 4
        self.qkv = nn.Linear(d, heads * 4 * 3)
        self.bn = nn.BatchNorm1d(heads * 12)
        pts = [(i, j) for i in range(res) for j in range(res)]
        offsets: Dict[Tuple[int, int], int] = {}
        idxs = []
        for p1 in pts:
            for p2 in pts:
                off = (abs(p1[0] - p2[0]), abs(p1[1] - p2[1]))
                if off not in offsets:
                    offsets[off] = len(offsets)
                idxs.append(offsets[off])
        self.ab = nn.Parameter(torch.randn(heads, len(offsets)))
        self.register_buffer("idx", torch.tensor(idxs, dtype=torch.long).view(res * res, res * res))
        self.proj = nn.Sequential(nn.Hardswish(), nn.Linear(heads * 4, d))

    def forward(self, x):
        b, n, _ = x.shape
        qkv = self.bn(self.qkv(x).flatten(0, 1)).view(b, n, self.h, -1)
        q, k, v = qkv.split([self.kd, self.kd, self.kd], dim=3)
        q, k, v = q.permute(0, 2, 1, 3), k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)
        attn = (q @ k.transpose(-2, -1)) * self.kd ** -0.5 + self.ab[:, self.idx]
        x = (attn.softmax(-1) @ v).transpose(1, 2).reshape(b, n, self.h * self.kd)
        return self.proj(x)


def build_levit_attention():
    _seed(505)
    m = LeViTAttention()
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 9, 16),)


# --- audio ---------------------------------------------------------------------------------------


class GlobalLN(nn.Module):
    """Conv-TasNet gLN: mean/var over (channels, time) per sample, per-channel affine."""

    def __init__(self, c: int):
        super().__init__()
        self.gamma = nn.Parameter(torch.rand(1, c, 1) + 0.5)
        self.beta = nn.Parameter(torch.randn(1, c, 1) * 0.1)

    def forward(self, x):
        mean = x.mean(dim=(1, 2), keepdim=True)
        var = ((x - mean) ** 2).mean(dim=(1, 2), keepdim=True)
        return self.gamma * (x - mean) / torch.pow(var + 1e-8, 0.5) + self.beta


class CumulativeLN(nn.Module):
    """cLN: statistics of all frames up to t by ``cumsum`` over time."""

    def forward(self, x):
        c, t = x.shape[1], x.shape[2]
        s = x.sum(1, keepdim=True).cumsum(2)
        s2 = (x * x).sum(1, keepdim=True).cumsum(2)
        cnt = torch.arange(1, t + 1, dtype=x.dtype, device=x.device).view(1, 1, t) * c
        mean = s / cnt
        var = s2 / cnt - mean * mean
        return (x - mean) / (var.clamp_min(0) + 1e-5).sqrt()


class TasBlock(nn.Module):
    def __init__(self, c: int, h: int, d: int, causal: bool):
        super().__init__()
        self.inp = nn.Conv1d(c, h, 1)
        self.p1 = nn.PReLU()
        self.n1: nn.Module = CumulativeLN() if causal else GlobalLN(h)
        self.dw = nn.Conv1d(h, h, 3, padding=d, dilation=d, groups=h)
        self.p2 = nn.PReLU(h)
        self.n2 = GlobalLN(h)
        self.res = nn.Conv1d(h, c, 1)
        self.skip = nn.Conv1d(h, c, 1)

    def forward(self, x):
        y = self.n2(self.p2(self.dw(self.n1(self.p1(self.inp(x))))))
        return x + self.res(y), self.skip(y)


class ConvTasNet(nn.Module):
    """Conv-TasNet: a conv1d encoder (stride L/2, ReLU), a bottleneck, dilated depthwise-separable
    blocks (PReLU, gLN or cLN) with skip sums, sigmoid masks for 2 sources, a ConvTranspose1d
    decoder; a GLU gate on the bottleneck."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Conv1d(1, 16, 8, stride=4, bias=False)
        self.bottleneck = nn.Conv1d(16, 16, 1)
        self.blocks = nn.ModuleList([TasBlock(8, 12, d, causal=(d == 2)) for d in (1, 2, 4)])
        self.mask = nn.Conv1d(8, 32, 1)
        self.dec = nn.ConvTranspose1d(16, 1, 8, stride=4, bias=False)

    def forward(self, wav):
        w = F.relu(self.enc(wav.unsqueeze(1)))
        x = F.glu(self.bottleneck(w), dim=1)
        skip = torch.zeros_like(x)
        for blk in self.blocks:
            x, s = blk(x)
            skip = skip + s
        m = torch.sigmoid(self.mask(F.prelu(skip, torch.tensor([0.25])))).view(w.shape[0], 2, 16, -1)
        est = w.unsqueeze(1) * m
        return self.dec(est.flatten(0, 1)).view(w.shape[0], 2, -1)


def build_conv_tasnet():
    _seed(506)
    return ConvTasNet().eval(), (torch.randn(2, 64),)


# --- sequence models beyond attention ------------------------------------------------------------


class SelectiveScan(nn.Module):
    """A Mamba block: in-proj to (x, z), causal depthwise conv1d, SiLU, data-dependent dt
    (softplus), B, C; the selective scan as a Python loop over time (``exp(dt * A)``, einsum),
    gated by ``silu(z)``, out-proj."""

    def __init__(self, d: int = 8, n: int = 4):
        super().__init__()
        self.inp = nn.Linear(d, 2 * d)
        self.conv = nn.Conv1d(d, d, 3, padding=2, groups=d)
        self.x_proj = nn.Linear(d, 1 + 2 * n)
        self.dt_proj = nn.Linear(1, d)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, n + 1, dtype=torch.float32)).repeat(d, 1))
        self.D = nn.Parameter(torch.ones(d))
        self.out = nn.Linear(d, d)
        self.n = n

    def forward(self, u):
        b, l, d = u.shape
        x, z = self.inp(u).chunk(2, dim=-1)
        x = F.silu(self.conv(x.transpose(1, 2))[..., :l].transpose(1, 2))
        dbc = self.x_proj(x)
        dt, B, C = torch.split(dbc, [1, self.n, self.n], dim=-1)
        dt = F.softplus(self.dt_proj(dt))
        A = -torch.exp(self.A_log)
        dA = torch.exp(dt.unsqueeze(-1) * A)  # b l d n
        dBx = dt.unsqueeze(-1) * B.unsqueeze(2) * x.unsqueeze(-1)
        h = torch.zeros(b, d, self.n)
        ys: List[torch.Tensor] = []
        for t in range(l):
            h = dA[:, t] * h + dBx[:, t]
            ys.append(torch.einsum("bdn,bn->bd", h, C[:, t]))
        y = torch.stack(ys, dim=1) + x * self.D
        return self.out(y * F.silu(z))


def build_selective_scan():
    _seed(507)
    return SelectiveScan().eval(), (torch.randn(2, 6, 8),)


class RWKVTimeMix(nn.Module):
    """RWKV time mixing: token shift by ``nn.ZeroPad2d((0, 0, 1, -1))``, lerp-mixed k/v/r, the WKV
    recurrence over time with a running max for stability (``torch.maximum``, ``exp``), sigmoid
    receptance; channel mixing with squared relu."""

    def __init__(self, d: int = 8):
        super().__init__()
        self.shift = nn.ZeroPad2d((0, 0, 1, -1))
        self.mix_k = nn.Parameter(torch.rand(1, 1, d))
        self.mix_v = nn.Parameter(torch.rand(1, 1, d))
        self.mix_r = nn.Parameter(torch.rand(1, 1, d))
        self.decay = nn.Parameter(torch.randn(d) * 0.5)
        self.first = nn.Parameter(torch.randn(d) * 0.5)
        self.k, self.v, self.r, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.ck, self.cv = nn.Linear(d, 16, bias=False), nn.Linear(16, d, bias=False)
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        xx = self.shift(x)
        k = self.k(x * self.mix_k + xx * (1 - self.mix_k))
        v = self.v(x * self.mix_v + xx * (1 - self.mix_v))
        r = torch.sigmoid(self.r(x * self.mix_r + xx * (1 - self.mix_r)))
        w = -torch.exp(self.decay)
        u = self.first
        b, t, d = x.shape
        aa = torch.zeros(b, d)
        bb = torch.zeros(b, d)
        pp = torch.full((b, d), -1e38)
        outs: List[torch.Tensor] = []
        for i in range(t):
            kk, vv = k[:, i], v[:, i]
            ww = u + kk
            q = torch.maximum(pp, ww)
            e1, e2 = torch.exp(pp - q), torch.exp(ww - q)
            outs.append((e1 * aa + e2 * vv) / (e1 * bb + e2))
            ww = pp + w
            q = torch.maximum(ww, kk)
            e1, e2 = torch.exp(ww - q), torch.exp(kk - q)
            aa = e1 * aa + e2 * vv
            bb = e1 * bb + e2
            pp = q
        y = x + self.o(r * torch.stack(outs, 1))
        h = self.ln(y)
        return y + self.cv(torch.square(torch.relu(self.ck(h))))


def build_rwkv():
    _seed(508)
    return RWKVTimeMix().eval(), (torch.randn(2, 5, 8),)


class LinearAttention(nn.Module):
    """Causal linear attention (Katharopoulos): ``elu(x) + 1`` feature maps, prefix sums of
    ``k v^T`` and of k by ``cumsum`` over time, einsum contractions; a non-causal variant too."""

    def __init__(self, d: int = 8, heads: int = 2):
        super().__init__()
        self.h = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.h, d // self.h).unbind(2)
        q, k = F.elu(q) + 1, F.elu(k) + 1
        kv = torch.einsum("bthd,bthe->bthde", k, v).cumsum(1)
        ks = k.cumsum(1)
        num = torch.einsum("bthd,bthde->bthe", q, kv)
        den = torch.einsum("bthd,bthd->bth", q, ks).unsqueeze(-1) + 1e-6
        causal = (num / den).reshape(b, t, d)
        kv_all = torch.einsum("bthd,bthe->bhde", k, v)
        full = torch.einsum("bthd,bhde,bth->bthe", q, kv_all, 1 / (torch.einsum("bthd,bhd->bth", q, k.sum(1))))
        return self.out(causal), full.flatten(2)


def build_linear_attention():
    _seed(509)
    return LinearAttention().eval(), (torch.randn(2, 7, 8),)


class CLIPText(nn.Module):
    """A CLIP text tower: token + position embeddings, a causal mask ``torch.full(-inf).triu_(1)``,
    pre-norm attention with quick-gelu (``x * sigmoid(1.702 x)``), final LayerNorm, pooled at the
    eos token (``argmax`` of the ids) by advanced indexing, projection, L2 normalised."""

    def __init__(self, vocab: int = 30, d: int = 16, ctx: int = 7):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(ctx, d) * 0.1)
        self.ln1, self.ln2, self.lnf = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.proj = nn.Parameter(torch.randn(d, 12) * d ** -0.5)
        self.heads = 2

    def forward(self, ids):
        b, t = ids.shape
        x = self.tok(ids) + self.pos[:t]
        mask = torch.full((t, t), float("-inf")).triu_(1)
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask, -1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(b, t, -1))
        h = self.fc1(self.ln2(x))
        x = x + self.fc2(h * torch.sigmoid(1.702 * h))
        x = self.lnf(x)
        pooled = x[torch.arange(b), ids.argmax(dim=-1)] @ self.proj
        return pooled / pooled.norm(p=2, dim=-1, keepdim=True)


def build_clip_text():
    _seed(510)
    ids = torch.tensor([[3, 7, 9, 29, 0, 0, 0], [5, 2, 8, 11, 4, 29, 0]])
    return CLIPText().eval(), (ids,)


# --- routing and sparsity ----------------------------------------------------------------------


class MoE(nn.Module):
    """A mixture of experts: top-2 gating, softmax over the selected logits, dense combine weights
    by ``scatter``; per expert a fixed-capacity token choice (``topk`` of its gate over tokens),
    ``index_select`` of those tokens, the expert MLP, and ``index_add`` (weighted) back; plus a
    ``scatter_add`` load count and the auxiliary balance loss."""

    def __init__(self, d: int = 8, e: int = 4, cap: int = 4):
        super().__init__()
        self.gate = nn.Linear(d, e, bias=False)
        self.w1 = nn.ModuleList([nn.Linear(d, 16) for _ in range(e)])
        self.w2 = nn.ModuleList([nn.Linear(16, d) for _ in range(e)])
        self.cap = cap

    def forward(self, x):
        b, t, d = x.shape
        tokens = x.reshape(-1, d)
        logits = self.gate(tokens)
        topv, topi = logits.topk(2, dim=-1)
        combine = torch.zeros_like(logits).scatter(1, topi, torch.softmax(topv, dim=-1))
        out = torch.zeros_like(tokens)
        i = 0
        for w1, w2 in zip(self.w1, self.w2):
            wsel, sel = combine[:, i].topk(self.cap)
            h = w2(F.gelu(w1(tokens.index_select(0, sel))))
            out = out.index_add(0, sel, h * wsel.unsqueeze(1))
            i += 1
        load = torch.zeros(logits.shape[1]).scatter_add(0, topi.flatten(), torch.ones(topi.numel()))
        aux = (load / topi.numel() * torch.softmax(logits, -1).mean(0)).sum() * logits.shape[1]
        return out.view(b, t, d), load, aux


def build_moe():
    _seed(511)
    return MoE().eval(), (torch.randn(2, 5, 8),)


def squash(s, dim: int = -1):
    n2 = (s * s).sum(dim, keepdim=True)
    return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8)


class CapsNet(nn.Module):
    """Capsules: primary capsules from a conv (view + squash), prediction vectors by einsum with a
    weight per (in, out) capsule pair, three routing iterations (softmax over out capsules,
    agreement by einsum) unrolled from a Python ``for``; lengths (``linalg.vector_norm``) as
    class scores."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 16, 3, 2)
        self.W = nn.Parameter(torch.randn(36, 3, 6, 4) * 0.3)  # in caps, out caps, out dim, in dim
        self.iters = 3

    def forward(self, x):
        u = self.conv(x)
        b = u.shape[0]
        u = squash(u.view(b, 4, 4, -1).permute(0, 1, 3, 2).reshape(b, -1, 4))  # (b, 36 in caps, 4)
        u_hat = torch.einsum("iodk,bik->biod", self.W, u)
        logits = torch.zeros(b, u_hat.shape[1], u_hat.shape[2])
        v = u_hat.mean(1)
        for r in range(self.iters):
            c = F.softmax(logits, dim=2)
            v = squash(torch.einsum("bio,biod->bod", c, u_hat))
            if r < self.iters - 1:
                logits = logits + torch.einsum("biod,bod->bio", u_hat, v)
        return torch.linalg.vector_norm(v, dim=-1), v


def build_capsnet():
    _seed(512)
    return CapsNet().eval(), (torch.randn(2, 1, 7, 7),)


class VQVAE(nn.Module):
    """VQ-VAE: conv encoder, distances to a codebook (``|z|^2 - 2 z.e + |e|^2``), ``argmin``,
    ``F.embedding`` lookup, straight-through ``z + (q - z).detach()``, commitment loss, a
    ``one_hot`` code histogram and perplexity, a transposed-conv decoder."""

    def __init__(self, k: int = 12, d: int = 4):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, 8, 4, 2, 1), nn.ReLU(), nn.Conv2d(8, d, 1))
        self.codebook = nn.Embedding(k, d)
        self.dec = nn.Sequential(nn.ConvTranspose2d(d, 8, 4, 2, 1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))

    def forward(self, x):
        z = self.enc(x)
        b, d, h, w = z.shape
        flat = z.permute(0, 2, 3, 1).reshape(-1, d)
        dist = (flat ** 2).sum(1, keepdim=True) - 2 * flat @ self.codebook.weight.t() + \
            (self.codebook.weight ** 2).sum(1)
        codes = dist.argmin(1)
        q = F.embedding(codes, self.codebook.weight).view(b, h, w, d).permute(0, 3, 1, 2)
        loss = F.mse_loss(q, z.detach()) + 0.25 * F.mse_loss(z, q.detach())
        q = z + (q - z).detach()
        probs = F.one_hot(codes, self.codebook.num_embeddings).float().mean(0)
        perplexity = torch.exp(-(probs * torch.log(probs + 1e-10)).sum())
        return self.dec(q), codes.view(b, h, w), loss, perplexity


def build_vqvae():
    _seed(513)
    return VQVAE().eval(), (torch.randn(2, 3, 8, 8),)


# --- tabular, implicit, graphs ----------------------------------------------------------------


class FTTransformer(nn.Module):
    """FT-Transformer: numeric features tokenised per feature (``x[..., None] * W + b``),
    categorical ones by one embedding table with per-column offsets, a cls token, one
    ``nn.TransformerEncoderLayer`` (pre-norm, batch_first, gelu), the cls output to a head."""

    def __init__(self, n_num: int = 5, cards=(3, 4, 6), d: int = 8):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n_num, d))
        self.b = nn.Parameter(torch.randn(n_num, d) * 0.1)
        self.register_buffer("offsets", torch.tensor([0] + list(cards[:-1])).cumsum(0))
        self.emb = nn.Embedding(sum(cards), d)
        self.cls = nn.Parameter(torch.randn(1, 1, d))
        self.layer = nn.TransformerEncoderLayer(d, 2, 16, dropout=0.0, activation="gelu", batch_first=True,
                                                norm_first=True)
        self.head = nn.Sequential(nn.LayerNorm(d), nn.ReLU(), nn.Linear(d, 3))

    def forward(self, x_num, x_cat):
        t_num = x_num[..., None] * self.w + self.b
        t_cat = self.emb(x_cat + self.offsets[None])
        t = torch.cat([self.cls.expand(x_num.shape[0], -1, -1), t_num, t_cat], 1)
        return self.head(self.layer(t)[:, 0])


def build_ft_transformer():
    _seed(514)
    g = torch.Generator().manual_seed(5140)
    cat = torch.stack([torch.randint(0, c, (3,), generator=g) for c in (3, 4, 6)], 1)
    return FTTransformer().eval(), (torch.randn(3, 5), cat)


class NeRFSiren(nn.Module):
    """NeRF positional encoding (sin/cos of ``2**k * pi * x`` for k < 4, stacked then flattened),
    an MLP with a skip cat, density by softplus and colour by sigmoid; a SIREN branch
    (``sin(30 * W x)`` first layer, then ``sin`` layers) on the raw coordinates."""

    def __init__(self, L: int = 4):
        super().__init__()
        self.register_buffer("freqs", (2.0 ** torch.arange(L)) * math.pi)
        pe = 3 + 3 * 2 * L
        self.l1, self.l2 = nn.Linear(pe, 32), nn.Linear(32, 32)
        self.l3 = nn.Linear(32 + pe, 32)
        self.sigma, self.rgb = nn.Linear(32, 1), nn.Linear(32, 3)
        self.s1, self.s2, self.s3 = nn.Linear(3, 16), nn.Linear(16, 16), nn.Linear(16, 1)

    def forward(self, x):
        xf = x[..., None] * self.freqs  # (n, 3, L)
        enc = torch.cat([x, torch.stack([xf.sin(), xf.cos()], -1).flatten(-3)], -1)
        h = F.relu(self.l2(F.relu(self.l1(enc))))
        h = F.relu(self.l3(torch.cat([h, enc], -1)))
        s = torch.sin(30.0 * self.s1(x))
        s = self.s3(torch.sin(self.s2(s)))
        return F.softplus(self.sigma(h)), torch.sigmoid(self.rgb(h)), s


def build_nerf_siren():
    _seed(515)
    return NeRFSiren().eval(), (torch.rand(6, 3) * 2 - 1,)


class GAT(nn.Module):
    """GAT over an edge index: per-edge scores ``leaky_relu(a_src[src] + a_dst[dst])``, a scatter
    softmax over each node's incoming edges (``scatter_reduce(amax, include_self=False)``, exp,
    ``index_add`` of the sums, divided back), messages ``index_add``-ed to the targets; 2 heads
    concatenated, then an elu."""

    def __init__(self, cin: int = 6, d: int = 4, heads: int = 2):
        super().__init__()
        self.lin = nn.Linear(cin, heads * d, bias=False)
        self.a_src = nn.Parameter(torch.randn(1, heads, d))
        self.a_dst = nn.Parameter(torch.randn(1, heads, d))
        self.bias = nn.Parameter(torch.randn(heads * d) * 0.1)
        self.h, self.d = heads, d

    def forward(self, x, edge_index):
        n = x.shape[0]
        h = self.lin(x).view(n, self.h, self.d)
        src, dst = edge_index[0], edge_index[1]
        e = F.leaky_relu((h * self.a_src).sum(-1)[src] + (h * self.a_dst).sum(-1)[dst], 0.2)  # E, H
        idx = dst.unsqueeze(1).expand_as(e)
        emax = torch.full((n, self.h), float("-inf")).scatter_reduce(0, idx, e, "amax", include_self=False)
        ex = torch.exp(e - emax[dst])
        den = torch.zeros(n, self.h).index_add(0, dst, ex)
        alpha = ex / den[dst]
        out = torch.zeros(n, self.h, self.d).index_add(0, dst, h[src] * alpha.unsqueeze(-1))
        return F.elu(out.reshape(n, -1) + self.bias)


def build_gat():
    _seed(516)
    src = torch.tensor([0, 1, 2, 3, 4, 0, 2, 1, 3, 4, 0, 1, 2, 3, 4])
    dst = torch.tensor([1, 2, 3, 4, 0, 2, 0, 3, 1, 2, 0, 1, 2, 3, 4])  # self loops: every node has an edge in
    return GAT().eval(), (torch.randn(5, 6), torch.stack([src, dst]))


# --- dtypes -------------------------------------------------------------------------------------


class HalfNet(nn.Module):
    """A model in ``dtype`` (float16 or bfloat16): weights and inputs, conv, batch norm, linear,
    layer norm, gelu, softmax, a mean; the logits cast back to float32."""

    def __init__(self, dtype: torch.dtype):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 6)
        self.ln = nn.LayerNorm(6)
        self.to(dtype)

    def forward(self, x):
        y = F.relu(self.bn(self.conv(x)))
        y = y.mean((2, 3))
        z = F.gelu(self.ln(self.fc(y)))
        return z, torch.softmax(z.float(), -1)


def build_float16():
    _seed(517)
    m = HalfNet(torch.float16)
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 3, 6, 6).half(),)


def build_bfloat16():
    _seed(518)
    m = HalfNet(torch.bfloat16)
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 3, 6, 6).to(torch.bfloat16),)


class SmallInts(nn.Module):
    """int16, uint8 and bool inputs: uint8 pixels to float (/255), int16 ids offset and used as
    embedding indices, a bool mask input to ``masked_fill`` and ``where``, ``~`` and ``&`` on bools,
    integer sums keep their dtype rules (int16 sum is int64), ``bitwise_and`` / shifts on uint8."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 4)

    def forward(self, img, ids, mask):
        x = img.float() / 255.0
        e = self.emb((ids + 3).long())
        m = mask & (ids > 0)
        y = x.mean(1).masked_fill(~mask, -1.0)
        z = torch.where(m.unsqueeze(-1), e, torch.zeros_like(e))
        lo = torch.bitwise_and(img, 15) + (img >> 4)
        return y, z, ids.sum(1), (ids * 2 - 1).to(torch.int16), lo, m.sum(-1), img.max(1)[0]


def build_small_ints():
    g = torch.Generator().manual_seed(519)
    img = torch.randint(0, 256, (2, 3, 5), generator=g, dtype=torch.uint8)
    ids = torch.randint(-3, 16, (2, 5), generator=g, dtype=torch.int16)
    mask = torch.rand(2, 5, generator=g) > 0.4
    return SmallInts().eval(), (img, ids, mask)


# --- quantized: dynamic (qint8 and float16) and quantization-aware training ------------------------


class DynTagger(nn.Module):
    """A tagger for ``quantize_dynamic``: an embedding, a bidirectional batch-first GRU, a 2-layer
    time-major LSTM, two Linears (one without bias); returns the tags and both final states."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.gru = nn.GRU(8, 12, batch_first=True, bidirectional=True)
        self.lstm = nn.LSTM(24, 6, num_layers=2)
        self.fc = nn.Linear(6, 5)
        self.fc2 = nn.Linear(5, 3, bias=False)

    def forward(self, ids):
        y, h = self.gru(self.emb(ids))
        z, (hn, cn) = self.lstm(y.transpose(0, 1))
        return self.fc2(torch.relu(self.fc(z))), h, hn


def build_dynamic_tagger(dtype: torch.dtype):
    """:class:`DynTagger` through ``quantize_dynamic`` (Linear, LSTM and GRU) to ``dtype`` (qint8 or
    float16; the caller sets torch's quantized engine), and its example ids."""
    import torch.ao.quantization as tq

    _seed(520)
    m = DynTagger().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qm = tq.quantize_dynamic(m, {nn.Linear, nn.LSTM, nn.GRU}, dtype=dtype)
    ids = torch.randint(0, 20, (2, 7), generator=torch.Generator().manual_seed(5200))
    return qm, (ids,)


class QATNet(nn.Module):
    """Eager quantization-aware training: conv+bn+relu and a grouped strided conv+bn fused for QAT
    (``fuse_modules_qat``), adaptive average pool, Linear."""

    def __init__(self):
        super().__init__()
        import torch.ao.quantization as tq

        self.q, self.dq = tq.QuantStub(), tq.DeQuantStub()
        self.conv, self.bn, self.relu = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, stride=2, groups=2), nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = self.bn2(self.conv2(self.relu(self.bn(self.conv(self.q(x))))))
        return self.dq(self.fc(torch.flatten(self.pool(x), 1)))


def build_qat(engine: str, fx: bool = False):
    """:class:`QATNet` (eager) or an FX-prepared conv/bn/relu/linear net, trained three SGD steps
    with fake quantization under ``engine``'s default QAT qconfig, converted; and an example input."""
    import torch.ao.quantization as tq
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_qat_fx

    _seed(521)
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(5210))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if fx:
            m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(288, 4)).train()
            m = prepare_qat_fx(m, tq.get_default_qat_qconfig_mapping(engine), (x,))
        else:
            m = QATNet().train()
            m.qconfig = tq.get_default_qat_qconfig(engine)
            tq.fuse_modules_qat(m, [["conv", "bn", "relu"], ["conv2", "bn2"]], inplace=True)
            tq.prepare_qat(m, inplace=True)
        opt = torch.optim.SGD(m.parameters(), lr=0.01)
        for s in range(3):
            loss = m(torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(s))).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        m.eval()
        return (convert_fx(m) if fx else tq.convert(m)), (x,)


MODELS: Dict[str, Callable[[], Tuple[nn.Module, tuple]]] = {
    "yolo_csp": build_yolo_csp,
    "detr_decoder": build_detr_decoder,
    "transposed_convs": build_transposed_convs,
    "bifpn": build_bifpn,
    "levit_attention": build_levit_attention,
    "conv_tasnet": build_conv_tasnet,
    "selective_scan": build_selective_scan,
    "rwkv": build_rwkv,
    "linear_attention": build_linear_attention,
    "clip_text": build_clip_text,
    "moe": build_moe,
    "capsnet": build_capsnet,
    "vqvae": build_vqvae,
    "ft_transformer": build_ft_transformer,
    "nerf_siren": build_nerf_siren,
    "gat": build_gat,
    "float16": build_float16,
    "bfloat16": build_bfloat16,
    "small_ints": build_small_ints,
}
