"""The fourth held-out zoo: families and idioms in none of the other zoos (heldout_models.py,
heldout2_models.py, heldout3_models.py), to find what a model srcore has never seen breaks.

Each builder returns ``(module in eval mode, example inputs)``: fixed seeds, small sizes (one
torch call well under a few ms); every model takes every import path (heldout_paths.PATHS).
The quantized net is built by :func:`build_static_quant`.
"""
from __future__ import annotations

import warnings
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from heldout2_models import _norm_stats, _seed


# --- convnets ------------------------------------------------------------------------------


class InceptionBlock(nn.Module):
    """Inception-C style: parallel 1x1, 1x7 then 7x1 (asymmetric padding), a dilated 3x3, and a
    3x3 stride-1 average pool with ``count_include_pad=False`` then 1x1; cat over channels."""

    def __init__(self, cin: int = 8):
        super().__init__()
        self.b1 = nn.Sequential(nn.Conv2d(cin, 6, 1), nn.BatchNorm2d(6), nn.ReLU())
        self.b7 = nn.Sequential(nn.Conv2d(cin, 4, 1), nn.ReLU(), nn.Conv2d(4, 5, (1, 7), padding=(0, 3)), nn.ReLU(),
                                nn.Conv2d(5, 6, (7, 1), padding=(3, 0)), nn.ReLU())
        self.bd = nn.Sequential(nn.Conv2d(cin, 6, 3, padding=2, dilation=2), nn.ReLU())
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.bp = nn.Conv2d(cin, 4, 1)

    def forward(self, x):
        return torch.cat([self.b1(x), self.b7(x), self.bd(x), F.relu(self.bp(self.pool(x)))], 1)


class Inception(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2), nn.ReLU())
        self.block = InceptionBlock(8)
        self.fc = nn.Linear(22, 5)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(self.block(self.stem(x)), 1).flatten(1))


def build_inception():
    _seed(401)
    m = Inception()
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 3, 23, 19),)


class Res2NetBlock(nn.Module):
    """Res2Net: 1x1 to ``scale * w`` channels, ``torch.split`` into scales, each 3x3 conv fed the
    previous output added to its split (hierarchical), the last split passed through, cat, 1x1."""

    def __init__(self, c: int = 16, w: int = 4, scale: int = 4):
        super().__init__()
        self.w, self.scale = w, scale
        self.conv1 = nn.Conv2d(c, w * scale, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(w * scale)
        self.convs = nn.ModuleList([nn.Conv2d(w, w, 3, padding=1, bias=False) for _ in range(scale - 1)])
        self.bns = nn.ModuleList([nn.BatchNorm2d(w) for _ in range(scale - 1)])
        self.conv3 = nn.Conv2d(w * scale, c, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        spx = torch.split(out, self.w, 1)
        outs: List[torch.Tensor] = []
        sp = spx[0]
        for i, (conv, bn) in enumerate(zip(self.convs, self.bns)):
            sp = spx[i] if i == 0 else sp + spx[i]
            sp = F.relu(bn(conv(sp)))
            outs.append(sp)
        outs.append(spx[self.scale - 1])
        return F.relu(self.bn3(self.conv3(torch.cat(outs, 1))) + x)


def build_res2net():
    _seed(402)
    m = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1), Res2NetBlock(), Res2NetBlock())
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 3, 12, 10),)


class HRFusion(nn.Module):
    """HRNet exchange unit: a high- and a low-resolution branch, each fused into the other (strided
    3x3 conv down; 1x1 conv then nearest ``interpolate(scale_factor=2)`` up), added, relu."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU())
        self.to_low = nn.Sequential(nn.Conv2d(8, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU())
        self.hi = nn.Sequential(nn.Conv2d(8, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU())
        self.lo = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU())
        self.down = nn.Sequential(nn.Conv2d(8, 16, 3, 2, 1), nn.BatchNorm2d(16))
        self.up = nn.Sequential(nn.Conv2d(16, 8, 1), nn.BatchNorm2d(8))

    def forward(self, x):
        x = self.stem(x)
        h, l = self.hi(x), self.lo(self.to_low(x))
        h2 = F.relu(h + F.interpolate(self.up(l), scale_factor=2.0, mode="nearest"))
        l2 = F.relu(l + self.down(h))
        return h2, l2


def build_hrnet_fusion():
    _seed(403)
    m = HRFusion()
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 3, 16, 12),)


class RegNetBlock(nn.Module):
    """RegNetY: 1x1, group conv (group width 4, stride 2), squeeze-excite by ``AdaptiveAvgPool2d``,
    1x1; a strided 1x1 projection shortcut."""

    def __init__(self, cin: int = 8, cout: int = 16):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())
        self.b = nn.Sequential(nn.Conv2d(cout, cout, 3, 2, 1, groups=cout // 4, bias=False), nn.BatchNorm2d(cout),
                               nn.ReLU())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(cout, 4, 1), nn.ReLU(), nn.Conv2d(4, cout, 1),
                                nn.Sigmoid())
        self.c = nn.Sequential(nn.Conv2d(cout, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, 2, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.b(self.a(x))
        return F.relu(self.c(y * self.se(y)) + self.proj(x))


def build_regnet():
    _seed(404)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), RegNetBlock(), nn.Flatten(1), nn.LazyLinear(4))
    m(torch.randn(2, 3, 11, 9))
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 3, 11, 9),)


class ESPCN(nn.Module):
    """Super-resolution: ``pixel_unshuffle`` in (space to depth), convs with tanh, ``pixel_shuffle``
    by 3 out (a sub-pixel conv), clamp to [0, 1]."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(12, 16, 5, padding=2)
        self.c2 = nn.Conv2d(16, 8, 3, padding=1)
        self.c3 = nn.Conv2d(8, 3 * 36, 3, padding=1)

    def forward(self, x):
        y = F.pixel_unshuffle(x, 2)
        y = torch.tanh(self.c2(torch.tanh(self.c1(y))))
        return F.pixel_shuffle(self.c3(y), 6).clamp(0.0, 1.0)


def build_espcn():
    _seed(405)
    return ESPCN().eval(), (torch.rand(2, 3, 8, 6),)


class StyleTransfer(nn.Module):
    """Fast style transfer: reflection pad + conv, ``InstanceNorm2d(affine=True)``, a residual block,
    nearest ``Upsample(scale_factor=2)`` + conv, tanh scaled."""

    def __init__(self):
        super().__init__()

        def conv(ci, co, k, s=1):
            return nn.Sequential(nn.ReflectionPad2d(k // 2), nn.Conv2d(ci, co, k, s))

        self.c1, self.n1 = conv(3, 8, 5), nn.InstanceNorm2d(8, affine=True)
        self.c2, self.n2 = conv(8, 16, 3, 2), nn.InstanceNorm2d(16, affine=True)
        self.r1, self.rn1 = conv(16, 16, 3), nn.InstanceNorm2d(16, affine=True)
        self.r2, self.rn2 = conv(16, 16, 3), nn.InstanceNorm2d(16, affine=True)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.c3, self.n3 = conv(16, 8, 3), nn.InstanceNorm2d(8, affine=True)
        self.c4 = conv(8, 3, 5)
        with torch.no_grad():
            for n in (self.n1, self.n2, self.rn1, self.rn2, self.n3):
                n.weight.uniform_(0.5, 1.5)
                n.bias.uniform_(-0.3, 0.3)

    def forward(self, x):
        y = F.relu(self.n1(self.c1(x)))
        y = F.relu(self.n2(self.c2(y)))
        y = y + self.rn2(self.r2(F.relu(self.rn1(self.r1(y)))))
        y = F.relu(self.n3(self.c3(self.up(y))))
        return torch.tanh(self.c4(y)) * 150.0 + 127.5


def build_style_transfer():
    _seed(406)
    return StyleTransfer().eval(), (torch.rand(1, 3, 14, 10),)


# --- recommendation ------------------------------------------------------------------------


class DLRM(nn.Module):
    """DLRM: a bottom MLP on dense features; ``nn.EmbeddingBag`` tables (sum with
    ``per_sample_weights``, mean, max) over flat int64 ids with offsets; pairwise dot-product
    interaction by ``bmm`` and the strict lower triangle by ``torch.tril_indices``; a top MLP."""

    def __init__(self):
        super().__init__()
        self.bot = nn.Sequential(nn.Linear(5, 12), nn.ReLU(), nn.Linear(12, 8), nn.ReLU())
        self.e_sum = nn.EmbeddingBag(20, 8, mode="sum")
        self.e_mean = nn.EmbeddingBag(15, 8, mode="mean")
        self.e_max = nn.EmbeddingBag(10, 8, mode="max")
        n = 4
        self.register_buffer("li", torch.tril_indices(n, n, -1)[0].clone(), persistent=False)
        self.register_buffer("lj", torch.tril_indices(n, n, -1)[1].clone(), persistent=False)
        self.top = nn.Sequential(nn.Linear(8 + n * (n - 1) // 2, 8), nn.ReLU(), nn.Linear(8, 1))

    def forward(self, dense, ids_a, off_a, w_a, ids_b, off_b, ids_c, off_c):
        x = self.bot(dense)
        feats = [x, self.e_sum(ids_a, off_a, per_sample_weights=w_a), self.e_mean(ids_b, off_b),
                 self.e_max(ids_c, off_c)]
        t = torch.stack(feats, 1)
        z = torch.bmm(t, t.transpose(1, 2))
        inter = z[:, self.li, self.lj]
        return torch.sigmoid(self.top(torch.cat([x, inter], 1)))


def build_dlrm():
    _seed(407)
    g = torch.Generator().manual_seed(4070)
    b = 3
    ids_a = torch.randint(0, 20, (7,), generator=g)
    off_a = torch.tensor([0, 2, 5])
    w_a = torch.rand(7, generator=g)
    ids_b = torch.randint(0, 15, (6,), generator=g)
    off_b = torch.tensor([0, 1, 3])
    ids_c = torch.randint(0, 10, (5,), generator=g)
    off_c = torch.tensor([0, 3, 4])
    return DLRM().eval(), (torch.randn(b, 5), ids_a, off_a, w_a, ids_b, off_b, ids_c, off_c)


class WideDeep(nn.Module):
    """Wide & deep: 2-D ``EmbeddingBag`` input (fixed bag size, no offsets), a plain ``Embedding``
    deep part over int64 ids, a wide linear on a multi-hot, ``torch.triu_indices`` selection of a
    field interaction matrix."""

    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(30, 6, mode="mean")
        self.emb = nn.Embedding(12, 6)
        self.wide = nn.Linear(10, 1)
        self.deep = nn.Sequential(nn.Linear(6 * 4 + 3, 16), nn.ReLU(), nn.Linear(16, 1))
        iu = torch.triu_indices(3, 3, 1)
        self.register_buffer("iu", iu.clone(), persistent=False)

    def forward(self, bags, fields, multi_hot):
        f = self.emb(fields)  # (B, 3, 6)
        inter = torch.matmul(f, f.transpose(1, 2))[:, self.iu[0], self.iu[1]]
        deep_in = torch.cat([self.bag(bags), f.flatten(1), inter], 1)
        return self.wide(multi_hot) + self.deep(deep_in)


def build_wide_deep():
    _seed(408)
    g = torch.Generator().manual_seed(4080)
    return WideDeep().eval(), (torch.randint(0, 30, (4, 5), generator=g), torch.randint(0, 12, (4, 3), generator=g),
                               (torch.rand(4, 10, generator=g) > 0.5).float())


# --- point clouds and graphs ---------------------------------------------------------------


class PointNet(nn.Module):
    """PointNet: a T-Net regresses a 3x3 transform (conv1d 1x1, max over points, MLP, + identity)
    applied by ``bmm``; shared MLP as conv1d 1x1 with BatchNorm1d; global max; classifier."""

    def __init__(self):
        super().__init__()
        self.t1 = nn.Sequential(nn.Conv1d(3, 16, 1), nn.BatchNorm1d(16), nn.ReLU(), nn.Conv1d(16, 32, 1), nn.ReLU())
        self.tfc = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 9))
        self.register_buffer("eye", torch.eye(3).flatten())
        self.mlp = nn.Sequential(nn.Conv1d(3, 16, 1), nn.BatchNorm1d(16), nn.ReLU(), nn.Conv1d(16, 32, 1),
                                 nn.BatchNorm1d(32), nn.ReLU())
        self.fc = nn.Linear(32, 4)

    def forward(self, pts):  # (B, 3, N)
        t = torch.max(self.t1(pts), 2, keepdim=False)[0]
        trans = (self.tfc(t) + self.eye).view(-1, 3, 3)
        x = torch.bmm(pts.transpose(2, 1), trans).transpose(2, 1)
        g = self.mlp(x).amax(2)
        return F.log_softmax(self.fc(g), -1), trans


def build_pointnet():
    _seed(409)
    m = PointNet()
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 3, 40),)


class GIN(nn.Module):
    """Message passing on an edge index (int64, shape (2, E)): GIN sum aggregation by ``index_add``,
    a GCN-normalised aggregation by ``scatter_add`` with degrees from ``bincount``-free
    ``scatter_add`` of ones, a max aggregation by ``scatter_reduce(amax, include_self=False)``, and a
    mean readout by ``scatter_reduce('mean')`` over a graph-id vector."""

    def __init__(self):
        super().__init__()
        self.mlp1 = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 12))
        self.lin2 = nn.Linear(12, 12)
        self.lin3 = nn.Linear(12, 8)
        self.eps = 0.1

    def forward(self, x, edge_index, batch):
        src, dst = edge_index[0], edge_index[1]
        n = x.shape[0]
        agg = torch.zeros_like(x).index_add(0, dst, x[src])
        h = F.relu(self.mlp1((1 + self.eps) * x + agg))
        deg = torch.zeros(n, dtype=h.dtype).scatter_add(0, dst, torch.ones(dst.shape[0], dtype=h.dtype)) + 1.0
        norm = deg.rsqrt()
        msg = (h[src] * (norm[src] * norm[dst]).unsqueeze(1))
        idx = dst.unsqueeze(1).expand(-1, h.shape[1])
        h = F.relu(self.lin2(torch.zeros_like(h).scatter_add(0, idx, msg) + h / deg.unsqueeze(1)))
        mx = torch.zeros_like(h).scatter_reduce(0, idx, h[src], reduce="amax", include_self=False)
        h = self.lin3(h + mx)
        bidx = batch.unsqueeze(1).expand(-1, h.shape[1])
        return torch.zeros(2, h.shape[1]).scatter_reduce(0, bidx, h, reduce="mean", include_self=False)


def build_gin():
    _seed(410)
    g = torch.Generator().manual_seed(4100)
    n, e = 9, 20
    edge_index = torch.randint(0, n, (2, e), generator=g)
    batch = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 1])
    return GIN().eval(), (torch.randn(n, 6, generator=g), edge_index, batch)


# --- sequence ------------------------------------------------------------------------------


class WaveNet(nn.Module):
    """WaveNet: causal conv1d (``padding`` then trimming the tail), dilations 1, 2, 4, 8, gated
    ``tanh * sigmoid`` activation from one conv split by ``chunk``, residual and summed skips."""

    def __init__(self, c: int = 8):
        super().__init__()
        self.inp = nn.Conv1d(1, c, 1)
        self.dil = nn.ModuleList([nn.Conv1d(c, 2 * c, 2, dilation=d, padding=d) for d in (1, 2, 4, 8)])
        self.res = nn.ModuleList([nn.Conv1d(c, c, 1) for _ in range(4)])
        self.skip = nn.ModuleList([nn.Conv1d(c, c, 1) for _ in range(4)])
        self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(c, c, 1), nn.ReLU(), nn.Conv1d(c, 16, 1))

    def forward(self, x):
        x = self.inp(x)
        t = x.shape[-1]
        skips = torch.zeros_like(x)
        for conv, res, skip in zip(self.dil, self.res, self.skip):
            a, b = conv(x)[..., :t].chunk(2, 1)
            z = torch.tanh(a) * torch.sigmoid(b)
            skips = skips + skip(z)
            x = x + res(z)
        return F.log_softmax(self.out(skips), 1)


def build_wavenet():
    _seed(411)
    return WaveNet().eval(), (torch.randn(2, 1, 30),)


class Seq2SeqDecoder(nn.Module):
    """``nn.TransformerDecoderLayer`` (batch_first, post-norm, relu) with a causal target mask from
    ``generate_square_subsequent_mask`` (float -inf) and a bool memory key padding mask from lengths."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(16, 7)

    def forward(self, tgt, memory, mem_len):
        t = tgt.shape[1]
        causal = torch.triu(torch.full((t, t), float("-inf")), 1)
        pad = torch.arange(memory.shape[1]).unsqueeze(0) >= mem_len.unsqueeze(1)
        return self.head(self.layer(tgt, memory, tgt_mask=causal, memory_key_padding_mask=pad))


def build_seq2seq_decoder():
    _seed(412)
    return Seq2SeqDecoder().eval(), (torch.randn(2, 5, 16), torch.randn(2, 7, 16), torch.tensor([7, 4]))


class Perceiver(nn.Module):
    """Perceiver: learned latents cross-attend to the inputs through
    ``F.scaled_dot_product_attention`` with a bool mask (True = attend, from a padding mask), then
    self-attend among latents (no mask, explicit ``scale``); mean over latents."""

    def __init__(self, d: int = 16, n_lat: int = 6, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.latents = nn.Parameter(torch.randn(n_lat, d))
        self.q, self.kv = nn.Linear(d, d), nn.Linear(8, 2 * d)
        self.sq = nn.Linear(d, 3 * d)
        self.ln = nn.LayerNorm(d)
        self.out = nn.Linear(d, 3)

    def _split(self, x):
        b, n, d = x.shape
        return x.view(b, n, self.heads, d // self.heads).transpose(1, 2)

    def forward(self, x, valid):  # x (B, N, 8), valid (B, N) bool
        b = x.shape[0]
        lat = self.latents.unsqueeze(0).expand(b, -1, -1)
        q = self._split(self.q(lat))
        k, v = self.kv(x).chunk(2, -1)
        mask = valid[:, None, None, :]
        a = F.scaled_dot_product_attention(q, self._split(k), self._split(v), attn_mask=mask)
        lat = self.ln(lat + a.transpose(1, 2).reshape(b, -1, q.shape[1] * q.shape[3]))
        qq, kk, vv = self.sq(lat).chunk(3, -1)
        a = F.scaled_dot_product_attention(self._split(qq), self._split(kk), self._split(vv), scale=0.3)
        lat = lat + a.transpose(1, 2).flatten(2)
        return self.out(lat.mean(1))


def build_perceiver():
    _seed(413)
    valid = torch.tensor([[True] * 9, [True] * 5 + [False] * 4])
    return Perceiver().eval(), (torch.randn(2, 9, 8), valid)


# --- numerics and dtypes -------------------------------------------------------------------


class Float64Net(nn.Module):
    """A float64 model: linear, layer norm, gelu(tanh), ``logcumsumexp``, ``F.normalize``,
    ``torch.norm`` (p=2 and p=1 over a dim) and ``cdist`` to float64 centers."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 8).double()
        self.ln = nn.LayerNorm(8).double()
        self.register_buffer("centers", torch.randn(3, 8, dtype=torch.float64))

    def forward(self, x):
        y = F.gelu(self.ln(self.fc(x)), approximate="tanh")
        c = torch.logcumsumexp(y, 1)
        n = F.normalize(y, dim=1)
        d = torch.cdist(n, self.centers)
        return c, d, torch.norm(y, dim=1), torch.norm(y, p=1, dim=0, keepdim=True)


def build_float64():
    _seed(414)
    return Float64Net().eval(), (torch.randn(4, 6, dtype=torch.float64),)


class Numerics(nn.Module):
    """int32 inputs and arithmetic; ``torch.where`` with scalar operands; ``clamp`` with tensor
    bounds; ``bucketize`` (both ``right``) and ``searchsorted`` (``side='right'``, int32 out);
    ``nan_to_num`` with explicit and default fills; ``logcumsumexp`` on float32."""

    def __init__(self):
        super().__init__()
        self.register_buffer("edges", torch.tensor([-1.0, -0.25, 0.0, 0.5, 1.5]))
        self.register_buffer("sorted_rows", torch.sort(torch.randn(3, 6), 1)[0])

    def forward(self, x, ids, lo, hi):
        a = torch.where(x > 0, 1.5, -2.0)
        b = torch.where(ids % 2 == 0, ids * 3, 7)  # int32
        c = torch.clamp(x, lo, hi)
        d = torch.bucketize(x, self.edges) + torch.bucketize(x, self.edges, right=True)
        e = torch.searchsorted(self.sorted_rows, x[:, :4].contiguous(), side="right", out_int32=True)
        y = torch.log(x)  # nan for negatives, -inf at 0
        f = torch.nan_to_num(y, nan=0.5, posinf=9.0, neginf=-9.0) + torch.nan_to_num(y / 0.0)
        g = torch.logcumsumexp(x, dim=1)
        return a + c, b, d, e, f.clamp(-1e6, 1e6), g


def build_numerics():
    _seed(415)
    g = torch.Generator().manual_seed(4150)
    x = torch.randn(3, 5, generator=g)
    x[0, 0] = 0.0
    ids = torch.randint(-5, 50, (3, 5), generator=g, dtype=torch.int32)
    lo = torch.full((3, 5), -0.5) - torch.rand(3, 5, generator=g)
    return Numerics().eval(), (x, ids, lo, lo + 1.2)


# --- quantized ---------------------------------------------------------------------------------


class StaticQuantNet(nn.Module):
    """Eager-mode static quantization with ops the other zoos lack: a quantized conv1d (+bn+relu
    fused), a standalone ``BatchNorm2d`` (``quantized::batch_norm2d``), quantized LayerNorm,
    hardswish, leaky relu and sigmoid; FloatFunctional ``mul``, ``add_scalar``, ``mul_scalar`` and
    ``cat``. ``standalone_bn=False``: an identity instead of the BatchNorm2d (torch cannot run a
    scripted quantized BatchNorm2d)."""

    def __init__(self, standalone_bn: bool = True):
        super().__init__()
        import torch.ao.quantization as tq
        from torch.ao.nn.quantized import FloatFunctional

        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.c1 = nn.Sequential(nn.Conv1d(4, 8, 3, padding=1), nn.BatchNorm1d(8), nn.ReLU())
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8) if standalone_bn else nn.Identity()
        self.ln = nn.LayerNorm([8, 6])
        self.hs, self.lr, self.sg = nn.Hardswish(), nn.LeakyReLU(0.1), nn.Sigmoid()
        self.mul, self.adds, self.muls, self.cat = FloatFunctional(), FloatFunctional(), FloatFunctional(), FloatFunctional()
        self.fc = nn.Linear(8 * 2 * 6, 4)

    def forward(self, x):  # x (B, 4, 6)
        y = self.c1(self.quant(x))  # (B, 8, 6)
        z = self.ln(y)
        a = self.hs(z)
        b = self.sg(self.lr(z))
        g = self.mul.mul(a, b)
        g = self.muls.mul_scalar(self.adds.add_scalar(g, 0.25), 2.0)
        img = self.bn(self.c2(g.unsqueeze(2)))  # (B, 8, 1, 6)
        h = self.cat.cat([img, z.unsqueeze(2)], 2)  # (B, 8, 2, 6)
        return self.dequant(self.fc(h.flatten(1)))


def build_static_quant(engine: str = "x86", standalone_bn: bool = True):
    """:class:`StaticQuantNet` fused, per-channel weights (``engine``'s default qconfig), calibrated
    on four seeded batches and converted (the caller sets torch's quantized engine to ``engine``)."""
    import torch.ao.quantization as tq

    _seed(420)
    m = StaticQuantNet(standalone_bn)
    _norm_stats(m)
    m.eval()
    tq.fuse_modules(m, [["c1.0", "c1.1", "c1.2"]], inplace=True)
    m.qconfig = tq.get_default_qconfig(engine)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tq.prepare(m, inplace=True)
        with torch.no_grad():
            for s in range(4):
                m(torch.randn(3, 4, 6, generator=torch.Generator().manual_seed(s)))
        tq.convert(m, inplace=True)
    return m, (torch.randn(3, 4, 6),)


# --- dict output ---------------------------------------------------------------------------


class DictHeads(nn.Module):
    """A multi-task model returning a dict of heads (traced with ``strict=False, check_trace=False``)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 12), nn.GELU())
        self.cls, self.reg = nn.Linear(12, 3), nn.Linear(12, 2)

    def forward(self, x):
        h = self.body(x)
        return {"logits": self.cls(h), "boxes": self.reg(h).sigmoid(), "feat": h}


def build_dict_heads():
    _seed(430)
    return DictHeads().eval(), (torch.randn(4, 6),)


# --- registry ------------------------------------------------------------------------------------


MODELS: Dict[str, Callable[[], Tuple[nn.Module, tuple]]] = {
    "inception": build_inception,
    "res2net": build_res2net,
    "hrnet_fusion": build_hrnet_fusion,
    "regnet": build_regnet,
    "espcn": build_espcn,
    "style_transfer": build_style_transfer,
    "dlrm": build_dlrm,
    "wide_deep": build_wide_deep,
    "pointnet": build_pointnet,
    "gin": build_gin,
    "wavenet": build_wavenet,
    "seq2seq_decoder": build_seq2seq_decoder,
    "perceiver": build_perceiver,
    "float64": build_float64,
    "numerics": build_numerics,
}
