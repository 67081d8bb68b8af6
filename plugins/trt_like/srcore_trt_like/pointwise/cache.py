"""The kernel cache: a generated kernel's source is written to ``cache_root()/trt_like/kernels/
k_<hash of the source>.py``, imported, and compiled by numba with an explicit signature and
``cache=True``, so another process building the same program loads the machine code instead
of compiling it."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import numba
import numpy as np
from numba import types

from srcore.plugin import cache_root
from srcore.plugin import SrcoreInputError

from ..kernels import fastmath
from .codegen import _plan_loops, generate_source
from .expr import PointwiseError, Program


def kernel_dir() -> Path:
    """Where generated kernels (and numba's cache of them, in ``__pycache__``) live:
    ``srcore.cachedir.cache_root() / "trt_like" / "kernels"``."""
    return cache_root() / "trt_like" / "kernels"


_lock = threading.Lock()
_loaded: dict[str, Callable] = {}    # source hash -> dispatcher, for this process
_fallback_dir: Path | None = None


def _write_source(source: str, digest: str) -> Path:
    """The kernel's file, written once (atomically) so that its mtime, which numba's cache index
    checks, stays put; a cache directory that cannot be written falls back to a temp directory."""
    global _fallback_dir
    for attempt in range(2):
        if attempt == 0:
            directory = kernel_dir()
        else:
            if _fallback_dir is None:
                _fallback_dir = Path(tempfile.mkdtemp(prefix="srcore-trt-like-kernels-"))
            directory = _fallback_dir
        path = directory / f"k_{digest}.py"
        try:
            if path.is_file() and path.read_text() == source:
                return path
            directory.mkdir(parents=True, exist_ok=True)
            tmp = directory / f".k_{digest}.{os.getpid()}.{threading.get_ident()}.tmp"
            tmp.write_text(source)
            os.replace(tmp, path)
            return path
        except OSError:
            if attempt == 1:
                raise
    raise AssertionError("unreachable")


def _signature(program: Program):
    # inputs typed read-only: the dispatcher then takes writeable and read-only arrays alike
    # (a model's parameters are read-only memory maps; a caller may pass read-only inputs)
    arrays = [types.Array(types.float32, len(inp.shape), "C", readonly=True) for inp in program.inputs]
    arrays += [types.Array(types.float32, len(program.shape), "C")] * len(program.outputs)
    return types.void(*arrays)


def _load(program: Program, source: str) -> tuple[Callable, Path]:
    digest = hashlib.sha256(source.encode()).hexdigest()[:32]
    with _lock:
        path = _write_source(source, digest)
        fn = _loaded.get(digest)
        if fn is not None:
            return fn, path
        name = f"_srcore_trt_like_kernel_{digest}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
        try:
            fn = numba.njit(_signature(program), cache=True, **fastmath.jit_options())(module.kernel)
        except numba.core.errors.NumbaError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise PointwiseError(f"pointwise kernel {path} does not compile: {first}") from exc
        _loaded[digest] = fn
        return fn, path


@attrs.frozen
class PointwiseKernel:
    """A compiled :class:`Program`.

    ``fn(*inputs, *outputs) -> None`` is the numba dispatcher (compiled for exactly one
    signature): float32 C-contiguous arrays of the program's input shapes, then one
    preallocated float32 C-contiguous array of the output shape per output. It checks dtypes,
    ranks and element counts, not the shapes themselves; outputs must not overlap inputs except
    by being the very same full-size array (in place). Calling the kernel object checks
    everything and allocates missing outputs.
    """

    program: Program
    fn: Callable = attrs.field(repr=False)
    source: str = attrs.field(repr=False)
    path: Path
    loop_sizes: tuple[int, ...]

    def __call__(self, *inputs: np.ndarray, out: Sequence[np.ndarray] | None = None) -> tuple[np.ndarray, ...]:
        """Run with checks; returns the outputs (``out`` when given, else new arrays)."""
        prog = self.program
        if len(inputs) != len(prog.inputs):
            raise SrcoreInputError(f"pointwise kernel takes {len(prog.inputs)} input(s) "
                                   f"{[i.name for i in prog.inputs]}, got {len(inputs)}")
        arrays = []
        for spec, x in zip(prog.inputs, inputs):
            if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.shape != spec.shape:
                got = f"{x.dtype} {x.shape}" if isinstance(x, np.ndarray) else type(x).__name__
                raise SrcoreInputError(f"input {spec.name!r}: expected float32 {spec.shape}, got {got}")
            arrays.append(x if x.flags.c_contiguous else np.ascontiguousarray(x))  # (keeps 0-d 0-d)
        n_out = len(prog.outputs)
        if out is None:
            outs = tuple(np.empty(prog.shape, np.float32) for _ in range(n_out))
        else:
            outs = tuple(out)
            if len(outs) != n_out:
                raise SrcoreInputError(f"pointwise kernel has {n_out} output(s), got {len(outs)} out= arrays")
            for m, o in enumerate(outs):
                if (not isinstance(o, np.ndarray) or o.dtype != np.float32 or o.shape != prog.shape
                        or not o.flags.c_contiguous or not o.flags.writeable):
                    got = f"{o.dtype} {o.shape}" if isinstance(o, np.ndarray) else type(o).__name__
                    raise SrcoreInputError(f"output {m}: expected a writeable C-contiguous float32 "
                                           f"{prog.shape}, got {got}")
        self.fn(*arrays, *outs)
        return outs


def compile_program(program: Program, *, streams: int | None = None, wide: bool = False) -> PointwiseKernel:
    """Generate, cache and compile ``program``'s kernel (a cached kernel loads without compiling).

    ``streams`` trades compile time for speed on long op chains: the innermost loop computes
    that many independent element streams side by side (None: up to 4, fewer for short loops
    and big bodies; 128 ops on 1x256x14x14 compile in 1.3 / 3.0 / 6.8 s and run in
    13.6 / 7.4 / 4.6 ms with 1 / 2 / 4 streams). ``wide``: vectorized with 512-bit registers
    (the same bits; a separate kernel)."""
    source = generate_source(program, streams, wide)
    fn, path = _load(program, source)
    return PointwiseKernel(program, fn, source, path, _plan_loops(program).sizes)
