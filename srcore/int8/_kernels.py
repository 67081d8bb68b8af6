"""numba code of :mod:`.gemm` (imported on first use: numba is imported only by what runs it). See
:mod:`.gemm` for the layout and the exactness argument."""
from __future__ import annotations

import numba
import numpy as np


#: adding and subtracting 1.5 * 2^23 rounds a float32 below 2^22 to the nearest integer, ties to even
_ROUND = np.float32(12582912.0)

from . import amx as _amx
from .simd8 import (add_i32x8, bcast4_i8x32, bcast4_i8x64, copy_bytes, dot4_u8s8, dpbusd, dpbusd512, load_i8x32,
                    load_i8x64, requant8_u8, store_i32x8, store_i32x16, zero_bytes, zero_i32x8, zero_i32x16)


@numba.njit(inline="always")
def _mac(acc, x, b, vnni):
    """``acc +`` per int32 lane the dot product of 4 bytes of ``x`` (u8) and ``b`` (s8)."""
    if vnni:
        return dpbusd(acc, x, b)
    return add_i32x8(acc, dot4_u8s8(x, b))


def _gemm_kernel(vnni: bool):
    """The GEMM loop with its multiply-accumulate step: ``vpdpbusd`` if ``vnni`` else the AVX2 pair.
    ``vnni`` is a closure constant: numba prunes the other branch (the AVX2 kernel holds no AVX-512
    code and is not compiled for it), and its on-disk cache keys a closure on the bytecode and the
    pickled cell values, so each variant loads from the cache in a new process."""

    @numba.njit(cache=True, nogil=True, boundscheck=False)
    def gemm(a, kp, m, panels, n_panels, c, row_block):
        kq = kp // 4
        ldc = n_panels * 16
        for i0 in range(0, m, row_block):
            i1 = min(m, i0 + row_block)
            for jp in range(n_panels):
                boff = jp * kq * 64
                i = i0
                while i + 4 <= i1:
                    c00 = zero_i32x8()
                    c01 = zero_i32x8()
                    c10 = zero_i32x8()
                    c11 = zero_i32x8()
                    c20 = zero_i32x8()
                    c21 = zero_i32x8()
                    c30 = zero_i32x8()
                    c31 = zero_i32x8()
                    a0 = i * kp
                    a1 = a0 + kp
                    a2 = a1 + kp
                    a3 = a2 + kp
                    for q in range(kq):
                        b0 = load_i8x32(panels, boff + q * 64)
                        b1 = load_i8x32(panels, boff + q * 64 + 32)
                        x = bcast4_i8x32(a, a0 + 4 * q)
                        c00 = _mac(c00, x, b0, vnni)
                        c01 = _mac(c01, x, b1, vnni)
                        x = bcast4_i8x32(a, a1 + 4 * q)
                        c10 = _mac(c10, x, b0, vnni)
                        c11 = _mac(c11, x, b1, vnni)
                        x = bcast4_i8x32(a, a2 + 4 * q)
                        c20 = _mac(c20, x, b0, vnni)
                        c21 = _mac(c21, x, b1, vnni)
                        x = bcast4_i8x32(a, a3 + 4 * q)
                        c30 = _mac(c30, x, b0, vnni)
                        c31 = _mac(c31, x, b1, vnni)
                    o = i * ldc + jp * 16
                    store_i32x8(c, o, c00)
                    store_i32x8(c, o + 8, c01)
                    o += ldc
                    store_i32x8(c, o, c10)
                    store_i32x8(c, o + 8, c11)
                    o += ldc
                    store_i32x8(c, o, c20)
                    store_i32x8(c, o + 8, c21)
                    o += ldc
                    store_i32x8(c, o, c30)
                    store_i32x8(c, o + 8, c31)
                    i += 4
                while i < i1:
                    c00 = zero_i32x8()
                    c01 = zero_i32x8()
                    a0 = i * kp
                    for q in range(kq):
                        b0 = load_i8x32(panels, boff + q * 64)
                        b1 = load_i8x32(panels, boff + q * 64 + 32)
                        x = bcast4_i8x32(a, a0 + 4 * q)
                        c00 = _mac(c00, x, b0, vnni)
                        c01 = _mac(c01, x, b1, vnni)
                    o = i * ldc + jp * 16
                    store_i32x8(c, o, c00)
                    store_i32x8(c, o + 8, c01)
                    i += 1
    return gemm


#: ``c[i, j] = sum_k a[i, k] * w[j, k]`` (int32, ``c`` rows of ``n_panels * 16``) for ``a`` uint8
#: ``(m, kp)`` flat and ``panels`` the packed int8 weight, saturating pairs at int16 (AVX2)
gemm_u8s8 = _gemm_kernel(False)
#: the same with ``vpdpbusd`` (AVX512-VNNI): exact for every byte (no int16 step). Compiled for
#: AVX512-VNNI: call it only where the CPU has it.
gemm_u8s8_vnni = _gemm_kernel(True)


@numba.njit(inline="always")
def _zmm_8x2(a, a0, kp, kq, panels, b0, b1, c, o, ldc):
    """Rows ``a0 / kp .. + 7`` times panels at ``b0`` and ``b1``: 16 ``zmm`` accumulators, stored at ``c[o]``."""
    c00 = zero_i32x16()
    c01 = zero_i32x16()
    c10 = zero_i32x16()
    c11 = zero_i32x16()
    c20 = zero_i32x16()
    c21 = zero_i32x16()
    c30 = zero_i32x16()
    c31 = zero_i32x16()
    c40 = zero_i32x16()
    c41 = zero_i32x16()
    c50 = zero_i32x16()
    c51 = zero_i32x16()
    c60 = zero_i32x16()
    c61 = zero_i32x16()
    c70 = zero_i32x16()
    c71 = zero_i32x16()
    for q in range(kq):
        w0 = load_i8x64(panels, b0 + q * 64)
        w1 = load_i8x64(panels, b1 + q * 64)
        x = bcast4_i8x64(a, a0 + 0 * kp + 4 * q)
        c00 = dpbusd512(c00, x, w0)
        c01 = dpbusd512(c01, x, w1)
        x = bcast4_i8x64(a, a0 + 1 * kp + 4 * q)
        c10 = dpbusd512(c10, x, w0)
        c11 = dpbusd512(c11, x, w1)
        x = bcast4_i8x64(a, a0 + 2 * kp + 4 * q)
        c20 = dpbusd512(c20, x, w0)
        c21 = dpbusd512(c21, x, w1)
        x = bcast4_i8x64(a, a0 + 3 * kp + 4 * q)
        c30 = dpbusd512(c30, x, w0)
        c31 = dpbusd512(c31, x, w1)
        x = bcast4_i8x64(a, a0 + 4 * kp + 4 * q)
        c40 = dpbusd512(c40, x, w0)
        c41 = dpbusd512(c41, x, w1)
        x = bcast4_i8x64(a, a0 + 5 * kp + 4 * q)
        c50 = dpbusd512(c50, x, w0)
        c51 = dpbusd512(c51, x, w1)
        x = bcast4_i8x64(a, a0 + 6 * kp + 4 * q)
        c60 = dpbusd512(c60, x, w0)
        c61 = dpbusd512(c61, x, w1)
        x = bcast4_i8x64(a, a0 + 7 * kp + 4 * q)
        c70 = dpbusd512(c70, x, w0)
        c71 = dpbusd512(c71, x, w1)
    store_i32x16(c, o + 0 * ldc, c00)
    store_i32x16(c, o + 0 * ldc + 16, c01)
    store_i32x16(c, o + 1 * ldc, c10)
    store_i32x16(c, o + 1 * ldc + 16, c11)
    store_i32x16(c, o + 2 * ldc, c20)
    store_i32x16(c, o + 2 * ldc + 16, c21)
    store_i32x16(c, o + 3 * ldc, c30)
    store_i32x16(c, o + 3 * ldc + 16, c31)
    store_i32x16(c, o + 4 * ldc, c40)
    store_i32x16(c, o + 4 * ldc + 16, c41)
    store_i32x16(c, o + 5 * ldc, c50)
    store_i32x16(c, o + 5 * ldc + 16, c51)
    store_i32x16(c, o + 6 * ldc, c60)
    store_i32x16(c, o + 6 * ldc + 16, c61)
    store_i32x16(c, o + 7 * ldc, c70)
    store_i32x16(c, o + 7 * ldc + 16, c71)


@numba.njit(inline="always")
def _zmm_8x1(a, a0, kp, kq, panels, b0, c, o, ldc):
    """:func:`_zmm_8x2` with one panel (the last of an odd count)."""
    c00 = zero_i32x16()
    c10 = zero_i32x16()
    c20 = zero_i32x16()
    c30 = zero_i32x16()
    c40 = zero_i32x16()
    c50 = zero_i32x16()
    c60 = zero_i32x16()
    c70 = zero_i32x16()
    for q in range(kq):
        w0 = load_i8x64(panels, b0 + q * 64)
        c00 = dpbusd512(c00, bcast4_i8x64(a, a0 + 0 * kp + 4 * q), w0)
        c10 = dpbusd512(c10, bcast4_i8x64(a, a0 + 1 * kp + 4 * q), w0)
        c20 = dpbusd512(c20, bcast4_i8x64(a, a0 + 2 * kp + 4 * q), w0)
        c30 = dpbusd512(c30, bcast4_i8x64(a, a0 + 3 * kp + 4 * q), w0)
        c40 = dpbusd512(c40, bcast4_i8x64(a, a0 + 4 * kp + 4 * q), w0)
        c50 = dpbusd512(c50, bcast4_i8x64(a, a0 + 5 * kp + 4 * q), w0)
        c60 = dpbusd512(c60, bcast4_i8x64(a, a0 + 6 * kp + 4 * q), w0)
        c70 = dpbusd512(c70, bcast4_i8x64(a, a0 + 7 * kp + 4 * q), w0)
    store_i32x16(c, o + 0 * ldc, c00)
    store_i32x16(c, o + 1 * ldc, c10)
    store_i32x16(c, o + 2 * ldc, c20)
    store_i32x16(c, o + 3 * ldc, c30)
    store_i32x16(c, o + 4 * ldc, c40)
    store_i32x16(c, o + 5 * ldc, c50)
    store_i32x16(c, o + 6 * ldc, c60)
    store_i32x16(c, o + 7 * ldc, c70)


@numba.njit(inline="always")
def _zmm_1x2(a, a0, kq, panels, b0, b1, c, o):
    c00 = zero_i32x16()
    c01 = zero_i32x16()
    for q in range(kq):
        x = bcast4_i8x64(a, a0 + 4 * q)
        c00 = dpbusd512(c00, x, load_i8x64(panels, b0 + q * 64))
        c01 = dpbusd512(c01, x, load_i8x64(panels, b1 + q * 64))
    store_i32x16(c, o, c00)
    store_i32x16(c, o + 16, c01)


@numba.njit(inline="always")
def _zmm_1x1(a, a0, kq, panels, b0, c, o):
    c00 = zero_i32x16()
    for q in range(kq):
        c00 = dpbusd512(c00, bcast4_i8x64(a, a0 + 4 * q), load_i8x64(panels, b0 + q * 64))
    store_i32x16(c, o, c00)


@numba.njit(cache=True, nogil=True, boundscheck=False)
def gemm_u8s8_vnni512(a, kp, m, panels, n_panels, c, row_block):
    """:data:`gemm_u8s8_vnni` on 512-bit registers: one ``zmm`` is a packed panel's 16 channels x 4
    depths, the micro-kernel 8 rows x 2 panels (16 accumulators, the 2 panels' weights stay in L1
    while the rows pass). Compiled for AVX512-VNNI: call it only where the CPU has it."""
    kq = kp // 4
    ldc = n_panels * 16
    ps = kq * 64
    for i0 in range(0, m, row_block):
        i1 = min(m, i0 + row_block)
        jp = 0
        while jp < n_panels:
            b0 = jp * ps
            i = i0
            if jp + 2 <= n_panels:
                while i + 8 <= i1:
                    _zmm_8x2(a, i * kp, kp, kq, panels, b0, b0 + ps, c, i * ldc + jp * 16, ldc)
                    i += 8
                while i < i1:
                    _zmm_1x2(a, i * kp, kq, panels, b0, b0 + ps, c, i * ldc + jp * 16)
                    i += 1
                jp += 2
            else:
                while i + 8 <= i1:
                    _zmm_8x1(a, i * kp, kp, kq, panels, b0, c, i * ldc + jp * 16, ldc)
                    i += 8
                while i < i1:
                    _zmm_1x1(a, i * kp, kq, panels, b0, c, i * ldc + jp * 16)
                    i += 1
                jp += 1


_TILE_CONFIG = _amx.tile_config()


@numba.njit(cache=True, nogil=True, boundscheck=False)
def gemm_u8s8_amx(a, kp, m, panels, n_panels, c, row_block):
    """:data:`gemm_u8s8_vnni` on AMX-INT8 tiles (:mod:`.amx`): blocks of 32 rows x 2 panels as four
    16 x 16 int32 tiles, 64 depths per ``tdpbusd``; ``kp`` a multiple of 64 (``gemm.pack``'s
    ``align``). Rows of a block beyond its whole tiles go to :func:`gemm_u8s8_vnni512`, a last odd
    panel or tile of rows is a 2 x 2 step with one operand repeated (its results not stored).
    Compiled for AMX: call it only where :func:`.amx.permitted`."""
    ldc = n_panels * 16
    ps = kp * 16
    kt = kp // 64
    # a tile's 16 rows at a stride of a multiple of 1 kB share a few L1 sets (4 kB: one): such rows
    # are first copied as 16 x 64-byte blocks, a tile a contiguous 1 kB (read once per panel pair)
    relay = kp % 1024 == 0
    ap = np.empty(min(row_block, m) * kp if relay else 0, np.uint8)
    _amx.load_config(_TILE_CONFIG)
    for r0 in range(0, m, row_block):
        r1 = min(m, r0 + row_block)
        t1 = r0 + (r1 - r0) // 16 * 16
        if relay:
            for i in range(r0, t1):
                src = i * kp
                dst = ((i - r0) // 16 * kt) * 1024 + (i - r0) % 16 * 64
                for t in range(kt):
                    copy_bytes(ap, dst + t * 1024, a, src + t * 64, 64)
            src_a, lda, tstep, rstep, base = ap, 64, 1024, 16 * kp, r0
        else:
            src_a, lda, tstep, rstep, base = a, kp, 64, 16 * kp, 0
        jp = 0
        while jp < n_panels and t1 > r0:
            pair = jp + 1 < n_panels
            b0 = jp * ps
            b1 = b0 + ps if pair else b0
            i = r0
            while i < t1:
                two = i + 16 < t1
                a0 = (i - base) * kp
                a1 = a0 + rstep if two else a0
                _amx.zero_c()
                for t in range(kt):
                    _amx.dp_2x2(src_a, a0 + t * tstep, a1 + t * tstep, lda, panels, b0 + t * 1024, b1 + t * 1024)
                o = i * ldc + jp * 16
                mask = 1 | (2 if pair else 0) | (4 if two else 0) | (8 if two and pair else 0)
                _amx.store_c(c, o, o + 16, o + 16 * ldc, o + 16 * ldc + 16, ldc, mask)
                i += 32 if two else 16
            jp += 2
        if t1 < r1:
            gemm_u8s8_vnni512(a[t1 * kp:r1 * kp], kp, r1 - t1, panels, n_panels, c[t1 * ldc:], r1 - t1)
    _amx.release()


@numba.njit(cache=True, nogil=True, boundscheck=False)
def im2col_u8(x, zp, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, cols):
    """Windows of the channels-last uint8 input ``x`` (N, H, W, C, C-contiguous) as rows of
    ``cols`` (N * oh * ow, kp, C-contiguous): row = (image, oy, ox), columns (tap, channel),
    positions outside the input at ``zp`` (real zero), columns beyond kh * kw * C zero."""
    n, h, w, c = x.shape
    kp = cols.shape[1]
    depth = kh * kw * c
    xf = x.reshape(-1)
    cf = cols.reshape(-1)
    row = 0
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                o = row * kp
                x0 = ox * sw - pw
                inside_x = x0 >= 0 and x0 + (kw - 1) * dw < w
                for i in range(kh):
                    iy = oy * sh - ph + i * dh
                    if 0 <= iy < h and inside_x and dw == 1:     # the kernel row inside: one run
                        copy_bytes(cf, o, xf, ((b * h + iy) * w + x0) * c, kw * c)
                        o += kw * c
                        continue
                    for j in range(kw):
                        ix = x0 + j * dw
                        if 0 <= iy < h and 0 <= ix < w:
                            copy_bytes(cf, o, xf, ((b * h + iy) * w + ix) * c, c)
                        else:
                            for t in range(c):
                                cf[o + t] = zp
                        o += c
                for t in range(row * kp + depth, row * kp + kp):
                    cf[t] = 0
                row += 1


@numba.njit(cache=True, nogil=True, boundscheck=False)
def clamp_excess(a, lim, at, excess):
    """Every byte of ``a`` (uint8, (m, kp)) above ``lim``: its flat index into ``at``, its excess
    over ``lim`` into ``excess``, and the byte clamped to ``lim`` in place. Returns how many, or -1
    (``a`` untouched) if they are more than ``at`` holds. Rows without such a byte are passed over
    by a max reduction (LLVM vectorizes it: no early exit)."""
    m, kp = a.shape
    count = 0
    for r in range(m):
        top = np.uint8(0)
        for q in range(kp):
            top = max(top, a[r, q])
        if top > lim:
            for q in range(kp):
                if a[r, q] > lim:
                    count += 1
    if count > at.shape[0]:
        return -1
    t = 0
    for r in range(m):
        top = np.uint8(0)
        for q in range(kp):
            top = max(top, a[r, q])
        if top > lim:
            for q in range(kp):
                v = a[r, q]
                if v > lim:
                    at[t] = r * kp + q
                    excess[t] = v - lim
                    a[r, q] = lim
                    t += 1
    return count


@numba.njit(cache=True, nogil=True, boundscheck=False)
def add_excess(c, ldc, panels, kp, n, at, excess, count):
    """``c[r, j] += e * w[j, q]`` for each clamped byte (flat index ``r * kp + q``, excess ``e``) of
    :func:`clamp_excess`: the products the clamping took away, exact in int32. ``panels``: the
    packed weight (``w[j, q]`` at ``((j // 16) * kp / 4 + q // 4) * 64 + (j % 16) * 4 + q % 4``).
    Whole panels of 16 channels at a time (the padding channels' weights are zero and ``c``'s rows
    hold them): a constant-stride inner loop LLVM vectorizes, no division per channel."""
    kq = kp // 4
    n_panels = -(-n // 16)
    for t in range(count):
        r = at[t] // kp
        q = at[t] - r * kp
        e = np.int32(excess[t])
        base = (q // 4) * 64 + q % 4
        row = r * ldc
        for jp in range(n_panels):
            pb = jp * kq * 64 + base
            cb = row + jp * 16
            for lane in range(16):
                c[cb + lane] += e * np.int32(panels[pb + 4 * lane])


@numba.njit(cache=True, nogil=True, boundscheck=False)
def requantize_u8(c, ldc, out, s_img, s_row, s_ch, imgs, m, n, colsum, zw, rowsum, za, k, bias_div, mult, y_zp,
                  lo, hi):
    """fbgemm's requantization fused with the zero-point corrections: for image ``b``, row ``i``,
    channel ``j`` (``r = b * m + i``), ``acc = c[r * ldc + j] - za * colsum[j] - zw[j] * (rowsum[r]
    - k * za)``, ``y = clamp(nearbyint((float32(acc) + bias_div[j]) * mult[j]) + y_zp, lo, hi)``,
    all in float32 as fbgemm's ``ReQuantizeOutput``, into ``out`` (flat uint8) at ``b * s_img +
    i * s_row + j * s_ch``. Tiles of 64 rows are computed along the channels (contiguous reads)
    and then written in ``out``'s order (runs along rows for NCHW)."""
    has_rs = rowsum.shape[0] > 0
    yz = np.float32(y_zp)
    flo = np.float32(lo)
    fhi = np.float32(hi)
    corr = np.empty(n, np.int32)
    for j in range(n):
        corr[j] = np.int32(za * colsum[j])
    rows_first = s_ch != 1
    tile = np.empty(64 * n if rows_first else 0, np.uint8)
    n8 = n // 8 * 8
    for b in range(imgs):
        for i0 in range(0, m, 64):
            i1 = min(m, i0 + 64)
            for i in range(i0, i1):
                r = b * m + i
                base = r * ldc
                rc = np.int32(rowsum[r] - k * za) if has_rs else np.int32(0)
                # channels-last output: straight into ``out``; else into the tile
                dst, d0 = (tile, (i - i0) * n) if rows_first else (out, b * s_img + i * s_row)
                for j in range(0, n8, 8):       # 8 channels in float32 lanes, the same operations
                    requant8_u8(c, base + j, corr, zw, rc, bias_div, mult, j, yz, flo, fhi, dst, d0 + j)
                for j in range(n8, n):
                    acc = c[base + j] - corr[j] - zw[j] * rc
                    # nearbyint by the 1.5 * 2^23 trick: exact below 2^22 in magnitude; beyond,
                    # the value clamps to lo or hi either way
                    v = ((np.float32(acc) + bias_div[j]) * mult[j] + _ROUND) - _ROUND + yz
                    v = min(max(v, flo), fhi)
                    dst[d0 + j] = np.uint8(v)
            if rows_first:
                ob = b * s_img
                for j in range(n):
                    o = ob + j * s_ch
                    for i in range(i0, i1):
                        out[o + i * s_row] = tile[(i - i0) * n + j]


@numba.njit(cache=True, nogil=True, boundscheck=False)
def clamp_copy_u8(x, lim, xc):
    """``xc = min(x, lim)`` over flat uint8 arrays (a vectorized loop: numpy's ``minimum`` and even
    ``copyto`` took 15x longer on 200 kB activations here)."""
    u = np.uint8(lim)
    for q in range(x.shape[0]):
        v = x[q]
        xc[q] = v if v < u else u


@numba.njit(cache=True, nogil=True, boundscheck=False)
def add_input_excess(cm, ldc, panels, kp, n, at, excess, count, h, w, c, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow):
    """The corrections of a convolution whose input bytes above ``lim`` were clamped
    (:func:`clamp_copy_u8`, ``gemm.conv_requantize``): each clamped input byte (flat index into the
    (N, h, w, c) input, excess ``e``) is read by every output position whose window covers it, at
    tap ``(i, j)``: ``cm[row, :] += e * w[:, (i * kw + j) * c + channel]`` there (the GEMM's rows
    are (image, oy, ox), its depth (tap, channel)); whole panels at a time as :func:`add_excess`."""
    _block_excess(cm, ldc, 0, len(cm) // ldc, panels, kp, n, at, excess, count, h, w, c, kh, kw, sh, sw, ph, pw,
                  dh, dw, oh, ow)


_HIGH_BITS = np.uint64(0x8080808080808080)


@numba.njit(cache=True, nogil=True, boundscheck=False)
def find_excess(x, lim, at, excess):
    """Every byte of ``x`` (flat contiguous uint8) above ``lim`` (>= 128): its index into ``at`` and
    its excess over ``lim`` into ``excess``; returns how many, or -1 if more than ``at`` holds.
    Blocks of 64 bytes are screened as 8 uint64 words by their high bits (a byte above ``lim`` >= 128
    has its top bit set), only blocks with one are looked at byte by byte. The OR over words, not
    bytes: over uint8 LLVM did not vectorize it (6x slower on a 200 KB input, Sapphire Rapids)."""
    words = x[:x.shape[0] // 8 * 8].view(np.uint64)
    cap = at.shape[0]
    count = 0
    nw = words.shape[0]
    for w0 in range(0, nw, 8):
        w1 = min(nw, w0 + 8)
        acc = np.uint64(0)
        for i in range(w0, w1):
            acc |= words[i]
        if acc & _HIGH_BITS:
            for q in range(w0 * 8, w1 * 8):
                if x[q] > lim:
                    if count == cap:
                        return -1
                    at[count] = q
                    excess[count] = x[q] - lim
                    count += 1
    for q in range(nw * 8, x.shape[0]):
        if x[q] > lim:
            if count == cap:
                return -1
            at[count] = q
            excess[count] = x[q] - lim
            count += 1
    return count


@numba.njit(inline="always")
def _gather_rows(xf, h, w, c, zp, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, r0, r1, cf, kp):
    """:func:`im2col_u8` for the rows ``r0 .. r1 - 1`` only, into ``cf`` from its start."""
    depth = kh * kw * c
    run = kw * c
    xsize = xf.shape[0]
    csize = cf.shape[0]
    for row in range(r0, r1):
        ox = row % ow
        oy = (row // ow) % oh
        b = row // (ow * oh)
        o = (row - r0) * kp
        x0 = ox * sw - pw
        inside_x = x0 >= 0 and x0 + (kw - 1) * dw < w
        for i in range(kh):
            iy = oy * sh - ph + i * dh
            if 0 <= iy < h and inside_x and dw == 1:     # the kernel row inside: one run
                so = ((b * h + iy) * w + x0) * c
                if run <= 32 and so + 32 <= xsize and o + 32 <= csize:
                    # a short run (a stem's 3 channels: 21 bytes) as one 32-byte move: a memcpy call
                    # of a variable length cost more than the bytes; the bytes past the run are
                    # written over by the next run, the row's zero tail or the next row
                    copy_bytes(cf, o, xf, so, 32)
                else:
                    copy_bytes(cf, o, xf, so, run)
                o += run
                continue
            for j in range(kw):
                ix = x0 + j * dw
                if 0 <= iy < h and 0 <= ix < w:
                    copy_bytes(cf, o, xf, ((b * h + iy) * w + ix) * c, c)
                else:
                    for t in range(c):
                        cf[o + t] = zp
                o += c
        base = (row - r0) * kp
        if kp > depth:
            zero_bytes(cf, base + depth, kp - depth)


@numba.njit(inline="always")
def _block_excess(cm, ldc, r0, r1, panels, kp, n, at, excess, count, h, w, c, kh, kw, sh, sw, ph, pw, dh, dw, oh,
                  ow):
    """:func:`add_input_excess` for the output rows ``r0 .. r1 - 1`` only (``cm`` holds them from
    its start)."""
    kq = kp // 4
    n_panels = -(-n // 16)
    for t in range(count):
        f = at[t]
        ch = f % c
        pix = f // c
        ix = pix % w
        iy = (pix // w) % h
        b = pix // (w * h)
        e = np.int32(excess[t])
        for i in range(kh):
            ty = iy + ph - i * dh
            if ty < 0 or ty % sh:
                continue
            oy = ty // sh
            if oy >= oh:
                continue
            for j in range(kw):
                tx = ix + pw - j * dw
                if tx < 0 or tx % sw:
                    continue
                ox = tx // sw
                if ox >= ow:
                    continue
                r = (b * oh + oy) * ow + ox
                if r < r0 or r >= r1:
                    continue
                q = (i * kw + j) * c + ch
                base = (q // 4) * 64 + q % 4
                row = (r - r0) * ldc
                for jp in range(n_panels):
                    pb = jp * kq * 64 + base
                    cb = row + jp * 16
                    for lane in range(16):
                        cm[cb + lane] += e * np.int32(panels[pb + 4 * lane])


@numba.njit(inline="always")
def _add_vec_run(out, d0, other, o0, step, count, sa, pa, sb, pb, inv, zp, lo, hi):
    """``add_vec_u8``'s arithmetic on ``out[d0:d0 + count]`` and ``other[o0 + j * step]``, in place
    (``step`` 1: contiguous, LLVM vectorizes it)."""
    a = out[d0:d0 + count]
    flo, fhi, fzp = np.float32(lo - zp), np.float32(hi - zp), np.float32(zp)
    for j in range(count):
        cv = np.float32(np.float64(a[j]) * sa + pa) + np.float32(np.float64(other[o0 + j * step]) * sb + pb)
        # nearbyint by the 1.5 * 2^23 trick (vectorizes; np.rint is a libm call): exact below 2^22
        # in magnitude, and beyond it the value clamps to lo or hi either way
        v = (cv * inv + _ROUND) - _ROUND
        a[j] = min(max(v, flo), fhi) + fzp


@numba.njit(inline="always")
def _add_row(out, d0, nout, r, npos, other, addf, addi):
    """``quantized::add(_relu)`` of one row of a convolution's requantized bytes (``out[d0:d0 +
    nout]``, output row ``r`` = (image, position)) and ``other``, in place, as
    ``binary.add_out`` and its layout variants compute it: torch's vectorized path (``add_vec_u8``'s
    arithmetic) except on the elements its loop leaves to the scalar path (``(q - zp) * scale`` in
    float32, ``nearbyint(zp + c * inv)``): ``addi[0]`` 1: the last ``numel % 64`` (from
    ``addi[1]``) in NCHW order, 2: in memory (NHWC) order, 3: every element. ``addi[2:5]``:
    ``other``'s strides (image, position, channel) in elements; ``addf``: the vectorized path's
    ``sa, pa, sb, pb, inv, zp, lo, hi``, then the scalar path's ``sa, za, sb, zb``."""
    mode = addi[0]
    kvec = addi[1]
    b = r // npos
    pos = r - b * npos
    ob = b * addi[2] + pos * addi[3]
    sc = addi[4]
    if mode == 3:
        jt = 0
    elif mode == 2:
        jt = kvec - d0
    else:           # NCHW index (b * nout + j) * npos + pos >= kvec
        jt = -((pos - kvec) // npos) - b * nout
    jt = min(max(jt, 0), nout)
    sa, pa, sb, pb = addf[0], addf[1], addf[2], addf[3]
    inv = np.float32(addf[4])
    zp, lo, hi = addf[5], addf[6], addf[7]
    if sc == 1:         # other channels-last (a conv's, add's or pool's output): contiguous, vectorized
        _add_vec_run(out, d0, other, ob, 1, jt, sa, pa, sb, pb, inv, zp, lo, hi)
    else:               # strided (an NCHW other): the same arithmetic (np.rint was a libm call per element)
        _add_vec_run(out, d0, other, ob, sc, jt, sa, pa, sb, pb, inv, zp, lo, hi)
    if jt < nout:
        ssa, sza, ssb, szb = np.float32(addf[8]), np.int64(addf[9]), np.float32(addf[10]), np.int64(addf[11])
        fzp = np.float32(zp)
        floor = np.float32(0) if addi[5] != 0 else np.float32(-np.inf)       # relu
        qlo, qhi = np.float32(addf[12]), np.float32(hi)
        for j in range(jt, nout):
            cv = np.float32(np.int64(out[d0 + j]) - sza) * ssa + np.float32(np.int64(other[ob + j * sc]) - szb) * ssb
            cv = max(cv, floor)
            # nearbyint(zp + cv * inv) by the 1.5 * 2^23 trick (as _add_vec_run: np.rint is a libm call)
            v = ((fzp + cv * inv) + _ROUND) - _ROUND
            out[d0 + j] = min(max(v, qlo), qhi)


#: the integer arguments of :func:`conv_layer_u8` (``ConvPlan.geo``), by position
CONV_GEO = ("n", "h", "w", "c", "kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw", "oh", "ow", "kp", "n_panels", "nout",
            "row_block", "x_zp", "y_zp", "lo", "hi", "lim", "pixels_are_rows", "scan")


def _conv_kernel(vnni: bool, zmm: bool = False, amx: bool = False):
    """One whole groups-1 convolution (``gemm.ConvPlan``) in one compiled call: the exactness scan
    of the input (bytes above ``lim`` clamped in a copy, ``scan``), then per block of
    ``row_block`` output rows the windows gathered (or the pixels themselves), the GEMM, the
    clamped bytes' corrections for those rows and fbgemm's requantization into ``out``
    (channels-last uint8, rows of ``nout``) while the block's sums are in cache. ``geo``: int64,
    :data:`CONV_GEO`. ``corr``: ``x_zp * colsum`` per channel; no weight zero points. Returns the
    number of clamped bytes, or -1 (nothing written) when they are more than ``at`` holds."""

    @numba.njit(cache=True, nogil=True, boundscheck=False)
    def conv(x, xc, at, excess, cols, panels, c, corr, zw, bias_div, mult, geo, out, other, addf, addi):
        n, h, w, cch = geo[0], geo[1], geo[2], geo[3]
        kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geo[4], geo[5], geo[6], geo[7], geo[8], geo[9], geo[10], geo[11], \
            geo[12], geo[13]
        kp, n_panels, nout, row_block = geo[14], geo[15], geo[16], geo[17]
        zp = np.uint8(geo[18])
        yz = np.float32(geo[19])
        flo = np.float32(geo[20])
        fhi = np.float32(geo[21])
        lim = geo[22]
        pixels = geo[23] != 0
        amode = addi[0] if addi.shape[0] else 0
        count = 0
        if geo[24] != 0:
            count = find_excess(x, lim, at, excess)
            if count < 0:
                return -1
        src = x
        if count > 0:
            u = np.uint8(lim)
            for q in range(x.shape[0]):
                v = x[q]
                xc[q] = v if v < u else u
            src = xc
        m = n * oh * ow
        ldc = n_panels * 16
        n8 = nout // 8 * 8
        for r0 in range(0, m, row_block):
            r1 = min(m, r0 + row_block)
            rb = r1 - r0
            if pixels:
                rows = src[r0 * kp:r1 * kp]
            else:
                _gather_rows(src, h, w, cch, zp, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, r0, r1, cols, kp)
                rows = cols
            if amx:
                gemm_u8s8_amx(rows, kp, rb, panels, n_panels, c, rb)
            elif zmm:
                gemm_u8s8_vnni512(rows, kp, rb, panels, n_panels, c, rb)
            elif vnni:
                gemm_u8s8_vnni(rows, kp, rb, panels, n_panels, c, rb)
            else:
                gemm_u8s8(rows, kp, rb, panels, n_panels, c, rb)
            if count > 0:
                _block_excess(c, ldc, r0, r1, panels, kp, nout, at, excess, count, h, w, cch, kh, kw, sh, sw, ph, pw,
                              dh, dw, oh, ow)
            for i in range(rb):
                base = i * ldc
                d0 = (r0 + i) * nout
                for j in range(0, n8, 8):       # 8 channels in float32 lanes, as requantize_u8
                    requant8_u8(c, base + j, corr, zw, 0, bias_div, mult, j, yz, flo, fhi, out, d0 + j)
                for j in range(n8, nout):
                    acc = c[base + j] - corr[j]
                    v = ((np.float32(acc) + bias_div[j]) * mult[j] + _ROUND) - _ROUND + yz
                    v = min(max(v, flo), fhi)
                    out[d0 + j] = np.uint8(v)
                if amode:
                    _add_row(out, d0, nout, r0 + i, oh * ow, other, addf, addi)
        return count
    return conv


#: one groups-1 convolution in one call (AVX2 GEMM; ``conv_layer_u8_vnni``: ``vpdpbusd`` on ``ymm``,
#: ``conv_layer_u8_vnni512`` on ``zmm``, compiled for AVX512-VNNI: call them only where the CPU has it)
conv_layer_u8 = _conv_kernel(False)
conv_layer_u8_vnni = _conv_kernel(True)
conv_layer_u8_vnni512 = _conv_kernel(True, True)
#: the same on AMX tiles (:func:`gemm_u8s8_amx`): call it only where :func:`.amx.permitted`
conv_layer_u8_amx = _conv_kernel(True, False, True)
