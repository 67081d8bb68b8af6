"""``srcore batch MODEL INPUT... -o OUTPUT --on local|ray|dask``: files in, files out (docs/scale-out.md)."""
from __future__ import annotations

import json
import sys

NAME = "batch"
HELP = "run a model over Parquet or .npz files, here or on a Ray or Dask cluster; output rows in input order"


def configure_parser(parser) -> None:
    from ._common import add_model_arguments

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
    parser.add_argument("--workers", type=_positive, metavar="N",
                        help="workers: runtimes (local), actors (ray), worker processes of a local Dask cluster "
                        "(default: 1 local, else one per CPU)")
    parser.add_argument("--batch-size", type=_positive, default=256, metavar="B", help="rows per model call (default 256)")
    parser.add_argument("--input-column", action="append", default=[], type=column_spec, metavar="NAME=COL[,COL...]",
                        help="the column of model input NAME (default: the column named NAME); several columns "
                        "are stacked as the features of a rank-2 input")
    parser.add_argument("--output-column", action="append", default=[], type=column_spec, metavar="NAME=COL[,COL...]",
                        help="the column of model output NAME (default: every output, named as the output); "
                        "several columns spread a rank-2 output")
    parser.add_argument("--output-format", choices=("parquet", "npz"),
                        help="output format (default: the output's suffix; per input file: the input's format)")
    parser.add_argument("--transfer", choices=("copy", "path"), default="copy",
                        help="how the model reaches cluster workers: copy (sent once per node, default) or path "
                        "(every worker reads MODEL at this path: a shared filesystem)")
    parser.add_argument("--timeout", type=float, metavar="S",
                        help="fail when the oldest running batch takes longer than S seconds (default: no limit)")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="the closing report: one line, or a JSON object on standard output")


def _positive(text: str) -> int:
    import argparse

    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return n


def column_spec(text: str) -> tuple[str, str | list[str]]:
    """``NAME=COL`` or ``NAME=COL1,COL2,...`` (an argparse type: a bad one is a usage error)."""
    import argparse

    name, sep, cols = text.partition("=")
    parts = [c.strip() for c in cols.split(",")]
    if not sep or not name or not all(parts):
        raise argparse.ArgumentTypeError(f"expected NAME=COLUMN or NAME=COL1,COL2,..., got {text!r}")
    return name, parts[0] if len(parts) == 1 else parts


def run(args) -> int:
    from ..errors import SrcoreError
    from ..scaleout.job import BatchJob, make_engine, run_job
    from ._common import load_model, make_options

    if args.output == "-" and args.format == "json":
        raise SrcoreError("-o - writes the output to standard output: the JSON report (--format json) needs it")
    if args.on == "local" and args.address:
        raise SrcoreError("--address names a Ray or Dask cluster: use it with --on ray or --on dask")
    # a .srm goes to the workers as it is; other formats are converted here, then sent as a .srm
    model = args.model if args.model.lower().endswith(".srm") else load_model(args.model)
    job = BatchJob.plan(model, args.inputs, args.output,
                        input_columns=dict(args.input_column) or None, output_columns=dict(args.output_column) or None,
                        batch_size=args.batch_size, options=make_options(args), output_format=args.output_format)
    engine = make_engine(args.on, address=args.address, workers=args.workers, transfer=args.transfer, model=job.model)
    with _RowBar(job.rows, enabled=args.output != "-" and args.format != "json") as bar:
        report = run_job(job, engine, on_rows=bar.update, timeout=args.timeout)
    rate = report.rows / report.seconds if report.seconds > 0 else 0.0
    if args.format == "json":
        json.dump({"rows": report.rows, "batches": report.units, "outputs": list(report.outputs),
                   "seconds": round(report.seconds, 4), "start_seconds": round(report.start_seconds, 4),
                   "rows_per_second": round(rate, 2), "on": report.engine,
                   "workers": report.workers}, sys.stdout)
        print()
    else:
        out = sys.stderr if args.output == "-" else sys.stdout
        dest = report.outputs[0] if len(report.outputs) == 1 else f"{len(report.outputs)} files in {args.output}"
        print(f"{report.rows} rows in {report.units} batches on {report.engine} ({report.workers} workers): "
              f"{report.seconds:.2f} s, {rate:.1f} rows/s -> {dest}", file=out)
    return 0


class _RowBar:
    """A progress bar over rows on a terminal (tqdm), nothing elsewhere."""

    def __init__(self, total: int, enabled: bool = True):
        self._bar = None
        if enabled and sys.stderr.isatty():
            try:
                from tqdm import tqdm
            except ImportError:
                return
            self._bar = tqdm(total=total, unit="row", desc="batch", file=sys.stderr, leave=False,
                             dynamic_ncols=True, mininterval=0.2)

    def update(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.close()
