"""``srcore convert SRC -o MODEL.srm``: a TorchScript (``.pt``), torch.export (``.pt2``) or ONNX (``.onnx``)
file -> ``.srm``."""
from __future__ import annotations

import json
import os
import time

from ..errors import ConversionError

NAME = "convert"
HELP = "convert a torch.jit.save'd .pt, a torch.export.save'd .pt2 or an .onnx file to a .srm model file"

_FRONTENDS = {".pt": "torchscript", ".pth": "torchscript", ".jit": "torchscript", ".pt2": "export", ".onnx": "onnx"}


def configure_parser(p) -> None:
    p.add_argument("src", metavar="SRC", help="model file: .pt (TorchScript), .pt2 (torch.export) or .onnx")
    p.add_argument("-o", "--output", metavar="MODEL.srm", help="output file (default: SRC with suffix .srm)")
    p.add_argument("--frontend", choices=("auto", "torchscript", "export", "onnx"), default="auto",
                   help="how to read SRC (default: from its suffix)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=DTYPE:D0,D1,...",
                   help="TorchScript only: the dtype and shape of an input, in order, e.g. x=float32:1,64 "
                        "(a saved TorchScript file does not record them)")
    p.add_argument("--dynamic", action="append", default=[], metavar="INPUT:DIM=NAME",
                   help="TorchScript only: make dim DIM of INPUT symbolic, e.g. x:0=batch (repeatable)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="summary format")


def parse_dynamic(items: list[str]) -> dict[str, dict[int, str]]:
    out: dict[str, dict[int, str]] = {}
    for item in items:
        try:
            name, rest = item.split(":", 1)
            dim, sym = rest.split("=", 1)
            out.setdefault(name, {})[int(dim)] = sym
        except ValueError:
            raise ConversionError(f"--dynamic {item!r}: expected INPUT:DIM=NAME, e.g. x:0=batch") from None
    return out


def parse_inputs(items: list[str]):
    """``["x=float32:1,64"]`` -> example tensors (zeros) in that order."""
    if not items:
        return None
    from ..frontends._torch_common import import_torch

    torch = import_torch()
    out = []
    for item in items:
        try:
            _name, rest = item.split("=", 1)
            dtype, _, dims = rest.partition(":")
            shape = [int(d) for d in dims.split(",") if d.strip()]
            out.append(torch.zeros(shape, dtype=getattr(torch, dtype)))
        except (ValueError, AttributeError, TypeError):
            raise ConversionError(f"--input {item!r}: expected NAME=DTYPE:D0,D1,..., e.g. x=float32:1,64") from None
    return tuple(out)


def convert(src: str, output: str | None = None, frontend: str = "auto", dynamic=None, inputs=None):
    """Convert ``src`` and save it; returns ``(model, output path)``."""
    from .. import save

    if not os.path.exists(src):
        raise ConversionError(f"{src}: no such file")
    if frontend == "auto":
        frontend = _FRONTENDS.get(os.path.splitext(src)[1].lower())
        if frontend is None:
            raise ConversionError(f"{src}: unknown suffix; use --frontend torchscript|export|onnx "
                                  f"(known: {', '.join(sorted(_FRONTENDS))})")
    if frontend == "torchscript":
        from ..frontends.torchscript import from_torchscript

        model = from_torchscript(src, inputs, dynamic_dims=dynamic or None)
        _require_specs(src, model)
    else:
        if dynamic or inputs:
            raise ConversionError(f"--input/--dynamic apply to TorchScript; a .{'pt2' if frontend == 'export' else 'onnx'}"
                                  f" file carries its input shapes")
        if frontend == "onnx":
            from ..frontends.onnx_import import from_onnx

            model = from_onnx(src)
        else:
            from ..frontends.torch_export import from_torch

            model = from_torch(src)
    output = output or os.path.splitext(src)[0] + ".srm"
    save(model, output, producer=model.metadata.get("producer"))
    return model, output


def _require_specs(src: str, model) -> None:
    """A saved scripted module records no input dtypes and shapes: a model without them would fail
    at run time deep inside some kernel, so conversion fails here and says how to give them."""
    missing = [s.name for s in model.input_specs if s.dtype is None or s.shape is None]
    if missing:
        names = [s.name for s in model.input_specs]
        raise ConversionError(
            f"{src}: the file does not record the dtype and shape of input(s) {', '.join(missing)}; give every "
            f"tensor input, in order ({', '.join(names)}), with --input NAME=DTYPE:D0,D1,..., e.g. --input "
            f"{names[0]}=float32:1,3,224,224 (and --dynamic {names[0]}:0=batch for a symbolic dim)")


def run(args) -> int:
    t0 = time.perf_counter()
    model, out = convert(args.src, args.output, args.frontend, parse_dynamic(args.dynamic),
                         parse_inputs(args.input))
    nbytes = sum(int(a.nbytes) for a in model.params.values())
    summary = {"output": out, "frontend_source": args.src, "params": len(model.params), "param_bytes": nbytes,
               "inputs": [s.to_json() for s in model.input_specs], "outputs": list(model.output_names),
               "required_ops": model.required_ops(), "seconds": round(time.perf_counter() - t0, 3)}
    if args.format == "json":
        print(json.dumps(summary, indent=2))
    else:
        ins = ", ".join(f"{s.name}: {s.dtype}{list(s.shape) if s.shape is not None else '[?]'}"
                        for s in model.input_specs)
        print(f"wrote {out}: {len(model.params)} params ({nbytes / 1e6:.1f} MB), inputs ({ins}), "
              f"{len(model.required_ops())} op kinds, {summary['seconds']} s")
    return 0
