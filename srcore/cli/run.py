"""``srcore run MODEL``: run a model once on given (or random) inputs."""
from __future__ import annotations

from typing import Any, Iterator

NAME = "run"
HELP = "run a model on inputs (.npy files, or random inputs that fit its input specs)"

#: values shown per output in the text report and in the JSON ``head``
HEAD = 6


def configure_parser(parser) -> None:
    from ._common import add_model_arguments
    from .flags import non_negative_int
    from .output import add_format_argument

    add_model_arguments(parser)
    parser.add_argument("-i", "--input", action="append", metavar="NAME=FILE.npy", dest="inputs",
                        help="an input (repeatable; a quantized one as the .npz that -o writes); inputs not "
                             "given are random")
    parser.add_argument("-o", "--output", metavar="OUT.npz", help="write the outputs to an .npz file ('-': "
                        "stdout, the report then goes to stderr); nested outputs are flattened to NAME.0.1")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed of the random inputs")
    parser.add_argument("--dequantize", action="store_true",
                        help="write quantized outputs as their float32 values (default: their integers plus "
                             "NAME.qdtype, NAME.scale, NAME.zero_point[, NAME.axis])")
    add_format_argument(parser, what="the outputs")


def flatten(name: str, value: Any) -> Iterator[tuple[str, Any]]:
    """``(key, leaf)`` for every leaf of a (nested) output: tuples and lists become ``name.0``,
    ``name.1.0``, ...; dicts ``name.key``."""
    if isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from flatten(f"{name}.{i}", v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from flatten(f"{name}.{k}", v)
    else:
        yield name, value


def describe(name: str, value: Any) -> dict:
    """One leaf of the JSON report: name, kind, dtype, shape, the first values, non-finite count."""
    import numpy as np

    if isinstance(value, np.ndarray) or (np.isscalar(value) and not isinstance(value, (str, bytes))):
        arr = np.asarray(value)
        nonfinite = int(arr.size - np.isfinite(arr).sum()) if arr.dtype.kind in "fc" else 0
        return {"name": name, "kind": "tensor" if isinstance(value, np.ndarray) else "scalar",
                "dtype": str(arr.dtype), "shape": list(arr.shape), "head": arr.reshape(-1)[:HEAD].tolist(),
                "nonfinite": nonfinite}
    return {"name": name, "kind": "none" if value is None else type(value).__name__, "dtype": None,
            "shape": None, "head": [] if value is None else [str(value)], "nonfinite": 0}


def run(args) -> int:
    import numpy as np

    from ._common import load_model, make_module, parse_inputs
    from .output import check_output_path, claim_stdout, open_output, print_json, report_stream

    check_output_path(args.output, "-o")
    claim_stdout(args, ("-o", args.output))
    out_stream = report_stream(args.output)
    model = load_model(args.model)
    sm = make_module(args, model)
    inputs = parse_inputs(sm, args.inputs, args.seed)
    out = sm(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    names = list(getattr(model, "output_names", ()) or ())
    names += [f"output{i}" for i in range(len(names), len(outs))]
    from ..qarray import QuantizedArray, npz_entries

    if args.dequantize:
        outs = tuple(o.dequantize() if isinstance(o, QuantizedArray) else o for o in outs)
    leaves = [leaf for name, o in zip(names, outs) for leaf in flatten(name, o)]
    _warn_nonfinite(args.model, leaves)
    if args.format == "text":
        for name, o in zip(names, outs):
            if isinstance(o, QuantizedArray):
                flat = o.int_repr().reshape(-1)[:HEAD]
                print(f"{name}: {o.qdtype}{list(o.shape)} ({o.qparams.describe()[:80]})  "
                      f"{np.array2string(flat, separator=', ')}{' ...' if o.size > HEAD else ''}", file=out_stream)
            elif isinstance(o, np.ndarray):
                flat = o.reshape(-1)[:HEAD]
                print(f"{name}: {o.dtype}{list(o.shape)}  {np.array2string(flat, precision=5, separator=', ')}"
                      f"{' ...' if o.size > HEAD else ''}", file=out_stream)
            else:
                print(f"{name}: {o!r}", file=out_stream)
    saved = None
    if args.output:
        arrays = {}
        for k, v in leaves:   # a quantized output: its integers and parameters (no pickle)
            if isinstance(v, QuantizedArray):
                arrays.update(npz_entries(k, v))
            elif v is not None and not _is_object(v):
                arrays[k] = np.asarray(v)
        with open_output(args.output, "-o", binary=True) as f:
            np.savez(f, **arrays)
        saved = sorted(arrays)
        if args.format == "text":
            skipped = [k for k, _ in leaves if k not in arrays]
            print(f"wrote {args.output}" + (f" (not saved: {', '.join(skipped)}, not arrays)" if skipped else ""),
                  file=out_stream)
    if args.format == "json":
        print_json({"model": args.model, "outputs": [describe(k, v) for k, v in leaves],
                    "output_file": args.output, "saved": saved})
    return 0


def _warn_nonfinite(model: str, leaves) -> None:
    """NaN or inf in an output is worth a warning: a damaged weight reads as one (``srcore check``)."""
    import logging

    import numpy as np

    for key, leaf in leaves:
        if isinstance(leaf, np.ndarray) and leaf.dtype.kind in "fc" and not np.isfinite(leaf).all():
            bad = int(leaf.size - np.isfinite(leaf).sum())
            logging.getLogger("srcore.cli").warning(
                "output %s has %d non-finite value(s) of %d; 'srcore check %s' verifies the weights", key, bad,
                leaf.size, model)


def _is_object(value: Any) -> bool:
    import numpy as np

    try:
        return np.asarray(value).dtype == object
    except Exception:  # ragged or exotic: not an array
        return True
