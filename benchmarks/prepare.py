"""Artifacts of a benchmark model, made once in the parent and cached under ``OUT/artifacts/MODEL/``.

``inputs.npz`` / ``refs.npz`` (the example inputs, any count and dtype, named as ``forward``
names them; torch eager's outputs, flattened: see ``artifacts.py``),
``eager_state.pt`` (state_dict), ``weights.npz`` (the same as numpy, for the
numpy floor), ``model.pt`` (TorchScript: scripted, or traced where
``meta["torchscript"] == "trace"``), ``model.onnx`` (legacy exporter,
``dynamo=False``: the scripted module for control_flow; the dynamo exporter where the legacy one
fails, noted in ``model.onnx.exporter``), ``model.srm``
(srcore, converted from the TorchScript module) and ``model_onnx.srm`` (srcore,
converted from ``model.onnx`` with ``srcore.from_onnx``). A failed artifact leaves
``<name>.error`` with the message instead; the cells that need it are skipped.
"""
from __future__ import annotations

import time
import traceback
from pathlib import Path


def prepare(model: str, out: Path, *, force: bool = False) -> dict[str, str]:
    """Make the missing artifacts of ``model``; return ``{artifact: "ok" | "cached" | error}``."""
    import numpy as np
    import torch

    from .artifacts import flatten_outputs, input_names, save_inputs, save_refs
    from .models import ALL_MODELS

    art = out / "artifacts" / model
    art.mkdir(parents=True, exist_ok=True)
    build, meta = ALL_MODELS[model]
    m, inputs = build()
    names = input_names(m, len(inputs))
    status: dict[str, str] = {}
    ts_cache: dict[str, torch.jit.ScriptModule] = {}

    def torchscript():
        if "m" not in ts_cache:
            if meta["torchscript"] == "trace":
                # traced with grad off, as it runs: the stock encoder layer's fast path; the sanity
                # check would re-run it with grad on (the slow path) and report a spurious difference
                with torch.no_grad():
                    ts_cache["m"] = torch.jit.trace(m, inputs, check_trace=False)
            else:
                ts_cache["m"] = torch.jit.script(m)
        return ts_cache["m"]

    def make_refs(p):
        save_inputs(art, names, [t.numpy() for t in inputs])
        with torch.inference_mode():
            save_refs(art, flatten_outputs(m(*inputs)))

    def make_onnx(p):
        src = torchscript() if model == "control_flow" else m
        with torch.inference_mode():
            n_out = len(flatten_outputs(m(*inputs)))
        outs = ["y"] if n_out == 1 else [f"y{i}" for i in range(n_out)]
        try:
            torch.onnx.export(src, inputs, str(p), dynamo=False, input_names=names, output_names=outs,
                              opset_version=17)
            exporter = "legacy (dynamo=False), opset 17"
        except Exception as e:  # noqa: BLE001 - the dynamo exporter covers what the legacy one cannot
            p.unlink(missing_ok=True)
            torch.onnx.export(m, inputs, str(p), dynamo=True, input_names=names, output_names=outs,
                              opset_version=18, external_data=False)
            exporter = f"dynamo, opset 18 (the legacy exporter failed: {type(e).__name__}: {str(e)[:300]})"
        (art / "model.onnx.exporter").write_text(exporter + "\n")

    def make_srm(p):
        import srcore

        t0 = time.perf_counter()
        srcore.save(srcore.from_torchscript(torchscript(), inputs), str(p))
        status["srm_convert_s"] = f"{time.perf_counter() - t0:.2f}"

    def make_onnx_srm(p):
        import srcore

        t0 = time.perf_counter()
        srcore.save(srcore.from_onnx(str(art / "model.onnx")), str(p))
        status["onnx_convert_s"] = f"{time.perf_counter() - t0:.2f}"

    steps = {
        "refs.npz": make_refs,
        "eager_state.pt": lambda p: torch.save(m.state_dict(), p),
        "weights.npz": lambda p: np.savez(p, **{k: v.detach().numpy() for k, v in m.state_dict().items()}),
        "model.pt": lambda p: torch.jit.save(torchscript(), str(p)),
        "model.onnx": make_onnx,
        "model.srm": make_srm,
        "model_onnx.srm": make_onnx_srm,
    }
    for name, make in steps.items():
        path, err = art / name, art / (name + ".error")
        if path.exists() and not force:
            status[name] = "cached"
            continue
        err.unlink(missing_ok=True)
        try:
            make(path)
            status[name] = "ok"
        except Exception as e:  # noqa: BLE001 - recorded, the cells needing it are skipped
            path.unlink(missing_ok=True)
            msg = f"{type(e).__name__}: {e}"[:2000]
            err.write_text(msg + "\n" + traceback.format_exc(limit=-4)[-2000:])
            status[name] = "error: " + msg
    return status
