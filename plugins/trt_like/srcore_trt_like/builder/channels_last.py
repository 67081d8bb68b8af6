"""Channels-last MLP blocks in NCHW: ``permute(0, 2, 3, 1)`` -> per-position layers ->
``permute(0, 3, 1, 2)`` without the permutes.

ConvNeXt (V1, V2), PoolFormer / MetaFormer and other "channels-last MLP" blocks move an NCHW
tensor to NHWC for a layer norm over the channels and two linears (GELU between, a layer scale
after), then move it back. Each layer there works on one position's channel vector, so the same
work runs on the NCHW tensor itself: the layer norm as a ``channel_norm`` layer (over dim 1), each
linear as a 1x1 conv (the conv tactics, NCHW16c and all), a pointwise op with its constant operands
of the channel dim reshaped to (C, 1, 1). The two permutes (a copy each) go; a linear's bias and a
scale or shift after it (the layer scale) fold into its conv's bias and weight, and the conv
fusions that run next give it its GELU and its residual add.

A region is the set of NHWC tensors closed under producers and readers: every one made by an
entry permute (of a 4-D float32 NCHW tensor) or a region layer, read only by region layers and
exit permutes, never an engine input or output. The region layers are a ``layer_norm`` over the
last dim alone, a ``gemm`` (a linear), and a pointwise layer whose tensor operands are region
tensors of its output's shape or constants varying along the last dim only. Anything else leaves
the network as it was.
"""
from __future__ import annotations

import numpy as np

from .network import Layer, Network

TO_NHWC, TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)


def channels_last_to_nchw(net: Network) -> Network:
    """Rewrite every region of ``net`` (see the module) in NCHW (in place; before the conv fusions)."""
    done: set[int] = set()
    for layer in list(net.layers):
        if _is_permute(layer, TO_NHWC, net) and layer.outputs[0] not in done:
            region = _region(net, layer.outputs[0])
            if region is not None:
                done |= region[0]
                _rewrite(net, *region)
    return net


def _is_permute(layer: Layer, perm, net: Network) -> bool:
    return (layer.kind == "permute" and tuple(layer.attrs["perm"]) == perm and len(net.shape(layer.inputs[0])) == 4
            and net.tensors[layer.inputs[0]].dtype == "float32")


def _per_position(layer: Layer, net: Network) -> bool:
    """Whether ``layer`` works on each position's last-dim vector alone (see the module)."""
    out = net.shape(layer.outputs[0])
    if len(out) != 4 or len(layer.outputs) != 1 or net.tensors[layer.outputs[0]].dtype != "float32":
        return False
    if layer.kind == "layer_norm":
        return layer.attrs["size"] == out[-1]
    if layer.kind == "gemm":
        return set(layer.attrs) == {"weight"} and layer.attrs["weight"].ndim == 2
    if layer.kind != "pointwise":
        return False
    for t in layer.inputs:
        if t in net.constants:
            s = net.shape(t)
            if len(s) > 4 or any(d != 1 for d in s[:-1]) or (s and s[-1] not in (1, out[-1])):
                return False
        elif net.shape(t) != out or net.tensors[t].dtype != "float32":
            return False
    return True


def _region(net: Network, start: int):
    """``(tensors, layers, entries, exits)`` of the region holding ``start``, or None."""
    made = {t: x for x in net.layers for t in x.outputs}
    readers: dict[int, list[Layer]] = {}
    for x in net.layers:
        for t in x.inputs:
            readers.setdefault(t, []).append(x)
    fixed = set(net.inputs) | set(net.outputs)
    tensors, layers, entries, exits = set(), {}, {}, {}
    todo = [start]
    while todo:
        t = todo.pop()
        if t in tensors:
            continue
        if t in fixed or len(net.shape(t)) != 4:
            return None
        tensors.add(t)
        p = made.get(t)
        if p is not None and _is_permute(p, TO_NHWC, net):
            entries[id(p)] = p
        elif p is not None and _per_position(p, net):
            layers[id(p)] = p
            todo += [u for u in p.inputs if u not in net.constants]
        else:
            return None
        for r in readers.get(t, []):
            if r.kind == "permute" and tuple(r.attrs["perm"]) == TO_NCHW:
                exits[id(r)] = r
            elif _per_position(r, net):
                layers[id(r)] = r
                todo += [u for u in (*r.inputs, *r.outputs) if u not in net.constants]
            else:
                return None
    if not entries or not exits:
        return None
    return tensors, list(layers.values()), list(entries.values()), list(exits.values())


def _rewrite(net: Network, tensors: set[int], layers: list[Layer], entries: list[Layer], exits: list[Layer]) -> None:
    rename = {p.outputs[0]: p.inputs[0] for p in entries}
    rename.update((p.outputs[0], p.inputs[0]) for p in exits)
    for t in tensors:
        n, h, w, c = net.shape(t)
        net.tensors[t].shape = (n, c, h, w)
    made_convs = []
    for layer in layers:
        layer.inputs = [_channel_const(net, t) if t in net.constants else t for t in layer.inputs]
        if layer.kind == "layer_norm":
            layer.kind = "channel_norm"
        elif layer.kind == "gemm":
            wt = layer.attrs["weight"]
            layer.kind = "conv"
            layer.attrs = dict(weight=np.ascontiguousarray(wt.reshape(*wt.shape, 1, 1), np.float32), bias=None,
                               stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, relu=False, residual=False)
            made_convs.append(layer)
    gone = {id(p) for p in (*entries, *exits)}
    net.layers = [x for x in net.layers if id(x) not in gone]
    for x in net.layers:
        x.inputs = [rename.get(t, t) for t in x.inputs]
    net.outputs = [rename.get(t, t) for t in net.outputs]
    for conv in made_convs:
        _fold_affine(net, conv)


def _channel_const(net: Network, t: int) -> int:
    """A constant varying along the last dim as one of shape (C, 1, 1) (a scalar stays)."""
    a = net.constants[t]
    if a.ndim == 0 or a.size == 1:
        return t
    return net.constant(a.reshape(-1, 1, 1))


def _fold_affine(net: Network, conv: Layer) -> None:
    """Fold the adds and multiplies by a per-channel or scalar constant that alone read ``conv``'s
    output (a linear's bias, a layer scale) into its bias and weight."""
    oc = conv.attrs["weight"].shape[0]
    while True:
        y = conv.outputs[0]
        users = [x for x in net.layers if y in x.inputs]
        if y in net.outputs or len(users) != 1:
            return
        pw = users[0]
        if pw.kind != "pointwise" or pw.attrs["op"] not in ("add", "mul") or pw.attrs.get("params"):
            return
        args = tuple(pw.attrs["args"])
        if len(args) != 2 or ("in", pw.inputs.index(y)) not in args or pw.inputs.count(y) != 1:
            return
        other = args[1] if args[0] == ("in", pw.inputs.index(y)) else args[0]
        if other[0] == "const":
            v = np.full(oc, other[1], np.float32)
        else:
            t = pw.inputs[other[1]]
            if t not in net.constants or net.constants[t].size not in (1, oc):
                return
            v = np.broadcast_to(net.constants[t].reshape(-1), (oc,)).astype(np.float32)
        bias = conv.attrs["bias"] if conv.attrs["bias"] is not None else np.zeros(oc, np.float32)
        if pw.attrs["op"] == "add":
            conv.attrs["bias"] = (bias + v).astype(np.float32)
        else:
            conv.attrs["weight"] = np.ascontiguousarray(conv.attrs["weight"] * v[:, None, None, None], np.float32)
            conv.attrs["bias"] = (bias * v).astype(np.float32)
        conv.outputs = list(pw.outputs)
        net.layers = [x for x in net.layers if x is not pw]
