"""float32 vectors for numba kernels: register values of LLVM type ``<L x float>``.

numba has no vector types, and in a scalar loop LLVM kept a conv's accumulators in memory and did
not vectorize (docs/performance-log.md, 2026-11-26). These intrinsics give a numba function vector
values that stay in registers. The lane count ``L`` comes from a *width tag*, a float32 array whose
``ndim`` says it: 1 -> 8 lanes (one AVX2 ``ymm``), 2 -> 16 lanes (one AVX-512 ``zmm``; on a CPU
without AVX-512 LLVM splits it into two ``ymm``, still exact). Every other intrinsic takes its width
from its vector operand. numba compiles for the host CPU, so FMAs are ``vfmadd`` where the CPU has
FMA3. Indices are element offsets into 1-D arrays, unchecked (the kernels own their arithmetic).
:func:`store_epilogue` is the kernels' one store loop (bias is the accumulators' start; residual,
leaky relu and clamp here; :func:`store_epilogue_n` the same for a partial vector, masked;
:func:`epilogue1` one element's). :func:`task_coords` splits a task number into span, block, group.
numba's on-disk cache keys a kernel on its own module's source: after editing this module or
:mod:`srcore._vec_ir`, delete the ``__pycache__/*.nbi``/``*.nbc`` files of the kernels' modules (:mod:`.direct`,
:mod:`.direct_oc`, :mod:`.depthwise`, ...).
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ._jit import helper
from .._vec_ir import F32 as _F32, I32 as _I32, declare, elem_ptr, f32x8, f32x16, splat


def _tag_type(tag):
    return f32x16 if getattr(tag, "ndim", 1) == 2 else f32x8


@intrinsic
def vsplat(typingctx, tag, x):
    """``x`` (a float32 scalar) in every lane; the width from ``tag``."""
    vt = _tag_type(tag)

    def codegen(context, builder, sig, args):
        return splat(builder, context.cast(builder, args[1], sig.args[1], types.float32), vt.ir_type)
    return vt(tag, x), codegen


@intrinsic
def vload(typingctx, arr, idx, like):
    """``arr[idx:idx + lanes]`` (float32 array or :func:`fptr` pointer, any alignment), as wide as ``like``."""
    vt = like

    def codegen(context, builder, sig, args):
        return builder.load(elem_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1], vt.ir_type), align=4)
    return vt(arr, idx, like), codegen


@intrinsic
def vbcast(typingctx, arr, idx, like):
    """``arr[idx]`` in every lane (``vbroadcastss`` from memory), as wide as ``like``."""
    vt = like

    def codegen(context, builder, sig, args):
        x = builder.load(elem_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1], _F32), align=4)
        return splat(builder, x, vt.ir_type)
    return vt(arr, idx, like), codegen


@intrinsic
def vfma(typingctx, a, b, c):
    """``a * b + c`` per lane, one rounding (``llvm.fma``)."""
    def codegen(context, builder, sig, args):
        vty = sig.args[0].ir_type
        name = f"llvm.fma.v{vty.count}f32"
        return builder.call(declare(builder, name, vty, [vty] * 3), list(args))
    return a(a, b, c), codegen


@intrinsic
def vadd(typingctx, a, b):
    def codegen(context, builder, sig, args):
        return builder.fadd(args[0], args[1])
    return a(a, b), codegen


@intrinsic
def vmul(typingctx, a, b):
    def codegen(context, builder, sig, args):
        return builder.fmul(args[0], args[1])
    return a(a, b), codegen


@intrinsic
def vdiv(typingctx, a, b):
    def codegen(context, builder, sig, args):
        return builder.fdiv(args[0], args[1])
    return a(a, b), codegen


@intrinsic
def vclamp(typingctx, v, lo, hi):
    """``min(max(v, lo), hi)`` per lane (NaN stays NaN, as ``np.clip``/``torch.clamp``)."""
    def codegen(context, builder, sig, args):
        vty = sig.args[0].ir_type
        x = args[0]
        lov = splat(builder, context.cast(builder, args[1], sig.args[1], types.float32), vty)
        hiv = splat(builder, context.cast(builder, args[2], sig.args[2], types.float32), vty)
        x = builder.select(builder.fcmp_ordered("<", x, lov), lov, x)
        return builder.select(builder.fcmp_ordered(">", x, hiv), hiv, x)
    return v(v, lo, hi), codegen


@intrinsic
def vleaky(typingctx, v, slope):
    """``v if v > 0 else v * slope`` per lane (leaky relu as torch's: NaN and -0.0 pass through)."""
    def codegen(context, builder, sig, args):
        vty = sig.args[0].ir_type
        x = args[0]
        s = splat(builder, context.cast(builder, args[1], sig.args[1], types.float32), vty)
        pos = builder.fcmp_ordered(">", x, ir.Constant(vty, [0.0] * vty.count))
        return builder.select(pos, x, builder.fmul(x, s))
    return v(v, slope), codegen


@intrinsic
def vstore(typingctx, arr, idx, v):
    """``arr[idx:idx + lanes] = v`` (float32 array or :func:`fptr` pointer, any alignment)."""
    def codegen(context, builder, sig, args):
        p = elem_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1], sig.args[2].ir_type)
        builder.store(args[2], p, align=4)
        return context.get_dummy_value()
    return types.none(arr, idx, v), codegen


def _lanes_below(builder, context, n, nty, count):
    """The ``<count x i1>`` mask of lanes ``< n``."""
    i32v = ir.VectorType(_I32, count)
    nv = splat(builder, context.cast(builder, n, nty, types.int32), i32v)
    return builder.icmp_signed("<", ir.Constant(i32v, list(range(count))), nv)


@intrinsic
def vload_n(typingctx, arr, idx, n, like):
    """``arr[idx:idx + n]`` in the first ``n`` lanes (``0 <= n <= lanes``), zeros in the rest, as wide
    as ``like``; nothing past ``arr[idx + n - 1]`` is read (a masked load: ``vmaskmovps``)."""
    vt = like

    def codegen(context, builder, sig, args):
        vty = vt.ir_type
        ptr = elem_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1], vty)
        mask = _lanes_below(builder, context, args[2], sig.args[2], vty.count)
        fn = declare(builder, f"llvm.masked.load.v{vty.count}f32.p0v{vty.count}f32", vty,
                     [vty.as_pointer(), _I32, mask.type, vty])
        return builder.call(fn, [ptr, ir.Constant(_I32, 4), mask, ir.Constant(vty, [0.0] * vty.count)])
    return vt(arr, idx, n, like), codegen


@intrinsic
def vstore_n(typingctx, arr, idx, v, n):
    """``arr[idx:idx + n] = v[:n]`` (``0 <= n <= lanes``); nothing else is written (a masked store)."""
    def codegen(context, builder, sig, args):
        vty = sig.args[2].ir_type
        ptr = elem_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1], vty)
        mask = _lanes_below(builder, context, args[3], sig.args[3], vty.count)
        fn = declare(builder, f"llvm.masked.store.v{vty.count}f32.p0v{vty.count}f32", ir.VoidType(),
                     [vty, vty.as_pointer(), _I32, mask.type])
        builder.call(fn, [args[2], ptr, ir.Constant(_I32, 4), mask])
        return context.get_dummy_value()
    return types.none(arr, idx, v, n), codegen


def _shuffle2(name, index, doc):
    """An intrinsic of two same-width vectors ``a``, ``b`` -> lanes ``index(lanes)`` of ``a ++ b``."""
    def impl(typingctx, a, b):
        def codegen(context, builder, sig, args):
            n = sig.args[0].lanes
            return builder.shuffle_vector(args[0], args[1], ir.Constant(ir.VectorType(_I32, n), index(n)))
        return a(a, b), codegen
    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = doc
    return intrinsic(impl)


veven = _shuffle2("veven", lambda n: [2 * m for m in range(n)],
                  "Lanes 0, 2, 4, ... of the concatenation ``a ++ b`` (deinterleaves a stride-2 row).")
vodd = _shuffle2("vodd", lambda n: [2 * m + 1 for m in range(n)], "Lanes 1, 3, 5, ... of the concatenation ``a ++ b``.")
vzip_lo = _shuffle2("vzip_lo", lambda n: [m // 2 + (n if m % 2 else 0) for m in range(n)],
                    "``a0, b0, a1, b1, ...``: the low halves of ``a`` and ``b`` interleaved.")
vzip_hi = _shuffle2("vzip_hi", lambda n: [n // 2 + m // 2 + (n if m % 2 else 0) for m in range(n)],
                    "The high halves of ``a`` and ``b`` interleaved.")


@intrinsic
def prefetch(typingctx, arr, idx):
    """Hint the cache line of ``arr[idx]`` into L2 (``llvm.prefetch``, read, locality 2); no effect on
    results, never faults."""
    def codegen(context, builder, sig, args):
        p = builder.bitcast(elem_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1]),
                            ir.IntType(8).as_pointer())
        fn = declare(builder, "llvm.prefetch.p0", ir.VoidType(), [ir.IntType(8).as_pointer(), _I32, _I32, _I32])
        builder.call(fn, [p, ir.Constant(_I32, 0), ir.Constant(_I32, 2), ir.Constant(_I32, 1)])
        return context.get_dummy_value()
    return types.none(arr, idx), codegen


@intrinsic
def fptr(typingctx, arr):
    """The data pointer of a float32 array, as a numba ``CPointer(float32)`` (indexable, and taken by
    :func:`vload`/:func:`vstore`): helpers given pointers instead of arrays are inlined without
    reference counting."""
    def codegen(context, builder, sig, args):
        return context.make_array(sig.args[0])(context, builder, value=args[0]).data
    return types.CPointer(types.float32)(arr), codegen


@helper
def store_epilogue(blk, src, out, o, cnt, whole, res, has_res, leaky, slope, lo, hi, like):
    """The SIMD conv kernels' store: ``out[o + e] = clamp(leaky?(blk[src + e] (+ res[o + e])), lo, hi)``
    for ``e < cnt`` (``blk`` the register block spilled to a local buffer). ``whole``: store a whole
    vector of ``like``'s width (its lanes past ``cnt`` must be the caller's to overwrite), else
    element by element (LLVM does not vectorize that loop: whole vectors wherever possible).
    ``blk``, ``out`` and ``res`` are :func:`fptr` pointers: inlined with arrays (numba IR inlining),
    the helper reference-counted them at every stored vector, 1.3-2.8x the kernel's time."""
    if whole:
        v = vload(blk, src, like)
        if has_res:
            v = vadd(v, vload(res, o, like))
        if leaky:
            v = vleaky(v, slope)
        vstore(out, o, vclamp(v, lo, hi))
        return
    for e in range(cnt):
        z = blk[src + e]
        if has_res:
            z += res[o + e]
        out[o + e] = epilogue1(z, leaky, slope, lo, hi)


@helper
def epilogue1(z, leaky, slope, lo, hi):
    """One element's epilogue after the residual: ``clamp(leaky?(z), lo, hi)``, as :func:`vleaky` and
    :func:`vclamp` per lane (the kernels' element-by-element stores)."""
    if leaky and not z > 0.0:
        z = z * slope
    # (if, not max/min: a NaN stays NaN, as torch.clamp)
    if z < lo:  # noqa: PLR1730
        z = lo
    if z > hi:  # noqa: PLR1730
        z = hi
    return z


@helper
def task_coords(t, nb_oc, spans, pix_inner):
    """Task ``t`` of a conv kernel split into ``nb_oc`` output-channel blocks x ``spans`` pixel spans
    per group: ``(span, block, group)``, channel blocks innermost unless ``pix_inner``."""
    if pix_inner:
        s = t % spans
        ob = (t // spans) % nb_oc
    else:
        ob = t % nb_oc
        s = (t // nb_oc) % spans
    return s, ob, t // (nb_oc * spans)


@helper
def store_epilogue_n(blk, src, out, o, cnt, res, has_res, leaky, slope, lo, hi, like):
    """:func:`store_epilogue` of ``0 < cnt <= lanes`` elements as one masked vector (nothing past
    ``out[o + cnt - 1]`` read or written): the same bits as its element loop, without it."""
    v = vload_n(blk, src, cnt, like)
    if has_res:
        v = vadd(v, vload_n(res, o, cnt, like))
    if leaky:
        v = vleaky(v, slope)
    vstore_n(out, o, vclamp(v, lo, hi), cnt)
