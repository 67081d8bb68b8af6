"""The seventh held-out zoo: families and idioms in none of the other zoos (heldout_models.py to
heldout6_models.py): a dynamic (hypernetwork) convolution by ``F.conv2d`` with a computed grouped
weight, FiLM conditioning, a ConvLSTM unrolled in a loop, a pix2pix U-Net (InstanceNorm,
ConvTranspose, dropout), ESRGAN's RRDB with ``pixel_shuffle``, TinyYOLOv3's route/upsample with an
asymmetric-pad stride-1 max pool, sliding-window attention by ``Tensor.unfold``, LSH bucketing
(``argsort`` + ``gather`` + inverse permutation), mixture-of-experts with ``topk`` routing and
``index_add``, PointNet++ ball query (``cdist``, radius mask, ``topk``), an FFT spectral layer,
torch.ao eager static quantization, integer/bool outputs, dict/list outputs, a 0-d input, an empty
batch, channels_last and non-contiguous inputs and a float64 model.

Each builder returns ``(module in eval mode, example inputs)``: fixed seeds, small sizes.
"""
from __future__ import annotations

import warnings
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from heldout2_models import _norm_stats, _seed


def _x(seed: int, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# --- vision ----------------------------------------------------------------------------------


class DynamicConv(nn.Module):
    """A hypernetwork: per-sample 3x3 kernels computed from the pooled input, applied to the whole
    batch at once as one grouped ``F.conv2d`` (batch folded into channels)."""

    def __init__(self, c: int = 4, o: int = 6):
        super().__init__()
        self.c, self.o = c, o
        self.hyper = nn.Sequential(nn.Linear(c, 16), nn.ReLU(), nn.Linear(16, o * c * 9))
        self.bias = nn.Parameter(torch.randn(o) * 0.1)

    def forward(self, x):
        b, c, h, w = x.shape
        k = self.hyper(x.mean((2, 3))).reshape(b * self.o, c, 3, 3)
        y = F.conv2d(x.reshape(1, b * c, h, w), k, padding=1, groups=b)
        return y.reshape(b, self.o, h, w) + self.bias.view(1, -1, 1, 1)


def build_dynamic_conv():
    _seed(701)
    return DynamicConv().eval(), (_x(1, 3, 4, 10, 10),)


class FiLM(nn.Module):
    """FiLM: per-channel scale and shift predicted from a conditioning vector, ``(1 + gamma)``."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.film = nn.Linear(5, 2 * 8)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 4)

    def forward(self, x, cond):
        gamma, beta = self.film(cond).chunk(2, dim=-1)
        y = F.relu(self.conv1(x))
        y = self.bn(self.conv2(y))
        y = F.relu(y * (1 + gamma[:, :, None, None]) + beta.unsqueeze(-1).unsqueeze(-1)) + y
        return self.head(y.amax(dim=(2, 3)))


def build_film():
    _seed(702)
    m = FiLM()
    _norm_stats(m)
    return m.eval(), (_x(1, 2, 3, 8, 8), _x(2, 2, 5))


class ConvLSTM(nn.Module):
    """A ConvLSTM cell unrolled over time in a Python loop (``range(x.size(1))``), gates from one conv
    of ``cat([x_t, h])``, the hidden states stacked."""

    def __init__(self, c: int = 3, hid: int = 4):
        super().__init__()
        self.hid = hid
        self.gates = nn.Conv2d(c + hid, 4 * hid, 3, padding=1)

    def forward(self, x):
        b, t, c, hh, ww = x.shape
        h = torch.zeros(b, self.hid, hh, ww, dtype=x.dtype)
        cell = torch.zeros(b, self.hid, hh, ww, dtype=x.dtype)
        outs: List[torch.Tensor] = []
        for i in range(t):
            i_, f, g, o = self.gates(torch.cat([x[:, i], h], 1)).chunk(4, 1)
            cell = torch.sigmoid(f) * cell + torch.sigmoid(i_) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(cell)
            outs.append(h)
        return torch.stack(outs, 1), cell


def build_convlstm():
    _seed(703)
    return ConvLSTM().eval(), (_x(1, 2, 4, 3, 6, 6),)


class Pix2PixUNet(nn.Module):
    """pix2pix generator in small: strided conv + InstanceNorm + LeakyReLU down, ConvTranspose +
    InstanceNorm + Dropout (eval: identity) + ReLU up with skip concatenation, tanh out."""

    def __init__(self):
        super().__init__()
        self.d1 = nn.Conv2d(3, 8, 4, 2, 1)
        self.d2 = nn.Sequential(nn.Conv2d(8, 16, 4, 2, 1, bias=False), nn.InstanceNorm2d(16), nn.LeakyReLU(0.2))
        self.d3 = nn.Sequential(nn.Conv2d(16, 16, 4, 2, 1, bias=False), nn.InstanceNorm2d(16, affine=True),
                                nn.LeakyReLU(0.2))
        self.u3 = nn.Sequential(nn.ConvTranspose2d(16, 16, 4, 2, 1, bias=False), nn.InstanceNorm2d(16),
                                nn.Dropout(0.5), nn.ReLU())
        self.u2 = nn.Sequential(nn.ConvTranspose2d(32, 8, 4, 2, 1, bias=False), nn.InstanceNorm2d(8), nn.ReLU())
        self.u1 = nn.ConvTranspose2d(16, 3, 4, 2, 1)

    def forward(self, x):
        a = F.leaky_relu(self.d1(x), 0.2)
        b = self.d2(a)
        c = self.d3(b)
        y = self.u3(c)
        y = self.u2(torch.cat([y, b], 1))
        return torch.tanh(self.u1(torch.cat([y, a], 1)))


def build_pix2pix():
    _seed(704)
    return Pix2PixUNet().eval(), (_x(1, 2, 3, 16, 16),)


class DenseBlock5(nn.Module):
    def __init__(self, c: int = 8, g: int = 4):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(c + i * g, g if i < 4 else c, 3, 1, 1) for i in range(5)])

    def forward(self, x):
        feats = [x]
        for i, conv in enumerate(self.convs):
            y = conv(torch.cat(feats, 1))
            if i < 4:
                feats.append(F.leaky_relu(y, 0.2))
            else:
                return x + 0.2 * y
        return x


class RRDBNet(nn.Module):
    """ESRGAN: residual-in-residual dense blocks (5 convs, dense concatenation, 0.2 residual
    scaling), then a x2 ``pixel_shuffle`` upsampler."""

    def __init__(self):
        super().__init__()
        self.first = nn.Conv2d(3, 8, 3, 1, 1)
        self.rdbs = nn.Sequential(DenseBlock5(), DenseBlock5())
        self.up = nn.Conv2d(8, 3 * 4, 3, 1, 1)

    def forward(self, x):
        f = self.first(x)
        f = f + 0.2 * self.rdbs(f)
        return F.pixel_shuffle(self.up(f), 2)


def build_rrdb():
    _seed(705)
    return RRDBNet().eval(), (_x(1, 1, 3, 8, 8),)


class TinyYOLOv3(nn.Module):
    """TinyYOLOv3's tail: the stride-1 max pool after a (0, 1, 0, 1) zero pad, two heads, the route
    (1x1 conv, nearest x2 upsample, concatenation with an earlier map) and the YOLO decode."""

    def __init__(self, na: int = 3, nc: int = 2):
        super().__init__()
        self.na, self.no = na, nc + 5
        self.b1 = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.LeakyReLU(0.1), nn.MaxPool2d(2, 2))
        self.b2 = nn.Sequential(nn.Conv2d(8, 16, 3, 1, 1), nn.LeakyReLU(0.1), nn.MaxPool2d(2, 2))
        self.pad = nn.ZeroPad2d((0, 1, 0, 1))
        self.pool1 = nn.MaxPool2d(2, 1)
        self.head1 = nn.Conv2d(16, na * self.no, 1)
        self.route = nn.Conv2d(16, 8, 1)
        self.head2 = nn.Conv2d(16, na * self.no, 1)
        self.register_buffer("anchors", torch.tensor([[1.0, 2.0], [2.0, 1.5], [3.0, 3.0]]))

    def decode(self, p, stride: int):
        b, _, h, w = p.shape
        p = p.view(b, self.na, self.no, h, w).permute(0, 1, 3, 4, 2)
        gy, gx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        grid = torch.stack((gx, gy), -1).view(1, 1, h, w, 2).to(p.dtype)
        xy = (p[..., :2].sigmoid() + grid) * stride
        wh = p[..., 2:4].exp() * self.anchors.view(1, self.na, 1, 1, 2) * stride
        return torch.cat((xy, wh, p[..., 4:].sigmoid()), -1).reshape(b, -1, self.no)

    def forward(self, x):
        early = self.b1(x)
        deep = self.b2(early)
        deep = self.pool1(self.pad(deep))
        o1 = self.decode(self.head1(deep), 4)
        r = F.interpolate(self.route(deep), scale_factor=2.0, mode="nearest")
        o2 = self.decode(self.head2(torch.cat([r, early], 1)), 2)
        return torch.cat([o1, o2], 1)


def build_tiny_yolov3():
    _seed(706)
    return TinyYOLOv3().eval(), (_x(1, 1, 3, 16, 16),)


# --- sequence ---------------------------------------------------------------------------------


class SlidingWindowAttention(nn.Module):
    """Local attention: keys/values padded by the window's half and cut into windows with
    ``Tensor.unfold(1, w, 1)``, each query attending to its own window; padded keys masked by -inf."""

    def __init__(self, d: int = 8, win: int = 5):
        super().__init__()
        self.win = win
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, -1)
        p = self.win // 2
        valid = F.pad(torch.ones(b, t, dtype=x.dtype), (p, p)).unfold(1, self.win, 1)        # b t w
        kw = F.pad(k, (0, 0, p, p)).unfold(1, self.win, 1)                                  # b t d w
        vw = F.pad(v, (0, 0, p, p)).unfold(1, self.win, 1)
        s = torch.einsum("btd,btdw->btw", q, kw) / d ** 0.5
        s = s.masked_fill(valid == 0, float("-inf"))
        return self.out(torch.einsum("btw,btdw->btd", s.softmax(-1), vw))


def build_sliding_window_attn():
    _seed(707)
    return SlidingWindowAttention().eval(), (_x(1, 2, 12, 8),)


class LSHBucketAttention(nn.Module):
    """Reformer-style LSH: random rotations, bucket = argmax of [r, -r], tokens sorted by
    (bucket, position) with ``argsort``, attention inside fixed-size chunks of the sorted order,
    results scattered back by the inverse permutation (``argsort`` of the permutation)."""

    def __init__(self, d: int = 8, buckets: int = 4, chunk: int = 4):
        super().__init__()
        self.chunk = chunk
        self.qk = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.register_buffer("rot", torch.randn(d, buckets // 2))

    def forward(self, x):
        b, t, d = x.shape
        qk = self.qk(x)
        v = self.v(x)
        r = qk @ self.rot
        bucket = torch.cat([r, -r], -1).argmax(-1)
        key = bucket * t + torch.arange(t).unsqueeze(0)
        perm = key.argsort(-1)
        undo = perm.argsort(-1)
        sq = qk.gather(1, perm.unsqueeze(-1).expand(b, t, d)).view(b, t // self.chunk, self.chunk, d)
        sv = v.gather(1, perm.unsqueeze(-1).expand(b, t, d)).view(b, t // self.chunk, self.chunk, d)
        kn = F.normalize(sq, dim=-1)
        att = (sq @ kn.transpose(-1, -2) / d ** 0.5).softmax(-1)
        y = (att @ sv).reshape(b, t, d)
        return y.gather(1, undo.unsqueeze(-1).expand(b, t, d)), bucket


def build_lsh_bucket():
    _seed(708)
    return LSHBucketAttention().eval(), (_x(1, 2, 16, 8),)


class TopKMoE(nn.Module):
    """Mixture of experts: router softmax, ``topk(2)``, renormalised gates; per expert the routed
    tokens found with ``nonzero``/``where``, their outputs weighted and ``index_add``-ed back."""

    def __init__(self, d: int = 8, n: int = 4, k: int = 2):
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, n, bias=False)
        self.experts = nn.ModuleList([nn.Sequential(nn.Linear(d, 16), nn.GELU(), nn.Linear(16, d)) for _ in range(n)])

    def forward(self, x):
        tokens = x.reshape(-1, x.shape[-1])
        probs = self.router(tokens).softmax(-1)
        w, idx = probs.topk(self.k, -1)
        w = w / w.sum(-1, keepdim=True)
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            tok, slot = torch.where(idx == e)
            y = expert(tokens[tok]) * w[tok, slot].unsqueeze(-1)
            out = out.index_add(0, tok, y)
        return out.view(x.shape), idx


def build_moe_topk():
    _seed(709)
    return TopKMoE().eval(), (_x(1, 2, 6, 8),)


# --- points -----------------------------------------------------------------------------------


class BallQuery(nn.Module):
    """PointNet++ set abstraction with a ball query: centroids (every 4th point), ``cdist``, points
    beyond the radius pushed to +inf, ``topk(largest=False)`` neighbours, missing ones replaced by
    the first (as the CUDA kernel does), relative coordinates gathered, shared MLP, max pool."""

    def __init__(self, radius: float = 1.2, k: int = 6):
        super().__init__()
        self.r, self.k = radius, k
        self.mlp = nn.Sequential(nn.Linear(3 + 4, 16), nn.ReLU(), nn.Linear(16, 16))

    def forward(self, xyz, feats):
        b, n, _ = xyz.shape
        centers = xyz[:, ::4]
        d = torch.cdist(centers, xyz)
        d = torch.where(d > self.r, torch.full_like(d, float("inf")), d)
        dist, idx = d.topk(self.k, -1, largest=False)
        idx = torch.where(torch.isinf(dist), idx[..., :1].expand_as(idx), idx)
        m = centers.shape[1]
        flat = idx.reshape(b, m * self.k, 1)
        g_xyz = xyz.gather(1, flat.expand(b, m * self.k, 3)).view(b, m, self.k, 3) - centers.unsqueeze(2)
        g_f = feats.gather(1, flat.expand(b, m * self.k, feats.shape[-1])).view(b, m, self.k, -1)
        return self.mlp(torch.cat([g_xyz, g_f], -1)).amax(2), idx


def build_ball_query():
    _seed(710)
    return BallQuery().eval(), (_x(1, 2, 16, 3), _x(2, 2, 16, 4))


# --- spectral ---------------------------------------------------------------------------------


class SpectralLayer(nn.Module):
    """FNO-style spectral layer: ``rfft`` along time, the lowest modes multiplied by complex weights,
    ``irfft`` back to the input length, plus a pointwise path."""

    def __init__(self, c: int = 4, modes: int = 5):
        super().__init__()
        self.modes = modes
        self.wr = nn.Parameter(torch.randn(c, c, modes) * 0.3)
        self.wi = nn.Parameter(torch.randn(c, c, modes) * 0.3)
        self.pw = nn.Conv1d(c, c, 1)

    def forward(self, x):
        n = x.shape[-1]
        xf = torch.fft.rfft(x, dim=-1)[..., : self.modes]
        w = torch.complex(self.wr, self.wi)
        yf = torch.einsum("bim,iom->bom", xf, w)
        y = torch.fft.irfft(yf, n=n, dim=-1)
        return F.gelu(y + self.pw(x))


def build_spectral_fft():
    _seed(711)
    return SpectralLayer().eval(), (_x(1, 2, 4, 16),)


# --- quantized ----------------------------------------------------------------------------------


class _EagerQ(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        y = self.pool(self.relu(self.bn(self.conv(self.quant(x)))))
        return self.dequant(self.fc(torch.flatten(y, 1)))


def build_eager_quant():
    """torch.ao eager-mode post-training static quantization (fbgemm qconfig, conv+bn+relu fused,
    calibrated on four seeded batches)."""
    import torch.ao.quantization as tq

    _seed(712)
    m = _EagerQ()
    _norm_stats(m)
    m.eval()
    m.qconfig = tq.get_default_qconfig("fbgemm")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = tq.fuse_modules(m, [["conv", "bn", "relu"]])
        tq.prepare(m, inplace=True)
        with torch.no_grad():
            for s in range(4):
                m(_x(100 + s, 2, 3, 8, 8))
        tq.convert(m, inplace=True)
    return m.eval(), (_x(1, 2, 3, 8, 8),)


# --- outputs and inputs of unusual kinds ------------------------------------------------------------


class IntBoolOutputs(nn.Module):
    """Integer and bool outputs: ``argmax`` (int64), a bool mask, a count (sum of bools: int64),
    ``int()`` casts, ``bucket`` ids by ``floor`` then ``long``, and a float output."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 5)

    def forward(self, x):
        y = self.lin(x)
        cls = y.argmax(-1)
        pos = y > 0
        count = pos.sum(-1)
        ids = (y * 2).floor().clamp(-3, 3).long()
        return cls, pos, count, ids.to(torch.int32), y.softmax(-1)


def build_int_bool_outputs():
    _seed(713)
    return IntBoolOutputs().eval(), (_x(1, 4, 6),)


class DictListOutputs(nn.Module):
    """A ``Dict[str, Tensor]`` output and a ``List[Tensor]`` one (multi-scale features), keys not in
    alphabetical order."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 4, 3, 2, 1)
        self.c2 = nn.Conv2d(4, 4, 3, 2, 1)

    def forward(self, x) -> Tuple[Dict[str, torch.Tensor], List[torch.Tensor]]:
        a = F.relu(self.c1(x))
        b = F.relu(self.c2(a))
        return {"scores": b.mean((2, 3)), "boxes": a.flatten(2).amax(-1)}, [a, b, b.sigmoid()]


def build_dict_list_outputs():
    _seed(714)
    return DictListOutputs().eval(), (_x(1, 2, 3, 8, 8),)


class ScalarInput(nn.Module):
    """A 0-d tensor input (a temperature) dividing logits, and a 0-d output (the mean entropy)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 5)

    def forward(self, x, temperature):
        p = (self.lin(x) / temperature).softmax(-1)
        ent = -(p * p.clamp_min(1e-9).log()).sum(-1).mean()
        return p, ent


def build_scalar_input():
    _seed(715)
    return ScalarInput().eval(), (_x(1, 3, 6), torch.tensor(0.7))


class EmptyBatch(nn.Module):
    """A batch of zero samples through conv, batch norm, pooling, linear and softmax."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        y = F.relu(self.bn(self.conv(x))).mean((2, 3))
        return self.fc(y).softmax(-1)


def build_empty_batch():
    _seed(716)
    m = EmptyBatch()
    _norm_stats(m)
    return m.eval(), (torch.zeros(0, 3, 6, 6),)


class LayoutInputs(nn.Module):
    """A channels_last image and a transposed (non-contiguous) matrix as inputs."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.lin = nn.Linear(5, 4)

    def forward(self, img, seq):
        a = self.conv(img).mean((2, 3))
        return a + self.lin(seq).sum(1), img[:, :, 0, :].sum(-1) * seq[:, 0, :1]


def build_layout_inputs():
    _seed(717)
    img = _x(1, 2, 3, 6, 7).contiguous(memory_format=torch.channels_last)
    seq = _x(2, 2, 5, 4).transpose(1, 2)    # (2, 4, 5), non-contiguous
    return LayoutInputs().eval(), (img, seq)


class Float64Model(nn.Module):
    """A float64 model: GRU cell, LayerNorm, ``softplus`` with beta, ``cumsum``, ``logsumexp`` of a stack,
    a float32 output cast from the float64 state."""

    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(4, 6)
        self.ln = nn.LayerNorm(6)

    def forward(self, x, h):
        for i in range(x.shape[1]):
            h = self.cell(x[:, i], h)
        y = F.softplus(self.ln(h), beta=2.0).cumsum(-1)
        return torch.logsumexp(torch.stack([y, -y]), 0), h.float()


def build_float64():
    _seed(718)
    return Float64Model().double().eval(), (_x(1, 2, 3, 4, dtype=torch.float64), _x(2, 2, 6, dtype=torch.float64))


MODELS: Dict[str, Callable[[], Tuple[nn.Module, tuple]]] = {
    "dynamic_conv": build_dynamic_conv,
    "film": build_film,
    "convlstm": build_convlstm,
    "pix2pix": build_pix2pix,
    "rrdb": build_rrdb,
    "tiny_yolov3": build_tiny_yolov3,
    "sliding_window_attn": build_sliding_window_attn,
    "lsh_bucket": build_lsh_bucket,
    "moe_topk": build_moe_topk,
    "ball_query": build_ball_query,
    "spectral_fft": build_spectral_fft,
    "eager_quant": build_eager_quant,
    "int_bool_outputs": build_int_bool_outputs,
    "dict_list_outputs": build_dict_list_outputs,
    "scalar_input": build_scalar_input,
    "empty_batch": build_empty_batch,
    "layout_inputs": build_layout_inputs,
    "float64_gru": build_float64,
}
