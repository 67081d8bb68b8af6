"""The parity model zoo: small torch models covering layers and control flow beyond the bench set.

``ZOO`` maps a name to a :class:`ZooCase`: ``build()`` returns ``(module, inputs, others)`` with
``others`` a list of further input tuples (other values, or other batch sizes when the case has a
symbolic dim). Every module is in eval mode, float32, built under a fixed seed.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Tuple

import attrs
import torch
import torch.nn as nn
import torch.nn.functional as F


@attrs.frozen
class ZooCase:
    build: Callable
    torchscript: str = "script"        # "script" or "trace"
    export: str | None = None          # None: torch.export can; else why it cannot (asserted)
    dynamic: Dict[str, Dict[int, str]] | None = None  # symbolic dims of the inputs
    export_static: str | None = None   # why torch.export cannot keep ``dynamic`` symbolic (exported static)
    xfail: str | None = None           # a known gap outside this suite's files (strict xfail)
    export_xfail: str | None = None    # the same, for the from_torch conversion only
    no_torchscript: str | None = None  # why TorchScript cannot take the model at all
    dim_range: Dict[str, Tuple[int, int]] | None = None  # (min, max) torch.export may assume for a dim
    unsupported: str | None = None     # "op: why": no srcore kernel; refused at load with allow_fallback=False


def _seed(s: int) -> None:
    torch.manual_seed(s)


def _randomize_bn(m: nn.Module) -> None:
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)


# --- CNNs -----------------------------------------------------------------------------------------

class InvertedResidual(nn.Module):
    def __init__(self, c: int, expand: int):
        super().__init__()
        h = c * expand
        self.pw1 = nn.Sequential(nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(h, h, 3, 1, 1, groups=h, bias=False), nn.BatchNorm2d(h), nn.ReLU6())
        self.pw2 = nn.Sequential(nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        return x + self.pw2(self.dw(self.pw1(x)))


class MobileNetLike(nn.Module):
    """Stem conv+BN+hardswish, depthwise-separable blocks, strided depthwise, adaptive pool, classifier."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish())
        self.b1 = InvertedResidual(8, 2)
        self.down = nn.Sequential(nn.Conv2d(8, 8, 3, 2, 1, groups=8, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.Conv2d(8, 16, 1), nn.Hardswish())
        self.b2 = InvertedResidual(16, 3)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(16, 32), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(32, 5))

    def forward(self, x):
        return self.head(self.pool(self.b2(self.down(self.b1(self.stem(x))))))


def build_mobilenet_like():
    _seed(11)
    m = MobileNetLike()
    _randomize_bn(m)
    return m.eval(), (torch.randn(2, 3, 32, 32),), [(torch.randn(2, 3, 32, 32),), (torch.randn(3, 3, 32, 32),)]


class UNetSmall(nn.Module):
    """Two-level UNet: maxpool down, conv_transpose2d + nearest/bilinear upsampling up, cat skips."""

    def __init__(self):
        super().__init__()
        self.e1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.e2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        self.e3 = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.up2 = nn.ConvTranspose2d(16, 16, 2, stride=2)
        self.d2 = nn.Sequential(nn.Conv2d(32, 8, 3, padding=1), nn.ReLU())
        self.d1 = nn.Conv2d(16, 4, 3, padding=1)
        self.up_t = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        s1 = self.e1(x)                                   # 8 x H
        s2 = self.e2(F.max_pool2d(s1, 2))                 # 16 x H/2
        b = self.e3(F.max_pool2d(s2, 2))                  # 16 x H/4
        u2 = torch.cat([self.up2(b), s2], dim=1)          # conv_transpose2d: 32 x H/2
        d2 = self.d2(u2)                                  # 8 x H/2
        up_n = F.interpolate(d2, scale_factor=2.0, mode="nearest")
        up_b = F.interpolate(d2, scale_factor=2.0, mode="bilinear", align_corners=False)
        d1 = self.d1(torch.cat([up_n + self.up_t(d2), s1 * 0.5 + up_b.mean(1, keepdim=True)], 1))
        small = F.interpolate(d1, size=(5, 7), mode="bilinear", align_corners=True)
        return d1, small


def build_unet_small():
    _seed(12)
    return UNetSmall().eval(), (torch.randn(1, 3, 16, 16),), [(torch.randn(1, 3, 16, 16),)]


class Conv1dNet(nn.Module):
    """conv1d, max_pool1d, GELU (tanh approximation), batchnorm1d, avg_pool1d, linear."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(4, 12, 5, padding=2)
        self.bn = nn.BatchNorm1d(12)
        self.c2 = nn.Conv1d(12, 12, 3, stride=2, dilation=2, padding=2)
        self.fc = nn.Linear(12, 3)

    def forward(self, x):
        x = F.gelu(self.bn(self.c1(x)), approximate="tanh")
        x = F.max_pool1d(x, 3, stride=2, padding=1)
        x = F.gelu(self.c2(x), approximate="tanh")
        x = F.avg_pool1d(x, 2)
        return self.fc(x.mean(-1))


def build_conv1d_net():
    _seed(13)
    m = Conv1dNet()
    _randomize_bn(m)
    return m.eval(), (torch.randn(2, 4, 32),), [(torch.randn(2, 4, 32),), (torch.randn(1, 4, 32),)]


class NormNet(nn.Module):
    """group_norm, instance_norm (affine and not), layer_norm over the last two dims."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.inorm = nn.InstanceNorm2d(8, affine=True)
        self.inorm_plain = nn.InstanceNorm2d(8)
        self.ln = nn.LayerNorm([6, 6])
        with torch.no_grad():
            for n in (self.gn, self.inorm, self.ln):
                n.weight.uniform_(0.5, 1.5)
                n.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        x = self.conv(x)
        y = F.silu(self.gn(x))
        z = self.inorm(y) + self.inorm_plain(x)
        return self.ln(z)


def build_norm_net():
    _seed(14)
    return NormNet().eval(), (torch.randn(2, 4, 6, 6) * 3 + 1,), [(torch.randn(2, 4, 6, 6),)]


# --- control flow ---------------------------------------------------------------------------------

class RNNLoop(nn.Module):
    """Elman RNN written as a python loop over time steps: prim::Loop carrying the hidden state,
    trip count x.size(1) (other sequence lengths run the same StaticModule)."""

    def __init__(self):
        super().__init__()
        self.ih = nn.Linear(6, 10)
        self.hh = nn.Linear(10, 10)
        self.out = nn.Linear(10, 4)

    def forward(self, x):
        h = torch.zeros(x.size(0), 10)
        acc = torch.zeros(x.size(0), 10)
        for t in range(x.size(1)):
            h = torch.tanh(self.ih(x[:, t]) + self.hh(h))
            acc = acc + h
        return self.out(h), acc / x.size(1)


def build_rnn_loop():
    _seed(15)
    return RNNLoop().eval(), (torch.randn(3, 7, 6),), [(torch.randn(3, 7, 6),), (torch.randn(3, 4, 6),),
                                                        (torch.randn(3, 1, 6),)]


class DataIf(nn.Module):
    """prim::If on a tensor value, with an elif and branches of different op mixes."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x):
        m = x.mean()
        if m > 0.5:
            y = torch.relu(self.a(x)) * 2.0
        elif m < -0.5:
            y = torch.sigmoid(self.b(x)) - x
        else:
            y = self.a(self.b(x)).clamp(-0.25, 0.25)
        if bool((y > 0).any()):
            y = y + 1.0
        return y


def build_data_if():
    _seed(16)
    x = torch.randn(4, 8)
    return DataIf().eval(), (x + 2.0,), [(x - 2.0,), (x * 0.1,), (-torch.ones(4, 8) * 3,)]


class WhileLoop(nn.Module):
    """`while` with a data-dependent condition (prim::Loop with a carried condition)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(5, 5)

    def forward(self, x):
        i = 0
        steps = torch.zeros(1)
        while bool(x.abs().max() > 1.0) and i < 50:
            x = self.lin(x) * 0.5
            i += 1
            steps = steps + 1
        return x, steps


def build_while_loop():
    _seed(17)
    x = torch.randn(2, 5)
    return WhileLoop().eval(), (x * 40,), [(x * 0.01,), (x * 1e4,)]


# --- NLP ------------------------------------------------------------------------------------------

class TextClassifier(nn.Module):
    """Embedding of int64 token ids, bool attention mask, masked mean pooling, logits and argmax."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16, padding_idx=0)
        self.proj = nn.Linear(16, 16)
        self.cls = nn.Linear(16, 4)

    def forward(self, ids, mask):
        e = torch.tanh(self.proj(self.emb(ids)))
        m = mask.unsqueeze(-1).to(e.dtype)
        pooled = (e * m).sum(1) / m.sum(1).clamp(min=1.0)
        logits = self.cls(pooled)
        return logits, logits.argmax(dim=-1), mask.sum(1)


def _ids_and_mask(seed: int, b: int = 3, t: int = 10):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 50, (b, t), generator=g)
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    mask = torch.arange(t).unsqueeze(0) < lengths.unsqueeze(1)
    return ids.masked_fill(~mask, 0), mask


def build_text_classifier():
    _seed(18)
    return TextClassifier().eval(), _ids_and_mask(1), [_ids_and_mask(2), _ids_and_mask(3, b=5)]


class MHAEncoder(nn.Module):
    """Post-norm encoder block around nn.MultiheadAttention with a key_padding_mask (float additive)."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
        self.ln1 = nn.LayerNorm(16)
        self.ff = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))
        self.ln2 = nn.LayerNorm(16)

    def forward(self, x, pad):
        a, w = self.attn(x, x, x, key_padding_mask=pad, need_weights=True)
        x = self.ln1(x + a)
        x = self.ln2(x + self.ff(x))
        keep = (~pad).unsqueeze(-1).to(x.dtype)
        return (x * keep).sum(1) / keep.sum(1), w


def _seq_and_pad(seed: int, b: int = 2, t: int = 6):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, t, 16, generator=g)
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    lengths[0] = t  # one full row, one padded
    return x, torch.arange(t).unsqueeze(0) >= lengths.unsqueeze(1)


def build_mha_encoder():
    _seed(19)
    return MHAEncoder().eval(), _seq_and_pad(1), [_seq_and_pad(2), _seq_and_pad(5, b=3)]


# --- indexing, outputs, shapes, activations --------------------------------------------------------

class TopkGather(nn.Module):
    """topk, gather, index_select, where, masked_fill, sort-free ranking."""

    def __init__(self):
        super().__init__()
        self.register_buffer("perm", torch.tensor([3, 1, 0, 2, 5, 4, 7, 6]))

    def forward(self, x, idx):
        vals, ind = torch.topk(x, 3, dim=-1)
        g = torch.gather(x, 1, idx)
        s = torch.index_select(x, 1, self.perm)
        w = torch.where(x > 0, x, x * 0.1)
        mf = s.masked_fill(s < -0.5, -1.0e4)
        return vals, ind, g, w + mf, torch.softmax(mf, dim=-1)


def _topk_inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(4, 8, generator=g), torch.randint(0, 8, (4, 5), generator=g)


def build_topk_gather():
    _seed(20)
    return TopkGather().eval(), _topk_inputs(1), [_topk_inputs(2)]


class TupleOut(nn.Module):
    """A nested tuple of outputs, one output returned twice, one that is an input."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x, y) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
        a = self.lin(x)
        b = a * y
        return a, (b, a), y


def build_tuple_out():
    _seed(21)
    return TupleOut().eval(), (torch.randn(3, 6), torch.randn(3, 6)), [(torch.randn(3, 6), torch.randn(3, 6))]


class DictOut(nn.Module):
    """Returns Dict[str, Tensor] (scripted: prim::DictConstruct)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 3)

    def forward(self, x) -> Dict[str, torch.Tensor]:
        logits = self.lin(x)
        return {"logits": logits, "probs": torch.softmax(logits, -1)}


def build_dict_out():
    _seed(22)
    return DictOut().eval(), (torch.randn(2, 6),), [(torch.randn(2, 6),)]


class SizeArith(nn.Module):
    """view/reshape/permute/flatten/transpose driven by x.size() with a symbolic batch dim."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(12, 12)

    def forward(self, x):
        b, c, h, w = x.size()
        y = x.view(b, c, h * w).permute(0, 2, 1)          # b, hw, c
        y = self.lin(y.reshape(-1, c)).reshape(b, h * w, c)
        y = y.transpose(1, 2).contiguous().view(b, c, h, w)
        z = torch.flatten(y, 1)
        z = z.view(b, c // 2, -1).sum(-1) / float(h * w)
        return y + x, z.reshape(b * (c // 2)), torch.ones(b, 1) * (h + w)


def build_size_arith():
    _seed(23)
    return SizeArith().eval(), (torch.randn(2, 12, 3, 4),), [(torch.randn(5, 12, 3, 4),), (torch.randn(1, 12, 3, 4),)]


class Activations(nn.Module):
    """softplus/elu/leaky_relu/hardsigmoid/silu/mish/hardtanh/softsign and cumsum/softmax/log_softmax."""

    def forward(self, x):
        a = F.softplus(x) + F.softplus(x, beta=2.0, threshold=5.0)
        b = F.elu(x, alpha=0.7) + F.leaky_relu(x, 0.02) + F.hardsigmoid(x)
        c = F.silu(x) * F.mish(x) + F.hardtanh(x, -0.5, 0.5) + F.softsign(x)
        s = torch.cumsum(a + b + c, dim=1)
        return s, torch.softmax(s, dim=-1), torch.log_softmax(s, dim=0), torch.cumsum(x, 0)


def build_activations():
    _seed(24)
    return Activations().eval(), (torch.randn(4, 9) * 4,), [(torch.randn(4, 9) * 30,)]


# --- more attention, lists, splitting, integer outputs, pooling ----------------------------------

class StockEncoder(nn.Module):
    """Stock nn.TransformerEncoder (2 pre-norm layers) with src_key_padding_mask (bool)."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x, pad):
        return self.enc(x, src_key_padding_mask=pad)


def build_stock_encoder():
    _seed(26)
    return StockEncoder().eval(), _seq_and_pad(3, t=5), [_seq_and_pad(4, t=5)]


class SDPAttention(nn.Module):
    """F.scaled_dot_product_attention, causal and with a float additive mask; unbind of a permute."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(16, 48)

    def forward(self, x, attn_mask):
        b, t, e = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 2, 8).permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        c = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        return (a + c).transpose(1, 2).reshape(b, t, e)


def build_sdpa():
    _seed(27)
    return SDPAttention().eval(), (torch.randn(2, 5, 16), torch.randn(5, 5)), [(torch.randn(2, 5, 16), torch.zeros(5, 5))]


class ListStack(nn.Module):
    """RNN whose per-step outputs are appended to a list in the loop and stacked after it."""

    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(12, 4)

    def forward(self, x):
        h = torch.zeros(x.size(0), 4)
        outs: List[torch.Tensor] = []
        for t in range(x.size(1)):
            h = torch.tanh(self.cell(torch.cat([x[:, t], h], 1)))
            outs.append(h)
        return torch.stack(outs, 1)


def build_list_stack():
    _seed(28)
    return ListStack().eval(), (torch.randn(3, 6, 8),), [(torch.randn(3, 6, 8),), (torch.randn(3, 2, 8),)]


class SplitChunk(nn.Module):
    """chunk/split/repeat/expand/squeeze, einsum vs bmm, rsqrt/pow/clamp."""

    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        parts = torch.split(x, [1, 2, 3], dim=1)
        r = a.repeat(1, 2, 1)[:, :3] + parts[2] + b.expand(-1, -1, -1)
        e = torch.einsum("bij,bkj->bik", x, x)
        m = torch.bmm(x, x.transpose(1, 2))
        return r, e - m, torch.rsqrt(x.abs() + 1).pow(3), x.clamp(min=-0.3, max=0.3), parts[0].squeeze(1)


def build_split_chunk():
    _seed(29)
    return SplitChunk().eval(), (torch.randn(2, 6, 6),), [(torch.randn(2, 6, 6),)]


class IntOps(nn.Module):
    """Integer and bool outputs (exact): argmax/argmin, int arithmetic, sort indices, nonzero, `&`."""

    def forward(self, x, ids):
        am = x.argmax(1)
        s = (ids * 3 + 1) // 2 % 7
        srt, idx = torch.sort(x, dim=1, descending=True)
        both = (x > 0.5) & (x < 1.5) | (ids == 0)
        return am, s, idx, (x > 0).sum(1), ids.max(), x.argmin(), srt, torch.nonzero(ids > 3), both


def _int_inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(4, 7, generator=g), torch.randint(0, 9, (4, 7), generator=g)


def build_int_ops():
    _seed(30)
    return IntOps().eval(), _int_inputs(1), [_int_inputs(2)]


class Pools(nn.Module):
    """padding="same" dilated conv, ceil_mode max/avg pools, count_include_pad=False, adaptive
    max/avg pools with non-dividing output sizes."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, padding="same", dilation=2)

    def forward(self, x):
        y = self.c(x)
        a = F.max_pool2d(y, 3, 2, ceil_mode=True)
        b = F.avg_pool2d(y, 3, 2, padding=1, ceil_mode=True, count_include_pad=False)
        c = F.adaptive_max_pool2d(y, (3, 2))
        f = F.adaptive_avg_pool2d(y, (3, 5))
        return a, b, c, f


def build_pools():
    _seed(31)
    return Pools().eval(), (torch.randn(2, 3, 11, 10),), [(torch.randn(2, 3, 11, 10),)]


class PadBicubic(nn.Module):
    """Reflect-padded conv, constant pad, bicubic resize by size, by scale factor, with align_corners."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")

    def forward(self, x):
        y = self.c(x)
        return (F.pad(y, (1, 2, 0, 1), value=0.5), F.interpolate(y, size=(4, 9), mode="bicubic"),
                F.interpolate(y, scale_factor=(1.5, 2.5), mode="bicubic"),
                F.interpolate(y, size=(11, 5), mode="bicubic", align_corners=True))


def build_pad_bicubic():
    _seed(32)
    return PadBicubic().eval(), (torch.randn(1, 3, 6, 6),), [(torch.randn(1, 3, 6, 6) * 3,)]


class Interp1d3d(nn.Module):
    """F.interpolate on 3-D and 5-D inputs: linear / nearest (1-d), trilinear / nearest (3-d), by size
    and by scale factor, align_corners both ways (upsample_{linear1d,nearest1d,trilinear3d,nearest3d})."""

    def forward(self, x, v):
        return (F.interpolate(x, scale_factor=2.5, mode="linear"),
                F.interpolate(x, size=5, mode="linear", align_corners=True),
                F.interpolate(x, size=13, mode="nearest"),
                F.interpolate(v, scale_factor=(1.5, 2.0, 0.7), mode="trilinear"),
                F.interpolate(v, size=(2, 7, 4), mode="trilinear", align_corners=True),
                F.interpolate(v, scale_factor=2.0, mode="nearest"))


def build_interp_1d_3d():
    _seed(38)
    return Interp1d3d().eval(), (torch.randn(2, 3, 7), torch.randn(1, 2, 3, 4, 5)), \
        [(torch.randn(2, 3, 7) * 2, torch.randn(1, 2, 3, 4, 5) - 1)]



# --- dtypes, export-only control flow, masks, nested loops, statistics ----------------------------

class DoubleNet(nn.Module):
    """A float64 model (float64 constants, gelu, layer_norm, softmax)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 5).double()
        self.ln = nn.LayerNorm(5).double()

    def forward(self, x):
        return torch.softmax(self.ln(F.gelu(self.lin(x)) * 0.5 + 1.0), -1)


def build_double_net():
    _seed(33)
    return DoubleNet().eval(), (torch.randn(3, 6, dtype=torch.float64),), [(torch.randn(3, 6, dtype=torch.float64),)]


class CondNet(nn.Module):
    """torch.cond (export's data-dependent branch: the higher-order op becomes a prim::If)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        def pos(x):
            return torch.relu(self.a(x))

        def neg(x):
            return self.b(x) - 1.0
        return torch.cond(x.sum() > 0, pos, neg, (x,))


def build_cond_net():
    _seed(34)
    x = torch.randn(2, 4)
    return CondNet().eval(), (x.abs(),), [(-x.abs(),)]


class MHAFloatMask(nn.Module):
    """Sequence-first nn.MultiheadAttention with a float causal attn_mask, per-head weights."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2)

    def forward(self, x, m):
        return self.attn(x, x, x, attn_mask=m, need_weights=True, average_attn_weights=False)


def build_mha_float_mask():
    _seed(35)
    causal = torch.triu(torch.full((5, 5), float("-inf")), 1)
    return MHAFloatMask().eval(), (torch.randn(5, 2, 8), causal), [(torch.randn(5, 2, 8), torch.randn(5, 5))]


class NestedLoops(nn.Module):
    """A while loop (trip count from the outer counter) nested in a for loop, index assignment."""

    def forward(self, x):
        acc = torch.zeros_like(x)
        for i in range(x.size(0)):
            row = x[i]
            j = 0
            while j < i + 1:
                row = row * 0.9 + 0.1
                j += 1
            acc[i] = row
        return acc


def build_nested_loops():
    return NestedLoops().eval(), (torch.randn(4, 3),), [(torch.randn(4, 3),), (torch.randn(2, 3),)]


class Stats(nn.Module):
    """var/std (biased and not), norm, amax, logsumexp, prod, mean over dims, max indices."""

    def forward(self, x):
        return (x.var(1), x.std(0, unbiased=False), torch.linalg.vector_norm(x, dim=1), x.amax(1),
                x.logsumexp(1), x.prod(1), x.mean((0, 1), keepdim=True), x.max(1).indices, x.min(0).values)


def build_stats():
    _seed(36)
    return Stats().eval(), (torch.randn(4, 6) + 2,), [(torch.randn(4, 6),)]


class MissingOps(nn.Module):
    """cumprod, median (all elements; along a dim: values and indices), one_hot. Once gaps in
    srcore-cpu, hence the name."""

    def forward(self, x, ids):
        m = torch.median(x, 1)
        # NaN results (median of a slice holding NaN) become -7: the harness compares finite values
        return (torch.cumprod(torch.nan_to_num(x), 1), torch.nan_to_num(m.values, -7.0), m.indices,
                torch.nan_to_num(torch.median(x), -7.0), torch.median(x, 0, keepdim=True).indices,
                F.one_hot(ids, 10), torch.cumprod(ids, 0))


def build_missing_ops():
    _seed(37)
    # the second input: ties in the median rows and a NaN (median gives NaN and the first NaN's index)
    ties = torch.tensor([[1.0, 2.0, 2.0, 0.5], [3.0, 3.0, 3.0, 3.0], [float("nan"), 1.0, float("nan"), 0.0]])
    return MissingOps().eval(), (torch.randn(3, 4), torch.randint(0, 10, (3, 4))), \
        [(ties, torch.tensor([[0, 1, 2, 3], [3, 2, 1, 0], [1, 1, 1, 1]]))]


class OneHotInfer(nn.Module):
    """one_hot with the class count inferred from the values: the output shape is data-dependent."""

    def forward(self, ids):
        return F.one_hot(ids) * 2


def build_one_hot_infer():
    return OneHotInfer().eval(), (torch.tensor([[0, 3], [2, 1]]),), [(torch.tensor([[6, 0], [1, 1]]),),
                                                                    (torch.tensor([[0, 0], [1, 0]]),)]


class SeluCelu(nn.Module):
    def forward(self, x):
        return F.selu(x) + F.celu(-x * 0.5, 0.7)


def build_selu():
    _seed(25)
    return SeluCelu().eval(), (torch.randn(3, 5) * 3,), []



# --- recurrent layers -----------------------------------------------------------------------------

class LSTMTagger(nn.Module):
    """Embedding, 2-layer bidirectional batch-first nn.LSTM (aten::lstm.input with a constant
    Tensor[] of weights), per-token linear; the zero initial states are built from x.size(0)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.lstm = nn.LSTM(8, 12, num_layers=2, bidirectional=True, batch_first=True)
        self.out = nn.Linear(24, 5)

    def forward(self, ids):
        y, (h, c) = self.lstm(self.emb(ids))
        return self.out(y), h, c


def build_lstm_tagger():
    _seed(38)
    return LSTMTagger().eval(), (torch.randint(0, 20, (3, 7)),), [(torch.randint(0, 20, (2, 4)),),
                                                                  (torch.randint(0, 20, (1, 1)),)]


class RecurrentStack(nn.Module):
    """GRU with a given initial state feeding a projected LSTM (proj_size) and a ReLU nn.RNN without
    biases, and one LSTMCell step on the last output."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(6, 8)
        self.lstm = nn.LSTM(8, 10, proj_size=4)
        self.rnn = nn.RNN(4, 5, nonlinearity="relu", bias=False, bidirectional=True)
        self.cell = nn.LSTMCell(10, 3)

    def forward(self, x, h0):
        y, h = self.gru(x, h0)
        y, (hp, c) = self.lstm(y)
        z, hr = self.rnn(y)
        hc, cc = self.cell(z[-1])
        return z, h, hp, c, hr, hc + cc


def build_recurrent_stack():
    _seed(39)
    return RecurrentStack().eval(), (torch.randn(5, 2, 6), torch.randn(1, 2, 8)), \
        [(torch.randn(5, 2, 6), torch.zeros(1, 2, 8))]

ZOO: Dict[str, ZooCase] = {
    "mobilenet_like": ZooCase(build_mobilenet_like, dynamic={"x": {0: "batch"}}),
    "unet_small": ZooCase(build_unet_small),
    "conv1d_net": ZooCase(build_conv1d_net, dynamic={"x": {0: "batch"}}),
    "norm_net": ZooCase(build_norm_net),
    "rnn_loop": ZooCase(build_rnn_loop, dynamic={"x": {1: "time"}},
                        export_static="torch.export unrolls the python loop: the time dim specializes"),
    "data_if": ZooCase(build_data_if, export="data-dependent"),
    "while_loop": ZooCase(build_while_loop, export="data-dependent"),
    "text_classifier": ZooCase(build_text_classifier, dynamic={"ids": {0: "batch"}, "mask": {0: "batch"}}),
    "mha_encoder": ZooCase(build_mha_encoder, dynamic={"x": {0: "batch"}, "pad": {0: "batch"}}),
    "topk_gather": ZooCase(build_topk_gather),
    "tuple_out": ZooCase(build_tuple_out),
    "dict_out": ZooCase(build_dict_out),
    "size_arith": ZooCase(build_size_arith, dynamic={"x": {0: "batch"}}),
    "activations": ZooCase(build_activations),
    "stock_encoder": ZooCase(build_stock_encoder),
    "sdpa": ZooCase(build_sdpa),
    "list_stack": ZooCase(build_list_stack, dynamic={"x": {1: "time"}},
                          export_static="torch.export unrolls the python loop: the time dim specializes"),
    "split_chunk": ZooCase(build_split_chunk),
    "int_ops": ZooCase(build_int_ops),
    "pools": ZooCase(build_pools),
    "pad_bicubic": ZooCase(build_pad_bicubic),
    "interp_1d_3d": ZooCase(build_interp_1d_3d),
    "double_net": ZooCase(build_double_net),
    "cond_net": ZooCase(build_cond_net, no_torchscript="torch.cond is torch.export's (TorchScript rejects it)"),
    "mha_float_mask": ZooCase(build_mha_float_mask),
    "nested_loops": ZooCase(build_nested_loops, dynamic={"x": {0: "rows"}},
                            export_static="torch.export unrolls the python loops: the row dim specializes"),
    "stats": ZooCase(build_stats),
    "missing_ops": ZooCase(build_missing_ops),
    "one_hot_infer": ZooCase(build_one_hot_infer, export="data-dependent"),
    "selu_celu": ZooCase(build_selu),
    "lstm_tagger": ZooCase(build_lstm_tagger, dynamic={"ids": {0: "batch", 1: "time"}},
                           export_static="torch.export specializes nn.LSTM's time dim (the export is static)"),
    "recurrent_stack": ZooCase(build_recurrent_stack),
}

# models written the way real-world PyTorch code is (ViT, GPT, ResNeXt/SE, detection head, ...):
# a module of their own; it imports this one's ZooCase, hence the import at the end
from zoo_realworld import REALWORLD  # noqa: E402

ZOO.update(REALWORLD)

#: the zoo models test.sh's second pass runs (the first runs all of them): one per architecture
#: family, plus the graph shapes the executors and planners treat differently (branches, nested
#: loops, lists built in loops, in-place writes, containers out, shape arithmetic)
SECOND_PASS = (
    "mobilenet_like",    # CNN (depthwise, dynamic batch)
    "resnext_se",        # CNN with grouped convs and squeeze-excite
    "unet_small",        # encoder-decoder (upsampling, skip concatenation)
    "detection_head",    # detection (multi-scale outputs)
    "tcn",               # 1-D temporal convs
    "video_c3d",         # 3-D convs
    "lstm_tagger",       # recurrent (nn.LSTM)
    "gpt_block",         # decoder transformer (causal attention)
    "bert_like",         # encoder transformer (embeddings, masks)
    "pointnet",          # point sets
    "graph_conv",        # graphs (scatter, index_add)
    "dlrm_tiny",         # recommendation (embedding bags)
    "norm_net",          # normalizations
    "data_if",           # data-dependent branches
    "nested_loops",      # nested loops, symbolic trip counts
    "list_stack",        # lists built in a loop
    "inplace_ops",       # in-place writes (aliasing: the planners)
    "dict_out",          # container outputs
    "size_arith",        # shape arithmetic
)
assert set(SECOND_PASS) <= set(ZOO), set(SECOND_PASS) - set(ZOO)
