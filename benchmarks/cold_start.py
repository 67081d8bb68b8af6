"""Cold start: a fresh ``python -c`` -> the first inference result, per model.

``python -m benchmarks.cold_start [--models ...] [--runs 3]``

* srcore: ``import srcore`` (plugin discovery happens on first use), ``srcore.load`` of the
  ``.srm``, ``StaticModule`` + ``runtime()``, first call;
* TorchScript: ``import torch``, ``torch.jit.load`` + first call;
* ONNX Runtime: ``import onnxruntime``, session creation + first call.

The time is measured from the parent around the whole child process (interpreter start
included) and, inside the child, from its first statement; the median of ``--runs`` is kept.
For srcore the child also reports where its time went (after the timed part, so the report
costs nothing): numpy + input, ``import srcore`` + ``load``, each ``StaticModule.load_stages``
entry (plugins = discovery + registry), ``runtime()`` and the first call; ``--runners`` picks
the runners (``srcore`` alone is the quick A/B loop).
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

PRELUDE = ("import time; t0 = time.perf_counter(); import numpy as np\n"
           "with np.load({inp!r}) as z: xs = [z[k] for k in z.files]\n")
CHILDREN = {
    "srcore": ("t_in = time.perf_counter()\n"
               "import srcore\n"
               "m = srcore.load({art!r} + '/model.srm')\n"
               "t_load = time.perf_counter()\n"
               "sm = srcore.StaticModule(m)\n"
               "t_sm = time.perf_counter()\n"
               "rt = sm.runtime()\n"
               "t_rt = time.perf_counter()\n"
               "y = rt(*xs)\n"
               "t_call = time.perf_counter()\n"),
    "torchscript": ("import torch\n"
                    "torch.set_num_threads(1)\n"
                    "m = torch.jit.load({art!r} + '/model.pt').eval()\n"
                    "with torch.inference_mode(): y = m(*[torch.from_numpy(x) for x in xs])\n"),
    "ort": ("import onnxruntime as ort\n"
            "so = ort.SessionOptions(); so.intra_op_num_threads = 1\n"
            "s = ort.InferenceSession({art!r} + '/model.onnx', so, providers=['CPUExecutionProvider'])\n"
            "y = s.run(None, dict(zip([i.name for i in s.get_inputs()], xs)))\n"),
}
EPILOGUE = "print('@@MS@@', (time.perf_counter() - t0) * 1e3)\n"
#: per runner, run after the timed part: one ``@@STAGES@@ {json}`` line of milliseconds
REPORTS = {
    "srcore": ("import json\n"
               "st = {{'numpy+input': t_in - t0, 'import+load': t_load - t_in}}\n"
               "st.update(sm.load_stages)\n"
               "st.update({{'runtime()': t_rt - t_sm, 'first call': t_call - t_rt}})\n"
               "print('@@STAGES@@', json.dumps({{k: v * 1e3 for k, v in st.items()}}))\n"),
}


def once(runner: str, art: Path) -> tuple[float, float, dict[str, float]]:
    """(process wall ms, in-child ms, stage ms) of one fresh process."""
    code = (PRELUDE.format(inp=str(art / "inputs.npz")) + CHILDREN[runner].format(art=str(art)) + EPILOGUE
            + REPORTS.get(runner, "").format())
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], env=child_env(1), capture_output=True, text=True, cwd=ROOT)
    wall = (time.perf_counter() - t0) * 1e3
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("@@MS@@")), None)
    if line is None:
        raise RuntimeError(p.stderr.strip()[-500:])
    stages = next((json.loads(ln.split(None, 1)[1]) for ln in p.stdout.splitlines() if ln.startswith("@@STAGES@@")),
                  {})
    return wall, float(line.split()[1]), stages


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cold_start")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--runners", default=",".join(CHILDREN), help="comma-separated subset of "
                    + ", ".join(CHILDREN))
    args = ap.parse_args(argv)
    out = Path(args.out)
    runners = [r for r in args.runners.split(",") if r]
    unknown = [r for r in runners if r not in CHILDREN]
    if unknown:
        ap.error(f"unknown runner(s) {', '.join(unknown)}; known: {', '.join(CHILDREN)}")
    results: dict = {}
    print(f"{'model':<28}" + "".join(f"{r + ' (ms)':>20}" for r in runners) + "   (process wall / in-child)")
    for m in args.models.split(","):
        prepare(m, out)
        row = {}
        for r in runners:
            try:
                samples = [once(r, out / "artifacts" / m) for _ in range(args.runs)]
                row[r] = {"wall_ms": statistics.median(s[0] for s in samples),
                          "in_child_ms": statistics.median(s[1] for s in samples)}
                if samples[0][2]:
                    row[r]["stages_ms"] = {k: statistics.median(s[2].get(k, 0.0) for s in samples)
                                           for k in samples[0][2]}
            except Exception as e:  # noqa: BLE001 - a failing runner is a result
                row[r] = {"error": f"{type(e).__name__}: {e}"}
        results[m] = row
        cells = [f"{v['wall_ms']:>10.0f} / {v['in_child_ms']:<7.0f}" if "wall_ms" in v else f"{'error':>20}"
                 for v in row.values()]
        print(f"{m:<28}" + "".join(cells), flush=True)
        for r, v in row.items():
            if "stages_ms" in v:
                print(f"  {r} stages (median ms): "
                      + ", ".join(f"{k} {ms:.1f}" for k, ms in v["stages_ms"].items()), flush=True)
    name = "cold_start.json" if runners == list(CHILDREN) else f"cold_start_{'_'.join(runners)}.json"
    (out / name).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
