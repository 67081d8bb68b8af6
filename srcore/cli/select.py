"""``srcore select MODEL... -o selection.yaml``: a selective build of the registry for some models."""
from __future__ import annotations

NAME = "select"
HELP = ("record the op overloads, dtypes, kernels and rules some models use, for a selective build "
        "(SRCORE_SELECTION=FILE or Options(selection=FILE))")


def configure_parser(p) -> None:
    from ._common import _backend_list

    p.add_argument("models", metavar="MODEL", nargs="+", help="models (.srm; also .pt, .pt2, .ir) the build must run")
    p.add_argument("-o", "--output", metavar="FILE", required=True, help="the selection file to write ('-': stdout)")
    p.add_argument("--backend", "--backends", action="extend", type=_backend_list, metavar="B[,B...]",
                   dest="backends", help="backend priority list the models will be loaded with (default: cpu)")
    p.add_argument("--no-optimize", action="store_true", help="the models will be loaded with optimize=False")
    from .output import add_format_argument

    add_format_argument(p, what="the summary")


def run(args) -> int:
    from ..plugin.selection import collect, write_selection
    from ..runtime.options import Options
    from ..runtime.static_module import StaticModule
    from ._common import load_model
    from .output import check_output_path, claim_stdout, print_json, report_stream

    claim_stdout(args, ("-o", args.output))
    check_output_path(args.output, "-o")
    backends = tuple(args.backends) if args.backends else ("cpu",)
    modules = [StaticModule(load_model(m), options=Options(optimize=not args.no_optimize), backends=backends)
               for m in args.models]
    sel = collect(modules, models=args.models)
    write_selection(sel, args.output)
    summary = {"output": args.output, "models": list(args.models), "backends": list(backends),
               "ops": len(sel.ops), "kernels": len({(k.op, k.backend, k.kind, k.impl) for o in sel.ops
                                                    for k in o.kernels}),
               "plugins": sorted(sel.plugins)}
    out = report_stream(args.output)
    if args.format == "json":
        print_json(summary)
    else:
        print(f"{args.output}: {summary['ops']} op overloads, {summary['kernels']} kernels from "
              f"{', '.join(summary['plugins'])}, for {len(args.models)} model(s) on {', '.join(backends)}", file=out)
    return 0
