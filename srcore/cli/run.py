"""``srcore run MODEL``: run a model once on given (or random) inputs."""
from __future__ import annotations

NAME = "run"
HELP = "run a model on inputs (.npy files, or random inputs that fit its input specs)"


def configure_parser(parser) -> None:
    from ._common import add_model_arguments

    add_model_arguments(parser)
    parser.add_argument("-i", "--input", action="append", metavar="NAME=FILE.npy", dest="inputs",
                        help="an input (repeatable; a quantized one as the .npz that -o writes); inputs not "
                             "given are random")
    parser.add_argument("-o", "--output", metavar="OUT.npz",
                        help="write the outputs to an .npz file (a quantized output as its integers plus "
                             "NAME.qdtype, NAME.scale, NAME.zero_point[, NAME.axis])")
    parser.add_argument("--dequantize", action="store_true",
                        help="write quantized outputs as their float32 values instead")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")


def run(args) -> int:
    import numpy as np

    from ._common import load_model, make_module, parse_inputs

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
    for name, o in zip(names, outs):
        if isinstance(o, QuantizedArray):
            flat = o.int_repr().reshape(-1)[:6]
            print(f"{name}: {o.qdtype}{list(o.shape)} ({o.qparams.describe()[:80]})  "
                  f"{np.array2string(flat, separator=', ')}{' ...' if o.size > 6 else ''}")
        elif isinstance(o, np.ndarray):
            flat = o.reshape(-1)[:6]
            print(f"{name}: {o.dtype}{list(o.shape)}  {np.array2string(flat, precision=5, separator=', ')}"
                  f"{' ...' if o.size > 6 else ''}")
        else:
            print(f"{name}: {o!r}")
    if args.output:
        entries: dict = {}
        for n, o in zip(names, outs):
            entries.update(npz_entries(n, o) if isinstance(o, QuantizedArray) else {n: np.asarray(o)})
        np.savez(args.output, **entries)
        print(f"wrote {args.output}")
    return 0
