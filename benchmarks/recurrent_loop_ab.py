"""The cpu plugin's compiled LSTM / GRU layer loops (``kernels/jit_recurrent.py``) against those of another
revision, in one process: each shape's loop by rows (512-bit) and in registers, interleaved rounds,
process CPU time (run it with ``OMP_NUM_THREADS=1``: the loops are one thread).

``python -m benchmarks.recurrent_loop_ab [--base REV] [--rounds 9] [lstm|gru ...]``

The base's module is read with ``git show REV:...`` and loaded as a module of the kernels package
(its relative imports resolve to this tree's kernels). The base's candidates are matched by what
they do: a base with three (a 256-bit twin first) gives its second and third. Outputs are compared
bit for bit first (``maxdiff``). Per shape and loop: best round of each (a round is the median of
5 timings), and new / old (below 1: the new loop is faster). Compile time: see
``tools/numba_compile_profile.py`` with an empty ``NUMBA_CACHE_DIR``.
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
_PATH = "plugins/cpu/srcore_cpu/kernels/jit_recurrent.py"
#: (mode, hidden, batch, steps): lstm_gru's layers, crnn's LSTM, the tests' GRU, a stacked LSTM at batch 4
SHAPES = [("lstm", 128, 1, 100), ("gru", 128, 1, 100), ("lstm", 24, 1, 32), ("gru", 37, 2, 9),
          ("lstm", 64, 4, 50), ("gru", 64, 4, 50), ("gru", 24, 1, 32)]


def _base_module(rev: str):
    src = subprocess.run(["git", "show", f"{rev}:{_PATH}"], cwd=_ROOT, check=True, capture_output=True,
                         text=True).stdout
    path = Path(tempfile.gettempdir()) / f"jit_recurrent_base_{os.getpid()}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("srcore_cpu.kernels.jit_recurrent_base", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _args(mode, H, B, T, rng):
    from srcore_cpu.kernels.recurrent import aligned

    g = (4 if mode == "lstm" else 3) * H
    xp = rng.standard_normal((T * B, g), dtype=np.float32)
    bias = rng.standard_normal(g, dtype=np.float32) * np.float32(0.1)
    whhT = aligned(rng.standard_normal((H, g), dtype=np.float32) * np.float32(1 / np.sqrt(H)), np.float32)
    h, y = np.zeros((B, H), np.float32), np.empty((T * B, H), np.float32)
    if mode == "lstm":
        return (xp, B, 1, 0, bias, whhT, h, np.zeros((B, H), np.float32), y, 0, False)
    return (xp, B, 1, 0, bias, whhT, rng.standard_normal(H, dtype=np.float32) * np.float32(0.1), h, y, 0, False)


def _per_call(fn, a, reps):
    start = time.process_time()
    for _ in range(reps):
        fn(*a)
    return (time.process_time() - start) / reps


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", default="main")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("modes", nargs="*", default=["lstm", "gru"])
    opts = p.parse_args(argv)
    from srcore_cpu.kernels import jit_recurrent as new

    old = _base_module(opts.base)
    for mode, H, B, T in SHAPES:
        if mode not in opts.modes:
            continue
        a = _args(mode, H, B, T, np.random.default_rng(0))
        co, cn = old.candidates(mode), new.candidates(mode)
        co = co[-2:]   # a base with a 256-bit twin first: its 512-bit rows and registers loops
        print(f"{mode} H{H} B{B} T{T}:", flush=True)
        for name, fo, fn in zip(("rows", "regs"), co, cn):
            outs = []
            for f in (fo, fn):
                b = tuple(x.copy() if isinstance(x, np.ndarray) else x for x in a)
                f(*b)
                outs.append(b[8])
            diff = float(np.max(np.abs(outs[0] - outs[1])))
            reps = max(3, int(2e5 / (H * H * B * T / 10 + 1)))
            best = ([], [])
            for r in range(opts.rounds):
                for k, f in ((0, fo), (1, fn)) if r % 2 == 0 else ((1, fn), (0, fo)):
                    best[k].append(statistics.median(_per_call(f, a, reps) for _ in range(5)))
            o, n = min(best[0]) * 1e6, min(best[1]) * 1e6
            print(f"    {name}: old {o:7.1f} new {n:7.1f} us  new/old {n / o:.3f}  maxdiff {diff:.1e}", flush=True)
    print(os.popen("uptime").read().strip())


if __name__ == "__main__":
    main()
