"""The channel shuffle as one copy: ShuffleNet's ``cat`` -> ``view(N, g, C/g, H, W)`` ->
``transpose(1, 2)`` -> ``view(N, C, H, W)`` -> ``chunk`` is four copies layer by layer (the cat,
the permute, one per chunk half; 2x16x5x5 tensors: ~1 µs each, mostly calls). Every output channel
of that chain is one input plane, so :func:`fuse_channel_shuffle` replaces it with a single
``channel_gather`` layer that copies each plane once, straight into the chunks (exact: a copy).

The match: a ``reshape`` (N, C, H, W) -> (N, g, C/g, H, W), a ``permute`` (0, 2, 1, 3, 4), a
``reshape`` back to (N, C, H, W) (other reshapes of the permute's output, a flatten, then read that). Folded in where they are there: the ``cat`` along channels
producing its input (when nothing else reads the cat), and the readers of its output when every
one is a ``strided`` channel range (the chunks; nothing else reads the shuffle's output and it is
not an engine output). The layer's ``table`` row ``(output, channel, input, channel)`` per output
plane, in output order.
"""
from __future__ import annotations

import numpy as np

from .network import Layer, Network


def shuffle_perm(C: int, g: int) -> np.ndarray:
    """``perm[c]``: the input channel output channel ``c`` of a shuffle in ``g`` groups reads."""
    c = np.arange(C)
    return (c % g) * (C // g) + c // g


def _channel_range(layer: Layer, C: int) -> tuple[int, int] | None:
    """``(a, b)`` when ``layer`` is a ``strided`` ``x[:, a:b]`` of a 4-D tensor with ``C`` channels."""
    key = layer.attrs.get("key", ())
    if layer.kind != "strided" or len(key) < 2 or len(key) > 4 or not all(isinstance(k, slice) for k in key):
        return None
    if any(k != slice(None) for i, k in enumerate(key) if i != 1) or key[1].step not in (None, 1):
        return None
    a, b, _ = key[1].indices(C)
    return (a, b) if b > a else None


def _shuffle_groups(net: Network, first: Layer, producer, users) -> tuple[int, Layer, Layer] | None:
    """``(g, permute, last)`` when ``first`` starts a channel shuffle (see the module)."""
    x = net.shape(first.inputs[0])
    v = net.shape(first.outputs[0])
    if len(x) != 4 or len(v) != 5 or v[0] != x[0] or v[1] * v[2] != x[1] or v[3:] != x[2:]:
        return None
    readers = users[first.outputs[0]]
    if len(readers) != 1 or readers[0].kind != "permute" or readers[0].attrs["perm"] != (0, 2, 1, 3, 4):
        return None
    perm = readers[0]
    after = users[perm.outputs[0]]
    back = [r for r in after if r.kind == "reshape" and net.shape(r.outputs[0]) == x]
    if (not back or any(r.kind != "reshape" for r in after)
            or first.outputs[0] in net.outputs or perm.outputs[0] in net.outputs):
        return None
    last = back[0]
    for r in after:   # another view of the shuffled tensor (a flatten collapse_reshapes moved): of y
        if r is not last:
            r.inputs = [last.outputs[0]]
            users[last.outputs[0]].append(r)
    return v[1], perm, last


def fuse_channel_shuffle(net: Network) -> Network:
    """Each channel shuffle (with the cat before it and the chunks after it) as one
    ``channel_gather`` layer, in place (see the module)."""
    users = net.users()
    producer = {t: x for x in net.layers for t in x.outputs}
    replace: dict[int, Layer] = {}
    drop: set[int] = set()
    for first in net.layers:
        if first.kind != "reshape" or id(first) in drop:
            continue
        found = _shuffle_groups(net, first, producer, users)
        if found is None:
            continue
        g, perm, last = found
        t_in, y = first.inputs[0], last.outputs[0]
        C = net.shape(t_in)[1]
        cat = producer.get(t_in)
        fused = [first, perm, last]
        if (cat is not None and cat.kind == "cat" and cat.attrs["dim"] == 1 and len(users[t_in]) == 1
                and t_in not in net.outputs):
            inputs = list(cat.inputs)
            sources = [(k, c) for k, t in enumerate(inputs) for c in range(net.shape(t)[1])]
            fused.insert(0, cat)
        else:
            inputs, sources = [t_in], [(0, c) for c in range(C)]
        readers = users[y]
        ranges = [_channel_range(r, C) for r in readers]
        if readers and y not in net.outputs and all(r is not None for r in ranges):
            outputs = [r.outputs[0] for r in readers]
            fused += readers
        else:
            outputs, ranges = [y], [(0, C)]
        src = shuffle_perm(C, g)
        table = np.array([(j, c - a, *sources[src[c]]) for j, (a, b) in enumerate(ranges) for c in range(a, b)],
                         np.int64).reshape(-1, 4)
        layer = Layer("channel_gather", inputs, outputs, dict(table=table, groups=g),
                      f"{first.source} (channel shuffle, {len(fused)} layers)")
        # the new layer runs where the first of the fused ones did: its inputs are ready there, and
        # every reader of its outputs came after the layer it replaces
        replace[id(fused[0])] = layer
        drop.update(id(x) for x in fused)
    net.layers = [replace.get(id(x), x) for x in net.layers if id(x) not in drop or id(x) in replace]
    return net
