""":mod:`.dense_nchwc`'s NCHW16c dense conv on 8-lane vectors: the same driver, window, row buffer,
weights packing and bits, with register tiles sized for 16 ``ymm`` registers.

The 16-lane tiles are 4 output blocks x 6 pixels and 2 (or 1) x 12: 24 or 12 ``zmm``
accumulators; where the CPU has no AVX-512, LLVM splits each vector in two and 48 or 24 ``ymm``
accumulators spill. Here each 16-channel block is two 8-lane halves and a tile ``(nb, P)`` of the
driver runs as sub-tiles of 1 block x 6 pixels (12 accumulators: per input channel 2 weight
half-vectors and 6 broadcasts, 15 registers in all), each over all the taps and input channels of
the block in turn; every output lane's sum runs in the same order as the
16-lane tile's (the same bits). Sub-tiles of at most 4 accumulators keep a second set for the odd
input channels, as :func:`.dense_nchwc._tile_source` does. A candidate beside the 16-lane kernel,
chosen by timing (``srcore_trt_like``'s ``conv_nchw16c_h8``). The tiles are compiled into
:func:`.dense_nchwc.dense_nchwc_tasks`, whose on-disk cache keys on its own module's source: after
editing this module, delete :mod:`.dense_nchwc`'s ``__pycache__/*.nbi``/``*.nbc``.
"""
from __future__ import annotations

import numba

from .dense_nchwc import LANES, SPLIT_MAX, TILES, UNROLL, NchwcDenseConv
from .direct import _tag
from .simd import prefetch, vadd, vbcast, vfma, vload, vstore  # noqa: F401 (the generated tiles' names)
from .depthwise import finish  # noqa: F401

#: floats of a half vector
HALF = 8


def _chunks(nb: int, P: int) -> list[tuple[int, int, int, int]]:
    """``(first block, blocks, first pixel, pixels)`` of the sub-tiles of tile ``(nb, P)``."""
    # one block's two halves x 6 pixels: 12 accumulators, 2 weight half-vectors and a broadcast in 15
    # registers (2 blocks x 3 pixels held 4 weight vectors: 17, and LLVM spilled weights in the loop)
    return [(j, 1, p0, min(6, P - p0)) for j in range(nb) for p0 in range(0, P, 6)]


def _tile_source(nb: int, P: int) -> str:
    """The source of ``_htile_{nb}x{P}``: :func:`.dense_nchwc._tile_source`'s tile (same arguments,
    ``z``, ``c3``, ``c6`` 8 lanes wide) as sub-tiles of :func:`_chunks`, each half of a block apart."""
    L = ["def _htile_%dx%d(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, "
         "first, fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn):" % (nb, P)]
    for s, (j0, jn, p0, pn) in enumerate(_chunks(nb, P)):
        cells = [(j, h, p) for j in range(j0, j0 + jn) for h in (0, HALF) for p in range(p0, p0 + pn)]
        acc = {c: f"a{c[0]}_{c[1]}_{c[2]}" for c in cells}
        split = nb * P <= SPLIT_MAX   # (the 16-lane tile's rule: the same order of sums)
        odd = {c: f"c{c[0]}_{c[1]}_{c[2]}" for c in cells} if split else acc
        L.append("    if first:")
        for c in cells:
            L.append(f"        {acc[c]} = vload(pb, bi + {c[0] * LANES + c[1]}, z)")
        L.append("    else:")
        for c in cells:
            L.append(f"        {acc[c]} = vload(psc, si + {c[0]} * srs + {c[2] * LANES + c[1]}, z)")
        if split:
            L.append("    " + ", ".join(odd[c] for c in cells) + " = " + ", ".join("z" for _ in cells))
        L.append("    for ky in range(ky0, ky1):")
        L.append("        for kx in range(KW):")
        L.append("            xr = x0 + ky * wrow + kx * dwv")
        L.append(f"            wr = wg + (ky * KW + kx) * {LANES * nb * LANES}")
        if s == 0:   # (the next weights' prefetch: once per tile)
            L.append("            for q in range(pfn):")
            L.append(f"                prefetch(pw, pfo + ((ky * KW + kx) * pfn + q) * {LANES})")
        L.append(f"            for i2 in range(0, {LANES}, {UNROLL}):")
        for u in range(UNROLL):
            L.append(f"                ic = i2 + {u}")
            for j in range(j0, j0 + jn):
                for h in (0, HALF):
                    L.append(f"                w{j}_{h} = vload(pw, wr + ic * {nb * LANES} + {j * LANES + h}, z)")
            into = odd if u % 2 else acc
            for p in range(p0, p0 + pn):
                L.append(f"                v{p} = vbcast(px, xr + {p} * xs + ic, z)")
                for j in range(j0, j0 + jn):
                    for h in (0, HALF):
                        c = (j, h, p)
                        L.append(f"                {into[c]} = vfma(v{p}, w{j}_{h}, {into[c]})")
        if split:
            for c in cells:
                L.append(f"    {acc[c]} = vadd({acc[c]}, {odd[c]})")
        L.append("    if fin:")
        for c in cells:
            o = f"oi + {c[0]} * obs + {c[2] * LANES + c[1]}"
            L.append(f"        vstore(pout, {o}, finish({acc[c]}, pres, {o}, {LANES}, has_res, leaky, slope, lo, hi, "
                     "act, c3, c6))")
        L.append("    else:")
        for c in cells:
            L.append(f"        vstore(psc, si + {c[0]} * srs + {c[2] * LANES + c[1]}, {acc[c]})")
    return "\n".join(L) + "\n"


# (compiled apart and called, as the 16-lane tiles)
_TILE = numba.njit(nogil=True, error_model="numpy", boundscheck=False)
for _nb, _ps in TILES.items():
    for _p in _ps:
        exec(_tile_source(_nb, _p), globals())   # noqa: S102 (generated from the constants above)
        globals()[f"_htile_{_nb}x{_p}"] = _TILE(globals()[f"_htile_{_nb}x{_p}"])


@_TILE
def row_tile(nb, P, pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,
             fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn):
    """The tile ``(nb, P)`` (one of :data:`.dense_nchwc.TILES`) on 8-lane vectors."""
    if nb == 4:
        if P == 6:
            _htile_4x6(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                       fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
        elif P == 4:
            _htile_4x4(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                       fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
        else:
            _htile_4x1(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                       fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
    elif nb == 2:
        if P == 12:
            _htile_2x12(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                        fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
        elif P == 4:
            _htile_2x4(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                       fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
        else:
            _htile_2x1(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                       fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
    else:
        if P == 12:
            _htile_1x12(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                        fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
        elif P == 4:
            _htile_1x4(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                       fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
        else:
            _htile_1x1(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                       fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)


class HalvesNchwcDenseConv(NchwcDenseConv):
    """:class:`.dense_nchwc.NchwcDenseConv` (same arguments, layouts and bits) on the 8-lane tiles:
    the driver's tiles follow its width tag (:func:`.dense_nchwc._row_tile`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tag = _tag(HALF)

