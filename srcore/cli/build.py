"""``srcore build MODEL -o MODEL.engine.srm``: the model with its engines' serialized plans."""
from __future__ import annotations

import os
import time

NAME = "build"
HELP = "build a model's engines (e.g. trt_like) and write the model with their plans: a later load rebuilds nothing"


def configure_parser(parser) -> None:
    from ._common import add_model_arguments
    from .output import add_format_argument

    add_model_arguments(parser)
    parser.add_argument("-o", "--output", metavar="OUT.srm", required=True,
                        help="the .srm file to write: the model and its engines' plans")
    add_format_argument(parser, what="the summary")


def run(args) -> int:
    from ..errors import SrcoreError
    from ._common import load_model, make_module
    from .output import check_output_path, print_json, report_stream

    if args.output == "-":
        from .errors import UsageError

        raise UsageError("-o -: an engine file is written to a file (it is mapped when loaded)")
    check_output_path(args.output, "-o")
    if not args.backends:
        from ..plugin.manager import get_plugin_manager

        engines = sorted(get_plugin_manager().registry.engine_builders)
        if not engines:
            raise SrcoreError("no engine backend is installed (srcore plugins lists them): nothing to build")
        args.backends = [*engines, "cpu"]
    t0 = time.perf_counter()
    model = load_model(args.model)
    sm = make_module(args, model)
    if sm.partition is None or not sm.partition.engines:
        exc = SrcoreError(f"{args.model}: no segment went into an engine on {', '.join(sm.options.backends)}: "
                          f"nothing to build")
        exc.hint = "srcore inspect MODEL --partition BACKEND shows what each node needs"
        raise exc
    written = sm.save(args.output)
    seconds = time.perf_counter() - t0
    engines = [{"name": s.name, "backend": s.backend, "nodes": len(s.ops), "serialized": s.name in written}
               for s in sm.partition.engines]
    if args.format == "json":
        print_json({"model": args.model, "output": args.output, "engines": engines,
                    "bytes": os.path.getsize(args.output), "seconds": seconds})
        return 0
    out = report_stream()
    for s in sm.partition.engines:
        print(f"{s.name} [{s.backend}], {len(s.ops)} nodes"
              + ("" if s.name in written else " (cannot be serialized: built at every load)"), file=out)
        for line in s.description.splitlines():
            if line.startswith(("plan for", "no plan for")):
                print(f"  {line}", file=out)
    print(f"wrote {args.output} ({os.path.getsize(args.output):,} bytes) in {seconds:.2f} s", file=out)
    return 0
