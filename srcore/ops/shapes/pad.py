"""Shape rules of padding: ``aten::pad`` and its per-mode forms."""
from __future__ import annotations

from . import symbolic as sym
from .base import Ctx, rule, tt


@rule("aten::pad", "aten::constant_pad_nd", "aten::reflection_pad1d", "aten::reflection_pad2d",
      "aten::replication_pad1d", "aten::replication_pad2d", "aten::_pad_circular")
def pad(ctx: Ctx):
    """``pad`` holds (before, after) pairs from the last dim backwards; negative values crop."""
    t = ctx.tensor(0)
    pads = ctx.int_list(1, "pad")
    if pads is None:
        pads = ctx.int_list(1, "padding")
    if t.shape is None or pads is None:
        return [tt(t.dtype, None if pads is None or t.shape is None else t.shape)]
    if len(pads) % 2 or len(pads) // 2 > len(t.shape):
        raise ctx.fail(f"pad of length {len(pads)} does not fit a tensor of rank {len(t.shape)}")
    shape = list(t.shape)
    for i in range(len(pads) // 2):
        d = len(shape) - 1 - i
        before, after = pads[2 * i], pads[2 * i + 1]
        if isinstance(before, int) and isinstance(after, int) and shape[d] is not None:
            new = sym.add(shape[d], before + after)
            if isinstance(new, int) and new < 0:
                raise ctx.fail(f"padding {before, after} makes dimension {d} negative")
            shape[d] = new
        else:
            shape[d] = None
    return [tt(t.dtype, tuple(shape))]
