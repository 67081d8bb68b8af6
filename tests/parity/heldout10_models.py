"""torch models of the tenth held-out zoo (test_heldout10_zoo.py): architectures zoos 1-9 leave out,
small, seeded. Each factory gives ``(module in eval mode, example inputs)``.

DeBERTa-style disentangled attention (relative-position gathers), ALBERT (one shared layer applied in
a loop), a BART-style decoder layer with cross attention, a Whisper-style conv1d + attention encoder,
a HiFi-GAN-style generator (transposed conv1d, dilated residuals, leaky relu), gMLP spatial gating,
ConvNeXt-V2 GRN, PVT spatial-reduction attention, CvT conv projections, a DCN-v2 cross network,
EmbeddingBag with offsets (sum / mean / max, per_sample_weights), PatchTST unfold patches, DLinear's
moving average with replicate padding, TFT gated residual networks.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn


def _seed(s):
    torch.manual_seed(s)


class DebertaAttention(nn.Module):
    """c2c + c2p + p2c scores, the relative positions clamped and gathered (DeBERTa's disentangled attention)."""

    def __init__(self, d=32, heads=4, span=4):
        super().__init__()
        self.h, self.dh, self.span = heads, d // heads, span
        self.qkv = nn.Linear(d, 3 * d)
        self.rel = nn.Embedding(2 * span, d)
        self.pos_k, self.pos_q = nn.Linear(d, d), nn.Linear(d, d, bias=False)
        self.out = nn.Linear(d, d)
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.h, self.dh).permute(2, 0, 3, 1, 4).unbind(0)
        pos = torch.arange(n, device=x.device)
        rel = (pos[:, None] - pos[None, :]).clamp(-self.span, self.span - 1) + self.span   # [n, n] in [0, 2span)
        r = self.rel.weight
        pk = self.pos_k(r).view(2 * self.span, self.h, self.dh).transpose(0, 1)            # [h, 2s, dh]
        pq = self.pos_q(r).view(2 * self.span, self.h, self.dh).transpose(0, 1)
        c2c = q @ k.transpose(-1, -2)
        c2p = torch.gather(q @ pk.transpose(-1, -2).unsqueeze(0), -1, rel.expand(b, self.h, n, n))
        p2c = torch.gather(k @ pq.transpose(-1, -2).unsqueeze(0), -1, (2 * self.span - 1 - rel).expand(b, self.h, n, n))
        s = (c2c + c2p + p2c.transpose(-1, -2)) / math.sqrt(3 * self.dh)
        a = s.softmax(-1) @ v
        return self.ln(x + self.out(a.transpose(1, 2).reshape(b, n, d)))


def deberta():
    _seed(1)
    return DebertaAttention().eval(), (torch.randn(2, 7, 32),)


class Albert(nn.Module):
    """Factorized embeddings, one encoder layer applied ``depth`` times (a loop over a shared module)."""

    def __init__(self, vocab=50, e=16, d=32, depth=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, e)
        self.proj = nn.Linear(e, d)
        self.layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True, activation="gelu")
        self.depth = depth
        self.pool = nn.Linear(d, d)

    def forward(self, ids):
        h = self.proj(self.emb(ids))
        for _ in range(self.depth):
            h = self.layer(h)
        return torch.tanh(self.pool(h[:, 0])), h


def albert():
    _seed(2)
    return Albert().eval(), (torch.randint(0, 50, (2, 6)),)


class BartDecoderLayer(nn.Module):
    """Causal self attention, cross attention over an encoder's states with a padding mask, ffn (post-LN)."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.sa = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ca = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d, 64), nn.GELU(), nn.Linear(64, d))
        self.n1, self.n2, self.n3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, y, mem, mem_len):
        t, s = y.shape[1], mem.shape[1]
        causal = torch.triu(torch.full((t, t), float("-inf")), 1)
        pad = torch.arange(s)[None, :] >= mem_len[:, None]
        y = self.n1(y + self.sa(y, y, y, attn_mask=causal, need_weights=False)[0])
        c, w = self.ca(y, mem, mem, key_padding_mask=pad)
        y = self.n2(y + c)
        return self.n3(y + self.ff(y)), w


def bart_decoder():
    _seed(3)
    return BartDecoderLayer().eval(), (torch.randn(2, 5, 32), torch.randn(2, 7, 32), torch.tensor([7, 4]))


class WhisperEncoder(nn.Module):
    """Two conv1d (the second strided) + GELU over log-mel frames, sinusoidal positions, a pre-LN block."""

    def __init__(self, mels=16, d=32, frames=20):
        super().__init__()
        self.c1 = nn.Conv1d(mels, d, 3, padding=1)
        self.c2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        t = torch.arange(frames // 2)[:, None] * torch.exp(-math.log(1e4) * torch.arange(d // 2) / (d // 2 - 1))
        self.register_buffer("pos", torch.cat([t.sin(), t.cos()], 1))
        self.ln1, self.ln2, self.lnf = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d), nn.Linear(d, d, bias=False), nn.Linear(d, d),
                                          nn.Linear(d, d))
        self.mlp = nn.Sequential(nn.Linear(d, 64), nn.GELU(), nn.Linear(64, d))

    def forward(self, mel):
        x = F.gelu(self.c2(F.gelu(self.c1(mel)))).permute(0, 2, 1) + self.pos
        b, t, d = x.shape
        h = self.ln1(x)
        q = self.q(h).view(b, t, 4, d // 4).transpose(1, 2)
        k = self.k(h).view(b, t, 4, d // 4).transpose(1, 2)
        v = self.v(h).view(b, t, 4, d // 4).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        return self.lnf(x + self.mlp(self.ln2(x)))


def whisper_encoder():
    _seed(4)
    return WhisperEncoder().eval(), (torch.randn(2, 16, 20),)


class ResBlock1(nn.Module):
    def __init__(self, c, k=3, dil=(1, 3, 5)):
        super().__init__()
        self.c1 = nn.ModuleList(nn.Conv1d(c, c, k, dilation=d, padding=d * (k - 1) // 2) for d in dil)
        self.c2 = nn.ModuleList(nn.Conv1d(c, c, k, padding=(k - 1) // 2) for _ in dil)

    def forward(self, x):
        for a, b in zip(self.c1, self.c2):
            x = x + b(F.leaky_relu(a(F.leaky_relu(x, 0.1)), 0.1))
        return x


class HiFiGAN(nn.Module):
    """conv_pre, two (leaky relu, ConvTranspose1d upsample, multi-receptive-field resblocks averaged), tanh."""

    def __init__(self, mels=8, c=16):
        super().__init__()
        self.pre = nn.Conv1d(mels, c, 7, padding=3)
        self.ups = nn.ModuleList([nn.ConvTranspose1d(c, c // 2, 8, 4, padding=2),
                                  nn.ConvTranspose1d(c // 2, c // 4, 4, 2, padding=1)])
        self.res = nn.ModuleList([nn.ModuleList([ResBlock1(c // 2, 3), ResBlock1(c // 2, 5)]),
                                  nn.ModuleList([ResBlock1(c // 4, 3), ResBlock1(c // 4, 5)])])
        self.post = nn.Conv1d(c // 4, 1, 7, padding=3)

    def forward(self, mel):
        x = self.pre(mel)
        for up, rs in zip(self.ups, self.res):
            x = up(F.leaky_relu(x, 0.1))
            acc = torch.zeros_like(x)
            for r in rs:
                acc = acc + r(x)
            x = acc / len(rs)
        return torch.tanh(self.post(F.leaky_relu(x)))


def hifigan():
    _seed(5)
    return HiFiGAN().eval(), (torch.randn(1, 8, 10),)


class GMLPBlock(nn.Module):
    """gMLP: channel projection, GELU, split, the gate normalized and mixed over the sequence axis."""

    def __init__(self, d=24, ff=48, n=10):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.up = nn.Linear(d, ff)
        self.gn = nn.LayerNorm(ff // 2)
        self.sp = nn.Conv1d(n, n, 1)
        nn.init.normal_(self.sp.weight, std=0.1)
        self.down = nn.Linear(ff // 2, d)

    def forward(self, x):
        u, v = F.gelu(self.up(self.ln(x))).chunk(2, -1)
        return x + self.down(u * self.sp(self.gn(v)))


class GMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(GMLPBlock(), GMLPBlock())

    def forward(self, x):
        return self.blocks(x).mean(1)


def gmlp():
    _seed(6)
    return GMLP().eval(), (torch.randn(3, 10, 24),)


class GRN(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gamma = nn.Parameter(torch.randn(1, 1, 1, c) * 0.1)
        self.beta = nn.Parameter(torch.randn(1, 1, 1, c) * 0.1)

    def forward(self, x):
        gx = torch.norm(x, p=2, dim=(1, 2), keepdim=True)
        nx = gx / (gx.mean(dim=-1, keepdim=True) + 1e-6)
        return self.gamma * (x * nx) + self.beta + x


class ConvNeXtV2Block(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.ln = nn.LayerNorm(c, eps=1e-6)
        self.pw1, self.pw2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.grn = GRN(4 * c)

    def forward(self, x):
        y = self.ln(self.dw(x).permute(0, 2, 3, 1))
        y = self.pw2(self.grn(F.gelu(self.pw1(y))))
        return x + y.permute(0, 3, 1, 2)


class ConvNeXtV2(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 4, 4)
        self.b = nn.Sequential(ConvNeXtV2Block(), ConvNeXtV2Block())
        self.head = nn.Linear(16, 5)

    def forward(self, x):
        return self.head(self.b(self.stem(x)).mean((2, 3)))


def convnextv2():
    _seed(7)
    return ConvNeXtV2().eval(), (torch.randn(2, 3, 24, 24),)


class PVTAttention(nn.Module):
    """Spatial-reduction attention: keys / values from a strided conv of the token map + LayerNorm."""

    def __init__(self, d=32, heads=2, sr=2):
        super().__init__()
        self.h = heads
        self.q, self.kv, self.proj = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)
        self.sr, self.norm = nn.Conv2d(d, d, sr, sr), nn.LayerNorm(d)

    def forward(self, x, hw: Tuple[int, int]):
        b, n, c = x.shape
        q = self.q(x).reshape(b, n, self.h, c // self.h).permute(0, 2, 1, 3)
        x_ = self.sr(x.permute(0, 2, 1).reshape(b, c, hw[0], hw[1])).reshape(b, c, -1).permute(0, 2, 1)
        kv = self.kv(self.norm(x_)).reshape(b, -1, 2, self.h, c // self.h).permute(2, 0, 3, 1, 4)
        a = (q @ kv[0].transpose(-2, -1)) * (c // self.h) ** -0.5
        return self.proj((a.softmax(-1) @ kv[1]).transpose(1, 2).reshape(b, n, c))


class PVT(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Conv2d(3, 32, 4, 4)
        self.ln = nn.LayerNorm(32)
        self.attn = PVTAttention()

    def forward(self, img):
        t = self.embed(img)
        hw = (t.shape[2], t.shape[3])
        x = t.flatten(2).transpose(1, 2)
        return x + self.attn(self.ln(x), hw)


def pvt():
    _seed(8)
    return PVT().eval(), (torch.randn(2, 3, 32, 24),)


class CvTAttention(nn.Module):
    """CvT: q / k / v from depthwise conv + BatchNorm projections of the token map (k, v strided)."""

    def __init__(self, d=24, heads=3):
        super().__init__()
        self.h = heads

        def proj(stride):
            return nn.Sequential(nn.Conv2d(d, d, 3, stride, 1, groups=d, bias=False), nn.BatchNorm2d(d))
        self.pq, self.pk, self.pv = proj(1), proj(2), proj(2)
        self.lq, self.lk, self.lv, self.o = (nn.Linear(d, d) for _ in range(4))
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)

    def _tok(self, t):
        b, n, c = t.shape
        return t.reshape(b, n, self.h, c // self.h).transpose(1, 2)

    def forward(self, fm):
        b, c, hh, ww = fm.shape
        q = self._tok(self.lq(self.pq(fm).flatten(2).transpose(1, 2)))
        k = self._tok(self.lk(self.pk(fm).flatten(2).transpose(1, 2)))
        v = self._tok(self.lv(self.pv(fm).flatten(2).transpose(1, 2)))
        a = F.scaled_dot_product_attention(q, k, v)
        return self.o(a.transpose(1, 2).reshape(b, hh * ww, c)).transpose(1, 2).reshape(b, c, hh, ww)


def cvt():
    _seed(9)
    return CvTAttention().eval(), (torch.randn(2, 24, 8, 6),)


class DCNv2(nn.Module):
    """Cross network v2 (x0 * (W x_l + b) + x_l, three layers) stacked with a deep MLP, logit."""

    def __init__(self, fields=4, vocab=30, e=6, dense=5):
        super().__init__()
        self.emb = nn.Embedding(fields * vocab, e)
        self.register_buffer("offs", torch.arange(fields) * vocab)
        d = fields * e + dense
        self.cross = nn.ModuleList(nn.Linear(d, d) for _ in range(3))
        self.deep = nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU())
        self.head = nn.Linear(d + 16, 1)

    def forward(self, sparse, dense):
        x0 = torch.cat([self.emb(sparse + self.offs).flatten(1), dense], 1)
        x = x0
        for lin in self.cross:
            x = x0 * lin(x) + x
        return torch.sigmoid(self.head(torch.cat([x, self.deep(x0)], 1)))


def dcn_v2():
    _seed(10)
    return DCNv2().eval(), (torch.randint(0, 30, (3, 4)), torch.randn(3, 5))


class Bags(nn.Module):
    """EmbeddingBag with 1-D input + offsets in three modes (one with per_sample_weights, one with
    include_last_offset), and a 2-D input bag."""

    def __init__(self):
        super().__init__()
        self.s = nn.EmbeddingBag(40, 6, mode="sum")
        self.m = nn.EmbeddingBag(40, 6, mode="mean")
        self.x = nn.EmbeddingBag(40, 6, mode="max")
        self.l = nn.EmbeddingBag(40, 6, mode="sum", include_last_offset=True)

    def forward(self, ids, offsets, w, ids2):
        last = torch.cat([offsets, torch.tensor([ids.shape[0]])])
        return (self.s(ids, offsets, per_sample_weights=w), self.m(ids, offsets), self.x(ids, offsets),
                self.l(ids, last), self.m(ids2))


def embedding_bags():
    _seed(11)
    return Bags().eval(), (torch.randint(0, 40, (11,)), torch.tensor([0, 3, 3, 7]), torch.rand(11),
                           torch.randint(0, 40, (3, 4)))


class PatchTST(nn.Module):
    """RevIN, patches by ``unfold`` over time (per channel), a linear embedding, one encoder layer, flatten head."""

    def __init__(self, length=32, patch=8, stride=4, d=16, horizon=6):
        super().__init__()
        self.patch, self.stride = patch, stride
        n = (length - patch) // stride + 2
        self.pad = nn.ReplicationPad1d((0, stride))
        self.embed = nn.Linear(patch, d)
        self.pos = nn.Parameter(torch.randn(n, d) * 0.1)
        self.enc = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0, batch_first=True, norm_first=True)
        self.head = nn.Linear(n * d, horizon)

    def forward(self, x):            # [B, L, C]
        mu, sd = x.mean(1, keepdim=True), torch.sqrt(x.var(1, keepdim=True, unbiased=False) + 1e-5)
        z = ((x - mu) / sd).permute(0, 2, 1)                      # [B, C, L]
        z = self.pad(z).unfold(-1, self.patch, self.stride)      # [B, C, N, P]
        b, c, n, p = z.shape
        h = self.enc(self.embed(z).reshape(b * c, n, -1) + self.pos)
        y = self.head(h.reshape(b, c, -1)).permute(0, 2, 1)      # [B, H, C]
        return y * sd + mu


def patchtst():
    _seed(12)
    return PatchTST().eval(), (torch.randn(2, 32, 3),)


class DLinear(nn.Module):
    """Series decomposition by a moving average (replicate padding by repeating the end rows), linear
    seasonal and trend heads per channel."""

    def __init__(self, length=24, horizon=8, k=5, channels=3):
        super().__init__()
        self.k = k
        self.avg = nn.AvgPool1d(k, 1)
        self.seasonal = nn.ModuleList(nn.Linear(length, horizon) for _ in range(channels))
        self.trend = nn.Linear(length, horizon)

    def forward(self, x):   # [B, L, C]
        front = x[:, :1].repeat(1, (self.k - 1) // 2, 1)
        end = x[:, -1:].repeat(1, (self.k - 1) // 2, 1)
        trend = self.avg(torch.cat([front, x, end], 1).permute(0, 2, 1))   # [B, C, L]
        season = x.permute(0, 2, 1) - trend
        out = torch.stack([lin(season[:, i]) for i, lin in enumerate(self.seasonal)], 1)
        return (out + self.trend(trend)).permute(0, 2, 1)


def dlinear():
    _seed(13)
    return DLinear().eval(), (torch.randn(2, 24, 3),)


class GRNUnit(nn.Module):
    """TFT's gated residual network: ELU(W2 a + W3 c), a GLU gate, add + LayerNorm, a skip projection."""

    def __init__(self, din, d, dout, ctx=0):
        super().__init__()
        self.skip = nn.Linear(din, dout) if din != dout else nn.Identity()
        self.fc1 = nn.Linear(din, d)
        self.ctx = nn.Linear(ctx, d, bias=False) if ctx else None
        self.fc2 = nn.Linear(d, d)
        self.glu = nn.Linear(d, 2 * dout)
        self.ln = nn.LayerNorm(dout)

    def forward(self, a, c: Optional[torch.Tensor] = None):
        h = self.fc1(a)
        if self.ctx is not None and c is not None:
            h = h + self.ctx(c)
        h = self.fc2(F.elu(h))
        return self.ln(self.skip(a) + F.glu(self.glu(h), -1))


class TFTVariableSelection(nn.Module):
    """Variable selection: a GRN per variable, softmax weights from a GRN over the flattened inputs with
    a static context, the weighted sum."""

    def __init__(self, nvar=4, din=3, d=8):
        super().__init__()
        self.per = nn.ModuleList(GRNUnit(din, d, d) for _ in range(nvar))
        self.sel = GRNUnit(nvar * din, d, nvar, ctx=5)
        self.out = GRNUnit(d, d, d, ctx=5)

    def forward(self, x, static):    # x [B, T, V, din], static [B, 5]
        b, t, v, _ = x.shape
        c = static[:, None].expand(b, t, static.shape[-1])
        w = torch.softmax(self.sel(x.flatten(2), c), -1)               # [B, T, V]
        h = torch.stack([g(x[:, :, i]) for i, g in enumerate(self.per)], -1)   # [B, T, d, V]
        return self.out((h * w[:, :, None]).sum(-1), c), w


def tft_grn():
    _seed(14)
    return TFTVariableSelection().eval(), (torch.randn(2, 5, 4, 3), torch.randn(2, 5))


#: name -> (factory, import paths that apply, rtol)
ALL = ("script", "trace", "frozen", "export", "onnx")
GRID = {
    "deberta": (deberta, ALL, 1e-4),
    "albert": (albert, ALL[:4], 1e-4),   # onnx: torch.onnx has no _transformer_encoder_layer_fwd
    "bart_decoder": (bart_decoder, ALL, 1e-4),
    "whisper_encoder": (whisper_encoder, ALL, 1e-4),
    "hifigan": (hifigan, ALL, 1e-4),
    "gmlp": (gmlp, ALL, 1e-4),
    "convnextv2": (convnextv2, ALL, 1e-4),
    "pvt": (pvt, ALL, 1e-4),
    "cvt": (cvt, ALL, 1e-4),
    "dcn_v2": (dcn_v2, ALL, 1e-4),
    "embedding_bags": (embedding_bags, ALL[:4], 1e-4),   # onnx: an empty max bag is -inf there (test_heldout10_zoo)
    "patchtst": (patchtst, ALL[:4], 1e-4),   # onnx: torch.onnx cannot export unfold of a padded input
    "dlinear": (dlinear, ALL, 1e-4),
    "tft_grn": (tft_grn, ALL, 1e-4),
}


# --- torch.ao quantized modules ------------------------------------------------------------------------


class Recurrent(nn.Module):
    """A two-layer bidirectional LSTM, a GRU over its output, a Linear (dynamic quantization's targets)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 8, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(16, 5, batch_first=True)
        self.fc = nn.Linear(16, 3)

    def forward(self, x):
        y, (h, _c) = self.lstm(x)
        z, _hg = self.gru(y)
        return self.fc(y), h, z


def dynamic_quantized(dtype):
    """``torch.ao.quantization.quantize_dynamic`` of :class:`Recurrent` (LSTM, GRU, Linear) to ``dtype``."""
    def build():
        _seed(20)
        m = Recurrent().eval()
        return torch.ao.quantization.quantize_dynamic(m, {nn.LSTM, nn.GRU, nn.Linear}, dtype=dtype), (torch.randn(2, 5, 6),)
    return build


class EagerQuant(nn.Module):
    """Eager-mode static quantization: QuantStub, conv + bn + relu fused, a strided grouped conv,
    FloatFunctional add_relu / mul_scalar, adaptive pooling, Linear, DeQuantStub."""

    def __init__(self):
        super().__init__()
        import torch.ao.quantization as tq

        self.q, self.dq = tq.QuantStub(), tq.DeQuantStub()
        self.c1, self.bn, self.r = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, groups=4)
        self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(8, 4)
        self.ff = nn.quantized.FloatFunctional()

    def forward(self, x):
        y = self.r(self.bn(self.c1(self.q(x))))
        z = self.c2(y)
        z = self.ff.add_relu(z, self.ff.mul_scalar(z, 0.5))
        return self.dq(self.fc(torch.flatten(self.pool(z), 1)))


def eager_quantized():
    """:class:`EagerQuant` fused, calibrated on three seeded batches and converted (x86 qconfig; the
    caller sets torch's quantized engine to x86)."""
    import torch.ao.quantization as tq

    _seed(21)
    m = EagerQuant().eval()
    m.qconfig = tq.get_default_qconfig("x86")
    tq.fuse_modules(m, [["c1", "bn", "r"]], inplace=True)
    tq.prepare(m, inplace=True)
    with torch.no_grad():
        for s in range(3):
            m(torch.randn(2, 3, 10, 10, generator=torch.Generator().manual_seed(s)))
    tq.convert(m, inplace=True)
    return m, (torch.randn(2, 3, 10, 10),)
