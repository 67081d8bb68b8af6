"""Regenerate the torch-printed golden graphs (needs torch==2.13.0; tests do not).

For each public benchmark model: ``torch.jit.freeze(torch.jit.script(m))`` (traced if
scripting fails), and write ``str(frozen.graph)`` to ``<model>.txt``. Also writes the
graph after torch's ``inlined_graph`` of the unfrozen scripted module, and after
running the graph with example inputs (``<model>.profiled.txt`` shows complete types).

Run: .venv/bin/python tests/golden/ir/generate.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

HERE = Path(__file__).parent
sys.path.insert(0, "/work/shared/bench")
from models import MODELS  # noqa: E402


def frozen(model, inputs):
    try:
        mod, how = torch.jit.script(model), "scripted"
    except Exception:  # scripting unsupported: fall back to tracing
        mod, how = torch.jit.trace(model, inputs, check_trace=False), "traced"
    return torch.jit.freeze(mod.eval()), how


def main() -> None:
    for name, (build, _meta) in MODELS.items():
        model, inputs = build()
        f, how = frozen(model, inputs)
        (HERE / f"{name}.txt").write_text(f"# {how}, frozen, torch {torch.__version__}\n{f.graph}")
        traced = torch.jit.freeze(torch.jit.trace(model, inputs, check_trace=False).eval())
        (HERE / f"{name}.traced.txt").write_text(
            f"# traced, frozen, torch {torch.__version__}\n{traced.graph}")
        print(name, how)


if __name__ == "__main__":
    main()
