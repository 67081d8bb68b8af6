"""A conv followed by a max pool that alone reads it, as one layer (``conv_max_pool``): resnet's stem
(7x7/2 conv, 3x3/2 pool) writes a 1x64x112x112 tensor (3.2 MB) that the pool reads back at once,
both from memory; fused, the conv's output is pooled while it is in cache and never written.

* :func:`fuse_conv_pool` rewrites the network (after pointwise fusion, before tactics).
* :func:`candidates`: the fused ``packed_gemm_max_pool`` (``conv_pool_kernels.py``) and, as
  timed alternatives, every conv tactic followed by the pool through a per-thread buffer
  (``<conv tactic>+max_pool``).
"""
from __future__ import annotations

import numpy as np

from . import conv_pool_kernels as _cp
from . import packed_kernels as _k
from . import parallel
from .conv_packed import PackedGemmTactic
from .conv_spec import ConvSpec
from .errors import TacticSpecError
from .network import Layer, Network
from .pool import MaxPool2d
from .scratch import SCRATCH

# conv output rows per GEMM of the fused tactic: their operand and C^T (~95 KB a row for the stem)
# stay in L2 while the pool reduces them
ROWS_BYTES = 512 << 10


def fuse_conv_pool(net: Network) -> Network:
    """Replace every ungrouped, residual-free conv whose output only a max pool reads (and the engine
    does not return) by one ``conv_max_pool`` layer at the conv's place (in place)."""
    readers: dict[int, list[Layer]] = {}
    for layer in net.layers:
        for t in layer.inputs:
            readers.setdefault(t, []).append(layer)
    drop: set[int] = set()
    out = []
    for layer in net.layers:
        if id(layer) in drop:
            continue
        users = readers.get(layer.outputs[0], []) if layer.kind == "conv" else []
        if (len(users) == 1 and users[0].kind == "max_pool2d" and not layer.attrs["residual"]
                and layer.attrs["groups"] == 1 and users[0].attrs["dilation"] == (1, 1)
                and layer.outputs[0] not in net.outputs):
            pool = users[0]
            attrs = dict(layer.attrs, pool={k: pool.attrs[k] for k in ("kernel", "stride", "padding", "ceil_mode")},
                         conv_shape=net.shape(layer.outputs[0]))
            out.append(Layer("conv_max_pool", list(layer.inputs), list(pool.outputs), attrs, layer.source))
            drop.add(id(pool))
            continue
        out.append(layer)
    net.layers = out
    return net


def _specs(layer: Layer, net: Network):
    a = layer.attrs
    w = a["weight"]
    spec = ConvSpec(net.shape(layer.inputs[0]), w.shape[0], w.shape[2:], a["stride"], a["padding"], a["dilation"],
                    a["groups"], relu=a["relu"])
    p = a["pool"]
    pool = MaxPool2d(spec.out_shape, p["kernel"], p["stride"], p["padding"], 1, p["ceil_mode"])
    return spec, pool


class PackedConvMaxPool:
    """``out = max_pool(relu?(conv(x) + bias))`` with the pool reduced from the packed GEMM's C^T."""
    name = "packed_gemm_max_pool"

    def __init__(self, spec: ConvSpec, weight, bias, pool: MaxPool2d, threads: int | None = None):
        if pool.dilation != (1, 1) or pool.x_shape != spec.out_shape:
            raise TacticSpecError(f"{self.name}: needs an undilated pool of the conv's output {spec.out_shape}")
        self.conv = PackedGemmTactic(spec, weight, bias, threads=1)
        self.pool = pool
        self.out_shape = pool.out_shape
        self.threads = parallel.threads() if threads is None else max(1, int(threads))
        c = self.conv
        Hc, Wc = spec.out_shape[2:]
        row_bytes = Wc * (c.K + 64 * c.mb) * 4
        self.step = max(1, min(Hc, ROWS_BYTES // row_bytes))
        (pkh, pkw), (psh, psw), (pph, ppw) = pool.kernel, pool.stride, pool.padding
        self.geom = np.array([pkh, pkw, psh, psw, pph, ppw], np.int64)
        Hp, Wp = pool.out_shape[2:]
        nt = self.threads
        self.parts = [parallel.split(Hp, t, nt) for t in range(nt)]
        rows = max(min(Hc, (b - 1) * psh - pph + pkh) - max(0, a * psh - pph) for a, b in self.parts if b > a)
        ldc = 64 * c.mb
        nblk = (self.step * Wc) // 6 + 2
        self.shapes = ((nblk, c.K, 6), (nblk * 6 * ldc,), (max(rows, 1) * Wp * ldc,), ((Wp + 16) * 16,))
        self.weight_bytes = c.weight_bytes

    def __call__(self, x, out):
        c, s = self.conv, self.conv.spec
        N, C = s.x_shape[:2]
        Hc, Wc = s.out_shape[2:]
        (kh, kw), (sh, sw), (ph, _), (dh, _) = s.kernel, s.stride, s.padding, s.dilation
        xph = SCRATCH.get("packed_phases", c.xph_shape)
        wf = c.wp.reshape(-1)
        nt = self.threads
        bufs = [SCRATCH.get(f"convpool_{i}", (nt,) + shp) for i, shp in enumerate(self.shapes)]
        if nt > 1:
            from . import packed_parallel as _par
            parallel.use(nt)
            _par.conv_pool(x, xph, c.pad, c.rows, kh, kw, sh, sw, ph, dh, c.joff, c.seg, Hc, Wc, wf, c.K, c.mb,
                           self.step, self.geom, *bufs, c.bias, s.relu, out, nt)
            return
        xp, ct, hm, stage = (b[0] for b in bufs)
        Hp = self.out_shape[2]
        for n in range(N):
            _k.split_phases(x, n, sw, c.pad, c.rows, xph, 0, C)
            _cp.part(xph, kh, kw, sh, ph, dh, c.joff, c.seg, Hc, Wc, wf, c.K, c.mb, self.step, self.geom, 0, Hp, xp,
                     ct, hm, stage, c.bias, s.relu, out, n)


def candidates(layer: Layer, net: Network) -> list[tuple[str, object]]:
    """The fused tactic and every conv tactic followed by the pool."""
    from .compiled_conv import conv_candidates, max_pool2d

    from .tactics import Lazy, materialize

    spec, pool = _specs(layer, net)
    a = layer.attrs

    def build_fused():
        fused = PackedConvMaxPool(spec, a["weight"], a["bias"], pool)

        def run_fused(x, y):
            fused(x, y)
        run_fused.weight_bytes = fused.weight_bytes
        run_fused.blas = "omp"
        return run_fused
    out = [(PackedConvMaxPool.name, Lazy(build_fused, blas="omp"))]
    conv_layer = Layer("conv", list(layer.inputs), [-1], {k: v for k, v in a.items() if k not in ("pool",
                                                                                                  "conv_shape")})
    tmp_net = _OneShape(net, a["conv_shape"])
    pool_layer = Layer("max_pool2d", [-1], list(layer.outputs), dict(a["pool"], dilation=(1, 1)))

    def build_split(conv):
        run_conv, run_pool = materialize(conv), max_pool2d(pool_layer, tmp_net)

        def run(x, y):
            mid = SCRATCH.get("convpool_mid", a["conv_shape"])
            run_conv(x, mid)
            run_pool(mid, y)
        run.weight_bytes = run_conv.weight_bytes
        run.blas = getattr(run_conv, "blas", None)
        return run
    for name, conv in conv_candidates(conv_layer, tmp_net):
        out.append((f"{name}+max_pool", Lazy(lambda conv=conv: build_split(conv), blas=getattr(conv, "blas", None))))
    return out


class _OneShape:
    """The network seen by the unfused parts: tensor -1 is the conv's output."""

    def __init__(self, net: Network, shape):
        self._net, self._shape = net, tuple(shape)

    def shape(self, t):
        return self._shape if t == -1 else self._net.shape(t)

    def __getattr__(self, name):
        return getattr(self._net, name)


def threaded(layer: Layer, net: Network) -> bool:
    return True
