"""Cold start: a fresh ``python -c`` -> the first inference result, per model.

``python -m benchmarks.cold_start [--models ...] [--runs 3]``

* srcore: ``import srcore`` (plugin discovery happens on first use), ``srcore.load`` of the
  ``.srm``, ``StaticModule`` + ``runtime()``, first call;
* TorchScript: ``import torch``, ``torch.jit.load`` + first call;
* ONNX Runtime: ``import onnxruntime``, session creation + first call.

The time is measured from the parent around the whole child process (interpreter start
included) and, inside the child, from its first statement; the median of ``--runs`` is kept.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .models import MODELS
from .prepare import prepare
from .run import ROOT, child_env

PRELUDE = "import time; t0 = time.perf_counter(); import numpy as np; x = np.load({inp!r})\n"
CHILDREN = {
    "srcore": ("import srcore\n"
               "rt = srcore.StaticModule(srcore.load({art!r} + '/model.srm')).runtime()\n"
               "y = rt(x)\n"),
    "torchscript": ("import torch\n"
                    "torch.set_num_threads(1)\n"
                    "m = torch.jit.load({art!r} + '/model.pt').eval()\n"
                    "with torch.inference_mode(): y = m(torch.from_numpy(x))\n"),
    "ort": ("import onnxruntime as ort\n"
            "so = ort.SessionOptions(); so.intra_op_num_threads = 1\n"
            "s = ort.InferenceSession({art!r} + '/model.onnx', so, providers=['CPUExecutionProvider'])\n"
            "y = s.run(None, {{s.get_inputs()[0].name: x}})\n"),
}
EPILOGUE = "print('@@MS@@', (time.perf_counter() - t0) * 1e3)\n"


def once(runner: str, art: Path) -> tuple[float, float]:
    code = PRELUDE.format(inp=str(art / "input.npy")) + CHILDREN[runner].format(art=str(art)) + EPILOGUE
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], env=child_env(1), capture_output=True, text=True, cwd=ROOT)
    wall = (time.perf_counter() - t0) * 1e3
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("@@MS@@")), None)
    if line is None:
        raise RuntimeError(p.stderr.strip()[-500:])
    return wall, float(line.split()[1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cold_start")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    results: dict = {}
    print(f"{'model':<28}" + "".join(f"{r + ' (ms)':>20}" for r in CHILDREN) + "   (process wall / in-child)")
    for m in args.models.split(","):
        prepare(m, out)
        row = {}
        for r in CHILDREN:
            try:
                samples = [once(r, out / "artifacts" / m) for _ in range(args.runs)]
                row[r] = {"wall_ms": statistics.median(s[0] for s in samples),
                          "in_child_ms": statistics.median(s[1] for s in samples)}
            except Exception as e:  # noqa: BLE001 - a failing runner is a result
                row[r] = {"error": f"{type(e).__name__}: {e}"}
        results[m] = row
        cells = [f"{v['wall_ms']:>10.0f} / {v['in_child_ms']:<7.0f}" if "wall_ms" in v else f"{'error':>20}"
                 for v in row.values()]
        print(f"{m:<28}" + "".join(cells), flush=True)
    (out / "cold_start.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
