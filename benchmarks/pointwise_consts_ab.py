"""trt_like's fused pointwise kernels with their constants compiled in (another revision's
``pointwise/codegen.py``) against the constants as the kernel's leading arguments (this tree's
``compile_program``, whose ``fn`` binds them with ``functools.partial``), in one process: numba's
compile time of each and their steady calls, interleaved rounds, process CPU time (run it with
``OMP_NUM_THREADS=1``: a kernel is one thread).

``python -m benchmarks.pointwise_consts_ab [--base REV] [--rounds 9]``

The base's ``codegen.py`` is read with ``git show REV:...`` and loaded as a module of the pointwise
package; its kernel is compiled with the base's signature (arrays only), cold (numba's cache is not
used; the new one is compiled into a fresh temporary ``SRCORE_CACHE_DIR``). Outputs are compared bit
for bit first (``maxdiff``). Per program: compile CPU seconds of each, the best round of each (a round
is the median of 7 timings of N calls through the Python call the engine makes), and new / old (below
1: the new is faster). Last, how many kernels each compiles for the programs of one structure that
differ only in their constants (what the change is for).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

_ROOT = Path(__file__).resolve().parents[1]
_PATH = "plugins/trt_like/srcore_trt_like/pointwise/codegen.py"


def _programs():
    from srcore_trt_like.pointwise import Input, Program, op

    big, tiny, mid, wide = (Input("x", (1, 64, 56, 56)), Input("x", (1, 128)), Input("x", (8, 256)),
                            Input("x", (4, 1024)))
    return {
        "leaky_relu 1x64x56x56": Program((big,), (op("leaky_relu", big, negative_slope=0.2),)),
        "clamp(x*0.5) 1x128": Program((tiny,), (op("clamp", op("mul", tiny, 0.5), min=-1.0, max=2.0),)),
        "elu(x)+3 8x256": Program((mid,), (op("add", op("elu", mid, alpha=1.5), 3.0),)),
        "softplus(hardtanh) 4x1024": Program((wide,), (op("softplus", op("hardtanh", wide, min_val=-2.0,
                                                                          max_val=3.5), beta=2.0),)),
    }


def _variants():
    """One structure, constants only differing (conformance's clamp / leaky_relu / elu cases)."""
    from srcore_trt_like.pointwise import Input, Program, op

    x = Input("x", (3, 7))
    out = [Program((x,), (op("clamp", x, min=lo, max=hi),)) for lo, hi in ((-1, 2), (0, 6), (-0.5, 0.5), (2, -2))]
    out += [Program((x,), (op("leaky_relu", x, negative_slope=s),)) for s in (0.01, 0.2, -1.5, 0.0)]
    out += [Program((x,), (op("elu", x, alpha=a, scale=s),)) for a, s in ((1.0, 1.0), (0.5, 1.0), (1.0, 2.0))]
    return out


def _base_module(rev: str):
    src = subprocess.run(["git", "show", f"{rev}:{_PATH}"], cwd=_ROOT, check=True, capture_output=True,
                         text=True).stdout
    path = Path(tempfile.gettempdir()) / f"pointwise_codegen_base_{os.getpid()}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("srcore_trt_like.pointwise.codegen_base", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _compile_base(base, program, tag: str):
    """``(fn(*inputs, *outputs), compile CPU seconds)`` of the base revision's kernel."""
    import numba
    from numba import types

    from srcore_trt_like.kernels import fastmath

    path = Path(tempfile.gettempdir()) / f"pointwise_base_{tag}_{os.getpid()}.py"
    path.write_text(base.generate_source(program))
    spec = importlib.util.spec_from_file_location(f"pointwise_base_{tag}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    arrays = [types.Array(types.float32, len(i.shape), "C", readonly=True) for i in program.inputs]
    arrays += [types.Array(types.float32, len(program.shape), "C")] * len(program.outputs)
    start = time.process_time()
    fn = numba.njit(types.void(*arrays), **fastmath.jit_options())(mod.kernel)
    return fn, time.process_time() - start


def _compile_new(program):
    from srcore_trt_like.pointwise import compile_program

    start = time.process_time()
    kernel = compile_program(program)
    return kernel.fn, time.process_time() - start


def _round(fn, args, calls: int) -> float:
    times = []
    for _ in range(7):
        start = time.process_time()
        for _ in range(calls):
            fn(*args)
        times.append((time.process_time() - start) / calls)
    return statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="4c96ec9f", help="the revision whose codegen compiles constants in")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    os.environ["SRCORE_CACHE_DIR"] = tempfile.mkdtemp(prefix="pointwise-consts-ab-")
    import numba

    from srcore_trt_like.pointwise import compile_program

    numba.njit(lambda: 0)()   # numba's own start-up outside the first compile
    base = _base_module(args.base)
    rng = np.random.default_rng(0)
    print(f"{'program':28s} {'compile old':>11s} {'new':>6s} {'old us':>8s} {'new us':>8s} {'new/old':>7s}  maxdiff")
    for k, (name, program) in enumerate(_programs().items()):
        x = (rng.standard_normal(program.inputs[0].shape) * 4).astype(np.float32)
        out_old, out_new = np.empty(program.shape, np.float32), np.empty(program.shape, np.float32)
        old, c_old = _compile_base(base, program, str(k))
        new, c_new = _compile_new(program)
        old(x, out_old)
        new(x, out_new)
        maxdiff = int(np.max(np.abs(out_old.view(np.int32).astype(np.int64) - out_new.view(np.int32))))
        calls = max(20, int(2e6 // max(x.size, 1)))
        best_old, best_new = float("inf"), float("inf")
        for _ in range(args.rounds):
            best_old = min(best_old, _round(old, (x, out_old), calls))
            best_new = min(best_new, _round(new, (x, out_new), calls))
        print(f"{name:28s} {c_old:10.2f}s {c_new:5.2f}s {best_old * 1e6:8.2f} {best_new * 1e6:8.2f} "
              f"{best_new / best_old:7.3f}  {maxdiff}")
    variants = _variants()
    sources_old = {base.generate_source(p) for p in variants}
    start = time.process_time()
    paths = {compile_program(p).path for p in variants}
    print(f"{len(variants)} programs differing only in constants: {len(sources_old)} kernels compiled in, "
          f"{len(paths)} with constant arguments ({time.process_time() - start:.2f} s CPU for those)")


if __name__ == "__main__":
    main()
