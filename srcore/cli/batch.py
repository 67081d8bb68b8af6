"""``srcore batch MODEL INPUT... -o OUTPUT --on local|ray|dask``: files in, files out (docs/scale-out.md)."""
from __future__ import annotations

import os

NAME = "batch"
HELP = "run a model over Parquet or .npz files, here or on a Ray or Dask cluster; output rows in input order"


def configure_parser(parser) -> None:
    from ._common import add_model_arguments
    from .flags import positive_float, positive_int
    from .output import add_format_argument

    add_model_arguments(parser)
    parser.add_argument("inputs", nargs="+", metavar="INPUT",
                        help="input files (.parquet, .npz), directories of them, or glob patterns, in order")
    parser.add_argument("-o", "--output", required=True, metavar="OUTPUT",
                        help="an output file (.parquet, .npz; '-': Parquet on standard output), or a directory "
                        "(ending in '/' or existing) for one output file per input file")
    parser.add_argument("--on", choices=("local", "ray", "dask"), default="local",
                        help="where to run: this process (a RuntimePool), Ray or Dask (default: local)")
    parser.add_argument("--address", metavar="ADDR",
                        help="a running cluster: Ray HOST:6379, ray://HOST:10001 or auto; Dask tcp://HOST:8786 "
                        "(default: a local cluster started for the job)")
    parser.add_argument("--workers", type=positive_int, metavar="N",
                        help="workers: runtimes (local), actors (ray), worker processes of a local Dask cluster "
                        "(default: 1 local, else one per CPU)")
    parser.add_argument("--batch-size", type=positive_int, default=256, metavar="B",
                        help="rows per model call (default 256)")
    parser.add_argument("--input-column", action="append", default=[], type=column_spec, metavar="NAME=COL[,COL...]",
                        help="the column of model input NAME (default: the column named NAME); several columns "
                        "are stacked as the features of a rank-2 input")
    parser.add_argument("--output-column", action="append", default=[], type=column_spec, metavar="NAME=COL[,COL...]",
                        help="the column of model output NAME (default: every output, named as the output); "
                        "several columns spread a rank-2 output")
    parser.add_argument("--output-format", choices=("parquet", "npz"),
                        help="output format (default: the output's suffix; per input file: the input's format)")
    parser.add_argument("--transfer", choices=("copy", "path"),
                        help="how the model reaches cluster workers: copy (sent once per node, default) or path "
                        "(every worker reads MODEL at this path: a shared filesystem)")
    parser.add_argument("--timeout", type=positive_float, metavar="S",
                        help="fail when the oldest running batch takes longer than S seconds (default: no limit)")
    add_format_argument(parser, what="the closing report")


def column_spec(text: str) -> tuple[str, str | list[str]]:
    """``NAME=COL`` or ``NAME=COL1,COL2,...`` (an argparse type: a bad one is a usage error)."""
    import argparse

    name, sep, cols = text.partition("=")
    parts = [c.strip() for c in cols.split(",")]
    if not sep or not name or not all(parts):
        raise argparse.ArgumentTypeError(f"expected NAME=COLUMN or NAME=COL1,COL2,..., got {text!r}")
    return name, parts[0] if len(parts) == 1 else parts


def run(args) -> int:
    from ..progress import bar
    from ..scaleout.job import BatchJob, make_engine, run_job
    from ._common import load_model, make_options
    from .errors import UsageError
    from .output import check_output_path, claim_stdout, print_json, report_stream

    claim_stdout(args, ("-o", args.output))
    if args.on == "local" and args.address:
        raise UsageError("--address names a Ray or Dask cluster: use it with --on ray or --on dask")
    if args.transfer is not None and args.on == "local":
        raise UsageError("--transfer says how cluster workers get the model: use it with --on ray or --on dask")
    if not (args.output.endswith(("/", os.sep)) or os.path.isdir(args.output)):
        check_output_path(args.output, "-o", suffixes=() if args.output_format else (".parquet", ".pq", ".npz"))
    # a .srm goes to the workers as it is; other formats are converted here, then sent as a .srm
    model = args.model if args.model.lower().endswith(".srm") else load_model(args.model)
    job = BatchJob.plan(model, args.inputs, args.output,
                        input_columns=dict(args.input_column) or None, output_columns=dict(args.output_column) or None,
                        batch_size=args.batch_size, options=make_options(args), output_format=args.output_format)
    engine = make_engine(args.on, address=args.address, workers=args.workers, transfer=args.transfer or "copy",
                         model=job.model)
    with bar(job.rows, f"batch on {args.on}", unit="row") as b:
        report = run_job(job, engine, on_rows=b.update, timeout=args.timeout)
    rate = report.rows / report.seconds if report.seconds > 0 else 0.0
    if args.format == "json":
        print_json({"model": args.model, "rows": report.rows, "batches": report.units, "outputs": list(report.outputs),
                    "seconds": round(report.seconds, 4), "start_seconds": round(report.start_seconds, 4),
                    "rows_per_second": round(rate, 2), "on": report.engine, "workers": report.workers})
    else:
        dest = report.outputs[0] if len(report.outputs) == 1 else f"{len(report.outputs)} files in {args.output}"
        print(f"{report.rows} rows in {report.units} batches on {report.engine} ({report.workers} workers): "
              f"{report.seconds:.2f} s, {rate:.1f} rows/s -> {'standard output' if dest == '-' else dest}",
              file=report_stream(args.output))
    return 0
