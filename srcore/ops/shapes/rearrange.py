"""repeat_interleave (data-dependent unless the repeats are known), im2col / col2im (F.unfold / F.fold).

argsort and pixel_(un)shuffle have their rules with sort (reduce.py) and the convolutions (conv.py).
"""
from __future__ import annotations

from . import symbolic as sym
from .base import Ctx, UNKNOWN, rule, tt


def _int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@rule("aten::repeat_interleave")
def repeat_interleave(ctx: Ctx):
    """``.Tensor``: ``(output_size or ?,)`` of the repeats' dtype; ``.self_*``: the input with the
    repeated dim (flattened when ``dim`` is None) of size ``output_size``, or ``n * repeats`` for a
    known int ``repeats``, else unknown."""
    if ctx.op.startswith("aten::repeat_interleave.Tensor"):
        r = ctx.tensor(0)
        if r.shape is not None and len(r.shape) != 1:
            raise ctx.fail(f"repeats must be a 1-D tensor, got shape {r.shape}")
        return [tt(r.dtype, (_int(ctx.known(1, "output_size", None)),))]
    x = ctx.tensor(0)
    dim = ctx.known(2, "dim", None)
    out_size = _int(ctx.known(3, "output_size", None))
    rep = ctx.known(1, "repeats") if not ctx.is_tensor(1) else UNKNOWN
    if rep is not UNKNOWN and _int(rep) is not None and rep < 0:
        raise ctx.fail(f"repeats can not be negative, got {rep}")
    if x.shape is None:
        return [tt(x.dtype, None if dim is not None else (out_size,))]
    if dim is None:
        n = sym.prod(x.shape)
        size = out_size if out_size is not None else (sym.mul(n, rep) if _int(rep) is not None and n is not None
                                                      else None)
        return [tt(x.dtype, (size,))]
    if dim is UNKNOWN:
        return [tt(x.dtype, (None,) * len(x.shape))]
    d = ctx.norm_dim(dim, len(x.shape))
    if d is None:
        return [tt(x.dtype, (None,) * len(x.shape))]
    shape = list(x.shape)
    if out_size is not None:
        shape[d] = out_size
    elif _int(rep) is not None and shape[d] is not None:
        shape[d] = sym.mul(shape[d], rep)
    else:
        shape[d] = None
    return [tt(x.dtype, tuple(shape))]


def _pairs(ctx: Ctx, names_pos):
    vals = []
    for pos, name in names_pos:
        v = ctx.int_list(pos, name, 2)
        if v is not None and len(v) == 1:
            v = v * 2
        vals.append(v if v is not None and len(v) == 2 else None)
    return vals


def _blocks(ctx: Ctx, size, k, d, p, s):
    """Blocks per spatial dim ((size + 2p - d(k-1) - 1) // s + 1); None where unknown."""
    out = []
    for i in range(2):
        parts = [size[i] if size is not None else None] + [v[i] if v is not None else None for v in (k, d, p, s)]
        if not all(isinstance(v, int) for v in parts):
            out.append(None)
            continue
        n, kk, dd, pp, ss = parts
        if kk <= 0 or dd <= 0 or ss <= 0 or pp < 0:
            raise ctx.fail(f"kernel_size, dilation and stride must be positive and padding non-negative, "
                           f"got {k}, {d}, {s}, {p}")
        b = (n + 2 * pp - dd * (kk - 1) - 1) // ss + 1
        if b <= 0:
            raise ctx.fail(f"the kernel {tuple(k)} (dilation {tuple(d)}) does not fit the padded input "
                           f"of size {n + 2 * pp} in dim {i}")
        out.append(b)
    return out


@rule("aten::im2col")
def im2col(ctx: Ctx):
    """``(N, C, H, W) -> (N, C*kh*kw, L)`` (3-D input: no N)."""
    x = ctx.tensor(0)
    k, d, p, s = _pairs(ctx, ((1, "kernel_size"), (2, "dilation"), (3, "padding"), (4, "stride")))
    if x.shape is None:
        return [tt(x.dtype, None)]
    if len(x.shape) not in (3, 4):
        raise ctx.fail(f"input must be 3-D or 4-D (N, C, H, W), got shape {x.shape}")
    *lead, c, h, w = x.shape
    bh, bw = _blocks(ctx, (h, w), k, d, p, s)
    ck = sym.mul(c, k[0] * k[1]) if k is not None and isinstance(k[0], int) and isinstance(k[1], int) \
        and c is not None else None
    L = bh * bw if bh is not None and bw is not None else None
    return [tt(x.dtype, tuple(lead) + (ck, L))]


@rule("aten::col2im")
def col2im(ctx: Ctx):
    """``(N, C*kh*kw, L) -> (N, C, H, W)`` with ``(H, W) = output_size`` (2-D input: no N)."""
    x = ctx.tensor(0)
    size, k, d, p, s = _pairs(ctx, ((1, "output_size"), (2, "kernel_size"), (3, "dilation"), (4, "padding"),
                                    (5, "stride")))
    if x.shape is None:
        return [tt(x.dtype, None)]
    if len(x.shape) not in (2, 3):
        raise ctx.fail(f"input must be 2-D or 3-D (N, C*kh*kw, L), got shape {x.shape}")
    *lead, ck, L = x.shape
    bh, bw = _blocks(ctx, size, k, d, p, s)
    kk = k[0] * k[1] if k is not None and isinstance(k[0], int) and isinstance(k[1], int) else None
    c = None
    if kk is not None and isinstance(ck, int):
        if ck % kk:
            raise ctx.fail(f"dim 1 of the input ({ck}) must be divisible by the kernel size {k[0]}*{k[1]}")
        c = ck // kk
    elif kk is not None and ck is not None:
        c = sym.exact_div(ck, kk)
    if isinstance(L, int) and bh is not None and bw is not None and L != bh * bw:
        raise ctx.fail(f"expected {bh}*{bw} = {bh * bw} blocks for output_size {tuple(size)}, got {L}")
    hw = tuple(size) if size is not None else (None, None)
    return [tt(x.dtype, tuple(lead) + (c,) + hw)]
