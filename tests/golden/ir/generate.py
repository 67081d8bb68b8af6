"""Regenerate the torch-printed golden graphs (needs torch==2.13.0; tests do not).

For each public benchmark model: ``torch.jit.freeze(torch.jit.script(m))`` (traced if
scripting fails), and write ``str(frozen.graph)`` to ``<model>.txt``. Also writes the
``<model>.traced.txt`` (traced then frozen) and, for a few small models, the unfrozen
scripted module's ``inlined_graph`` (``.inlined.txt``: prim::GetAttr on class types,
function constants) and the profiling executor's optimized graph after 3 runs
(``.optimized.txt``: complete types, prim::RequiresGradCheck, ``with`` subgraphs).

Run: .venv/bin/python tests/golden/ir/generate.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2]))  # the checkout: benchmarks/ holds the public bench set
from benchmarks.models import MODELS  # noqa: E402


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
        if name in ("mlp_tiny", "control_flow", "transformer_block_explicit"):
            scripted = torch.jit.script(model)
            (HERE / f"{name}.inlined.txt").write_text(
                f"# scripted, inlined_graph, torch {torch.__version__}\n{scripted.inlined_graph}")
            for _ in range(3):
                scripted(*inputs)
            (HERE / f"{name}.optimized.txt").write_text(
                f"# scripted, last_executed_optimized_graph, torch {torch.__version__}\n"
                f"{torch.jit.last_executed_optimized_graph()}")
        print(name, how)


if __name__ == "__main__":
    main()
