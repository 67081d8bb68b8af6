"""Multi-head attention with its (batch, head) pairs claimed over numba's OpenMP team (the
``attention_heads`` layer's ``mkl_heads_omp`` tactic): per pair the same ``cblas_sgemm`` calls and
compiled softmax as the one-thread ``mkl`` tactic (:func:`..tactics.attention.heads_mkl`), each on its
part's scratch, so a head's bits do not depend on the thread that ran it.

MKL is called from compiled code through its function's address (:func:`sgemm`, an intrinsic: the
address is an argument, so the kernel stays in numba's on-disk cache). Inside the region MKL runs
each product on the thread that calls it (a nested OpenMP call), as the per-head products
(0.5-2 M multiply-adds) should.
"""
from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .atomics import split
from .jit import EXACT_JIT
from .mkl_split import _one_thread
from .rows import softmax_rows_biased

_I32 = ir.IntType(32)
_F32 = ir.FloatType()
_FP = _F32.as_pointer()
#: cblas_sgemm(layout, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), LP64 ints
_SGEMM = ir.FunctionType(ir.VoidType(), [_I32] * 6 + [_F32, _FP, _I32, _FP, _I32, _F32, _FP, _I32])


def addresses(lib) -> tuple[int, int]:
    """The addresses of ``lib.cblas_sgemm`` (MKL's LP64 interface, :mod:`srcore.blas.mkl`) and of
    ``lib.MKL_Set_Num_Threads_Local``."""
    return (ctypes.cast(lib.cblas_sgemm, ctypes.c_void_p).value,
            ctypes.cast(lib.MKL_Set_Num_Threads_Local, ctypes.c_void_p).value)


@intrinsic
def sgemm(typingctx, fn, ta, tb, m, n, k, a, lda, b, ldb, c, ldc):
    """Row-major ``C = op(A) op(B)`` (alpha 1, beta 0) through the ``cblas_sgemm`` at address ``fn``;
    ``a``, ``b``, ``c`` float32 addresses, every other argument an integer."""
    ints = (fn, ta, tb, m, n, k, a, lda, b, ldb, c, ldc)
    if not all(isinstance(t, types.Integer) for t in ints):
        return None

    def codegen(context, builder, signature, args):
        def int32(v, ty):
            return context.cast(builder, v, ty, types.int32)

        def ptr(v, ty):
            return builder.inttoptr(context.cast(builder, v, ty, types.int64), _FP)
        ty = signature.args
        f = builder.inttoptr(context.cast(builder, args[0], ty[0], types.int64), _SGEMM.as_pointer())
        call = [ir.Constant(_I32, 101), int32(args[1], ty[1]), int32(args[2], ty[2]), int32(args[3], ty[3]),
                int32(args[4], ty[4]), int32(args[5], ty[5]), ir.Constant(_F32, 1.0),
                ptr(args[6], ty[6]), int32(args[7], ty[7]), ptr(args[8], ty[8]), int32(args[9], ty[9]),
                ir.Constant(_F32, 0.0), ptr(args[10], ty[10]), int32(args[11], ty[11])]
        builder.call(f, call)
        return context.get_dummy_value()
    return types.void(*ints), codegen


@njit(**EXACT_JIT)
def _heads(t, i0, i1, fn, one, qp, qb, kp, kb, vp, vb, op, ob, L, S, E, H, mask, step, c, divide, safe, s, p, ld):
    """Heads ``i0`` to ``i1`` (``i = b * H + h``) on part ``t``'s scratch."""
    _one_thread(one)   # an OpenMP worker's own MKL count may start a nested team (a call a claim: ~ns)
    D = E // H
    st, pt = s[t], p[t]
    for i in range(i0, i1):
        b, h = i // H, i % H
        off = 4 * h * D
        sgemm(fn, 111, 112, L, S, D, qp + b * qb + off, ld, kp + b * kb + off, ld, st.ctypes.data, S)
        mh = mask[b if mask.shape[0] > 1 else 0, h if mask.shape[1] > 1 else 0]
        softmax_rows_biased(st, pt, c, divide, mh, step, safe)
        sgemm(fn, 111, 111, L, D, S, pt.ctypes.data, S, vp + b * vb + off, ld, op + b * ob + off, E)


#: ``heads(nt, 1, B * H, fn, one, qp, qb, kp, kb, vp, vb, op, ob, L, S, E, H, mask, step, c, divide,
#: safe, s, p, ld)``: ``out[b, :, h*D:(h+1)*D] = softmax(q_h k_h^T / c + mask) v_h`` (``divide``; else
#: ``* c``) for every batch and head, the (batch, head) pairs claimed one at a time: ``q`` (B, L, E),
#: ``k`` and ``v`` (B, S, E) with rows ``ld`` floats apart (E; 3E: the thirds of a packed qkv),
#: ``out`` (B, L, E) with contiguous rows, at addresses ``qp``, ``kp``,
#: ``vp``, ``op`` and batch strides ``qb``, ``kb``, ``vb``, ``ob`` (bytes); ``mask`` (Bm, Hm, Lm, S)
#: with Bm, Hm in (1, B / H) and row step ``step``; ``s``, ``p`` (nt, L, S) scratch, one per part;
#: ``fn`` the address of ``cblas_sgemm``, ``one`` of ``MKL_Set_Num_Threads_Local``
heads = split(_heads, "heads")
