"""AMX-INT8 tiles for numba kernels: the operating system's permission, the tile configuration, and
intrinsics for a 2 x 2 block of ``tdpbusd`` (u8 x s8 -> s32 on 16 x 64-byte tiles).

Every tile here is 16 rows of 64 bytes: ``A`` 16 activation rows x 64 depths, ``B`` 16 quads of a
packed panel (16 channels x 4 depths per 64-byte row: :mod:`.gemm`'s panel layout is AMX's), ``C``
16 rows x 16 int32 channels. Tiles 0-3 hold the ``C`` block (rows r, channels j: tile ``2r + j``),
4-5 the two ``A`` tiles, 6-7 the two ``B`` tiles. Tile numbers are instruction immediates, so the
block is one intrinsic. Linux lends the tile registers' 8 kB of state only on request
(``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``): without it a tile instruction is
SIGILL, so :func:`permitted` asks first and the kernels run only where it said yes.
"""
from __future__ import annotations

import ctypes
import functools
import sys

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .._vec_ir import I8 as _I8, I64 as _I64, call, elem_ptr

_ARCH_REQ_XCOMP_PERM, _ARCH_GET_XCOMP_PERM, _XFEATURE_XTILEDATA, _SYS_ARCH_PRCTL = 0x1023, 0x1022, 18, 158

#: what the tile instructions need (the functions that use them are compiled for it)
AMX_FEATURES = '"target-features"="+avx2,+avx512f,+avx512bw,+avx512vl,+avx512vnni,+amx-tile,+amx-int8"'


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@functools.lru_cache(maxsize=1)
def permitted() -> bool:
    """Whether this process may run AMX-INT8 instructions: the CPU has AMX-TILE and AMX-INT8 (a
    feature test: Linux's cpuinfo flags) and Linux granted the tile state (asked once)."""
    if not sys.platform.startswith("linux") or not {"amx_tile", "amx_int8"} <= _cpu_flags():
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) != 0:
            return False
        got = ctypes.c_uint64(0)
        if libc.syscall(_SYS_ARCH_PRCTL, _ARCH_GET_XCOMP_PERM, ctypes.byref(got)) != 0:
            return False
        return bool(got.value >> _XFEATURE_XTILEDATA & 1)
    except (OSError, AttributeError):
        return False


def tile_config() -> np.ndarray:
    """The 64-byte ``ldtilecfg`` operand: palette 1, tiles 0-7 of 16 rows x 64 bytes."""
    cfg = np.zeros(64, np.uint8)
    cfg[0] = 1
    cfg[16:32].view(np.uint16)[:8] = 64
    cfg[48:56] = 16
    return cfg


_VOID = ir.VoidType()


def _amx(builder):
    set.add(builder.function.attributes, AMX_FEATURES)


def _byte_ptr(context, builder, arrty, arr, idx, idxty):
    return elem_ptr(context, builder, arrty, arr, idx, idxty, _I8)


def _tile(n: int):
    return ir.Constant(_I8, n)


@intrinsic
def load_config(typingctx, cfg):
    """``ldtilecfg`` from a :func:`tile_config` array."""
    def codegen(context, builder, sig, args):
        _amx(builder)
        call(builder, "llvm.x86.ldtilecfg", _VOID, [_byte_ptr(context, builder, sig.args[0], args[0],
                                                               ir.Constant(_I64, 0), types.int64)])
        return context.get_dummy_value()
    return types.none(cfg), codegen


@intrinsic
def release(typingctx):
    """``tilerelease``: the tile state back to its initial (unused) state."""
    def codegen(context, builder, sig, args):
        _amx(builder)
        call(builder, "llvm.x86.tilerelease", _VOID, [])
        return context.get_dummy_value()
    return types.none(), codegen


@intrinsic
def zero_c(typingctx):
    """The four ``C`` tiles set to zero."""
    def codegen(context, builder, sig, args):
        _amx(builder)
        for t in range(4):
            call(builder, "llvm.x86.tilezero", _VOID, [_tile(t)])
        return context.get_dummy_value()
    return types.none(), codegen


@intrinsic
def dp_2x2(typingctx, a, a0, a1, lda, b, b0, b1):
    """``C[r][j] += A_r B_j``: ``A_r`` the 16 rows of 64 bytes at byte ``a_r`` of ``a`` (row stride
    ``lda`` bytes), ``B_j`` the 1 kB at byte ``b_j`` of ``b`` (a panel's 16 quads)."""
    def codegen(context, builder, sig, args):
        _amx(builder)
        av, a0v, a1v, ldav, bv, b0v, b1v = args
        st = sig.args
        stride = context.cast(builder, ldav, st[3], types.int64)
        for t, (off, ty) in ((4, (a0v, st[1])), (5, (a1v, st[2]))):
            call(builder, "llvm.x86.tileloadd64", _VOID,
                  [_tile(t), _byte_ptr(context, builder, st[0], av, off, ty), stride])
        for t, (off, ty) in ((6, (b0v, st[5])), (7, (b1v, st[6]))):
            call(builder, "llvm.x86.tileloadd64", _VOID,
                  [_tile(t), _byte_ptr(context, builder, st[4], bv, off, ty), ir.Constant(_I64, 64)])
        for r in range(2):
            for j in range(2):
                call(builder, "llvm.x86.tdpbusd", _VOID, [_tile(2 * r + j), _tile(4 + r), _tile(6 + j)])
        return context.get_dummy_value()
    return types.none(a, a0, a1, lda, b, b0, b1), codegen


@intrinsic
def store_c(typingctx, c, o00, o01, o10, o11, ldc, mask):
    """The ``C`` tiles whose bit (``2r + j``) is set in ``mask`` stored at element ``o_rj`` of the
    int32 array ``c`` (row stride ``ldc`` elements)."""
    def codegen(context, builder, sig, args):
        _amx(builder)
        cv = args[0]
        st = sig.args
        stride = builder.mul(context.cast(builder, args[5], st[5], types.int64), ir.Constant(_I64, 4))
        m = context.cast(builder, args[6], st[6], types.int64)
        for t in range(4):
            bit = builder.icmp_unsigned("!=", builder.and_(m, ir.Constant(_I64, 1 << t)), ir.Constant(_I64, 0))
            with cgutils.if_likely(builder, bit):
                p = _byte_ptr(context, builder, st[0], cv, args[1 + t], st[1 + t])
                call(builder, "llvm.x86.tilestored64", _VOID, [_tile(t), p, stride])
        return context.get_dummy_value()
    return types.none(c, o00, o01, o10, o11, ldc, mask), codegen
