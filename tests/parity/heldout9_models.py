"""torch models of the ninth held-out zoo (test_heldout9_zoo.py), each for the idiom it stresses:

- ``SCRIPTED``: TorchScript-only container code, scripted and frozen: dicts built in loops with
  ``"h" + str(i)`` keys and returned, ``enumerate`` with ``continue``, list comprehensions over a
  ModuleList, Optional arguments; the dict methods (``items``, ``keys``, ``get``, ``pop``,
  ``update``, ``del``, f-string keys); ``List[Tensor]`` / ``Tuple`` arguments with ``no_grad``,
  ``assert`` and a data-dependent ``raise``; ``torch.jit.fork`` / ``wait``; a list copied and grown
  in a loop.
- ``GRID``: through every import path that applies (script, trace, frozen, export, onnx): in-place
  writes through views (``x[:, 1:] +=``, strided ``*=``, ``narrow().mul_``, ``index_put_`` with
  accumulate and repeated indices, ``diagonal().add_``, ``t()[1].sub_``, ``index_add_``,
  ``scatter_reduce_``); int8 / uint8 / int16 / int32 / float16 arithmetic with bucketize and
  searchsorted; Optional returns of a submodule and a data-dependent ``while``; whole float16
  and bfloat16 models; grouped-query ``scaled_dot_product_attention``.
- ``EXPORT``: ``torch.cond`` and ``while_loop`` in one exported program with a dynamic batch.
- ``fx_mixed``: FX x86 static quantization of hardswish / add+relu / cat / layer_norm / mul /
  batch_norm / leaky_relu / sigmoid / tanh / max_pool / ELU (bit for bit); Conv3d (bit for bit
  since the quantized plugin's 3-d convolutions, refused before).

Factories give ``(module, inputs, other_inputs)`` (other values of the example's shapes: the scripted
cells convert without dynamic dims; ``cond_while``: also its dynamic shapes). Small shapes.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim


def _seed(s):
    torch.manual_seed(s)


# --- scripted containers ------------------------------------------------------------------------------


class DictContainers(nn.Module):
    """A dict filled in a loop over a list of head outputs (``"h" + str(i)``, one skipped with
    ``continue``), the list then rebuilt by a comprehension when a mask is given, a tuple of the
    dict, a list slice and an int. srcore's ``aten::str`` fell to torch's op, which takes no int;
    then ``h0`` came back overwritten: the dict, filled inside the loop's body, did not keep the
    list's first tensor alive in the graph's block, whose buffer the sum reused."""

    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(4, 3) for _ in range(3)])
        self.mode: str = "sum"

    def forward(self, x,
                mask: Optional[torch.Tensor] = None) -> Tuple[Dict[str, torch.Tensor], List[torch.Tensor], int]:
        outs = [h(x) for h in self.heads]
        d: Dict[str, torch.Tensor] = {}
        n = 0
        for i, o in enumerate(outs):
            if i == 1:
                continue
            d["h" + str(i)] = o
            n += 1
        if mask is not None:
            outs = [o * mask for o in outs]
        if self.mode == "sum":
            d["total"] = torch.stack(outs).sum(0)
        sizes = [o.size(0) for o in outs]
        return d, outs[1:], n + sizes[0]


def dict_containers():
    _seed(90)
    return DictContainers().eval(), (torch.randn(2, 4), torch.randn(2, 3)), [(torch.randn(2, 4) * 3, torch.randn(2, 3))]


class DictMethods(nn.Module):
    """``items()`` of a ``Dict[str, Tensor]`` argument, a ModuleDict's ``items()``, ``get`` with a
    default, ``keys()`` sorted, ``pop``, ``update``, ``del``, an f-string key. srcore ran every
    dict method but ``[]``/``len``/``in`` on torch's op, which takes no Python dict."""

    def __init__(self):
        super().__init__()
        self.proj = nn.ModuleDict({"a": nn.Linear(4, 4), "b": nn.Linear(4, 4)})

    def forward(self, feats: Dict[str, torch.Tensor], scale: float) -> Dict[str, torch.Tensor]:
        out: Dict[str, torch.Tensor] = {}
        for k, v in feats.items():
            if k in self.proj:
                out[k] = v * scale
        for name, mod in self.proj.items():
            if name in feats:
                out[name + "_p"] = mod(feats[name])
        extra = out.get("zz", torch.zeros(1))
        keys = list(out.keys())
        keys.sort()
        total = torch.zeros(1)
        for k in keys:
            total = total + out[k].sum()
        popped = out.pop("a_p")
        out.update({"total": total + extra, "popped": popped, "c": feats.get("c", torch.ones(1)) * 2})
        if "b" in out:
            del out["b"]
        out[f"n{len(keys)}"] = torch.tensor(float(len(out)))
        return out


def dict_methods():
    _seed(91)
    return (DictMethods().eval(), ({"a": torch.randn(2, 4), "b": torch.randn(2, 4), "c": torch.randn(3)}, 0.5),
            [({"a": torch.randn(2, 4), "b": torch.randn(2, 4), "c": torch.randn(3)}, 2.0)])


class ArgumentOddities(nn.Module):
    """``List[Tensor]`` and ``Tuple`` arguments, ``with torch.no_grad()``, an ``assert`` and a
    ``raise`` guarded by the data."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, xs: List[torch.Tensor], pair: Tuple[torch.Tensor, torch.Tensor]):
        assert len(xs) > 0, "need inputs"
        with torch.no_grad():
            h = self.fc(torch.cat(xs, 0))
        if bool(h.abs().max() > 1e6):
            raise RuntimeError("overflow")
        a, b = pair
        return h * a.sum() - b.mean(), len(xs)


def argument_oddities():
    _seed(92)
    return (ArgumentOddities().eval(), ([torch.randn(2, 4), torch.randn(3, 4)], (torch.randn(3), torch.randn(2, 2))),
            [([torch.randn(2, 4), torch.randn(3, 4)], (torch.randn(3), torch.randn(2, 2)))])


@torch.jit.script
def _branch(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) * 2


class ForkWait(nn.Module):
    """``torch.jit.fork`` of a scripted function and ``wait`` on its future."""

    def forward(self, x):
        fut = torch.jit.fork(_branch, x)
        y = torch.sigmoid(x)
        return torch.jit.wait(fut) + y


def fork_wait():
    _seed(93)
    return ForkWait().eval(), (torch.randn(3, 4),), [(torch.randn(3, 4) * 4,)]


class ListCopyLoop(nn.Module):
    """A list copied with ``list()`` and grown by one each pass of a loop (ONNX's SequenceInsert as
    TorchScript writes it)."""

    def forward(self, xs: List[torch.Tensor]):
        acc: List[torch.Tensor] = []
        for i in range(len(xs)):
            nxt = list(acc)
            nxt.append(xs[i] * float(i + 1))
            acc = nxt
        return torch.stack(acc).sum(0), len(acc)


def list_copy_loop():
    _seed(94)
    return ListCopyLoop().eval(), ([torch.randn(3) for _ in range(4)],), [([torch.randn(3) * 2 for _ in range(4)],)]


SCRIPTED = {"dict_containers": dict_containers, "dict_methods": dict_methods, "argument_oddities": argument_oddities,
            "fork_wait": fork_wait, "list_copy_loop": list_copy_loop}


# --- every import path ------------------------------------------------------------------------------


class InplaceViews(nn.Module):
    """In-place writes through views and index writes with repeated indices."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x, y, idx):
        h = self.fc(x)
        h[:, 1:] += y[:, :5]
        h[:, ::2] *= 0.5
        h.narrow(1, 0, 2).mul_(2.0)
        acc = torch.zeros(4, 6)
        acc.index_put_((idx,), h, accumulate=True)
        acc.diagonal().add_(1.0)
        acc.t()[1].sub_(0.25)
        acc.index_add_(0, idx, y)
        g = h.clone()
        g.masked_fill_(h > 0, -1.0)
        acc.scatter_reduce_(0, idx.view(-1, 1).expand(-1, 6), y, reduce="amax", include_self=True)
        return h, acc, g


def inplace_views():
    _seed(95)
    return InplaceViews().eval(), (torch.randn(5, 6), torch.randn(5, 6), torch.tensor([0, 2, 2, 3, 0]))


class IntDtypes(nn.Module):
    """uint8 / int8 inputs widened to int16, shifts of int32, bucketize and searchsorted of a float16
    input, bool reductions, a float16 softmax and sum."""

    def forward(self, a, b, bits, h):
        c = (a.to(torch.int16) * 3 - b.to(torch.int16)) // 2
        sh = (bits << 2) + (bits >> 1)
        bnd = torch.tensor([-1.0, 0.0, 0.5, 2.0])
        bk = torch.bucketize(h.float(), bnd, right=True)
        ss = torch.searchsorted(bnd, h.float())
        flags = (a > 3).any(1) & (b < 100).all(1)
        hh = (h * 2 + 1).softmax(-1)
        return c, sh, bk, ss, flags, hh, a.to(torch.float16).sum(1)


def int_dtypes():
    _seed(96)
    return IntDtypes().eval(), (torch.randint(0, 200, (3, 4), dtype=torch.uint8),
                                torch.randint(-100, 100, (3, 4), dtype=torch.int8),
                                torch.randint(0, 30, (3, 4), dtype=torch.int32), torch.randn(3, 4).to(torch.float16))


class _MaybeRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        y = self.fc(x)
        if bool(y.mean() > 10):
            return y, None
        return y, y.relu()


class OptionalBranches(nn.Module):
    """A submodule returning an Optional, an Optional argument cloned and written, a data-dependent
    ``while`` halving the output."""

    def __init__(self):
        super().__init__()
        self.sub = _MaybeRelu()

    def forward(self, x, w: Optional[torch.Tensor] = None):
        y, r = self.sub(x)
        if r is not None:
            y = y + r
        if w is None:
            w = torch.ones_like(y)
        else:
            w = w.clone()
            w[0] = 0.0
        out = torch.where(y > 0, y * w, torch.zeros_like(y))
        while bool(out.abs().max() > 1.0):
            out = out / 2
        return out


def optional_branches():
    _seed(97)
    return OptionalBranches().eval(), (torch.randn(3, 4), torch.randn(3, 4) * 4)


class HalfModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.ln = nn.LayerNorm(8)
        self.c = nn.Conv1d(8, 8, 3, padding=1)

    def forward(self, x):
        h = self.ln(self.fc(x))
        return F.gelu(self.c(h.transpose(1, 2))).transpose(1, 2).softmax(-1)


def _half(dtype):
    def build():
        _seed(98)
        return HalfModel().eval().to(dtype), (torch.randn(2, 5, 8).to(dtype),)
    return build


class GQAttention(nn.Module):
    """Grouped-query attention as Llama-style code writes it: ``scaled_dot_product_attention(...,
    enable_gqa=True)`` with 4 query heads on 2 key/value heads, causal and with a bool mask. srcore's
    shape rule broadcast the head dims (4 with 2) and refused it, though its kernels repeat the heads."""

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(16, 16)
        self.kv = nn.Linear(16, 16)

    def forward(self, x, mask):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, 4, 4).transpose(1, 2)
        k, v = self.kv(x).view(b, t, 2, 8).transpose(1, 2).chunk(2, -1)
        a = F.scaled_dot_product_attention(q, k, v, enable_gqa=True, is_causal=True)
        c = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True, scale=0.3)
        return a.transpose(1, 2).reshape(b, t, 16), c


def gq_attention():
    _seed(101)
    return GQAttention().eval(), (torch.randn(2, 6, 16), torch.rand(6, 6) > 0.3)


#: name -> (factory of (module, inputs), import paths, rtol). Paths torch cannot take are left out: the
#: data-dependent ``if``/``while`` (export), index_add_ with repeated indices and searchsorted (torch.onnx
#: refuses both; and SDPA's enable_gqa), float16 / bfloat16 on ONNX (left to the ONNX zoos)
GRID = {
    "inplace_views": (inplace_views, ("script", "trace", "frozen", "export"), 1e-4),
    "int_dtypes": (int_dtypes, ("script", "trace", "frozen", "export"), 2e-3),
    "optional_branches": (optional_branches, ("script", "trace", "frozen", "onnx"), 1e-4),
    "float16_model": (_half(torch.float16), ("script", "trace", "frozen", "export"), 3e-2),
    "bfloat16_model": (_half(torch.bfloat16), ("script", "trace", "frozen", "export"), 3e-2),
    "gq_attention": (gq_attention, ("script", "trace", "frozen", "export"), 1e-4),
}


# --- torch.export with torch.cond and while_loop ------------------------------------------------------


class CondWhile(nn.Module):
    """``torch.cond`` on the input's sum (branches reading the dynamic batch size) and a
    ``while_loop`` carrying a counter and a tensor."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        def true_fn(x):
            return self.a(x).relu()

        def false_fn(x):
            return self.b(x).sigmoid() * x.shape[0]

        y = torch.cond(x.sum() > 0, true_fn, false_fn, (x,))

        def cond_fn(i, h):
            return i < 3

        def body_fn(i, h):
            return i + 1, h * 0.5 + self.a(h).tanh()

        i, h = torch._higher_order_ops.while_loop(cond_fn, body_fn, (torch.tensor(0), y))
        return h, i


def cond_while():
    _seed(99)
    return (CondWhile().eval(), (torch.randn(3, 4) + 1,), ({0: Dim("b", max=64)},),
            [(torch.randn(5, 4) - 3,), (torch.randn(1, 4) + 2,)])


# --- FX-quantized (x86) ------------------------------------------------------------------------------


class FxMixed(nn.Module):
    """quantized hardswish, add + relu, cat, layer_norm, mul, batch_norm, leaky_relu, sigmoid, tanh,
    max_pool, adaptive pooling, linear and ELU (``quantized::elu``: srcore had no kernel)."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.ln = nn.LayerNorm([8, 6, 6])
        self.hs = nn.Hardswish()
        self.lr = nn.LeakyReLU(0.1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(16, 5)
        self.elu = nn.ELU(0.5)

    def forward(self, x):
        a = self.hs(self.c(x))
        b = F.relu(self.c2(a) + a)
        c = torch.cat([self.ln(b), torch.sigmoid(b)], 1)
        e = self.bn(b * a) + self.lr(b)
        return (e, self.fc(F.adaptive_avg_pool2d(c, 1).flatten(1)), F.max_pool2d(c, 2), torch.tanh(e).mean((2, 3)),
                self.elu(e))


def fx_mixed():
    _seed(100)
    return FxMixed().eval(), (torch.randn(2, 3, 6, 6),)


class _InstanceNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, padding=1)
        self.n = nn.InstanceNorm2d(4, affine=True)

    def forward(self, x):
        return self.n(self.c(x))


class _Conv3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv3d(2, 4, 3, padding=1)

    def forward(self, x):
        return self.c(x)


class _Pool3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(2, 4, 1)

    def forward(self, x):
        return F.max_pool3d(self.c(x).unsqueeze(1), 2)


#: FX-quantized modules srcore refuses: name -> (factory, what the error names)
#: an FX-quantized Conv3d (refused at import, naming Conv3dPackedParamsBase, until the quantized plugin's 3-d convs)
CONV3D_QUANTIZED = lambda: (_Conv3d().eval(), (torch.randn(1, 2, 4, 4, 4),))  # noqa: E731

#: an FX-quantized InstanceNorm2d (refused until the quantized plugin's instance norm)
INSTANCE_NORM_QUANTIZED = lambda: (_InstanceNorm().eval(), (torch.randn(1, 3, 5, 5),))  # noqa: E731

#: an FX-quantized max_pool3d of quantized data (refused until the quantized plugin's 3-D pools)
POOL3D_QUANTIZED = lambda: (_Pool3d().eval(), (torch.randn(1, 2, 4, 4),))  # noqa: E731

