"""The held-out zoo: architectures of the bench families (benchmarks/families.py) built differently
from the bench set and the parity zoo, to find what a model srcore has never seen breaks.

Each builder returns ``(module in eval mode, example inputs)``: fixed seeds, small sizes (one
torch call well under a millisecond to a few ms); every model takes every import path.
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
    """Non-trivial batch-norm statistics, so conv+bn folding does real work."""
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)


# --- mobile convnets -----------------------------------------------------------------------


def _cbr6(cin: int, cout: int, k: int, stride: int, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6(inplace=True))


class InvertedResidualV2(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers: List[nn.Module] = []
        if expand != 1:
            layers.append(_cbr6(cin, hidden, 1, 1))
        layers += [_cbr6(hidden, hidden, 3, stride, groups=hidden),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        if self.use_res:
            return x + self.conv(x)
        return self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 at width 0.25: relu6 inverted residuals (expand 1 and 6), dropout + linear head."""

    def __init__(self):
        super().__init__()
        cfg = [(1, 8, 1, 1), (6, 12, 2, 2), (6, 16, 2, 2), (6, 24, 1, 1)]
        layers: List[nn.Module] = [_cbr6(3, 8, 3, 2)]
        cin = 8
        for t, c, n, s in cfg:
            for i in range(n):
                layers.append(InvertedResidualV2(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(_cbr6(cin, 64, 1, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(64, 10))

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, (1, 1))
        return self.classifier(torch.flatten(x, 1))


def build_mobilenet_v2():
    _seed(101)
    m = MobileNetV2()
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 3, 32, 32),)


class SqueezeExciteSigmoid(nn.Module):
    def __init__(self, c: int, r: int):
        super().__init__()
        self.reduce = nn.Conv2d(c, r, 1)
        self.expand = nn.Conv2d(r, c, 1)

    def forward(self, x):
        s = x.mean((2, 3), keepdim=True)
        s = torch.sigmoid(self.expand(F.silu(self.reduce(s))))
        return x * s


class MBConvLite(nn.Module):
    def __init__(self, cin: int, cout: int, k: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        self.expand = nn.Sequential(nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.SiLU())
        self.dw = nn.Sequential(nn.Conv2d(hidden, hidden, k, stride, k // 2, groups=hidden, bias=False),
                                nn.BatchNorm2d(hidden), nn.SiLU())
        self.se = SqueezeExciteSigmoid(hidden, max(1, cin // 4))
        self.project = nn.Sequential(nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.res = stride == 1 and cin == cout

    def forward(self, x):
        y = self.project(self.se(self.dw(self.expand(x))))
        return x + y if self.res else y


class EfficientNetLite(nn.Module):
    """EfficientNet-style blocks: SiLU, SE with sigmoid (mean over H, W), depthwise 5x5 stride 2."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU())
        self.blocks = nn.Sequential(MBConvLite(16, 16, 3, 1, 1), MBConvLite(16, 24, 5, 2, 4),
                                    MBConvLite(24, 24, 5, 1, 4), MBConvLite(24, 32, 3, 2, 4))
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(x.mean((2, 3)))


def build_efficientnet_lite():
    _seed(102)
    m = EfficientNetLite()
    _norm_stats(m)
    return m.eval(), (torch.randn(1, 3, 48, 48),)


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(b, -1, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.stride = stride
        half = cout // 2
        if stride > 1:
            self.branch1 = nn.Sequential(nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False),
                                         nn.BatchNorm2d(cin), nn.Conv2d(cin, half, 1, bias=False),
                                         nn.BatchNorm2d(half), nn.ReLU())
        else:
            self.branch1 = nn.Identity()
        bin_ = cin if stride > 1 else half
        self.branch2 = nn.Sequential(nn.Conv2d(bin_, half, 1, bias=False), nn.BatchNorm2d(half), nn.ReLU(),
                                     nn.Conv2d(half, half, 3, stride, 1, groups=half, bias=False),
                                     nn.BatchNorm2d(half), nn.Conv2d(half, half, 1, bias=False),
                                     nn.BatchNorm2d(half), nn.ReLU())

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """ShuffleNetV2 units: chunk, channel shuffle through view/transpose/view, cat; max-pool stem."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.stage = nn.Sequential(ShuffleUnit(16, 32, 2), ShuffleUnit(32, 32, 1), ShuffleUnit(32, 32, 1))
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.stage(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build_shufflenet_v2():
    _seed(103)
    m = ShuffleNetV2()
    _norm_stats(m)
    return m.eval(), (torch.randn(2, 3, 40, 40),)


# --- U-Net ---------------------------------------------------------------------------------


class ConvINLeaky(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.n1 = nn.InstanceNorm2d(cout, affine=True)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.n2 = nn.InstanceNorm2d(cout)

    def forward(self, x):
        x = F.leaky_relu(self.n1(self.c1(x)), 0.2)
        return F.leaky_relu(self.n2(self.c2(x)), 0.01)


class UNetTransposed(nn.Module):
    """U-Net with ConvTranspose2d up-sampling, instance norm, leaky relu and F.pad to odd sizes."""

    def __init__(self):
        super().__init__()
        self.d1, self.d2, self.mid = ConvINLeaky(2, 8), ConvINLeaky(8, 16), ConvINLeaky(16, 32)
        self.up2 = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.u2 = ConvINLeaky(32, 16)
        self.up1 = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.u1 = ConvINLeaky(16, 8)
        self.out = nn.Conv2d(8, 3, 1)

    @staticmethod
    def _match(up: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        dy = skip.size(2) - up.size(2)
        dx = skip.size(3) - up.size(3)
        return F.pad(up, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])

    def forward(self, x):
        s1 = self.d1(x)
        s2 = self.d2(F.max_pool2d(s1, 2))
        m = self.mid(F.max_pool2d(s2, 2))
        y = self.u2(torch.cat([self._match(self.up2(m), s2), s2], 1))
        y = self.u1(torch.cat([self._match(self.up1(y), s1), s1], 1))
        return torch.softmax(self.out(y), dim=1)


def build_unet_transposed():
    _seed(104)
    return UNetTransposed().eval(), (torch.randn(1, 2, 30, 26),)


# --- BERT ----------------------------------------------------------------------------------


class BertSelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads, self.dh = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        new_shape = x.size()[:-1] + (self.heads, self.dh)
        return x.view(new_shape).permute(0, 2, 1, 3)

    def forward(self, x, ext_mask):
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh)
        probs = F.softmax(scores + ext_mask, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.size()[:-2] + (self.heads * self.dh,))


class BertLayerTanh(nn.Module):
    def __init__(self, hidden: int, heads: int, inter: int):
        super().__init__()
        self.attn = BertSelfAttention(hidden, heads)
        self.attn_out = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.inter = nn.Linear(hidden, inter)
        self.out = nn.Linear(inter, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, ext_mask):
        x = self.ln1(x + self.attn_out(self.attn(x, ext_mask)))
        return self.ln2(x + self.out(F.gelu(self.inter(x), approximate="tanh")))


class BertWithPooler(nn.Module):
    """BERT: word + position (position_ids buffer) + token type embeddings, the extended mask
    ``(1 - mask[:, None, None, :]) * -10000``, tanh-approximate GELU, a tanh pooler."""

    def __init__(self, vocab: int = 100, hidden: int = 32, heads: int = 4, layers: int = 2, max_pos: int = 64):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden, padding_idx=0)
        self.position = nn.Embedding(max_pos, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.ln = nn.LayerNorm(hidden, eps=1e-12)
        self.register_buffer("position_ids", torch.arange(max_pos).expand((1, -1)), persistent=False)
        self.layers = nn.ModuleList([BertLayerTanh(hidden, heads, 4 * hidden) for _ in range(layers)])
        self.pool = nn.Linear(hidden, hidden)

    def forward(self, input_ids, token_type_ids, attention_mask):
        t = input_ids.size(1)
        pos = self.position_ids[:, :t]
        x = self.ln(self.word(input_ids) + self.position(pos) + self.token_type(token_type_ids))
        ext = attention_mask[:, None, None, :].to(x.dtype)
        ext = (1.0 - ext) * -10000.0
        for layer in self.layers:
            x = layer(x, ext)
        pooled = torch.tanh(self.pool(x[:, 0]))
        return x, pooled


def build_bert_pooler():
    _seed(105)
    m = BertWithPooler()
    ids = torch.randint(1, 100, (2, 12))
    types = torch.cat([torch.zeros(2, 5, dtype=torch.long), torch.ones(2, 7, dtype=torch.long)], 1)
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, 9:] = 0
    return m.eval(), (ids, types, mask)


# --- recurrent -----------------------------------------------------------------------------


class BiGRU2(nn.Module):
    """A bidirectional 2-layer GRU (time-major), its output and final hidden states, and a head."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(12, 16, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(32, 5)

    def forward(self, x):
        out, h = self.gru(x)
        return self.fc(out), h


def build_bigru2():
    _seed(106)
    return BiGRU2().eval(), (torch.randn(7, 2, 12),)


class LSTMWithState(nn.Module):
    """A batch_first 2-layer LSTM given h0/c0 as inputs, returning its output and (h, c)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(10, 20, num_layers=2, batch_first=True)

    def forward(self, x, h0, c0):
        out, (h, c) = self.lstm(x, (h0, c0))
        return out, h, c


def build_lstm_state():
    _seed(107)
    return LSTMWithState().eval(), (torch.randn(3, 6, 10), torch.randn(2, 3, 20), torch.randn(2, 3, 20))


# --- detection -----------------------------------------------------------------------------


class YoloHead(nn.Module):
    """A YOLOv5-style head on two scales: view/permute, sigmoid, grid offsets from arange, exp for
    the box size times the anchors, cat over scales."""

    def __init__(self, nc: int = 3, na: int = 2):
        super().__init__()
        self.na, self.no = na, nc + 5
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.SiLU(), nn.Conv2d(8, 16, 3, 2, 1), nn.SiLU())
        self.down = nn.Sequential(nn.Conv2d(16, 16, 3, 2, 1), nn.SiLU())
        self.m0 = nn.Conv2d(16, na * self.no, 1)
        self.m1 = nn.Conv2d(16, na * self.no, 1)
        self.register_buffer("anchors", torch.tensor([[[10.0, 13.0], [16.0, 30.0]], [[30.0, 61.0], [62.0, 45.0]]]))
        self.strides = [4.0, 8.0]

    def _decode(self, p: torch.Tensor, i: int, stride: float) -> torch.Tensor:
        bs, _, ny, nx = p.shape
        p = p.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
        yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
        grid = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2).float()
        y = p.sigmoid()
        xy = (y[..., 0:2] * 2.0 - 0.5 + grid) * stride
        wh = torch.exp(p[..., 2:4]) * self.anchors[i].view(1, self.na, 1, 1, 2)
        return torch.cat((xy, wh, y[..., 4:]), -1).view(bs, -1, self.no)

    def forward(self, x):
        f0 = self.backbone(x)
        f1 = self.down(f0)
        return torch.cat([self._decode(self.m0(f0), 0, self.strides[0]),
                          self._decode(self.m1(f1), 1, self.strides[1])], 1)


def build_yolo_head():
    _seed(108)
    m = YoloHead()
    with torch.no_grad():  # keep exp() of the box logits in a sane range
        m.m0.weight.mul_(0.3)
        m.m1.weight.mul_(0.3)
    return m.eval(), (torch.randn(1, 3, 32, 48),)


class FPN(nn.Module):
    """A feature pyramid: lateral 1x1 convs, nearest 2x upsample + add top-down, 3x3 output convs."""

    def __init__(self):
        super().__init__()
        self.c2 = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU())
        self.c3 = nn.Sequential(nn.Conv2d(8, 16, 3, 2, 1), nn.ReLU())
        self.c4 = nn.Sequential(nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU())
        self.lat = nn.ModuleList([nn.Conv2d(c, 16, 1) for c in (8, 16, 32)])
        self.smooth = nn.ModuleList([nn.Conv2d(16, 16, 3, padding=1) for _ in range(3)])

    def forward(self, x):
        c2 = self.c2(x)
        c3 = self.c3(c2)
        c4 = self.c4(c3)
        p4 = self.lat[2](c4)
        p3 = self.lat[1](c3) + F.interpolate(p4, scale_factor=2.0, mode="nearest")
        p2 = self.lat[0](c2) + F.interpolate(p3, size=c2.shape[-2:], mode="nearest")
        return self.smooth[0](p2), self.smooth[1](p3), self.smooth[2](p4)


def build_fpn():
    _seed(109)
    return FPN().eval(), (torch.randn(1, 3, 32, 32),)


# --- index-heavy ---------------------------------------------------------------------------


class IndexGraph(nn.Module):
    """scatter / scatter_add, index_select, sort, gather over dim 1, masked_fill with a computed
    mask, cumsum over dim 0."""

    def forward(self, x, idx):
        # x: (B, N) float; idx: (B, K) int64 into N
        vals, order = torch.sort(x, dim=1, descending=True)
        top = torch.gather(x, 1, order[:, :4])
        picked = torch.index_select(x, 1, idx[0])
        acc = torch.zeros_like(x).scatter_add(1, idx, picked)
        hard = torch.zeros_like(x).scatter(1, idx[:, :2], 1.0)
        mask = x < x.mean(dim=1, keepdim=True)
        filled = x.masked_fill(mask, -1.0)
        run = torch.cumsum(filled, dim=0)
        return vals, top, acc + hard, run, order


def build_index_graph():
    _seed(110)
    x = torch.randn(3, 10)
    idx = torch.stack([torch.randperm(10)[:6] for _ in range(3)])
    return IndexGraph().eval(), (x, idx)


# --- 1-D conv / audio ----------------------------------------------------------------------


class CausalBlock(nn.Module):
    def __init__(self, c: int, dilation: int):
        super().__init__()
        self.pad = 2 * dilation
        self.conv = nn.Conv1d(c, c, 3, dilation=dilation)
        self.group = nn.Conv1d(c, c, 1, groups=4)

    def forward(self, x):
        y = F.relu(self.conv(F.pad(x, (self.pad, 0))))
        return F.relu(x + self.group(y))


class TCNCausal(nn.Module):
    """A TCN: a strided conv1d front end, dilated causal conv1d blocks (left padding with F.pad),
    grouped 1x1 conv1d, residual adds; the last time step classified."""

    def __init__(self):
        super().__init__()
        self.front = nn.Conv1d(1, 16, 8, stride=4, padding=2)
        self.blocks = nn.Sequential(*[CausalBlock(16, d) for d in (1, 2, 4, 8)])
        self.fc = nn.Linear(16, 4)

    def forward(self, wav):
        x = self.blocks(F.relu(self.front(wav)))
        return self.fc(x[:, :, -1])


def build_tcn_causal():
    _seed(111)
    return TCNCausal().eval(), (torch.randn(2, 1, 400),)


#: name -> builder of ``(module in eval mode, example inputs)``
HELDOUT: Dict[str, Callable[[], Tuple[nn.Module, tuple]]] = {
    "mobilenet_v2": build_mobilenet_v2,
    "efficientnet_lite": build_efficientnet_lite,
    "shufflenet_v2": build_shufflenet_v2,
    "unet_transposed": build_unet_transposed,
    "bert_pooler": build_bert_pooler,
    "bigru2": build_bigru2,
    "lstm_state": build_lstm_state,
    "yolo_head": build_yolo_head,
    "fpn": build_fpn,
    "index_graph": build_index_graph,
    "tcn_causal": build_tcn_causal,
}
