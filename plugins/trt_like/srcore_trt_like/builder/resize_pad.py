"""A nearest upsampling and the reflection pad after it as one gather: the resize-convolution of
style transfer and image-to-image decoders (``Upsample(nearest)``, ``ReflectionPad2d``, conv) made
two passes over the upsampled planes, each a layer call. Both are nearest gathers (each output
element reads one input element through a per-dim index table), so their composition is one:
:func:`fuse_resize_pad` replaces a nearest ``resize`` of a 4-D tensor whose output only a
``reflect`` / ``replicate`` ``pad`` of the last two dims reads (and the engine does not return) by a
``resize_pad`` layer reading the resize's input; ``tactics/data.py`` composes the tables.
"""
from __future__ import annotations

from .network import Layer, Network


def fuse_resize_pad(net: Network) -> Network:
    """Each nearest resize -> reflect / replicate pad pair as one ``resize_pad`` layer (in place);
    its attrs: the resize's ``scales``, the upsampled shape (``mid_shape``), the pad's ``widths`` and
    ``mode``. Runs before the layout pass (a resize in an NCHW16c run is not matched)."""
    users = net.users()
    producer = {t: x for x in net.layers for t in x.outputs}
    replace: dict[int, Layer] = {}
    drop: set[int] = set()
    for pad in net.layers:
        mode = pad.attrs.get("mode", "constant")
        if pad.kind != "pad" or mode not in ("reflect", "replicate") or len(net.shape(pad.inputs[0])) != 4 \
                or any(tuple(w) != (0, 0) for w in pad.attrs["widths"][:2]):
            continue
        resize = producer.get(pad.inputs[0])
        if (resize is None or resize.kind != "resize" or resize.attrs["mode"] != "nearest" or "nchwc" in resize.attrs
                or len(users[pad.inputs[0]]) != 1 or pad.inputs[0] in net.outputs):
            continue
        fused = Layer("resize_pad", [resize.inputs[0]], list(pad.outputs),
                      dict(scales=resize.attrs["scales"], mid_shape=net.shape(pad.inputs[0]),
                           widths=pad.attrs["widths"], mode=mode), f"{resize.source} (nearest resize, {mode} pad)")
        replace[id(pad)] = fused
        drop.add(id(resize))
    net.layers = [replace.get(id(x), x) for x in net.layers if id(x) not in drop]
    return net
