"""A compiled kernel call of many arguments as a call of one: :func:`packed_entry`.

numba unboxes each argument of a call: ~80 ns an array, ~18 ns a scalar on Sapphire Rapids, so an
NCHW16c conv's 39 arguments (11 arrays) cost ~1.2 us a call, more than a 2x2 plane's arithmetic. A
bound call (the same arrays every call: an engine's arena buffers) passes instead one int64 array:
each array's address and shape, each scalar's value. A small generated function rebuilds the
arguments (``numba.carray`` over the addresses: arrays of the same numba types) and calls the
kernel's compiled code by its address in numba's calling convention (:func:`_call_at`), so one
wrapper per argument signature serves every kernel of it and links none of their code. The caller
keeps the arrays alive (:class:`PackedCalls` holds them). The same bits as the plain call: the same
compiled code on the same memory.
"""
from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import sys
import threading
from pathlib import Path

import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.core.dispatcher import Dispatcher
from numba.extending import intrinsic

from ..errors import KernelError

log = logging.getLogger("srcore.conv")
_lock = threading.Lock()
_wrappers: dict[tuple, object] = {}   # numba signature -> wrapper (None: it does not compile)
_owners: dict[int, tuple] = {}   # id(entry point) -> (entry point, its dispatcher)
#: calls of fewer arguments are left as they are (the packed call's own cost is ~0.3 us)
MIN_ARGS = 8


@intrinsic
def _voidptr(typingctx, addr):
    """The integer ``addr`` as a ``void*`` (what ``numba.carray`` takes with a dtype)."""
    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], context.get_value_type(types.voidptr))
    return types.voidptr(addr), codegen


@intrinsic
def _call_at(typingctx, addr, args):
    """The compiled numba function at address ``addr`` (native calling convention, no return value)
    called with the tuple ``args``: by its address, so the wrapper links none of its code (linking
    a conv kernel's module took ~4 s a wrapper). Constants in ``args`` are passed as the plain types
    they widen to (the kernel was compiled for those: :func:`address`)."""
    argtys = tuple(types.unliteral(t) for t in args)

    def codegen(context, builder, sig, llargs):
        fnty = context.call_conv.get_function_type(types.none, argtys)
        fn = builder.inttoptr(llargs[0], fnty.as_pointer())
        values = [builder.extract_value(llargs[1], i) for i in range(len(argtys))]
        status, _ = context.call_conv.call_function(builder, fn, types.none, argtys, values)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()
    return types.none(addr, args), codegen


#: ``call_at(addr, args)`` in a kernel: the compiled kernel at ``addr`` (:func:`address`) called with the
#: tuple ``args``, linking none of its code. A ``parallel=True`` driver over a big kernel links and
#: re-optimizes the kernel's code into its region's function otherwise (the trt_like plugin's NCHW16c
#: drivers, ``blocked_split.py``: 3-8 s of compiling each, cold)
call_at = _call_at


def address(dispatcher, args) -> int:
    """The address of ``dispatcher``'s compiled code for the numba types of ``args`` (compiled now, or
    loaded from numba's cache), for :data:`call_at`: the caller must pass exactly these types (an
    array of another layout or rank, a float for an int, is undefined behaviour, not an error)."""
    sig = tuple(dispatcher.typeof_pyval(a) for a in args)
    dispatcher.compile(sig)
    cres = dispatcher.overloads[sig]
    if cres.signature.return_type != types.none:
        raise KernelError(f"{dispatcher.py_func.__name__} returns {cres.signature.return_type}: call_at calls "
                        "kernels that return nothing")
    return cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)


class PackedCalls(tuple):
    """``((fn, args),)`` calls (as :meth:`.direct.SerialTasks.serial_calls` gives) that also hold the
    arrays whose addresses ``args`` packs."""

    def __new__(cls, calls, keep):
        self = super().__new__(cls, calls)
        self.keep = keep
        return self


def _kind(ty) -> str | None:
    """How an argument of numba type ``ty`` travels in the int64 array (None: it cannot)."""
    if isinstance(ty, types.Array) and ty.layout == "C" and ty.mutable and ty.aligned and ty.ndim >= 1:
        return "array"
    if ty == types.boolean:
        return "bool"
    if isinstance(ty, types.Integer) and ty == types.int64:
        return "int"
    if ty in (types.float64, types.float32):
        return str(ty)
    return None


def _source(sig, tag: str) -> str:
    """The module defining ``packed(p)``: the kernel at ``p[-1]`` called with arguments of numba types
    ``sig`` rebuilt from ``p``."""
    lines, args, at = [], [], 0
    for i, ty in enumerate(sig):
        kind = _kind(ty)
        if kind == "array":
            shape = ", ".join(f"p[{at + 1 + d}]" for d in range(ty.ndim)) + ("," if ty.ndim == 1 else "")
            lines.append(f"a{i} = numba.carray(_voidptr(p[{at}]), ({shape}), np.{ty.dtype})")
            at += 1 + ty.ndim
        elif kind == "bool":
            lines.append(f"a{i} = p[{at}] != 0")
            at += 1
        elif kind == "int":
            lines.append(f"a{i} = p[{at}]")
            at += 1
        else:
            lines.append(f"a{i} = np.{kind}(p[{at}:{at + 1}].view(np.float64)[0])")
            at += 1
        args.append(f"a{i}")
    return "\n".join([f"# srcore packed call: generated ({tag})", "import numba",
                      "import numpy as np", "", "from srcore.conv.packed_call import _call_at, _voidptr", "", "",
                      "@numba.njit(cache=True, nogil=True, boundscheck=False)", "def packed(p):",
                      *("    " + line for line in lines), f"    _call_at(p[{at}], ({', '.join(args)},))", ""])


def _pack(sig, args, addr: int) -> np.ndarray:
    """The int64 array :func:`_source`'s wrapper reads: each argument, then the kernel's address."""
    p = []
    for ty, a in zip(sig, args):
        kind = _kind(ty)
        if kind == "array":
            p += [a.ctypes.data, *a.shape]
        elif kind == "bool":
            p.append(int(bool(a)))
        elif kind == "int":
            p.append(int(a))
        else:
            p.append(int(np.float64(a).view(np.int64)))
    return np.array([*p, addr], np.int64)


def remember(entry, dispatcher) -> None:
    """Note that ``entry`` is a compiled entry point of ``dispatcher`` (:func:`.direct.exact_entry`)."""
    _owners[id(entry)] = (entry, dispatcher)


def packed(calls):
    """``calls`` (``(fn, args)`` pairs on compiled entry points or dispatchers) with each call of many
    arguments to a kernel whose entry point :func:`remember` noted as one :func:`packed_entry` call;
    a :class:`PackedCalls` holding ``calls`` (their arrays). None stays None."""
    if not calls:
        return calls
    out, changed = [], False
    for fn, args in calls:
        owner = fn if isinstance(fn, Dispatcher) else _owners.get(id(fn), (None, None))[1]
        call = packed_entry(owner, args) if owner is not None and len(args) >= MIN_ARGS else None
        changed |= call is not None
        out.append(call or (fn, args))
    return PackedCalls(out, calls) if changed else calls


def packed_entry(dispatcher, args):
    """``(fn, (p,))``: a call ``fn(p)`` that is ``dispatcher(*args)`` on exactly these arrays (which
    the caller keeps alive: :class:`PackedCalls`), on the kernel's compiled code; None where an
    argument cannot be packed (a non-contiguous or read-only array, another scalar type) or the
    kernel has no compiled overload of exactly these types."""
    try:
        sig = tuple(dispatcher.typeof_pyval(a) for a in args)
        cres = dispatcher.overloads.get(sig)
    except Exception:   # noqa: BLE001 - an argument numba cannot type
        return None
    if cres is None or cres.signature.return_type != types.none or any(_kind(ty) is None for ty in sig):
        return None   # (the wrapper calls a kernel that returns nothing: a returned value has another ABI)
    with _lock:
        if sig not in _wrappers:
            try:
                wrapper = _make(sig)
                wrapper.compile((types.Array(types.int64, 1, "C"),))
            except Exception as exc:   # noqa: BLE001 - a type the generator misses: the plain call
                log.debug("no packed call for %s: %s", sig, exc)
                wrapper = None
            _wrappers[sig] = wrapper
        wrapper = _wrappers[sig]
    if wrapper is None:
        return None
    p = _pack(sig, args, cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name))
    return next(iter(wrapper.overloads.values())).entry_point, (p,)


def _make(sig):
    """The wrapper of arguments of numba types ``sig`` (one per signature, any kernel), from the
    cache directory (written there once: numba caches its compiled code beside it)."""
    from ..cachedir import cache_root

    here = Path(__file__).read_bytes()
    tag = hashlib.sha256(f"{sig!r} {numba.__version__}\n".encode() + here).hexdigest()[:24]
    source = _source(sig, tag)
    path = cache_root() / "conv" / f"packed_{tag}.py"
    if not path.is_file() or path.read_text() != source:   # (written once: numba's index checks its mtime)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(source)
        tmp.replace(path)
    name = f"_srcore_packed_{tag}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod   # (before it runs: numba's cached code re-imports its module by name)
    spec.loader.exec_module(mod)
    return mod.packed
