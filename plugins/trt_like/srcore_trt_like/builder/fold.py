"""``F.unfold`` (``aten::im2col``) and ``F.fold`` (``aten::col2im``) from existing layers: one table
of flat positions in the zero-padded plane, kernel offset major (``(ki * dh + oy * sh) * Wp +
kj * dw + ox * sw`` for offset ``(ki, kj)``, block ``(oy, ox)``), which is torch's channel order
``c * kh * kw + ki * kw + kj`` of the columns.

im2col pads (a ``pad`` layer), views each plane flat and gathers the table (``index_select``);
col2im adds the columns at the table (``scatter_reduce``'s sum in index order: for each output
element, its blocks in torch's loop order, so the same sums) into a zero padded plane, then crops
the padding (``strided``). An unbatched input is the batch of one.
"""
from __future__ import annotations

import numpy as np

from .nodes import Converter, NodeView


def _pair(x) -> tuple[int, int]:
    x = [int(i) for i in (x if isinstance(x, (list, tuple)) else [x])]
    return (x[0], x[0]) if len(x) == 1 else (x[0], x[1])


def _params(v: NodeView):
    return [_pair(v.const(n)) for n in ("kernel_size", "dilation", "padding", "stride")]


def positions(h: int, w: int, k, d, p, s) -> tuple[np.ndarray, tuple[int, int]]:
    """The flat positions in the padded ``(h + 2 ph, w + 2 pw)`` plane of every (offset, block), and
    the blocks ``(oh, ow)``."""
    hp, wp = h + 2 * p[0], w + 2 * p[1]
    oh = (hp - (d[0] * (k[0] - 1) + 1)) // s[0] + 1
    ow = (wp - (d[1] * (k[1] - 1) + 1)) // s[1] + 1
    ki, kj, oy, ox = np.meshgrid(np.arange(k[0]), np.arange(k[1]), np.arange(oh), np.arange(ow), indexing="ij")
    flat = (ki * d[0] + oy * s[0]) * wp + kj * d[1] + ox * s[1]
    return flat.reshape(-1).astype(np.int64), (oh, ow)


def im2col(v: NodeView, c: Converter) -> None:
    x = c.tensor(v.value("self"))
    shape = c.net.shape(x)
    n, ch, h, w = shape if len(shape) == 4 else (1, *shape)
    k, d, p, s = _params(v)
    table, _ = positions(h, w, k, d, p, s)
    hp, wp = h + 2 * p[0], w + 2 * p[1]
    x = c.net.add("reshape", [x], (n, ch, h, w), v.source)
    if p != (0, 0):
        x = c.net.add("pad", [x], (n, ch, hp, wp), v.source, widths=((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])),
                      value=0.0, mode="constant")
    flat = c.net.add("reshape", [x], (n, ch, hp * wp), v.source)
    cols = c.net.add("index_select", [flat], (n, ch, table.size), v.source, dim=2, index=table)
    c.bind(v.node.outputs[0], c.net.add("reshape", [cols], v.out_shape(), v.source))


def col2im(v: NodeView, c: Converter) -> None:
    x = c.tensor(v.value("self"))
    out = v.out_shape()
    n, ch, h, w = out if len(out) == 4 else (1, *out)
    k, d, p, s = _params(v)
    table, _ = positions(h, w, k, d, p, s)
    hp, wp = h + 2 * p[0], w + 2 * p[1]
    src = c.net.add("reshape", [x], (n, ch, table.size), v.source)
    zeros = c.net.constant(np.zeros((n, ch, hp * wp), np.float32))
    index = np.ascontiguousarray(np.broadcast_to(table, (n, ch, table.size)))
    # (scatter_reduce's sum with self: the scatter-add, with a compiled tactic for an index of the source's shape)
    y = c.net.add("scatter_reduce", [zeros, src], (n, ch, hp * wp), v.source, dim=2, reduce="sum",
                  include_self=True, index=index)
    y = c.net.add("reshape", [y], (n, ch, hp, wp), v.source)
    if p != (0, 0):
        y = c.net.add("strided", [y], (n, ch, h, w), v.source,
                      key=(slice(None), slice(None), slice(p[0], p[0] + h, 1), slice(p[1], p[1] + w, 1)))
    c.bind(v.node.outputs[0], c.net.add("reshape", [y], out, v.source))
