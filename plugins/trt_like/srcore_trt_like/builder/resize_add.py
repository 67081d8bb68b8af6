"""A nearest upsampling added to a tensor as one layer: HRNet's and FPN's top-down fusions
(``x + interpolate(y, scale_factor=2)``, then often a relu) made the upsampled tensor in one layer
and read it back in the next. :func:`fuse_resize_add` replaces a nearest ``resize`` of a 4-D tensor
whose output only an ``add`` pointwise of two same-shape float32 tensors reads (and the engine does
not return), and that add (with the ``relu`` after it when that is the add's only reader), by one
``resize_add`` layer: ``(relu)(other + y[h[i], w[j]])``, the resize's index tables read in place
(``tactics/data.py``). Runs after :func:`.fusion.fuse_conv_add` (a conv whose output only the add
reads takes the upsampled tensor as its residual instead: no pass at all) and before
:func:`.fusion.fuse_pointwise`.
"""
from __future__ import annotations

from .network import Layer, Network

_ADD_ARGS = (("in", 0), ("in", 1))


def fuse_resize_add(net: Network) -> Network:
    """Each nearest resize -> add (-> relu) chain as one ``resize_add`` layer (in place): inputs
    ``[other, resize input]``, attrs the resize's ``scales``, the upsampled shape (``mid_shape``) and
    ``relu``."""
    users = net.users()
    producer = {t: x for x in net.layers for t in x.outputs}
    replace: dict[int, Layer] = {}
    drop: set[int] = set()
    for add in net.layers:
        if (add.kind != "pointwise" or add.attrs["op"] != "add" or len(add.inputs) != 2
                or tuple(add.attrs["args"]) != _ADD_ARGS or add.attrs.get("params") or id(add) in drop):
            continue
        shape = net.shape(add.outputs[0])
        for up, other in (add.inputs, add.inputs[::-1]):
            resize = producer.get(up)
            if (resize is None or resize.kind != "resize" or resize.attrs["mode"] != "nearest" or len(shape) != 4
                    or "nchwc" in resize.attrs or len(users[up]) != 1 or up in net.outputs or other == up
                    or other in net.constants or net.shape(other) != shape or net.shape(up) != shape
                    or any(net.tensors[t].dtype != "float32" for t in (up, other, add.outputs[0]))):
                continue
            out, last, relu = add.outputs[0], add, False
            after = users[out]
            if (len(after) == 1 and out not in net.outputs and after[0].kind == "pointwise"
                    and after[0].attrs["op"] == "relu" and after[0].inputs == [out]
                    and tuple(after[0].attrs["args"]) == (("in", 0),)):
                last, relu = after[0], True
            fused = Layer("resize_add", [other, resize.inputs[0]], list(last.outputs),
                          dict(scales=resize.attrs["scales"], mid_shape=shape, relu=relu),
                          f"{add.source} (nearest resize, add{', relu' if relu else ''})")
            # the fused layer runs where the last of the chain did (both its inputs are ready there)
            replace[id(last)] = fused
            drop.update({id(resize), id(add), id(last)})
            break
    net.layers = [replace.get(id(x), x) for x in net.layers if id(x) not in drop or id(x) in replace]
    return net
