"""Written-out RMSNorm (T5's, LLaMA's) as one ``rms_norm`` layer.

Before pointwise fusion the norm is five to seven single layers: the square (``x.pow(2)``,
``x * x`` or ``torch.square``), the ``mean`` over the last dim (keepdim; or its ``sum`` divided by
the dim's size, which is how torch's float32 mean computes it), ``+ eps``, the inverse
root (``rsqrt``, ``reciprocal`` or ``1 /`` of ``sqrt``; or ``x / sqrt(...)`` directly), the
product with ``x`` and optionally the weight (a constant of the last dim's size, or a scalar). The
``float()`` / ``type_as`` casts of float32 code are gone by then (peephole). The fused layer is the
compiled row kernel of layer norm without the mean subtraction (``kernels/rows.py``), one pass for
the sum of squares and one for the result instead of four layers and three intermediates.

Only an exact match is fused: every intermediate read by the next layer alone and not an engine
output, the reduction over the last dim only, the same ``x`` squared and scaled; anything else
stays as it was.
"""
from __future__ import annotations

import numpy as np

from .network import Layer, Network


def fuse_rms_norm(net: Network) -> Network:
    """Replace every written-out RMSNorm of ``net`` by an ``rms_norm`` layer (in place; before
    :func:`.fusion.fuse_pointwise`, on single pointwise layers)."""
    while True:
        match = _find(net)
        if match is None:
            return net
        remove, layer = match   # the fused layer takes the place of the last one it replaces
        last = remove[-1]
        net.layers[:] = [layer if x is last else x for x in net.layers
                         if x is last or not any(x is r for r in remove)]


def _replace_all(net: Network, find) -> Network:
    """Each match ``find(net)`` gives, ``(layers to remove, fused layer)``, until none: the fused
    layer takes the place of the last (in execution order) of those it replaces."""
    while True:
        match = find(net)
        if match is None:
            return net
        remove, layer = match
        last = max(remove, key=lambda r: next(i for i, x in enumerate(net.layers) if x is r))
        net.layers[:] = [layer if x is last else x for x in net.layers
                         if x is last or not any(x is r for r in remove)]


def _operands(layer: Layer) -> list:
    """The layer's args as ``("t", tensor id)`` or ``("const", value)``."""
    return [("t", layer.inputs[a[1]]) if a[0] == "in" else ("const", float(a[1])) for a in layer.attrs["args"]]


def _pw(layer: Layer | None, op: str) -> bool:
    return layer is not None and layer.kind == "pointwise" and layer.attrs["op"] == op


def _graph(net: Network):
    """``(users, next_of, producer)``: the net's readers of each tensor, the one layer reading a tensor
    (None: several, none, or an engine output) and the layer writing each tensor."""
    users = net.users()
    outputs = set(net.outputs)

    def next_of(t):
        u = users.get(t, [])
        return u[0] if len(u) == 1 and t not in outputs else None

    return users, next_of, {t: x for x in net.layers for t in x.outputs}


def _find(net: Network):
    users, next_of, producer = _graph(net)
    for first in net.layers:
        if first.kind not in ("mean", "reduce") or net.tensors[first.inputs[0]].dtype != "float32":
            continue
        shape = net.shape(first.inputs[0])
        if not shape or first.attrs["dims"] != (len(shape) - 1,) or net.shape(first.outputs[0]) != shape[:-1] + (1,):
            continue
        mean = first if first.kind == "mean" else _sum_over_n(first, next_of(first.outputs[0]), shape[-1])
        if mean is None:
            continue
        sq = producer.get(first.inputs[0])
        if sq is None or next_of(first.inputs[0]) is not first:
            continue
        x = _squared(sq)
        if x is None or net.shape(x) != shape:
            continue
        found = _rest(net, next_of, mean, x)
        if found is None:
            continue
        chain, eps, y = found
        weight, out, tail = _weight(net, next_of, y, shape)
        n = shape[-1]
        layer = Layer("rms_norm", [x], [out], {"size": n, "eps": eps, "weight": weight}, sq.source)
        return [sq, *([first] if first is not mean else []), mean, *chain, *tail], layer
    return None


def _sum_over_n(total: Layer, div: Layer | None, n: int) -> Layer | None:
    """``div`` when ``total`` sums over the last dim and ``div`` divides that by the dim's size ``n``:
    torch's float32 ``mean`` (the sum, then one division by the count), written out."""
    if total.attrs["op"] != "sum" or not _pw(div, "div"):
        return None
    return div if _operands(div) == [("t", total.outputs[0]), ("const", float(n))] else None


def _squared(sq: Layer) -> int | None:
    """``x`` when ``sq`` is ``x ** 2``, ``x * x`` or ``square(x)``."""
    ops = _operands(sq) if sq.kind == "pointwise" else []
    if _pw(sq, "pow") and dict(sq.attrs.get("params", {})).get("exponent") == 2.0 and ops[0][0] == "t":
        return ops[0][1]
    if _pw(sq, "square") and ops[0][0] == "t":
        return ops[0][1]
    if _pw(sq, "mul") and ops[0][0] == "t" and ops[0] == ops[1]:
        return ops[0][1]
    return None


def _rest(net: Network, next_of, mean: Layer, x: int):
    """The layers from ``mean + eps`` to ``x * rstd``, eps and the normalised tensor (None: no match)."""
    add = next_of(mean.outputs[0])
    if not _pw(add, "add"):
        return None
    ops = _operands(add)
    consts = [v for k, v in ops if k == "const"]
    if len(consts) != 1 or ("t", mean.outputs[0]) not in ops or not consts[0] >= 0.0:
        return None
    eps = consts[0]
    chain = [add]
    root = next_of(add.outputs[0])
    if _pw(root, "rsqrt"):
        chain.append(root)
        scale = next_of(root.outputs[0])
        if not _pw(scale, "mul") or sorted(_operands(scale)) != sorted([("t", x), ("t", root.outputs[0])]):
            return None
        return [*chain, scale], eps, scale.outputs[0]
    if not _sqrt(root):
        return None
    chain.append(root)
    s = root.outputs[0]
    inv = next_of(s)
    if _pw(inv, "div") and _operands(inv) == [("t", x), ("t", s)]:   # x / sqrt(...)
        return [*chain, inv], eps, inv.outputs[0]
    if not (_pw(inv, "reciprocal") and _operands(inv) == [("t", s)]
            or _pw(inv, "div") and _operands(inv) == [("const", 1.0), ("t", s)]):
        return None
    scale = next_of(inv.outputs[0])
    if not _pw(scale, "mul") or sorted(_operands(scale)) != sorted([("t", x), ("t", inv.outputs[0])]):
        return None
    return [*chain, inv, scale], eps, scale.outputs[0]


def _weight(net: Network, next_of, y: int, shape):
    """The weight multiply after the norm, if there is one: (weight or None, output, layers)."""
    mul = next_of(y)
    if not _pw(mul, "mul") or net.shape(mul.outputs[0]) != shape:
        return None, y, []
    other = [o for o in _operands(mul) if o != ("t", y)]
    if len(other) != 1 or len(_operands(mul)) != 2:
        return None, y, []
    kind, v = other[0]
    n = shape[-1]
    if kind == "const":
        return np.full(n, v, np.float32), mul.outputs[0], [mul]
    w = net.constants.get(v)
    if w is None or w.size != n or net.shape(v)[-1:] != (n,) or len(net.shape(v)) > len(shape):
        return None, y, []
    return np.ascontiguousarray(w.reshape(n), np.float32), mul.outputs[0], [mul]


def fuse_channel_norm(net: Network) -> Network:
    """Replace every written-out layer norm over dim 1 of an NCHW tensor (ConvNeXt's channels-first
    ``LayerNorm``: ``u = x.mean(1, keepdim)``, ``s = (x - u).pow(2).mean(1, keepdim)``,
    ``(x - u) / sqrt(s + eps)``, then ``w[:, None, None] * . + b[:, None, None]``, either optional)
    by a ``channel_norm`` layer (``tactics/nn.py``), as :func:`fuse_rms_norm` does for RMSNorm."""
    return _replace_all(net, _find_channel_norm)


def _channel_mean(layer: Layer | None, net: Network) -> bool:
    if layer is None or layer.kind != "mean" or tuple(layer.attrs["dims"]) != (1,):
        return False
    shape = net.shape(layer.inputs[0])
    return (len(shape) == 4 and net.tensors[layer.inputs[0]].dtype == "float32"
            and net.shape(layer.outputs[0]) == (shape[0], 1, *shape[2:]))


def _find_channel_norm(net: Network):
    users, next_of, producer = _graph(net)
    outputs = set(net.outputs)
    for first in net.layers:
        if not _channel_mean(first, net):
            continue
        x, u = first.inputs[0], first.outputs[0]
        shape = net.shape(x)
        subs = users.get(u, [])
        if u in outputs or not subs or any(not _pw(s, "sub") or _operands(s) != [("t", x), ("t", u)] for s in subs):
            continue
        diffs = [s.outputs[0] for s in subs]
        sq = [r for d in diffs for r in users.get(d, []) if _squared(r) == d]
        if len(sq) != 1 or any(d in outputs for d in diffs):
            continue
        var = next_of(sq[0].outputs[0])
        if not _channel_mean(var, net):
            continue
        for d in diffs:
            found = _rest(net, next_of, var, d)
            if found is None:
                continue
            chain, eps, y = found
            done = {id(sq[0]), *(id(r) for r in chain)}
            if any(id(r) not in done for e in diffs for r in users.get(e, [])):
                continue   # (a difference read elsewhere too)
            weight, y, tail = _channel_affine(net, next_of, y, shape, "mul")
            bias, y, tail2 = _channel_affine(net, next_of, y, shape, "add")
            layer = Layer("channel_norm", [x], [y], {"size": shape[1], "eps": eps, "weight": weight, "bias": bias},
                          first.source)
            return [first, *subs, sq[0], var, *chain, *tail, *tail2], layer
    return None


def _channel_affine(net: Network, next_of, y: int, shape, op: str):
    """The multiply (``op`` "mul") or add by a per-channel constant (C, 1, ...) after the norm, if there
    is one: (its vector or None, output, layers)."""
    layer = next_of(y)
    if not _pw(layer, op) or net.shape(layer.outputs[0]) != shape or len(_operands(layer)) != 2:
        return None, y, []
    other = [o for o in _operands(layer) if o != ("t", y)]
    if len(other) != 1:
        return None, y, []
    kind, v = other[0]
    C = shape[1]
    if kind == "const":
        return np.full(C, v, np.float32), layer.outputs[0], [layer]
    a = net.constants.get(v)
    s = net.shape(v)
    n = len(shape) - 1   # (C, 1, ...) over the dims after the batch, maybe with a leading 1
    if a is None or len(s) > len(shape) or len(s) < n or s[-n:] != (C,) + (1,) * (n - 1) or a.size != C:
        return None, y, []
    return np.ascontiguousarray(a.reshape(C), np.float32), layer.outputs[0], [layer]


def fuse_global_norm(net: Network) -> Network:
    """Replace every written-out norm over all dims but the batch of an (N, C, ...) tensor with a
    per-channel affine (Conv-TasNet's gLN: ``u = x.mean((1, 2), keepdim)``, ``s = ((x - u) ** 2)
    .mean((1, 2), keepdim)``, ``g * (x - u) / (s + eps) ** 0.5 + b``; the affine after the division
    or the weight before it, either optional) by a one-group ``group_norm`` layer (``tactics/nn.py``),
    as :func:`fuse_channel_norm` does over dim 1."""
    return _replace_all(net, _find_global_norm)


def _global_mean(layer: Layer | None, net: Network) -> bool:
    if layer is None or layer.kind != "mean":
        return False
    shape = net.shape(layer.inputs[0])
    return (len(shape) >= 3 and tuple(layer.attrs["dims"]) == tuple(range(1, len(shape)))
            and net.tensors[layer.inputs[0]].dtype == "float32"
            and net.shape(layer.outputs[0]) == (shape[0],) + (1,) * (len(shape) - 1))


def _find_global_norm(net: Network):
    users, next_of, producer = _graph(net)
    outputs = set(net.outputs)
    for first in net.layers:
        if not _global_mean(first, net):
            continue
        x, u = first.inputs[0], first.outputs[0]
        shape = net.shape(x)
        subs = users.get(u, [])
        if u in outputs or len(subs) != 1 or not _pw(subs[0], "sub") or _operands(subs[0]) != [("t", x), ("t", u)]:
            continue
        d = subs[0].outputs[0]
        sq = [r for r in users.get(d, []) if _squared(r) == d]
        if len(sq) != 1 or d in outputs:
            continue
        var = next_of(sq[0].outputs[0])
        if not _global_mean(var, net) or var.inputs[0] != sq[0].outputs[0]:
            continue
        others = [r for r in users.get(d, []) if r is not sq[0]]
        if len(others) != 1:
            continue
        # d's one reader besides its square, as its next layer
        after_d = lambda t, r=others[0]: r if t == d else next_of(t)   # noqa: E731
        found = _rest(net, after_d, var, d) or _weight_first(net, after_d, var, d, shape)
        if found is None:
            continue
        chain, eps, y, weight = found if len(found) == 4 else (*found, None)
        if any(r is not sq[0] and not any(r is c for c in chain) for r in users.get(d, [])):
            continue   # (the difference read elsewhere too)
        tail = []
        if weight is None:
            weight, y, tail = _channel_affine(net, next_of, y, shape, "mul")
        bias, y, tail2 = _channel_affine(net, next_of, y, shape, "add")
        layer = Layer("group_norm", [x], [y], {"groups": 1, "eps": eps, "weight": weight, "bias": bias},
                      first.source)
        return [first, subs[0], sq[0], var, *chain, *tail, *tail2], layer
    return None


def _weight_first(net: Network, next_of, var: Layer, d: int, shape):
    """``(w * d) / sqrt(var + eps)`` (the weight multiplied first): (layers, eps, output, weight)."""
    add = next_of(var.outputs[0])
    if not _pw(add, "add"):
        return None
    ops = _operands(add)
    consts = [v for k, v in ops if k == "const"]
    if len(consts) != 1 or ("t", var.outputs[0]) not in ops or not consts[0] >= 0.0:
        return None
    root = next_of(add.outputs[0])
    if not _sqrt(root):
        return None
    weight, wd, mul = _channel_affine(net, next_of, d, shape, "mul")
    if weight is None:
        return None
    div = next_of(wd)
    if not _pw(div, "div") or _operands(div) != [("t", wd), ("t", root.outputs[0])]:
        return None
    return [add, root, *mul, div], consts[0], div.outputs[0], weight


def _sqrt(layer: Layer | None) -> bool:
    """``sqrt(v)`` or ``v ** 0.5``."""
    return _pw(layer, "sqrt") or _pw(layer, "pow") and dict(layer.attrs.get("params", {})).get("exponent") == 0.5
