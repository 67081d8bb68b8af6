"""``srcore convert SRC -o MODEL.srm``: a TorchScript (``.pt``), torch.export (``.pt2``) or ONNX (``.onnx``)
file -> ``.srm``."""
from __future__ import annotations

import os
import time

from ..errors import ConversionError

NAME = "convert"
HELP = "convert a torch.jit.save'd .pt, a torch.export.save'd .pt2 or an .onnx file to a .srm model file"

_FRONTENDS = {".pt": "torchscript", ".pth": "torchscript", ".jit": "torchscript", ".pt2": "export", ".onnx": "onnx"}


def configure_parser(p) -> None:
    p.add_argument("src", metavar="SRC", help="model file: .pt (TorchScript), .pt2 (torch.export) or .onnx")
    p.add_argument("-o", "--output", metavar="MODEL.srm", help="output file (default: SRC with suffix .srm; "
                   "'-': stdout, the summary then goes to stderr)")
    p.add_argument("--frontend", choices=("auto", "torchscript", "export", "onnx"), default="auto",
                   help="how to read SRC (default: from its suffix)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=DTYPE:D0,D1,...", type=input_item,
                   help="TorchScript only: the dtype and shape of an input, in order, e.g. x=float32:1,64 "
                        "(a saved TorchScript file does not record them)")
    p.add_argument("--dynamic", action="append", default=[], metavar="INPUT:DIM=NAME", type=dynamic_item,
                   help="TorchScript only: make dim DIM of INPUT symbolic, e.g. x:0=batch (repeatable)")
    from .output import add_format_argument

    add_format_argument(p, what="the summary")


#: torch dtypes ``--input`` accepts (by their torch attribute name)
INPUT_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


def dynamic_item(text: str) -> tuple[str, int, str]:
    """``--dynamic x:0=batch`` -> ``("x", 0, "batch")`` (an argparse type: a bad value is a usage error)."""
    import argparse

    name, _, rest = text.partition(":")
    dim, _, sym = rest.partition("=")
    try:
        index = int(dim)
    except ValueError:
        index = -1
    if not name or index < 0 or not sym.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected INPUT:DIM=NAME with DIM >= 0, e.g. x:0=batch")
    return name, index, sym.strip()


def input_item(text: str) -> tuple[str, str, tuple[int, ...]]:
    """``--input x=float32:1,64`` -> ``("x", "float32", (1, 64))`` (an argparse type)."""
    import argparse

    name, _, rest = text.partition("=")
    dtype, _, dims = rest.partition(":")
    try:
        shape = tuple(int(d) for d in dims.split(",") if d.strip())
    except ValueError:
        shape = (-1,)
    if not name or any(d < 0 for d in shape):
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=DTYPE:D0,D1,... with dims >= 0, "
                                         "e.g. x=float32:1,64")
    if dtype not in INPUT_DTYPES:
        raise argparse.ArgumentTypeError(f"{text!r}: unknown dtype {dtype!r}; expected one of "
                                         f"{', '.join(INPUT_DTYPES)}")
    return name, dtype, shape


def parse_dynamic(items) -> dict[str, dict[int, str]]:
    """``--dynamic`` values (strings or :func:`dynamic_item` tuples) -> ``{input: {dim: name}}``."""
    out: dict[str, dict[int, str]] = {}
    for item in items:
        name, dim, sym = dynamic_item(item) if isinstance(item, str) else item
        out.setdefault(name, {})[dim] = sym
    return out


def parse_inputs(items):
    """``--input`` values (strings or :func:`input_item` tuples) -> example tensors (zeros), in order."""
    if not items:
        return None
    from ..frontends._torch_common import import_torch

    torch = import_torch()
    specs = [input_item(i) if isinstance(i, str) else i for i in items]
    return tuple(torch.zeros(shape, dtype=getattr(torch, dtype)) for _name, dtype, shape in specs)


def output_path(src: str, output: str | None) -> str:
    """Where ``convert`` writes: ``output``, else SRC with the suffix ``.srm``."""
    return output or os.path.splitext(src)[0] + ".srm"


def pick_frontend(src: str, frontend: str = "auto") -> str:
    """``torchscript`` or ``export``, from ``frontend`` or the suffix of ``src`` (checked before any work)."""
    if not os.path.exists(src):
        raise ConversionError(f"{src}: no such file")
    if os.path.isdir(src):
        raise ConversionError(f"{src}: is a directory, not a model file")
    if frontend == "auto":
        frontend = _FRONTENDS.get(os.path.splitext(src)[1].lower())
        if frontend is None:
            raise ConversionError(f"{src}: unknown suffix; use --frontend torchscript|export|onnx "
                                  f"(known: {', '.join(sorted(_FRONTENDS))})")
    return frontend


def convert(src: str, output: str | None = None, frontend: str = "auto", dynamic=None, inputs=None):
    """Convert ``src`` and save it (``output`` ``-``: to stdout); returns ``(model, output path)``."""
    from ..progress import bar

    frontend = pick_frontend(src, frontend)
    with bar(2, f"convert {os.path.basename(src)}") as b:
        model = _read(src, frontend, dynamic, inputs)
        b.update()
        output = output_path(src, output)
        _save(model, output)
        b.update()
    return model, output


def _save(model, output: str) -> None:
    from .. import save
    from .output import STDOUT, open_output

    producer = model.metadata.get("producer")
    if output != STDOUT:
        try:
            save(model, output, producer=producer)
        except OSError as exc:
            from .errors import OutputPathError

            raise OutputPathError(f"-o {output}: cannot write: {exc.strerror or exc}") from None
        return
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="srcore-convert-") as tmp:  # save() writes a file atomically
        path = os.path.join(tmp, "model.srm")
        save(model, path, producer=producer)
        with open(path, "rb") as f, open_output(STDOUT, "-o", binary=True) as out:
            shutil.copyfileobj(f, out)


def _read(src: str, frontend: str, dynamic, inputs):
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
    return model


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
    from .output import check_output_path, claim_stdout, print_json, report_stream

    t0 = time.perf_counter()
    check_output_path(output_path(args.src, args.output), "-o")
    claim_stdout(args, ("-o", args.output))
    pick_frontend(args.src, args.frontend)
    dynamic, inputs = parse_dynamic(args.dynamic), parse_inputs(args.input)
    model, out = convert(args.src, args.output, args.frontend, dynamic, inputs)
    nbytes = sum(int(a.nbytes) for a in model.params.values())
    summary = {"output": out, "frontend_source": args.src, "params": len(model.params), "param_bytes": nbytes,
               "inputs": [s.to_json() for s in model.input_specs], "outputs": list(model.output_names),
               "required_ops": model.required_ops(), "seconds": round(time.perf_counter() - t0, 3)}
    if args.format == "json":
        print_json(summary)
    else:
        ins = ", ".join(f"{s.name}: {s.dtype}{list(s.shape) if s.shape is not None else '[?]'}"
                        for s in model.input_specs)
        print(f"wrote {out}: {len(model.params)} params ({nbytes / 1e6:.1f} MB), inputs ({ins}), "
              f"{len(model.required_ops())} op kinds, {summary['seconds']} s", file=report_stream(args.output))
    return 0
