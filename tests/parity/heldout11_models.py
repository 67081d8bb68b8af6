"""torch models of the eleventh held-out zoo (test_heldout11_zoo.py): families zoos 1-10 leave out,
small, seeded. Each factory gives ``(module in eval mode, example inputs)``.

A deformable-ish convolution (offsets and a modulation mask from a conv, ``grid_sample`` per kernel
tap), a DeiT with class + distillation tokens and bicubic position-embedding interpolation, PSPNet's
pyramid pooling (non-dividing adaptive pools, ``interpolate(size=..., align_corners=True)``),
DeepLab's ASPP with an image-pooling branch, CBAM + ECA + coordinate attention, Transformer-XL's
relative attention (the pad-and-view ``rel_shift``, memories), a Glow step (ActNorm, LU-parametrised
invertible 1x1 conv, affine coupling, log-determinants), CRF Viterbi decoding (int64 path), xDeepFM's
CIN + FM + DIN's masked attention over a behaviour sequence, PixelCNN masked gated convs, log-domain
Sinkhorn, ECAPA-TDNN (SE-Res2Net, attentive statistics pooling), Autoformer's auto-correlation (rfft,
top-k delays, gather-rolled aggregation), a neural ODE by fixed-step RK4, HorNet's recursive gated
conv, involution, SchNet's continuous-filter convolution, a DiT block (adaLN-Zero, unpatchify), a
RetNet retention layer (decay masks, group norm), RT-DETR-style NMS-free decoding (top-k over
queries x classes, int64 labels, a bool keep mask), a loss head (cross entropy with ignore_index, class
weights and label smoothing, NLL, BCE with logits); FX- and eager-quantized MBConv-SE and TCN.
"""
from __future__ import annotations

import math
from typing import List, Tuple

import torch
import torch.nn.functional as F
from torch import nn


def _seed(s):
    torch.manual_seed(s)


class DeformSample(nn.Module):
    """Modulated deformable 3x3 conv by hand: per tap an offset field and a mask, the input sampled
    there with ``grid_sample`` (bilinear, zeros padding), the taps stacked and mixed by a 1x1 conv."""

    def __init__(self, c=6, out=8):
        super().__init__()
        self.off = nn.Conv2d(c, 27, 3, padding=1)
        nn.init.normal_(self.off.weight, std=0.05)
        self.mix = nn.Conv2d(9 * c, out, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        o = self.off(x)
        dy, dx, m = o[:, :9], o[:, 9:18], torch.sigmoid(o[:, 18:])
        ys = torch.arange(h, dtype=x.dtype).view(1, 1, h, 1)
        xs = torch.arange(w, dtype=x.dtype).view(1, 1, 1, w)
        ky = torch.tensor([-1.0, -1, -1, 0, 0, 0, 1, 1, 1]).view(1, 9, 1, 1)
        kx = torch.tensor([-1.0, 0, 1, -1, 0, 1, -1, 0, 1]).view(1, 9, 1, 1)
        py = (ys + ky + dy) * (2.0 / (h - 1)) - 1     # [B, 9, H, W] in [-1, 1] (align_corners=True)
        px = (xs + kx + dx) * (2.0 / (w - 1)) - 1
        grid = torch.stack([px, py], -1).view(b, 9 * h, w, 2)
        s = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=True)   # [B, C, 9H, W]
        s = s.view(b, c, 9, h, w) * m.unsqueeze(1)
        return self.mix(s.reshape(b, c * 9, h, w))


def deform_sample():
    _seed(1)
    return DeformSample().eval(), (torch.randn(2, 6, 7, 9),)


class DeiTInterp(nn.Module):
    """Class and distillation tokens, a 4x4 learned position grid interpolated (bicubic) to the input's
    patch grid, one pre-LN block, the two heads averaged."""

    def __init__(self, d=32, patch=4, grid=4):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.1)
        self.dist = nn.Parameter(torch.randn(1, 1, d) * 0.1)
        self.pos = nn.Parameter(torch.randn(1, 2 + grid * grid, d) * 0.1)
        self.grid = grid
        self.block = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True, norm_first=True)
        self.norm = nn.LayerNorm(d)
        self.head, self.head_dist = nn.Linear(d, 5), nn.Linear(d, 5)

    def forward(self, img):
        t = self.patch(img)
        b, d, gh, gw = t.shape
        pe = self.pos[:, 2:].reshape(1, self.grid, self.grid, d).permute(0, 3, 1, 2)
        pe = F.interpolate(pe, size=(gh, gw), mode="bicubic", align_corners=False).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(b, -1, -1), self.dist.expand(b, -1, -1), t.flatten(2).transpose(1, 2)], 1)
        x = x + torch.cat([self.pos[:, :2], pe], 1)
        x = self.norm(self.block(x))
        return (self.head(x[:, 0]) + self.head_dist(x[:, 1])) / 2


def deit_interp():
    _seed(2)
    return DeiTInterp().eval(), (torch.randn(2, 3, 24, 20),)


class PSP(nn.Module):
    """Pyramid pooling: adaptive average pools to 1, 2, 3, 6 of a 10x14 map (3 and 6 do not divide it),
    1x1 conv + BN + ReLU each, upsampled bilinearly (align_corners=True) to the map's size, concatenated."""

    def __init__(self, c=8, bins=(1, 2, 3, 6)):
        super().__init__()
        self.bins = bins
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, 2, 1), nn.BatchNorm2d(c), nn.ReLU())
        self.stages = nn.ModuleList(nn.Sequential(nn.Conv2d(c, 4, 1, bias=False), nn.BatchNorm2d(4), nn.ReLU())
                                    for _ in bins)
        self.head = nn.Conv2d(c + 4 * len(bins), 3, 3, padding=1)
        for mod in self.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)

    def forward(self, img):
        x = self.stem(img)
        h, w = x.shape[2], x.shape[3]
        feats = [x] + [F.interpolate(st(F.adaptive_avg_pool2d(x, b)), size=(h, w), mode="bilinear", align_corners=True)
                       for b, st in zip(self.bins, self.stages)]
        return F.interpolate(self.head(torch.cat(feats, 1)), scale_factor=2.0, mode="bilinear", align_corners=False)


def psp():
    _seed(3)
    return PSP().eval(), (torch.randn(2, 3, 20, 28),)


class ASPP(nn.Module):
    """DeepLab-v3 ASPP: a 1x1 branch, three dilated 3x3 branches (rates 2, 4, 6), an image-pooling
    branch (mean, 1x1 conv, upsampled to ``size=``), concatenated and projected."""

    def __init__(self, cin=6, c=8):
        super().__init__()
        self.b0 = nn.Conv2d(cin, c, 1)
        self.dil = nn.ModuleList(nn.Conv2d(cin, c, 3, padding=r, dilation=r) for r in (2, 4, 6))
        self.pool = nn.Conv2d(cin, c, 1)
        self.proj = nn.Conv2d(5 * c, c, 1)

    def forward(self, x):
        h, w = x.shape[-2:]
        g = F.relu(self.pool(x.mean((2, 3), keepdim=True)))
        outs = [F.relu(self.b0(x))] + [F.relu(cv(x)) for cv in self.dil]
        outs.append(F.interpolate(g, size=(h, w), mode="bilinear", align_corners=False))
        return F.relu(self.proj(torch.cat(outs, 1)))


def aspp():
    _seed(4)
    return ASPP().eval(), (torch.randn(2, 6, 11, 13),)


class Attentions(nn.Module):
    """CBAM (channel attention from avg- and max-pooled MLP, spatial attention from the channel mean and
    max through a 7x7 conv), ECA (a conv1d across channels) and coordinate attention (pools along H and
    W, a shared conv, split, two sigmoid gates)."""

    def __init__(self, c=16, r=4):
        super().__init__()
        self.mlp = nn.Sequential(nn.Conv2d(c, c // r, 1, bias=False), nn.ReLU(), nn.Conv2d(c // r, c, 1, bias=False))
        self.spatial = nn.Conv2d(2, 1, 7, padding=3)
        self.eca = nn.Conv1d(1, 1, 3, padding=1, bias=False)
        self.ca = nn.Sequential(nn.Conv2d(c, 8, 1), nn.BatchNorm2d(8), nn.Hardswish())
        self.ch, self.cw = nn.Conv2d(8, c, 1), nn.Conv2d(8, c, 1)

    def forward(self, x):
        ca = torch.sigmoid(self.mlp(F.adaptive_avg_pool2d(x, 1)) + self.mlp(F.adaptive_max_pool2d(x, 1)))
        x = x * ca
        sa = torch.cat([x.mean(1, keepdim=True), x.amax(1, keepdim=True)], 1)
        x = x * torch.sigmoid(self.spatial(sa))
        e = self.eca(x.mean((2, 3)).unsqueeze(1)).squeeze(1)     # [B, C]
        x = x * torch.sigmoid(e)[:, :, None, None]
        b, c, h, w = x.shape
        xh = x.mean(3, keepdim=True)                              # [B, C, H, 1]
        xw = x.mean(2, keepdim=True).permute(0, 1, 3, 2)          # [B, C, W, 1]
        y = self.ca(torch.cat([xh, xw], 2))
        yh, yw = torch.split(y, [h, w], 2)
        return x * torch.sigmoid(self.ch(yh)) * torch.sigmoid(self.cw(yw.permute(0, 1, 3, 2)))


def attentions():
    _seed(5)
    return Attentions().eval(), (torch.randn(2, 16, 9, 7),)


class TransfoXLAttention(nn.Module):
    """Transformer-XL relative multi-head attention over [memories; segment] with the content / position
    biases u and v and the pad-one-column-and-view ``rel_shift``, a causal mask, post-LN."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.r = nn.Linear(d, d, bias=False)
        self.u = nn.Parameter(torch.randn(heads, d // heads) * 0.1)
        self.v = nn.Parameter(torch.randn(heads, d // heads) * 0.1)
        self.o = nn.Linear(d, d, bias=False)
        self.ln = nn.LayerNorm(d)
        self.register_buffer("inv_freq", 1 / (10000 ** (torch.arange(0.0, d, 2.0) / d)))

    @staticmethod
    def rel_shift(x):
        b, h, q, k = x.shape
        x = F.pad(x, (1, 0))
        return x.view(b, h, k + 1, q)[:, :, 1:].view(b, h, q, k)

    def forward(self, x, mem):
        b, q, d = x.shape
        cat = torch.cat([mem, x], 1)
        k = cat.shape[1]
        pos = torch.arange(k - 1, -1, -1.0)
        sin = pos[:, None] * self.inv_freq[None]
        r = self.r(torch.cat([sin.sin(), sin.cos()], -1)).view(k, self.h, self.dh)
        heads = self.qkv(cat).view(b, k, 3, self.h, self.dh)
        wq, wk, wv = heads[:, -q:, 0], heads[:, :, 1], heads[:, :, 2]
        ac = torch.einsum("bqnd,bknd->bnqk", wq + self.u, wk)
        bd = self.rel_shift(torch.einsum("bqnd,knd->bnqk", wq + self.v, r))
        s = (ac + bd) / math.sqrt(self.dh)
        mask = torch.triu(torch.ones(q, k, dtype=torch.bool), 1 + k - q)
        p = s.masked_fill(mask, float("-inf")).softmax(-1)
        a = torch.einsum("bnqk,bknd->bqnd", p, wv).reshape(b, q, d)
        return self.ln(x + self.o(a))


def transfo_xl():
    _seed(6)
    return TransfoXLAttention().eval(), (torch.randn(2, 5, 32), torch.randn(2, 3, 32))


class GlowStep(nn.Module):
    """Glow: squeeze (space to depth by view/permute), ActNorm, an LU-parametrised invertible 1x1 conv,
    an affine coupling (``sigmoid(s + 2)`` scales); z and the log-determinant per sample."""

    def __init__(self, c=3):
        super().__init__()
        c4 = 4 * c
        self.loc = nn.Parameter(torch.randn(1, c4, 1, 1) * 0.1)
        self.logs = nn.Parameter(torch.randn(1, c4, 1, 1) * 0.1)
        w = torch.linalg.qr(torch.randn(c4, c4))[0]
        p, lo, up = torch.linalg.lu(w)
        s = torch.diag(up)
        self.register_buffer("p", p)
        self.register_buffer("sign_s", torch.sign(s))
        self.register_buffer("l_mask", torch.tril(torch.ones(c4, c4), -1))
        self.register_buffer("eye", torch.eye(c4))
        self.lower = nn.Parameter(lo)
        self.upper = nn.Parameter(torch.triu(up, 1))
        self.log_s = nn.Parameter(torch.log(torch.abs(s)))
        self.net = nn.Sequential(nn.Conv2d(c4 // 2, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, c4, 3, padding=1))
        nn.init.normal_(self.net[2].weight, std=0.02)

    def forward(self, x):
        b, c, h, w = x.shape
        x = x.view(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4).reshape(b, 4 * c, h // 2, w // 2)
        hw = x.shape[2] * x.shape[3]
        x = (x + self.loc) * torch.exp(self.logs)
        logdet = hw * self.logs.sum() * torch.ones(b)
        lower = self.lower * self.l_mask + self.eye
        upper = self.upper * self.l_mask.T + torch.diag(self.sign_s * torch.exp(self.log_s))
        weight = self.p @ lower @ upper
        x = F.conv2d(x, weight.unsqueeze(2).unsqueeze(3))
        logdet = logdet + hw * self.log_s.sum()
        xa, xb = x.chunk(2, 1)
        shift, scale = self.net(xa).chunk(2, 1)
        scale = torch.sigmoid(scale + 2.0)
        yb = (xb + shift) * scale
        logdet = logdet + torch.log(scale).flatten(1).sum(1)
        return torch.cat([xa, yb], 1), logdet


def glow():
    _seed(7)
    return GlowStep().eval(), (torch.randn(2, 3, 8, 6),)


class CRFViterbi(nn.Module):
    """A BiGRU tagger's emissions, CRF Viterbi decoding: per step the best previous tag (max with
    indices), then a backtrace by ``gather``; the best score and the int64 tag path."""

    def __init__(self, vocab=30, tags=5, d=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.rnn = nn.GRU(d, d, batch_first=True, bidirectional=True)
        self.emit = nn.Linear(2 * d, tags)
        self.trans = nn.Parameter(torch.randn(tags, tags))
        self.start = nn.Parameter(torch.randn(tags))
        self.end = nn.Parameter(torch.randn(tags))

    def forward(self, ids):
        e = self.emit(self.rnn(self.emb(ids))[0])           # [B, T, K]
        score = self.start + e[:, 0]
        history: List[torch.Tensor] = []
        for t in range(1, e.shape[1]):
            best, idx = (score.unsqueeze(2) + self.trans).max(1)
            score = best + e[:, t]
            history.append(idx)
        score = score + self.end
        best_score, last = score.max(1)
        path = [last]
        for idx in history[::-1]:
            last = idx.gather(1, last.unsqueeze(1)).squeeze(1)
            path.append(last)
        return best_score, torch.stack(path[::-1], 1)


def crf_viterbi():
    _seed(8)
    return CRFViterbi().eval(), (torch.randint(0, 30, (3, 6)),)


class XDeepFMDIN(nn.Module):
    """xDeepFM's CIN (outer products by einsum, 1x1 conv1d compressions, sum pooling), FM's second order
    term, DIN's attention over a padded behaviour sequence (``-2**32 + 1`` on the padding)."""

    def __init__(self, fields=4, vocab=20, e=6, hist=5):
        super().__init__()
        self.emb = nn.Embedding(fields * vocab, e)
        self.register_buffer("offs", torch.arange(fields) * vocab)
        self.cin = nn.ModuleList([nn.Conv1d(fields * fields, 6, 1), nn.Conv1d(fields * 6, 6, 1)])
        self.item = nn.Embedding(vocab, e)
        self.att = nn.Sequential(nn.Linear(4 * e, 16), nn.Sigmoid(), nn.Linear(16, 1))
        self.head = nn.Linear(12 + 1 + e, 1)

    def forward(self, sparse, hist, hist_len, target):
        x0 = self.emb(sparse + self.offs)                       # [B, F, E]
        b, f, d = x0.shape
        xs, pooled = x0, []
        for conv in self.cin:
            z = torch.einsum("bhd,bmd->bhmd", xs, x0).reshape(b, -1, d)
            xs = F.relu(conv(z))
            pooled.append(xs.sum(2))
        fm = 0.5 * (x0.sum(1) ** 2 - (x0 ** 2).sum(1)).sum(1, keepdim=True)
        keys, q = self.item(hist), self.item(target)            # [B, L, E], [B, E]
        qe = q.unsqueeze(1).expand_as(keys)
        w = self.att(torch.cat([qe, keys, qe - keys, qe * keys], -1)).squeeze(-1)
        pad = torch.arange(hist.shape[1])[None, :] >= hist_len[:, None]
        w = torch.where(pad, torch.full_like(w, -2.0 ** 32 + 1), w).softmax(-1)
        interest = (w.unsqueeze(-1) * keys).sum(1)
        return torch.sigmoid(self.head(torch.cat(pooled + [fm, interest], 1))), w


def xdeepfm_din():
    _seed(9)
    return XDeepFMDIN().eval(), (torch.randint(0, 20, (3, 4)), torch.randint(0, 20, (3, 5)), torch.tensor([5, 2, 1]),
                                 torch.randint(0, 20, (3,)))


class MaskedConv(nn.Conv2d):
    def __init__(self, kind, cin, cout, k):
        super().__init__(cin, cout, k, padding=k // 2)
        mask = torch.ones_like(self.weight)
        mask[:, :, k // 2, k // 2 + (kind == "B"):] = 0
        mask[:, :, k // 2 + 1:] = 0
        self.register_buffer("mask", mask)

    def forward(self, x):
        return F.conv2d(x, self.weight * self.mask, self.bias, padding=self.padding)


class PixelCNN(nn.Module):
    """A type-A masked 7x7 conv, two gated residual blocks of type-B masked convs (tanh x sigmoid of
    the two halves), 256-way logits per pixel and their log-softmax."""

    def __init__(self, c=8):
        super().__init__()
        self.a = MaskedConv("A", 1, 2 * c, 7)
        self.bs = nn.ModuleList(MaskedConv("B", c, 2 * c, 3) for _ in range(2))
        self.out = nn.Conv2d(c, 16, 1)

    def forward(self, x):
        t, s = self.a(x).chunk(2, 1)
        h = torch.tanh(t) * torch.sigmoid(s)
        for blk in self.bs:
            t, s = blk(h).chunk(2, 1)
            h = h + torch.tanh(t) * torch.sigmoid(s)
        return F.log_softmax(self.out(h), 1)


def pixelcnn():
    _seed(10)
    return PixelCNN().eval(), (torch.rand(2, 1, 8, 8),)


class Sinkhorn(nn.Module):
    """Entropic optimal transport in the log domain: a squared-distance cost between projected point
    sets, five Sinkhorn iterations of ``logsumexp``, the plan and the transport cost."""

    def __init__(self, d=4, eps=0.5, iters=5):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.eps, self.iters = eps, iters

    def forward(self, x, y):
        a, b = self.proj(x), self.proj(y)
        cost = torch.cdist(a, b) ** 2                           # [B, N, M]
        n, m = cost.shape[1], cost.shape[2]
        log_mu = torch.full(cost.shape[:2], -math.log(n))
        log_nu = torch.full((cost.shape[0], m), -math.log(m))
        u, v = torch.zeros_like(log_mu), torch.zeros_like(log_nu)
        k = -cost / self.eps
        for _ in range(self.iters):
            u = log_mu - torch.logsumexp(k + v[:, None, :], 2)
            v = log_nu - torch.logsumexp(k + u[:, :, None], 1)
        plan = torch.exp(k + u[:, :, None] + v[:, None, :])
        return plan, (plan * cost).sum((1, 2))


def sinkhorn():
    _seed(11)
    return Sinkhorn().eval(), (torch.randn(2, 6, 4), torch.randn(2, 5, 4))


class SERes2Block(nn.Module):
    def __init__(self, c=16, scale=4, dil=2):
        super().__init__()
        self.scale = scale
        self.pre = nn.Sequential(nn.Conv1d(c, c, 1), nn.ReLU(), nn.BatchNorm1d(c))
        self.convs = nn.ModuleList(nn.Sequential(nn.Conv1d(c // scale, c // scale, 3, padding=dil, dilation=dil),
                                                 nn.ReLU(), nn.BatchNorm1d(c // scale)) for _ in range(scale - 1))
        self.post = nn.Sequential(nn.Conv1d(c, c, 1), nn.ReLU(), nn.BatchNorm1d(c))
        self.se1, self.se2 = nn.Conv1d(c, 4, 1), nn.Conv1d(4, c, 1)

    def forward(self, x):
        h = self.pre(x)
        parts = torch.chunk(h, self.scale, 1)
        ys = [parts[0]]
        y = parts[0]
        for i, conv in enumerate(self.convs):
            y = conv(parts[i + 1] if i == 0 else parts[i + 1] + y)
            ys.append(y)
        h = self.post(torch.cat(ys, 1))
        s = torch.sigmoid(self.se2(F.relu(self.se1(h.mean(2, keepdim=True)))))
        return x + h * s


class ECAPA(nn.Module):
    """ECAPA-TDNN: a conv1d stem, two SE-Res2Net blocks (dilations 2, 3) concatenated and fused,
    attentive statistics pooling with the global context (mean and std repeated over time), BN, linear."""

    def __init__(self, mels=10, c=16, emb=8):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv1d(mels, c, 5, padding=2), nn.ReLU(), nn.BatchNorm1d(c))
        self.b1, self.b2 = SERes2Block(c, dil=2), SERes2Block(c, dil=3)
        self.fuse = nn.Sequential(nn.Conv1d(2 * c, 2 * c, 1), nn.ReLU())
        self.att = nn.Sequential(nn.Conv1d(6 * c, 8, 1), nn.Tanh(), nn.Conv1d(8, 2 * c, 1))
        self.bn = nn.BatchNorm1d(4 * c)
        self.fc = nn.Linear(4 * c, emb)
        for mod in self.modules():
            if isinstance(mod, nn.BatchNorm1d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        x = self.stem(x)
        a = self.b1(x)
        b = self.b2(a)
        h = self.fuse(torch.cat([a, b], 1))
        t = h.shape[-1]
        mean = h.mean(2, keepdim=True)
        std = torch.sqrt(h.var(2, keepdim=True, unbiased=False).clamp(min=1e-4))
        ctx = torch.cat([h, mean.repeat(1, 1, t), std.repeat(1, 1, t)], 1)
        w = torch.softmax(self.att(ctx), 2)
        mu = (h * w).sum(2)
        sg = torch.sqrt(((h ** 2) * w).sum(2) - mu ** 2).clamp(min=1e-4)
        return F.normalize(self.fc(self.bn(torch.cat([mu, sg], 1))), dim=1)


def ecapa():
    _seed(12)
    return ECAPA().eval(), (torch.randn(2, 10, 15),)


class AutoCorrelation(nn.Module):
    """Autoformer: series decomposition (moving average with end padding), auto-correlation of q and k by
    ``rfft`` / ``irfft``, the top-k delays of the batch-mean correlation per sample, the values rolled
    by each delay (a gather at (t + delay) mod L) and summed with softmax weights."""

    def __init__(self, d=8, k=2, ma=5):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.topk, self.ma = k, ma
        self.pool = nn.AvgPool1d(ma, 1)

    def decomp(self, x):
        pad = (self.ma - 1) // 2
        xp = torch.cat([x[:, :1].repeat(1, pad, 1), x, x[:, -1:].repeat(1, pad, 1)], 1)
        trend = self.pool(xp.permute(0, 2, 1)).permute(0, 2, 1)
        return x - trend, trend

    def forward(self, x):
        season, trend = self.decomp(x)
        b, length, d = season.shape
        q, k, v = self.q(season), self.k(season), self.v(season)
        corr = torch.fft.irfft(torch.fft.rfft(q, dim=1) * torch.conj(torch.fft.rfft(k, dim=1)), n=length, dim=1)
        mean = corr.mean(2)                                       # [B, L]
        w, delay = torch.topk(mean, self.topk, dim=1)
        w = torch.softmax(w, 1)
        base = torch.arange(length)[None, :, None].expand(b, length, d)
        out = torch.zeros_like(v)
        for i in range(self.topk):
            idx = (base + delay[:, i].view(b, 1, 1)) % length
            out = out + torch.gather(v, 1, idx) * w[:, i].view(b, 1, 1)
        return self.o(out) + trend, delay


def autocorrelation():
    _seed(13)
    return AutoCorrelation().eval(), (torch.randn(2, 12, 8),)


class ODEFunc(nn.Module):
    def __init__(self, d=6):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d + 1, 16), nn.Linear(16, d)

    def forward(self, t: float, y):
        tt = torch.full_like(y[:, :1], t)
        return self.fc2(torch.tanh(self.fc1(torch.cat([y, tt], 1))))


class NeuralODE(nn.Module):
    """A neural ODE integrated by classic fixed-step RK4 from t=0 to 1 in four steps (time as a
    feature), the trajectory stacked."""

    def __init__(self, steps=4):
        super().__init__()
        self.f = ODEFunc()
        self.steps = steps

    def forward(self, y):
        h = 1.0 / self.steps
        traj = [y]
        for i in range(self.steps):
            t = i * h
            k1 = self.f(t, y)
            k2 = self.f(t + h / 2, y + h / 2 * k1)
            k3 = self.f(t + h / 2, y + h / 2 * k2)
            k4 = self.f(t + h, y + h * k3)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            traj.append(y)
        return torch.stack(traj, 1)


def neural_ode():
    _seed(14)
    return NeuralODE().eval(), (torch.randn(3, 6),)


class LayerNormCF(nn.Module):
    """ConvNeXt / HorNet's channels-first LayerNorm written out (mean and squared deviation over dim 1)."""

    def __init__(self, c, eps=1e-6):
        super().__init__()
        self.weight, self.bias = nn.Parameter(1 + 0.1 * torch.randn(c)), nn.Parameter(0.1 * torch.randn(c))
        self.eps = eps

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class GnConv(nn.Module):
    """HorNet's recursive gated convolution of order 3: a projection split into one gate and the
    depthwise-7x7-convolved rest (split again by the orders' widths), multiplied in a loop of 1x1 convs."""

    def __init__(self, c=16, order=3):
        super().__init__()
        self.dims = [c // 2 ** i for i in range(order)][::-1]
        self.proj_in = nn.Conv2d(c, 2 * c, 1)
        self.dw = nn.Conv2d(sum(self.dims), sum(self.dims), 7, padding=3, groups=sum(self.dims))
        self.pws = nn.ModuleList(nn.Conv2d(self.dims[i], self.dims[i + 1], 1) for i in range(order - 1))
        self.proj_out = nn.Conv2d(c, c, 1)
        self.norm = LayerNormCF(c)
        self.scale = 1.0 / 3

    def forward(self, x):
        y = self.proj_in(self.norm(x))
        pwa, abc = torch.split(y, (self.dims[0], sum(self.dims)), dim=1)
        dw = torch.split(self.dw(abc) * self.scale, self.dims, dim=1)
        z = pwa * dw[0]
        for i, pw in enumerate(self.pws):
            z = pw(z) * dw[i + 1]
        return x + self.proj_out(z)


def hornet():
    _seed(15)
    return GnConv().eval(), (torch.randn(2, 16, 9, 10),)


class Involution(nn.Module):
    """Involution (k=3, 2 groups, stride 2): kernels generated per pixel from an average-pooled map,
    applied to ``F.unfold`` patches by broadcasting and a sum over the taps."""

    def __init__(self, c=8, k=3, groups=2, stride=2):
        super().__init__()
        self.k, self.g, self.s = k, groups, stride
        self.reduce = nn.Sequential(nn.Conv2d(c, c // 2, 1), nn.BatchNorm2d(c // 2), nn.ReLU())
        self.span = nn.Conv2d(c // 2, k * k * groups, 1)
        self.pool = nn.AvgPool2d(stride, stride)

    def forward(self, x):
        b, c, h, w = x.shape
        ker = self.span(self.reduce(self.pool(x)))
        oh, ow = ker.shape[2], ker.shape[3]
        ker = ker.view(b, self.g, self.k * self.k, oh, ow).unsqueeze(2)
        patches = F.unfold(x, self.k, dilation=1, padding=(self.k - 1) // 2, stride=self.s)
        patches = patches.view(b, self.g, c // self.g, self.k * self.k, oh, ow)
        return (ker * patches).sum(3).view(b, c, oh, ow)


def involution():
    _seed(16)
    return Involution().eval(), (torch.randn(2, 8, 10, 8),)


def shifted_softplus(x):
    return F.softplus(x) - math.log(2.0)


class SchNet(nn.Module):
    """SchNet interactions: atom-type embeddings, pairwise distances (``cdist``), a Gaussian RBF expansion,
    a cosine cutoff, a filter network with shifted softplus, the continuous-filter convolution summed
    over neighbours (self and padding atoms masked), a per-molecule energy over the real atoms."""

    def __init__(self, types=5, d=16, rbf=12, cutoff=3.0):
        super().__init__()
        self.emb = nn.Embedding(types, d)
        self.register_buffer("mu", torch.linspace(0, cutoff, rbf))
        self.gamma, self.cutoff = 10.0 / cutoff, cutoff
        self.filt = nn.ModuleList(nn.Sequential(nn.Linear(rbf, d), nn.Softplus(), nn.Linear(d, d)) for _ in range(2))
        self.in2f = nn.ModuleList(nn.Linear(d, d, bias=False) for _ in range(2))
        self.f2out = nn.ModuleList(nn.Linear(d, d) for _ in range(2))
        self.out = nn.Sequential(nn.Linear(d, 8), nn.Softplus(), nn.Linear(8, 1))

    def forward(self, z, pos, atom_mask):
        h = self.emb(z)                                       # [B, N, d]
        n = pos.shape[1]
        dist = torch.cdist(pos, pos)                          # [B, N, N]
        rbf = torch.exp(-self.gamma * (dist.unsqueeze(-1) - self.mu) ** 2)
        cut = 0.5 * (torch.cos(dist * math.pi / self.cutoff) + 1.0) * (dist < self.cutoff).float()
        pair = atom_mask[:, :, None] & atom_mask[:, None, :] & ~torch.eye(n, dtype=torch.bool)
        cut = cut * pair.float()
        for filt, lin_in, lin_out in zip(self.filt, self.in2f, self.f2out):
            w = filt(rbf) * cut.unsqueeze(-1)                 # [B, N, N, d]
            m = (lin_in(h).unsqueeze(1) * w).sum(2)
            h = h + lin_out(shifted_softplus(m))
        e = self.out(h).squeeze(-1) * atom_mask.float()
        return e.sum(1), h


def schnet():
    _seed(17)
    pos = torch.rand(2, 6, 3) * 3
    return SchNet().eval(), (torch.randint(0, 5, (2, 6)), pos, torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]]).bool())


class DiTBlock(nn.Module):
    """DiT: a sinusoidal timestep embedding + class embedding as the condition, adaLN-Zero (six shift /
    scale / gate vectors from SiLU + Linear), attention and MLP on modulated LayerNorms without affine,
    the final layer's modulation and an unpatchify by einsum."""

    def __init__(self, d=32, heads=4, patch=2, c=3, classes=10):
        super().__init__()
        self.h, self.p, self.c = heads, patch, c
        self.embed = nn.Conv2d(c, d, patch, patch)
        self.t_mlp = nn.Sequential(nn.Linear(16, d), nn.SiLU(), nn.Linear(d, d))
        self.y_emb = nn.Embedding(classes + 1, d)
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(d, 6 * d))
        self.n1 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.n2 = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))
        self.final_ada = nn.Sequential(nn.SiLU(), nn.Linear(d, 2 * d))
        self.nf = nn.LayerNorm(d, elementwise_affine=False, eps=1e-6)
        self.final = nn.Linear(d, patch * patch * c)

    @staticmethod
    def t_embed(t, dim: int = 16):
        half = dim // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
        args = t[:, None].float() * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], -1)

    def forward(self, x, t, y):
        b, _, hh, ww = x.shape
        tok = self.embed(x).flatten(2).transpose(1, 2)       # [B, N, d]
        n, d = tok.shape[1], tok.shape[2]
        cond = self.t_mlp(self.t_embed(t)) + self.y_emb(y)
        s1, c1, g1, s2, c2, g2 = self.ada(cond).chunk(6, 1)
        h = self.n1(tok) * (1 + c1.unsqueeze(1)) + s1.unsqueeze(1)
        q, k, v = self.qkv(h).view(b, n, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d)
        tok = tok + g1.unsqueeze(1) * self.proj(a)
        tok = tok + g2.unsqueeze(1) * self.mlp(self.n2(tok) * (1 + c2.unsqueeze(1)) + s2.unsqueeze(1))
        sf, cf = self.final_ada(cond).chunk(2, 1)
        out = self.final(self.nf(tok) * (1 + cf.unsqueeze(1)) + sf.unsqueeze(1))
        gh, gw = hh // self.p, ww // self.p
        out = out.reshape(b, gh, gw, self.p, self.p, self.c)
        return torch.einsum("nhwpqc->nchpwq", out).reshape(b, self.c, gh * self.p, gw * self.p)


def dit_block():
    _seed(18)
    return DiTBlock().eval(), (torch.randn(2, 3, 8, 6), torch.tensor([3, 870]), torch.tensor([1, 10]))


class Retention(nn.Module):
    """RetNet multi-scale retention (parallel form): per-head decays ``1 - 2**(-5 - h)``, the decay mask
    ``gamma ** (n - m)`` on the causal triangle normalised per row, xPos-like rotation of q and k, a
    GroupNorm over heads, a swish gate."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.q, self.k, self.v, self.g, self.o = (nn.Linear(d, d, bias=False) for _ in range(5))
        self.register_buffer("gamma", 1 - 2.0 ** (-5 - torch.arange(heads, dtype=torch.float32)))
        self.register_buffer("theta", 1.0 / 10000 ** torch.linspace(0, 1, self.dh // 2))
        self.gn = nn.GroupNorm(heads, d)

    def rotate(self, x, sin, cos):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)

    def forward(self, x):
        b, n, d = x.shape
        idx = torch.arange(n, dtype=torch.float32)
        ang = idx[:, None] * self.theta[None]
        sin, cos = ang.sin(), ang.cos()
        q = self.rotate(self.q(x).view(b, n, self.h, self.dh).transpose(1, 2), sin, cos)
        k = self.rotate(self.k(x).view(b, n, self.h, self.dh).transpose(1, 2), sin, cos) * self.dh ** -0.5
        v = self.v(x).view(b, n, self.h, self.dh).transpose(1, 2)
        diff = idx[:, None] - idx[None, :]
        mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
        decay = torch.where(mask, self.gamma.view(-1, 1, 1) ** diff.clamp(min=0), torch.zeros(1))
        decay = decay / decay.sum(-1, keepdim=True).sqrt()
        s = (q @ k.transpose(-1, -2)) * decay
        s = s / s.abs().sum(-1, keepdim=True).clamp(min=1.0)
        r = (s @ v).transpose(1, 2).reshape(b * n, d)
        r = self.gn(r).view(b, n, d)
        return self.o(F.silu(self.g(x)) * r)


def retention():
    _seed(19)
    return Retention().eval(), (torch.randn(2, 7, 32),)


class NMSFreeDecode(nn.Module):
    """RT-DETR-style decoding of query logits and boxes: sigmoid scores, top-k over queries x classes,
    query index by floor division and label by remainder, boxes gathered and converted cxcywh -> xyxy,
    scaled by each image's (int64) size; the int64 labels and a bool keep mask as side outputs."""

    def __init__(self, d=16, classes=6, k=5):
        super().__init__()
        self.cls, self.box = nn.Linear(d, classes), nn.Linear(d, 4)
        self.k = k

    def forward(self, q, sizes):
        logits, boxes = self.cls(q), torch.sigmoid(self.box(q))
        b, nq, nc = logits.shape
        scores, idx = torch.topk(torch.sigmoid(logits).flatten(1), self.k, dim=1)
        labels = idx % nc
        qi = torch.div(idx, nc, rounding_mode="floor")
        sel = boxes.gather(1, qi.unsqueeze(-1).repeat(1, 1, 4))
        cx, cy, w, h = sel.unbind(-1)
        xyxy = torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], -1)
        ih, iw = sizes.unbind(1)
        scale = torch.stack([iw, ih, iw, ih], 1).unsqueeze(1).to(xyxy.dtype)
        return scores, labels, xyxy * scale, scores > 0.5


def nms_free():
    _seed(20)
    return NMSFreeDecode().eval(), (torch.randn(2, 8, 16), torch.tensor([[480, 640], [300, 200]]))


class LossHead(nn.Module):
    """A token classifier returning its loss as HuggingFace heads do with labels: cross entropy with
    ``ignore_index=-100`` (padding), class weights and label smoothing, an NLL over log-probs, and a
    sequence-level BCE-with-logits."""

    def __init__(self, d=8, classes=5, smoothing=0.1):
        super().__init__()
        self.smoothing = smoothing
        self.fc = nn.Linear(d, classes)
        self.register_buffer("w", torch.tensor([1.0, 0.5, 2.0, 1.0, 0.25]))
        self.bin = nn.Linear(d, 1)

    def forward(self, x, labels, target):
        logits = self.fc(x)                                     # [B, T, C]
        ce = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100)
        cew = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), weight=self.w, ignore_index=-100,
                              label_smoothing=self.smoothing, reduction="sum")
        nll = F.nll_loss(F.log_softmax(logits, -1).transpose(1, 2), labels.clamp(min=0), reduction="none")
        bce = F.binary_cross_entropy_with_logits(self.bin(x.mean(1)).squeeze(1), target)
        return logits, ce, cew, nll, bce


def loss_head(smoothing=0.1):
    _seed(21)
    labels = torch.randint(0, 5, (2, 6))
    labels[0, 4:] = -100
    return LossHead(smoothing=smoothing).eval(), (torch.randn(2, 6, 8), labels, torch.tensor([1.0, 0.0]))




# --- torch.ao quantized modules (the caller sets torch's quantized engine) --------------------------------


class QMBConvSE(nn.Module):
    """EfficientNet-B0's MBConv with stochastic depth off for FX quantization: expand 1x1 + BN + hardswish,
    depthwise 5x5 stride 1, squeeze-excite (pool, conv, relu, conv, hardsigmoid, mul), project, the
    residual add; a dilated conv1d over the flattened map; a linear head."""

    def __init__(self, c=8):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())
        self.expand = nn.Sequential(nn.Conv2d(c, 4 * c, 1, bias=False), nn.BatchNorm2d(4 * c), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(4 * c, 4 * c, 5, padding=2, groups=4 * c, bias=False), nn.BatchNorm2d(4 * c),
                                nn.Hardswish())
        self.se1, self.se2 = nn.Conv2d(4 * c, 4, 1), nn.Conv2d(4, 4 * c, 1)
        self.project = nn.Sequential(nn.Conv2d(4 * c, c, 1, bias=False), nn.BatchNorm2d(c))
        self.tcn = nn.Conv1d(c, c, 3, padding=2, dilation=2)
        self.head = nn.Linear(c, 4)
        for mod in self.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        x = self.stem(x)
        h = self.dw(self.expand(x))
        s = F.hardsigmoid(self.se2(F.relu(self.se1(F.adaptive_avg_pool2d(h, 1)))))
        y = x + self.project(h * s)
        t = F.relu(self.tcn(y.flatten(2)))
        return self.head(t.mean(2)), y


def qmbconv_se():
    _seed(30)
    return QMBConvSE().eval(), (torch.randn(2, 3, 8, 8),)


class EagerTCN(nn.Module):
    """Eager static quantization of a TCN: QuantStub, dilated causal conv1d blocks (left padding by
    a ConstantPad1d) fused with ReLU, FloatFunctional residual adds and a cat of
    two scales, DeQuantStub."""

    def __init__(self, c=6):
        super().__init__()
        import torch.ao.quantization as tq

        self.q, self.dq = tq.QuantStub(), tq.DeQuantStub()
        self.inp = nn.Conv1d(3, c, 1)
        self.blocks = nn.ModuleList()
        for d in (1, 2, 4):
            self.blocks.append(nn.Sequential(nn.ConstantPad1d((2 * d, 0), 0.0), nn.Conv1d(c, c, 3, dilation=d),
                                             nn.ReLU()))
        self.adds = nn.ModuleList(nn.quantized.FloatFunctional() for _ in range(3))
        self.cat = nn.quantized.FloatFunctional()
        self.out = nn.Conv1d(2 * c, 2, 1)

    def forward(self, x):
        h = self.inp(self.q(x))
        first = h
        for blk, add in zip(self.blocks, self.adds):
            h = add.add(h, blk(h))
        return self.dq(self.out(self.cat.cat([h, first], 1)))


def eager_tcn(engine: str):
    """:class:`EagerTCN` fused (conv + relu), calibrated on three seeded batches, converted (``engine``'s
    qconfig; the caller sets torch's quantized engine to it)."""
    import torch.ao.quantization as tq

    _seed(31)
    m = EagerTCN().eval()
    m.qconfig = tq.get_default_qconfig(engine)
    tq.fuse_modules(m, [[f"blocks.{i}.1", f"blocks.{i}.2"] for i in range(3)], inplace=True)
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore")
        tq.prepare(m, inplace=True)
        with torch.no_grad():
            for s in range(3):
                m(torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(s)))
        tq.convert(m, inplace=True)
    return m, (torch.randn(2, 3, 16),)


class CENLLHead(nn.Module):
    """The loss forms torch.onnx writes as SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss: cross
    entropy over [B, C, T] with ``ignore_index=-100``, over [N, C] with class weights summed, NLL of
    log-probs per token. (torch.onnx 2.13 writes ``nll_loss(log_softmax(x).transpose(1, 2))`` as a
    SoftmaxCrossEntropyLoss of a bias vector: a broken file, which srcore refuses naming the node.)"""

    def __init__(self, d=8, classes=5):
        super().__init__()
        self.fc = nn.Linear(d, classes)
        self.register_buffer("w", torch.tensor([1.0, 0.5, 2.0, 1.0, 0.25]))

    def forward(self, x, labels):
        logits = self.fc(x)
        ce = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100)
        cew = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), weight=self.w, ignore_index=-100, reduction="sum")
        nll = F.nll_loss(F.log_softmax(logits, -1).flatten(0, 1), labels.flatten().clamp(min=0), reduction="none")
        return ce, cew, nll


def ce_nll_head():
    _seed(22)
    labels = torch.randint(0, 5, (2, 6))
    labels[0, 4:] = -100
    return CENLLHead().eval(), (torch.randn(2, 6, 8), labels)


#: name -> (factory, import paths that apply, rtol). Paths torch cannot take are left out (torch.onnx has no
#: _transformer_encoder_layer_fwd, adaptive pooling to a size that does not divide, diag, fft_rfft or
#: label_smoothing)
ALL = ("script", "trace", "frozen", "export", "onnx")
GRID = {
    "deform_sample": (deform_sample, ALL, 1e-4),
    "deit_interp": (deit_interp, ALL[:4], 1e-4),
    "psp": (psp, ALL[:4], 1e-4),
    "aspp": (aspp, ALL, 1e-4),
    "attentions": (attentions, ALL, 1e-4),
    "transfo_xl": (transfo_xl, ALL, 1e-4),
    "glow": (glow, ALL[:4], 1e-4),
    "crf_viterbi": (crf_viterbi, ALL, 1e-4),
    "xdeepfm_din": (xdeepfm_din, ALL, 1e-4),
    "pixelcnn": (pixelcnn, ALL, 1e-4),
    "sinkhorn": (sinkhorn, ALL, 1e-4),
    "ecapa": (ecapa, ALL, 1e-4),
    "autocorrelation": (autocorrelation, ALL[:4], 1e-4),
    "neural_ode": (neural_ode, ALL, 1e-4),
    "hornet": (hornet, ALL, 1e-4),
    "involution": (involution, ALL, 1e-4),
    "schnet": (schnet, ALL, 1e-4),
    "dit_block": (dit_block, ALL, 1e-4),
    "retention": (retention, ALL, 1e-4),
    "nms_free": (nms_free, ALL, 1e-4),
    "loss_head": (loss_head, ALL[:4], 1e-4),
    "ce_nll_head": (ce_nll_head, ALL, 1e-4),
}
