"""Zoo models written the way real PyTorch code is: ViT, GPT block, ResNeXt/SE, MobileNetV3 and
EfficientNet pieces, a detection head, a temporal conv net, a bidirectional GRU encoder, a
point-cloud net, a graph-conv layer, pixel ops, in-place heavy code and script-only control flow.

Imported by ``models.py`` (``parity_models``), whose ``ZOO`` takes ``REALWORLD``. Every case feeds
a second input of another batch size (and, where legal, another spatial size or sequence length).
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from parity_models import ZooCase, _randomize_bn, _seed


# --- vision transformers and CNN blocks ------------------------------------------------------------

class ViTTiny(nn.Module):
    """Conv patch embedding (stride = patch), flatten(2).transpose(1, 2), a cls token concatenated
    with ``expand``, a learned positional embedding, a pre-norm batch-first encoder layer, and a
    head on the mean of the patch tokens plus the cls token."""

    def __init__(self, patch: int = 4, dim: int = 16, n_patches: int = 12):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, n_patches + 1, dim) * 0.02)
        self.block = nn.TransformerEncoderLayer(dim, 2, 32, dropout=0.1, activation="gelu",
                                                batch_first=True, norm_first=True)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(2 * dim, 5)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)        # B, N, D
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls, x), dim=1) + self.pos_embed
        x = self.norm(self.block(x))
        return self.head(torch.cat([x[:, 0], x[:, 1:].mean(dim=1)], dim=-1))


def build_vit_tiny():
    _seed(101)
    # 12 x 16 image, 4 x 4 patches: 3 x 4 = 12 patches (non-square)
    return ViTTiny().eval(), (torch.randn(2, 3, 12, 16),), [(torch.randn(1, 3, 12, 16),),
                                                            (torch.randn(3, 3, 12, 16),)]


class SEBlock(nn.Module):
    def __init__(self, c: int, r: int = 4):
        super().__init__()
        self.fc1 = nn.Conv2d(c, c // r, 1)
        self.fc2 = nn.Conv2d(c // r, c, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        s = torch.sigmoid(self.fc2(F.relu(self.fc1(s))))
        return x * s


class ResNeXtSE(nn.Module):
    """A ResNeXt bottleneck (grouped 3x3 conv, cardinality 4) with a squeeze-excitation gate and a
    strided projection shortcut; global average pool by ``mean([2, 3])``."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(8, 16, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=4, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.conv3 = nn.Conv2d(16, 24, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(24)
        self.se = SEBlock(24)
        self.down = nn.Sequential(nn.Conv2d(8, 24, 1, stride=2, bias=False), nn.BatchNorm2d(24))
        self.fc = nn.Linear(24, 3)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.se(self.bn3(self.conv3(out)))
        out = F.relu(out + self.down(x))
        return out, self.fc(out.mean([2, 3]))


def build_resnext_se():
    _seed(102)
    m = ResNeXtSE()
    _randomize_bn(m)
    return m.eval(), (torch.randn(2, 8, 10, 14),), [(torch.randn(1, 8, 7, 9),), (torch.randn(3, 8, 10, 14),)]


class MobileNetV3Block(nn.Module):
    """A MobileNetV3 bneck: 1x1 expand + hardswish, 5x5 strided depthwise, a hardsigmoid SE gate
    (nn.Hardsigmoid module), 1x1 project; in-place ReLU in the SE squeeze."""

    def __init__(self):
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(6, 18, 1, bias=False), nn.BatchNorm2d(18), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(18, 18, 5, 2, 2, groups=18, bias=False), nn.BatchNorm2d(18),
                                nn.Hardswish(inplace=True))
        self.se_reduce = nn.Conv2d(18, 8, 1)
        self.se_expand = nn.Conv2d(8, 18, 1)
        self.gate = nn.Hardsigmoid()
        self.project = nn.Sequential(nn.Conv2d(18, 10, 1, bias=False), nn.BatchNorm2d(10))

    def forward(self, x):
        y = self.dw(self.expand(x))
        s = F.adaptive_avg_pool2d(y, (1, 1))
        s = self.se_expand(F.relu(self.se_reduce(s), inplace=True))
        y = y * self.gate(s)
        return F.hardsigmoid(self.project(y)) * F.hardswish(self.project(y))


def build_mobilenetv3_block():
    _seed(103)
    m = MobileNetV3Block()
    _randomize_bn(m)
    return m.eval(), (torch.randn(2, 6, 11, 8),), [(torch.randn(1, 6, 9, 13),)]


class MBConv(nn.Module):
    """EfficientNet's MBConv: SiLU, depthwise 3x3, an SE gate with SiLU, drop-path that is the
    identity in eval (``if not self.training``), residual add."""

    def __init__(self, c: int = 8, expand: int = 4, drop_path: float = 0.2):
        super().__init__()
        h = c * expand
        self.drop_path = drop_path
        self.expand = nn.Sequential(nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.SiLU())
        self.dw = nn.Sequential(nn.Conv2d(h, h, 3, 1, 1, groups=h, bias=False), nn.BatchNorm2d(h), nn.SiLU())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(h, 2, 1), nn.SiLU(), nn.Conv2d(2, h, 1),
                                nn.Sigmoid())
        self.project = nn.Sequential(nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c))

    def _drop_path(self, x):
        if not self.training or self.drop_path == 0.0:
            return x
        keep = 1.0 - self.drop_path
        mask = x.new_empty((x.shape[0], 1, 1, 1)).bernoulli_(keep)
        return x * mask / keep

    def forward(self, x):
        y = self.dw(self.expand(x))
        y = y * self.se(y)
        return x + self._drop_path(self.project(y))


def build_mbconv():
    _seed(104)
    m = MBConv()
    _randomize_bn(m)
    return m.eval(), (torch.randn(2, 8, 9, 7),), [(torch.randn(1, 8, 6, 10),)]


# --- detection, sequences ------------------------------------------------------------------------

class DetectionHead(nn.Module):
    """An anchor-based head: class and box convs, permute/reshape to (N, A*H*W, C), sigmoid
    scores, best class by max/argmax, a score threshold with torch.where, gather of the best
    anchor's box, and box decoding (exp with clamp, stack(dim=-1))."""

    def __init__(self, c: int = 8, anchors: int = 3, classes: int = 4):
        super().__init__()
        self.a, self.k = anchors, classes
        self.cls_conv = nn.Conv2d(c, anchors * classes, 3, padding=1)
        self.box_conv = nn.Conv2d(c, anchors * 4, 3, padding=1)
        self.bbox_clip = math.log(1000.0 / 16)

    def forward(self, feat, anchors):
        n = feat.shape[0]
        logits = self.cls_conv(feat).permute(0, 2, 3, 1).reshape(n, -1, self.k)   # N, H*W*A, K
        deltas = self.box_conv(feat).permute(0, 2, 3, 1).reshape(n, -1, 4)
        scores = torch.sigmoid(logits)
        best, labels = scores.max(dim=-1)
        labels = torch.where(best > 0.5, labels, torch.full_like(labels, -1))
        widths = anchors[:, 2] - anchors[:, 0]
        heights = anchors[:, 3] - anchors[:, 1]
        cx = anchors[:, 0] + 0.5 * widths
        cy = anchors[:, 1] + 0.5 * heights
        dx, dy = deltas[..., 0], deltas[..., 1]
        dw = torch.clamp(deltas[..., 2], max=self.bbox_clip)
        dh = torch.clamp(deltas[..., 3], max=self.bbox_clip)
        pcx = dx * widths + cx
        pcy = dy * heights + cy
        pw = torch.exp(dw) * widths
        ph = torch.exp(dh) * heights
        boxes = torch.stack((pcx - 0.5 * pw, pcy - 0.5 * ph, pcx + 0.5 * pw, pcy + 0.5 * ph), dim=-1)
        top = best.argmax(dim=1)                                                   # N
        top_box = torch.gather(boxes, 1, top.view(n, 1, 1).expand(n, 1, 4)).squeeze(1)
        keep = best > 0.5
        return boxes.clamp(min=0.0, max=64.0), labels, keep, top, top_box, keep.sum(dim=1)


def _anchors(h: int, w: int, a: int = 3) -> torch.Tensor:
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32),
                            indexing="ij")
    out = []
    for s in (4.0, 8.0, 16.0)[:a]:
        out.append(torch.stack([xs * 4 - s / 2, ys * 4 - s / 2, xs * 4 + s / 2, ys * 4 + s / 2], -1))
    return torch.stack(out, 2).reshape(-1, 4)                  # H*W*A rows, anchor fastest


def build_detection_head():
    _seed(105)
    return DetectionHead().eval(), (torch.randn(2, 8, 5, 6) * 2, _anchors(5, 6)), \
        [(torch.randn(1, 8, 4, 7) * 2, _anchors(4, 7))]


class TemporalBlock(nn.Module):
    """A TCN residual block: causal dilated Conv1d (pad both sides, chomp the right end by slicing
    ``x[:, :, :-pad]``), and a second conv padded on the left with F.pad."""

    def __init__(self, cin: int, cout: int, k: int, dilation: int):
        super().__init__()
        self.pad = (k - 1) * dilation
        self.conv1 = nn.Conv1d(cin, cout, k, padding=self.pad, dilation=dilation)
        self.conv2 = nn.Conv1d(cout, cout, k, dilation=dilation)
        self.down = nn.Conv1d(cin, cout, 1) if cin != cout else None

    def forward(self, x):
        y = torch.relu(self.conv1(x)[:, :, :-self.pad].contiguous())
        y = torch.relu(self.conv2(F.pad(y, (self.pad, 0))))
        res = x if self.down is None else self.down(x)
        return torch.relu(y + res)


class TCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(TemporalBlock(3, 8, 3, 1), TemporalBlock(8, 8, 3, 2), TemporalBlock(8, 8, 2, 4))
        self.out = nn.Linear(8, 2)

    def forward(self, x):
        y = self.blocks(x)
        return self.out(y[:, :, -1]), y


def build_tcn():
    _seed(106)
    return TCN().eval(), (torch.randn(2, 3, 20),), [(torch.randn(1, 3, 9),), (torch.randn(3, 3, 31),)]


class BiGRUEncoder(nn.Module):
    """Seq2seq-style encoder: embedding, 2-layer bidirectional batch-first GRU, the last step taken
    by index, the final hidden states of both directions concatenated, a bridge to the decoder size,
    a bidirectional LSTM over the GRU output, and additive attention pooling (``tanh(W h) @ v``)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(30, 8)
        self.gru = nn.GRU(8, 6, num_layers=2, batch_first=True, bidirectional=True)
        self.lstm = nn.LSTM(12, 5, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(12, 6)
        self.att_w = nn.Linear(12, 12)
        self.att_v = nn.Parameter(torch.randn(12))

    def forward(self, ids):
        out, h = self.gru(self.emb(ids))
        last = out[:, -1, :]
        first_rev = out[:, 0, 6:]
        h_cat = torch.cat([h[-2], h[-1]], dim=1)
        y, (hl, cl) = self.lstm(out)
        # additive attention pooling: a matrix-vector product for the scores, bmm for the context
        alpha = torch.softmax(torch.tanh(self.att_w(out)) @ self.att_v, dim=1)            # B, T
        context = torch.bmm(alpha.unsqueeze(1), out).squeeze(1)
        return (torch.tanh(self.bridge(h_cat)), last, first_rev, y[:, -1],
                hl.transpose(0, 1).reshape(ids.size(0), -1), context, alpha)


def build_bigru_encoder():
    _seed(107)
    return BiGRUEncoder().eval(), (torch.randint(0, 30, (3, 7)),), [(torch.randint(0, 30, (1, 4)),),
                                                                    (torch.randint(0, 30, (2, 9)),)]


# --- sets, graphs ---------------------------------------------------------------------------------

class PointNetTiny(nn.Module):
    """PointNet: a T-net predicts a 3x3 transform applied with bmm, a shared MLP (Conv1d k=1), a max
    over points with indices (the critical points), an einsum feature transform."""

    def __init__(self):
        super().__init__()
        self.t1 = nn.Conv1d(3, 16, 1)
        self.t_fc = nn.Linear(16, 9)
        self.mlp1 = nn.Sequential(nn.Conv1d(3, 16, 1), nn.BatchNorm1d(16), nn.ReLU())
        self.feat_t = nn.Linear(16, 16 * 16)
        self.mlp2 = nn.Sequential(nn.Conv1d(16, 32, 1), nn.BatchNorm1d(32), nn.ReLU())
        self.head = nn.Linear(32, 4)

    def forward(self, pts):                        # pts: B, N, 3
        b = pts.size(0)
        x = pts.transpose(2, 1)                    # B, 3, N
        g = torch.max(F.relu(self.t1(x)), 2, keepdim=False)[0]
        trans = self.t_fc(g).view(b, 3, 3) + torch.eye(3).unsqueeze(0)
        x = torch.bmm(pts, trans).transpose(2, 1)
        x = self.mlp1(x)                           # B, 16, N
        ft = self.feat_t(x.mean(2)).view(b, 16, 16) * 0.1
        x = torch.einsum("bcn,bcd->bdn", x, ft)
        x = self.mlp2(x)
        feat, idx = torch.max(x, dim=2)
        return self.head(feat), idx


def build_pointnet():
    _seed(108)
    m = PointNetTiny()
    _randomize_bn(m)
    return m.eval(), (torch.randn(2, 10, 3),), [(torch.randn(1, 7, 3),), (torch.randn(3, 15, 3),)]


class GraphConv(nn.Module):
    """A GCN/message-passing layer on an edge list: gather source features with index_select,
    sum messages per target with scatter_add and index_add, degree from scatter_add of ones,
    mean aggregation, two layers and a global sum pool."""

    def __init__(self):
        super().__init__()
        self.lin1 = nn.Linear(5, 8)
        self.lin2 = nn.Linear(8, 8)
        self.root = nn.Linear(5, 8, bias=False)

    def forward(self, x, edge_index):
        src, dst = edge_index[0], edge_index[1]
        n = x.size(0)
        h = self.lin1(x)
        msg = h.index_select(0, src)
        agg = torch.zeros(n, h.size(1), dtype=h.dtype).scatter_add(0, dst.unsqueeze(1).expand_as(msg), msg)
        deg = torch.zeros(n, dtype=h.dtype).scatter_add_(0, dst, torch.ones_like(dst, dtype=h.dtype))
        h = F.relu(agg / deg.clamp(min=1.0).unsqueeze(1) + self.root(x))
        h2 = self.lin2(h)
        out = torch.zeros_like(h2).index_add(0, dst, h2[src])
        return out, out.sum(0), deg.to(torch.int64)


def _graph(seed: int, n: int, e: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 5, generator=g), torch.randint(0, n, (2, e), generator=g)


def build_graph_conv():
    _seed(109)
    return GraphConv().eval(), _graph(1, 6, 14), [_graph(2, 4, 5), _graph(3, 9, 20)]


# --- pixel ops, in-place code, script control flow ----------------------------------------------

class PixelOps(nn.Module):
    """Super-resolution style ops: interpolate x2 nearest / bilinear (align_corners=False),
    pixel_shuffle, unfold (im2col), flip, roll."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 12, 3, padding=1)

    def forward(self, x):
        up_n = F.interpolate(x, scale_factor=2.0, mode="nearest")
        up_b = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
        ps = F.pixel_shuffle(self.conv(x), 2)                       # B, 3, 2H, 2W
        y = up_n + up_b + ps
        cols = F.unfold(y, kernel_size=3, padding=1, stride=2)      # B, 27, L
        flipped = torch.flip(y, dims=[2, 3])
        rolled = torch.roll(y, shifts=(1, -2), dims=(2, 3))
        return cols, flipped - rolled, torch.roll(x, 3)


def build_pixel_ops():
    _seed(110)
    return PixelOps().eval(), (torch.randn(2, 3, 5, 6),), [(torch.randn(1, 3, 4, 7),)]


class InplaceOps(nn.Module):
    """In-place heavy code: ``x += ...``, ``relu_()``, ``mul_``, slice assignment ``y[:, :2] = ...``,
    a column write through a view, tuple/list manipulation in forward."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        y = self.lin(x)
        y += x
        y.relu_()
        z = y.clone()
        z[:, :2] = x[:, 4:] * 2.0
        z[:, -1] = 0.5
        z.mul_(1.5).add_(1.0)
        col = z[:, 2]
        col.clamp_(max=1.0)                       # writes through the view into z
        parts: List[torch.Tensor] = [z, y]
        parts.append(x)
        a, b = parts[0], parts[-1]
        pair = (a, b)
        parts.reverse()
        return pair[0] - pair[1], torch.cat(parts, 1), len(parts)


def build_inplace_ops():
    _seed(111)
    return InplaceOps().eval(), (torch.randn(3, 6),), [(torch.randn(1, 6),), (torch.randn(5, 6) * 3,)]


class ScriptControl(nn.Module):
    """torch.jit.script-only control flow: ``for i in range(x.size(0))`` over rows with an early
    ``return`` inside the loop, int and bool tensor outputs, ``break``."""

    def forward(self, x, limit: float):
        counts = torch.zeros(x.size(0), dtype=torch.int64)
        total = torch.zeros(x.size(1))
        for i in range(x.size(0)):
            row = x[i]
            if bool(row.abs().max() > 100.0):
                return total, counts, torch.zeros(x.size(1), dtype=torch.bool)
            c = 0
            for j in range(x.size(1)):
                if float(row[j]) > limit:
                    break
                c += 1
            counts[i] = c
            total = total + row
        return total, counts, total > 0


def build_script_control():
    x = torch.randn(4, 5)
    big = x.clone()
    big[2, 1] = 500.0
    return ScriptControl().eval(), (x, 0.5), [(torch.randn(2, 3), 0.0), (big, 0.5), (torch.randn(6, 5), 10.0)]


class GPTBlock(nn.Module):
    """A GPT-2 style decoder: token + learned position embeddings (positions from torch.arange), a
    Conv1D-style ``torch.addmm(bias, x2d, weight)`` qkv projection,
    one pre-norm block whose attention is written out by hand with a causal mask built in forward
    (torch.triu + masked_fill(-inf)) next to F.scaled_dot_product_attention(is_causal=True), an MLP
    with GELU, and logits tied to the embedding (``x @ self.wte.weight.T``)."""

    def __init__(self, vocab: int = 40, dim: int = 16, heads: int = 2, max_len: int = 16):
        super().__init__()
        self.h = heads
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(max_len, dim)
        self.ln1 = nn.LayerNorm(dim)
        # Hugging Face GPT-2's Conv1D: a (in, out) weight applied with torch.addmm
        self.c_attn_weight = nn.Parameter(torch.randn(dim, 3 * dim) * 0.2)
        self.c_attn_bias = nn.Parameter(torch.randn(3 * dim) * 0.1)
        self.c_proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))
        self.ln_f = nn.LayerNorm(dim)

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        h = torch.addmm(self.c_attn_bias, self.ln1(x).view(-1, x.size(-1)), self.c_attn_weight)
        q, k, v = h.view(b, t, -1).split(x.size(-1), dim=2)
        hd = x.size(-1) // self.h
        q = q.view(b, t, self.h, hd).transpose(1, 2)
        k = k.view(b, t, self.h, hd).transpose(1, 2)
        v = v.view(b, t, self.h, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y_manual = att @ v
        y_sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = (0.5 * (y_manual + y_sdpa)).transpose(1, 2).contiguous().view(b, t, -1)
        x = x + self.c_proj(y)
        x = x + self.mlp(self.ln2(x))
        logits = self.ln_f(x) @ self.wte.weight.T
        return logits, logits[:, -1].argmax(-1)


def build_gpt_block():
    _seed(112)
    return GPTBlock().eval(), (torch.randint(0, 40, (2, 7)),), [(torch.randint(0, 40, (1, 1)),),
                                                                (torch.randint(0, 40, (3, 12)),)]


class DoubleConv(nn.Module):
    """A float64 conv net: conv2d, batch norm, max pool, adaptive pool, linear (float64 weights)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1)), y


def build_double_conv():
    _seed(113)
    m = DoubleConv()
    _randomize_bn(m)
    m = m.double()
    return m.eval(), (torch.randn(2, 2, 8, 6, dtype=torch.float64),), [(torch.randn(1, 2, 5, 9, dtype=torch.float64),)]


# --- LLM / speech / metric blocks, and a model srcore does not support ------------------------------

class LlamaBlock(nn.Module):
    """A Llama-style decoder block: RMSNorm (nn.RMSNorm and the hand-written form), rotary position
    embeddings from ``torch.outer(positions, inv_freq)`` (a non-persistent buffer) with the
    ``cat((-x2, x1))`` rotation, grouped-query attention (``repeat_interleave`` of the KV heads),
    causal SDPA, a SwiGLU MLP, bias-free linears."""

    def __init__(self, dim: int = 16, heads: int = 4, kv_heads: int = 2):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, dim // heads
        self.attn_norm = nn.RMSNorm(dim, eps=1e-6)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wkv = nn.Linear(dim, 2 * kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.ffn_norm_weight = nn.Parameter(torch.rand(dim) + 0.5)
        self.w1 = nn.Linear(dim, 24, bias=False)
        self.w3 = nn.Linear(dim, 24, bias=False)
        self.w2 = nn.Linear(24, dim, bias=False)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def _rope(self, x, cos, sin):
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    def forward(self, x):
        b, t, d = x.shape
        freqs = torch.outer(torch.arange(t, dtype=torch.float32), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        h = self.attn_norm(x)
        q = self.wq(h).view(b, t, self.h, self.hd).transpose(1, 2)
        k, v = self.wkv(h).view(b, t, 2 * self.kv, self.hd).transpose(1, 2).chunk(2, dim=1)
        q, k = self._rope(q, cos, sin), self._rope(k, cos, sin)
        k = k.repeat_interleave(self.h // self.kv, dim=1)
        v = v.repeat_interleave(self.h // self.kv, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, t, d))
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.ffn_norm_weight
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


def build_llama_block():
    _seed(114)
    return LlamaBlock().eval(), (torch.randn(2, 6, 16),), [(torch.randn(1, 1, 16),), (torch.randn(3, 9, 16),)]


class ConformerConv(nn.Module):
    """A Conformer convolution module after sinusoidal positional encodings built in forward
    (``pe[:, 0::2] = sin``, ``pe[:, 1::2] = cos``): LayerNorm, pointwise conv + GLU, depthwise Conv1d,
    BatchNorm1d, SiLU, pointwise conv, residual; then a ConvTranspose1d upsampler and overlapping
    frames by ``Tensor.unfold``."""

    def __init__(self, d: int = 8):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.pw1 = nn.Conv1d(d, 2 * d, 1)
        self.dw = nn.Conv1d(d, d, 5, padding=2, groups=d)
        self.bn = nn.BatchNorm1d(d)
        self.pw2 = nn.Conv1d(d, d, 1)
        self.up = nn.ConvTranspose1d(d, 4, 4, stride=2, padding=1)

    def forward(self, x):                                    # B, T, D
        t, d = x.size(1), x.size(2)
        pos = torch.arange(t, dtype=torch.float32).unsqueeze(1)
        div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
        pe = torch.zeros(t, d)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        x = x + pe.unsqueeze(0)
        y = self.ln(x).transpose(1, 2)                       # B, D, T
        y = F.glu(self.pw1(y), dim=1)
        y = self.pw2(F.silu(self.bn(self.dw(y))))
        x = x + y.transpose(1, 2)
        up = self.up(x.transpose(1, 2))                      # B, 4, 2T
        frames = up.unfold(2, 4, 2)                          # B, 4, T-1, 4
        return x, frames.mean(-1)


def build_conformer_conv():
    _seed(115)
    m = ConformerConv()
    _randomize_bn(m)
    return m.eval(), (torch.randn(2, 7, 8),), [(torch.randn(1, 3, 8),), (torch.randn(3, 12, 8),)]


class MetricHead(nn.Module):
    """Metric learning / retrieval: L2-normalized embeddings, cosine similarity against a learned
    gallery read under ``torch.no_grad()`` (broadcast), top-k nearest by similarity (int64 indices),
    a margin-scaled softmax, CLIP-style positives on ``torch.diag`` of the batch similarity matrix,
    ``torch.cdist``, ``F.pairwise_distance`` and ``torch.linalg.norm``."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(6, 12), nn.GELU(), nn.Linear(12, 8))
        self.gallery = nn.Parameter(torch.randn(5, 8))

    def forward(self, x, y):
        ex, ey = self.enc(x), self.enc(y)
        pair = F.cosine_similarity(ex, ey, dim=-1)
        ex_n = F.normalize(ex, p=2.0, dim=-1)
        with torch.no_grad():   # a frozen gallery, as retrieval code writes it
            gallery = self.gallery * 1.0
        sim = F.cosine_similarity(ex.unsqueeze(1), gallery.unsqueeze(0), dim=-1)   # B, 5
        top_sim, top_idx = sim.topk(2, dim=1)
        # CLIP-style: the positives are the diagonal of the batch similarity matrix
        logits = ex_n @ F.normalize(ey, dim=-1).T
        pos = torch.diag(logits)
        dist = torch.cdist(ex, ey)
        return (pair, ex_n, top_sim, top_idx, F.softmax(30.0 * (sim - 0.2), dim=-1), pos, dist,
                F.pairwise_distance(ex, ey), torch.linalg.norm(ex, dim=-1))


def build_metric_head():
    _seed(116)
    return MetricHead().eval(), (torch.randn(4, 6), torch.randn(4, 6)), [(torch.randn(1, 6), torch.randn(1, 6)),
                                                                         (torch.randn(6, 6), torch.randn(6, 6))]


class SpatialTransformer(nn.Module):
    """A spatial transformer: a localization net predicts an affine ``theta`` (initialised near the
    identity), ``F.affine_grid`` makes the sampling grid, ``F.grid_sample`` warps the input
    (bilinear, zeros padding), plus a border-padded nearest warp by a flow field (optical-flow
    style: ``base grid + flow``, grid values beyond [-1, 1])."""

    def __init__(self):
        super().__init__()
        self.loc = nn.Sequential(nn.Conv2d(1, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 6))
        self.flow = nn.Conv2d(1, 2, 3, padding=1)
        with torch.no_grad():
            self.loc[-1].weight.mul_(0.1)
            self.loc[-1].bias.copy_(torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 0.0]))

    def forward(self, x):
        theta = self.loc(x).view(-1, 2, 3)
        grid = F.affine_grid(theta, [x.size(0), x.size(1), 6, 6], align_corners=False)
        warped = F.grid_sample(x, grid, align_corners=False)
        n, _, h, w = x.shape
        ident = torch.eye(2, 3).unsqueeze(0).expand(n, 2, 3)
        base = F.affine_grid(ident, [n, 1, h, w], align_corners=True)
        flow = torch.tanh(self.flow(x)).permute(0, 2, 3, 1) * 0.5
        moved = F.grid_sample(x, base + flow, mode="nearest", padding_mode="border", align_corners=True)
        return warped, moved


def build_spatial_transformer():
    _seed(117)
    return SpatialTransformer().eval(), (torch.randn(2, 1, 8, 8),), [(torch.randn(1, 1, 7, 9),)]


class Spectrogram(nn.Module):
    """An audio front end: ``torch.stft(..., return_complex=True)`` and its magnitude, a log-mel
    projection. srcore computes no complex tensors: loading must fail with an UnsupportedOpError
    naming ``aten::stft`` and the source line."""

    def __init__(self):
        super().__init__()
        self.register_buffer("window", torch.hann_window(16))
        self.mel = nn.Linear(9, 4, bias=False)

    def forward(self, wave):
        spec = torch.stft(wave, 16, hop_length=4, window=self.window, return_complex=True)
        return torch.log(self.mel(spec.abs().transpose(1, 2)) ** 2 + 1e-6)


def build_spectrogram():
    _seed(125)
    return Spectrogram().eval(), (torch.randn(2, 64),), []


# --- HF-style encoder, YOLO decode, diffusion block, Swin windows ---------------------------------

class BertLike(nn.Module):
    """A Hugging Face-style BERT layer: word + position (``position_ids[:, :t]`` of a buffer) +
    token-type embeddings, ``attention_mask: Optional[Tensor] = None`` turned into an additive
    ``(1.0 - mask[:, None, None, :]) * -10000.0``, hand-written multi-head attention (view/permute,
    ``torch.matmul``, ``/ math.sqrt``), erf GELU, and a tanh pooler on ``[:, 0]``."""

    def __init__(self, vocab: int = 30, dim: int = 16, heads: int = 2, max_pos: int = 16):
        super().__init__()
        self.h, self.hd = heads, dim // heads
        self.word = nn.Embedding(vocab, dim, padding_idx=0)
        self.pos = nn.Embedding(max_pos, dim)
        self.tok_type = nn.Embedding(2, dim)
        self.register_buffer("position_ids", torch.arange(max_pos).expand((1, -1)), persistent=False)
        self.emb_ln = nn.LayerNorm(dim, eps=1e-12)
        self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.attn_out = nn.Linear(dim, dim)
        self.ln1 = nn.LayerNorm(dim, eps=1e-12)
        self.inter = nn.Linear(dim, 32)
        self.out = nn.Linear(32, dim)
        self.ln2 = nn.LayerNorm(dim, eps=1e-12)
        self.pooler = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(0.1)

    def _heads(self, x):
        b, t, _ = x.size()
        return x.view(b, t, self.h, self.hd).permute(0, 2, 1, 3)

    def forward(self, input_ids, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None):
        b, t = input_ids.size()
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        if attention_mask is None:
            attention_mask = torch.ones(b, t)
        x = self.word(input_ids) + self.pos(self.position_ids[:, :t]) + self.tok_type(token_type_ids)
        x = self.dropout(self.emb_ln(x))
        ext = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        q, k, v = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.hd) + ext
        probs = self.dropout(nn.functional.softmax(scores, dim=-1))
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        ctx = ctx.view(ctx.size()[:-2] + (self.h * self.hd,))
        x = self.ln1(x + self.attn_out(ctx))
        x = self.ln2(x + self.out(F.gelu(self.inter(x))))
        return x, torch.tanh(self.pooler(x[:, 0]))


def _bert_inputs(seed: int, b: int, t: int):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 30, (b, t), generator=g)
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    mask = (torch.arange(t)[None] < lengths[:, None]).long()
    types = (torch.arange(t)[None] >= t // 2).long().expand(b, t).contiguous()
    return ids * mask, mask, types


def build_bert_like():
    _seed(118)
    return BertLike().eval(), _bert_inputs(1, 2, 7), [_bert_inputs(2, 1, 3), _bert_inputs(3, 3, 11)]


class YoloDetect(nn.Module):
    """YOLOv5's Detect head in inference: a ModuleList of per-level 1x1 convs iterated with
    ``enumerate``, ``view(bs, na, no, ny, nx).permute(0, 1, 3, 4, 2)``, a grid made in forward by
    ``torch.meshgrid(arange, arange, indexing="ij")``, sigmoid box decoding with the anchor grid,
    ``torch.cat(z, 1)`` over the levels."""

    def __init__(self, nc: int = 3, chs: Tuple[int, int] = (8, 12)):
        super().__init__()
        self.no, self.na, self.nl = nc + 5, 2, len(chs)
        self.m = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in chs)
        self.register_buffer("anchors", torch.tensor([[[10.0, 13.0], [16.0, 30.0]], [[30.0, 61.0], [62.0, 45.0]]]))
        self.strides = [8.0, 16.0]

    def _grid(self, nx: int, ny: int, i: int):
        yv, xv = torch.meshgrid(torch.arange(ny, dtype=torch.float32), torch.arange(nx, dtype=torch.float32),
                                indexing="ij")
        grid = torch.stack((xv, yv), 2).expand(1, self.na, ny, nx, 2) - 0.5
        anchor_grid = self.anchors[i].view(1, self.na, 1, 1, 2).expand(1, self.na, ny, nx, 2)
        return grid, anchor_grid

    def forward(self, p3, p4):
        feats = [p3, p4]
        z: List[torch.Tensor] = []
        for i, conv in enumerate(self.m):
            x = conv(feats[i])
            bs, _, ny, nx = x.shape
            x = x.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            grid, anchor_grid = self._grid(nx, ny, i)
            xy, wh, conf = x.sigmoid().split((2, 2, self.no - 4), 4)
            xy = (xy * 2 + grid) * self.strides[i]
            wh = (wh * 2) ** 2 * anchor_grid
            z.append(torch.cat((xy, wh, conf), 4).view(bs, self.na * nx * ny, self.no))
        return torch.cat(z, 1)


def build_yolo_detect():
    _seed(119)
    return YoloDetect().eval(), (torch.randn(2, 8, 6, 8), torch.randn(2, 12, 3, 4)), \
        [(torch.randn(1, 8, 4, 4), torch.randn(1, 12, 2, 2))]


class DiffusionResBlock(nn.Module):
    """A diffusion U-Net res block: sinusoidal timestep embedding of int64 timesteps
    (``t[:, None].float() * freqs[None]``, ``cat([cos, sin])``), GroupNorm + SiLU, FiLM conditioning
    (``scale, shift = emb.chunk(2, dim=1)``, ``h * (1 + scale[..., None, None]) + shift``),
    a skip 1x1 conv, then a nearest x2 upsample and a strided downsample conv."""

    def __init__(self, cin: int = 4, cout: int = 8, temb: int = 8):
        super().__init__()
        self.temb = temb
        self.t_mlp = nn.Sequential(nn.Linear(temb, 16), nn.SiLU(), nn.Linear(16, 2 * cout))
        self.norm1 = nn.GroupNorm(2, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2 = nn.GroupNorm(4, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1)
        self.up = nn.Conv2d(cout, cout, 3, padding=1)
        self.down = nn.Conv2d(cout, cout, 3, stride=2, padding=1)
        with torch.no_grad():
            for n in (self.norm1, self.norm2):
                n.weight.uniform_(0.5, 1.5)
                n.bias.uniform_(-0.3, 0.3)

    def _timestep_embedding(self, t):
        half = self.temb // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
        args = t[:, None].float() * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

    def forward(self, x, t):
        h = self.conv1(F.silu(self.norm1(x)))
        scale, shift = self.t_mlp(self._timestep_embedding(t)).chunk(2, dim=1)
        h = self.norm2(h) * (1 + scale[:, :, None, None]) + shift[:, :, None, None]
        h = self.conv2(F.silu(h)) + self.skip(x)
        up = self.up(F.interpolate(h, scale_factor=2.0, mode="nearest"))
        return h, self.down(up)


def build_diffusion_block():
    _seed(120)
    return DiffusionResBlock().eval(), (torch.randn(2, 4, 6, 10), torch.tensor([3, 950])), \
        [(torch.randn(1, 4, 5, 7), torch.tensor([0])), (torch.randn(3, 4, 6, 10), torch.tensor([1, 500, 999]))]


class SwinWindowAttention(nn.Module):
    """Swin Transformer's shifted-window attention: ``torch.roll`` by half a window, window partition
    by view/permute/view, a relative-position bias gathered from a table by a buffer index
    (``table[index.view(-1)].view(N, N, -1)``), a shift mask added per window, window reverse and
    the roll back."""

    def __init__(self, dim: int = 8, ws: int = 2, heads: int = 2, res: Tuple[int, int] = (4, 6)):
        super().__init__()
        self.dim, self.ws, self.h, self.shift = dim, ws, heads, ws // 2
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.table = nn.Parameter(torch.randn((2 * ws - 1) ** 2, heads) * 0.1)
        coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (ws - 1)
        self.register_buffer("rel_index", rel[..., 0] * (2 * ws - 1) + rel[..., 1])
        H, W = res
        img = torch.zeros(1, H, W, 1)
        cnt = 0
        for hs in (slice(0, -ws), slice(-ws, -self.shift), slice(-self.shift, None)):
            for wsl in (slice(0, -ws), slice(-ws, -self.shift), slice(-self.shift, None)):
                img[:, hs, wsl, :] = cnt
                cnt += 1
        win = img.view(1, H // ws, ws, W // ws, ws, 1).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws)
        mask = win.unsqueeze(1) - win.unsqueeze(2)
        self.register_buffer("attn_mask", mask.masked_fill(mask != 0, -100.0))

    def forward(self, x):                                          # B, H, W, C
        b, H, W, c = x.shape
        ws, n = self.ws, self.ws * self.ws
        x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        win = x.view(b, H // ws, ws, W // ws, ws, c).permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, n, c)
        bw = win.shape[0]
        qkv = self.qkv(win).reshape(bw, n, 3, self.h, c // self.h).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q * self.scale) @ k.transpose(-2, -1)
        bias = self.table[self.rel_index.view(-1)].view(n, n, -1).permute(2, 0, 1).contiguous()
        attn = attn + bias.unsqueeze(0)
        nw = self.attn_mask.shape[0]
        attn = attn.view(bw // nw, nw, self.h, n, n) + self.attn_mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, self.h, n, n).softmax(dim=-1)
        out = self.proj((attn @ v).transpose(1, 2).reshape(bw, n, c))
        out = out.view(b, H // ws, W // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5).contiguous().view(b, H, W, c)
        return torch.roll(out, shifts=(self.shift, self.shift), dims=(1, 2))


def build_swin_window():
    _seed(121)
    return SwinWindowAttention().eval(), (torch.randn(2, 4, 6, 8),), [(torch.randn(1, 4, 6, 8),),
                                                                      (torch.randn(3, 4, 6, 8),)]


class FPNNeck(nn.Module):
    """A torchvision-style feature pyramid: a ``Dict[str, Tensor]`` of backbone levels in, lateral
    1x1 convs, top-down ``F.interpolate(size=lateral.shape[-2:], mode="nearest")`` (non-integer
    ratios), 3x3 output convs, an extra max-pooled level; ``Dict[str, Tensor]`` out. Keys are read
    with ``in``, ``len`` and written into a new dict in a loop."""

    def __init__(self, chs: Tuple[int, int, int] = (4, 6, 8), out: int = 5):
        super().__init__()
        self.names = ["c3", "c4", "c5"]
        self.lateral = nn.ModuleList(nn.Conv2d(c, out, 1) for c in chs)
        self.smooth = nn.ModuleList(nn.Conv2d(out, out, 3, padding=1) for _ in chs)

    def forward(self, feats: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        assert len(feats) == 3 and "c5" in feats
        lats: List[torch.Tensor] = []
        for i, conv in enumerate(self.lateral):
            lats.append(conv(feats[self.names[i]]))
        p5 = lats[2]
        p4 = lats[1] + F.interpolate(p5, size=lats[1].shape[-2:], mode="nearest")
        p3 = lats[0] + F.interpolate(p4, size=lats[0].shape[-2:], mode="nearest")
        levels = [p3, p4, p5]
        outs: Dict[str, torch.Tensor] = {}
        for i, conv in enumerate(self.smooth):
            outs["p" + str(i + 3)] = conv(levels[i])
        outs["pool"] = F.max_pool2d(outs["p5"], 1, 2)
        return outs


def _fpn_inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    return ({"c3": torch.randn(2, 4, 13, 10, generator=g), "c4": torch.randn(2, 6, 7, 5, generator=g),
             "c5": torch.randn(2, 8, 3, 3, generator=g)},)


def build_fpn_neck():
    _seed(122)
    return FPNNeck().eval(), _fpn_inputs(1), [_fpn_inputs(2)]


class VideoC3D(nn.Module):
    """A C3D / R(2+1)D-style video clip classifier: Conv3d + BatchNorm3d + ReLU, a (2+1)D block
    (spatial 1x3x3 then temporal 3x1x1 conv), max_pool3d keeping time at the first stage,
    avg_pool3d, adaptive_avg_pool3d to 1, per-frame features by ``mean([3, 4])``, and
    ``torch.atan2`` of two heads (an angle regression)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv3d(3, 6, 3, padding=1, bias=False), nn.BatchNorm3d(6), nn.ReLU(inplace=True))
        self.spatial = nn.Conv3d(6, 8, (1, 3, 3), padding=(0, 1, 1))
        self.temporal = nn.Conv3d(8, 8, (3, 1, 1), padding=(1, 0, 0))
        self.bn = nn.BatchNorm3d(8)
        self.fc = nn.Linear(8, 4)
        self.angle = nn.Linear(8, 2)

    def forward(self, clip):                                # B, C, T, H, W
        x = F.max_pool3d(self.stem(clip), (1, 2, 2))
        x = F.relu(self.bn(self.temporal(F.relu(self.spatial(x)))))
        frames = x.mean([3, 4]).transpose(1, 2)             # B, T, C
        x = F.avg_pool3d(x, 2, ceil_mode=True)
        feat = F.adaptive_avg_pool3d(x, 1).flatten(1)
        a = self.angle(feat)
        return self.fc(feat), torch.atan2(a[:, 0], a[:, 1]), frames


def build_video_c3d():
    _seed(123)
    m = VideoC3D()
    _randomize_bn(m)
    return m.eval(), (torch.randn(2, 3, 4, 8, 6),), [(torch.randn(1, 3, 3, 6, 10),)]


class TextCNN(nn.Module):
    """Kim's CNN for sentence classification: embedding, Conv1d with kernel sizes 2, 3, 4, max over
    time by ``F.adaptive_max_pool1d(x, 1)`` and by ``F.max_pool1d(x, x.size(2))``, concatenation,
    dropout, and a length bucket of each sentence by ``torch.bucketize`` (int64 output)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(40, 8, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(8, 6, k) for k in (2, 3, 4))
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(18, 3)
        self.register_buffer("length_edges", torch.tensor([2.0, 4.0, 8.0]))

    def forward(self, ids):
        x = self.emb(ids).transpose(1, 2)                 # B, E, T
        feats: List[torch.Tensor] = []
        for i, conv in enumerate(self.convs):
            h = F.relu(conv(x))
            pooled = F.adaptive_max_pool1d(h, 1) if i % 2 == 0 else F.max_pool1d(h, h.size(2))
            feats.append(pooled.squeeze(2))
        lengths = (ids != 0).sum(1).float()
        return self.fc(self.drop(torch.cat(feats, 1))), torch.bucketize(lengths, self.length_edges)


def _sentences(seed: int, b: int, t: int):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 40, (b, t), generator=g)
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    return (ids.masked_fill(torch.arange(t)[None] >= lengths[:, None], 0),)


def build_text_cnn():
    _seed(124)
    return TextCNN().eval(), _sentences(1, 3, 9), [_sentences(2, 1, 4), _sentences(3, 5, 12)]


def channel_shuffle(x, groups: int):
    b, c, h, w = x.size()
    return x.view(b, groups, c // groups, h, w).transpose(1, 2).contiguous().view(b, c, h, w)


class ShuffleUnit(nn.Module):
    """A ShuffleNetV2 unit: ``x.chunk(2, dim=1)`` channel split, a pointwise / depthwise / pointwise
    branch with per-channel PReLU (MobileFaceNet style), ``cat`` and channel shuffle by
    view/transpose/contiguous/view; then a stride-2 unit with both branches; a shared-slope PReLU."""

    def __init__(self, c: int = 8):
        super().__init__()
        h = c // 2
        self.branch = nn.Sequential(nn.Conv2d(h, h, 1, bias=False), nn.BatchNorm2d(h), nn.PReLU(h),
                                    nn.Conv2d(h, h, 3, 1, 1, groups=h, bias=False), nn.BatchNorm2d(h),
                                    nn.Conv2d(h, h, 1, bias=False), nn.BatchNorm2d(h), nn.PReLU(h))
        self.down_left = nn.Sequential(nn.Conv2d(c, c, 3, 2, 1, groups=c, bias=False), nn.BatchNorm2d(c),
                                       nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True))
        self.down_right = nn.Sequential(nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True),
                                        nn.Conv2d(c, c, 3, 2, 1, groups=c, bias=False), nn.BatchNorm2d(c))
        self.act = nn.PReLU()

    def forward(self, x):
        x1, x2 = x.chunk(2, dim=1)
        y = channel_shuffle(torch.cat((x1, self.branch(x2)), dim=1), 2)
        z = torch.cat((self.down_left(y), self.act(self.down_right(y))), dim=1)
        return channel_shuffle(z, 2)


def build_shuffle_unit():
    _seed(126)
    m = ShuffleUnit()
    _randomize_bn(m)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.PReLU):
                mod.weight.uniform_(-0.5, 0.5)
    return m.eval(), (torch.randn(2, 8, 9, 6),), [(torch.randn(1, 8, 5, 11),)]


class GreedyDecoder(nn.Module):
    """Seq2seq greedy decoding in forward: a GRUCell step per token, ``log_softmax`` + ``max``, a
    sequence grown by ``torch.cat`` inside the loop (its shape changes every trip), finished rows
    masked, early ``break`` when every row emitted EOS, an int ``max_len`` input, and the decoded
    length (an int) returned."""

    def __init__(self, vocab: int = 12, dim: int = 8):
        super().__init__()
        self.eos = vocab - 1
        self.emb = nn.Embedding(vocab, dim)
        self.cell = nn.GRUCell(dim, dim)
        self.out = nn.Linear(dim, vocab)
        with torch.no_grad():
            self.out.bias[self.eos] = 1.5      # EOS is likely: rows finish at different steps

    def forward(self, h, max_len: int):
        b = h.size(0)
        tok = torch.zeros(b, dtype=torch.long)
        seq = tok.unsqueeze(1)
        finished = torch.zeros(b, dtype=torch.bool)
        scores = torch.zeros(b)
        for _ in range(max_len):
            h = self.cell(self.emb(tok), h)
            best, tok = torch.log_softmax(self.out(h), -1).max(-1)
            scores = scores + best.masked_fill(finished, 0.0)
            tok = tok.masked_fill(finished, 0)
            seq = torch.cat([seq, tok.unsqueeze(1)], dim=1)
            finished = finished | (tok == self.eos)
            if bool(finished.all()):
                break
        return seq, scores, seq.size(1)


def build_greedy_decoder():
    _seed(127)
    return GreedyDecoder().eval(), (torch.randn(3, 8), 6), [(torch.randn(2, 8), 9), (torch.randn(4, 8) * 3, 3),
                                                            (torch.randn(1, 8), 0)]


class DLRMTiny(nn.Module):
    """DLRM: a bottom MLP on dense features, ``nn.EmbeddingBag`` sparse features (sum with flat
    indices + offsets, including an empty bag; mean over a 2-D batch of ids; max with a
    padding_idx), pairwise dot interactions by ``bmm`` gathered at precomputed lower-triangle
    index buffers (``Z[:, li, lj]``), a top MLP with a sigmoid click probability."""

    def __init__(self, d: int = 4):
        super().__init__()
        self.bot = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, d), nn.ReLU())
        self.emb_sum = nn.EmbeddingBag(20, d, mode="sum")
        self.emb_mean = nn.EmbeddingBag(15, d, mode="mean")
        self.emb_max = nn.EmbeddingBag(12, d, mode="max", padding_idx=0)
        n = 4
        self.register_buffer("li", torch.tensor([i for i in range(n) for j in range(i)]))
        self.register_buffer("lj", torch.tensor([j for i in range(n) for j in range(i)]))
        self.top = nn.Sequential(nn.Linear(d + 6, 8), nn.ReLU(), nn.Linear(8, 1))

    def forward(self, dense, flat_ids, offsets, ids2d, ids_max, offsets_max):
        x = self.bot(dense)
        feats = [x, self.emb_sum(flat_ids, offsets), self.emb_mean(ids2d), self.emb_max(ids_max, offsets_max)]
        t = torch.stack(feats, dim=1)                                   # B, 4, d
        z = torch.bmm(t, t.transpose(1, 2))
        inter = z[:, self.li, self.lj]                                  # B, 6
        logit = self.top(torch.cat([x, inter], dim=1))
        return torch.sigmoid(logit), inter


def _dlrm_inputs(seed: int, b: int):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 4, (b,), generator=g)
    lengths[-1] = 0                                                     # an empty bag
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
    flat = torch.randint(0, 20, (int(lengths.sum()),), generator=g)
    ids_max = torch.randint(0, 12, (2 * b,), generator=g)
    ids_max[0] = 0                                                      # padding_idx rows count in no bag
    return (torch.randn(b, 3, generator=g), flat, offsets, torch.randint(0, 15, (b, 3), generator=g), ids_max,
            torch.arange(0, 2 * b, 2))


def build_dlrm_tiny():
    _seed(128)
    return DLRMTiny().eval(), _dlrm_inputs(1, 3), [_dlrm_inputs(2, 5), _dlrm_inputs(3, 1)]


#: a stride-2 layer makes torch.export guard ``h // 2 != 1``: sizes 2 and 3 are not exported
_STRIDED_HW = {"h": (4, 4096), "w": (4, 4096)}

REALWORLD: Dict[str, ZooCase] = {
    "vit_tiny": ZooCase(build_vit_tiny, dynamic={"x": {0: "batch"}}),
    "resnext_se": ZooCase(build_resnext_se, dynamic={"x": {0: "batch", 2: "h", 3: "w"}}, dim_range=_STRIDED_HW),
    "mobilenetv3_block": ZooCase(build_mobilenetv3_block, dynamic={"x": {0: "batch", 2: "h", 3: "w"}},
                                   dim_range=_STRIDED_HW),
    "mbconv": ZooCase(build_mbconv, dynamic={"x": {0: "batch", 2: "h", 3: "w"}}),
    "detection_head": ZooCase(build_detection_head, dynamic={"feat": {0: "batch", 2: "h", 3: "w"},
                                                             "anchors": {0: "anchors"}},
                              export_static="the anchor count is 3*h*w, a relation torch.export's Dims "
                                            "cannot state"),
    "tcn": ZooCase(build_tcn, dynamic={"x": {0: "batch", 2: "time"}}),
    "bigru_encoder": ZooCase(build_bigru_encoder, dynamic={"ids": {0: "batch", 1: "time"}},
                             export_static="torch.export specializes nn.GRU's time dim (the export is static)"),
    "pointnet": ZooCase(build_pointnet, dynamic={"pts": {0: "batch", 1: "points"}}),
    "graph_conv": ZooCase(build_graph_conv, dynamic={"x": {0: "nodes"}, "edge_index": {1: "edges"}}),
    "pixel_ops": ZooCase(build_pixel_ops, dynamic={"x": {0: "batch", 2: "h", 3: "w"}}),
    "inplace_ops": ZooCase(build_inplace_ops, dynamic={"x": {0: "batch"}}),
    "script_control": ZooCase(build_script_control, export="data-dependent", dynamic={"x": {0: "rows", 1: "cols"}}),
    "gpt_block": ZooCase(build_gpt_block, dynamic={"idx": {0: "batch", 1: "time"}}),
    "llama_block": ZooCase(build_llama_block, dynamic={"x": {0: "batch", 1: "time"}}),
    "conformer_conv": ZooCase(build_conformer_conv, dynamic={"x": {0: "batch", 1: "time"}}, dim_range={"time": (3, 4096)}),
    "metric_head": ZooCase(build_metric_head, dynamic={"x": {0: "batch"}, "y": {0: "batch"}},
                           export_static="torch.cdist picks its algorithm by size: export guards 2 <= batch <= 25"),
    "spatial_transformer": ZooCase(build_spatial_transformer, dynamic={"x": {0: "batch", 2: "h", 3: "w"}},
                                   export_static="torch.export specializes affine_grid's size argument"),
    "spectrogram": ZooCase(build_spectrogram, unsupported="aten::stft: srcore has no complex tensors"),
    "bert_like": ZooCase(build_bert_like, dynamic={"input_ids": {0: "batch", 1: "time"},
                                                   "attention_mask": {0: "batch", 1: "time"},
                                                   "token_type_ids": {0: "batch", 1: "time"}},
                         dim_range={"time": (2, 16)}),  # position_ids[:, :t] of a 16-row buffer
    "yolo_detect": ZooCase(build_yolo_detect, dynamic={"p3": {0: "batch", 2: "h3", 3: "w3"},
                                                       "p4": {0: "batch", 2: "h4", 3: "w4"}}),
    "diffusion_block": ZooCase(build_diffusion_block, dynamic={"x": {0: "batch", 2: "h", 3: "w"}, "t": {0: "batch"}},
                               dim_range=_STRIDED_HW),
    "swin_window": ZooCase(build_swin_window, dynamic={"x": {0: "batch"}}),
    "fpn_neck": ZooCase(build_fpn_neck),
    "video_c3d": ZooCase(build_video_c3d, dynamic={"clip": {0: "batch", 2: "time", 3: "h", 4: "w"}},
                         export_static="ceil_mode pooling makes torch.export guard sizes it cannot state as "
                                       "Dim ranges (it suggests derived dims)"),
    "text_cnn": ZooCase(build_text_cnn, dynamic={"ids": {0: "batch", 1: "time"}},
                        export_static="max_pool1d(h, h.size(2)): torch.export bakes the kernel size in"),
    "shuffle_unit": ZooCase(build_shuffle_unit, dynamic={"x": {0: "batch", 2: "h", 3: "w"}}, dim_range=_STRIDED_HW),
    "greedy_decoder": ZooCase(build_greedy_decoder, export="data-dependent", dynamic={"h": {0: "batch"}}),
    "dlrm_tiny": ZooCase(build_dlrm_tiny, dynamic={"dense": {0: "batch"}, "flat_ids": {0: "nnz"},
                                                   "offsets": {0: "batch"}, "ids2d": {0: "batch"},
                                                   "ids_max": {0: "nnz_max"}, "offsets_max": {0: "batch"}}),
    "double_conv": ZooCase(build_double_conv, dynamic={"x": {0: "batch", 2: "h", 3: "w"}}, dim_range=_STRIDED_HW),
}
