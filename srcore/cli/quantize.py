"""``srcore quantize MODEL.srm --calibration DATA.npz -o OUT.srm``: post-training static quantization
(:func:`srcore.quantize`) of a float model, with a per-node report."""
from __future__ import annotations

import os
import time

NAME = "quantize"
HELP = "quantize a float .srm model (int8 weights, uint8 activations) with calibration data"


def configure_parser(p) -> None:
    from ..quantization.observers import HISTOGRAM_METHODS, OBSERVERS
    from .flags import float_in, positive_int
    from .output import add_format_argument

    p.add_argument("model", metavar="MODEL.srm", help="the float model")
    p.add_argument("--calibration", required=True, metavar="DATA.npz",
                   help="calibration samples: one array per model input, named as the input, samples along axis 0")
    p.add_argument("-o", "--output", metavar="OUT.srm", help="the quantized model (default: MODEL.int8.srm; "
                   "'-': stdout, the summary then goes to stderr)")
    p.add_argument("--report", metavar="REPORT.json", help="write the per-node report as JSON ('-': stdout)")
    p.add_argument("--observer", choices=OBSERVERS, default="histogram",
                   help="how activation ranges are chosen (default histogram)")
    p.add_argument("--method", choices=HISTOGRAM_METHODS, default="percentile",
                   help="histogram observer: clip by KL divergence (entropy) or by --percentile (default)")
    p.add_argument("--percentile", type=float_in(0.0, 100.0, low_open=True), default=99.99,
                   help="histogram observer, percentile method: the percentile of |x| kept (default 99.99)")
    p.add_argument("--averaging-constant", type=float_in(0.0, 1.0, low_open=True), default=0.01,
                   help="moving_average observer: weight of each new batch (default 0.01)")
    p.add_argument("--batch-size", type=positive_int, default=32, help="calibration batch size (default 32)")
    p.add_argument("--keep-float", action="append", default=[], metavar="OP_OR_NODE",
                   help="keep an op (aten::linear or linear) or a node (its output name) in float; repeatable")
    p.add_argument("--full-range", action="store_true",
                   help="activations on all 8 bits (0..255) instead of 7 (0..127, the default, as torch's x86 "
                        "qconfigs: the AVX2 int8 GEMM then runs once per layer)")
    add_format_argument(p, what="the summary")


def output_path(model: str, output: str | None) -> str:
    return output or os.path.splitext(model)[0] + ".int8.srm"


def run(args) -> int:
    from .. import load, quantize
    from ..errors import SrcoreError
    from .convert import _save
    from .output import check_output_path, claim_stdout, print_json, report_stream, write_json

    t0 = time.perf_counter()
    out = output_path(args.model, args.output)
    check_output_path(out, "-o", suffixes=(".srm",))
    check_output_path(args.report, "--report", suffixes=(".json",))
    claim_stdout(args, ("-o", args.output), ("--report", args.report))
    if not os.path.exists(args.calibration):
        raise SrcoreError(f"--calibration {args.calibration}: no such file")
    model = load(args.model)
    qmodel, report = quantize(model, args.calibration, observer=args.observer, histogram_method=args.method,
                              percentile=args.percentile, averaging_constant=args.averaging_constant,
                              keep_float=args.keep_float, batch_size=args.batch_size, with_report=True,
                              reduce_range=not args.full_range)
    _save(qmodel, out)
    if args.report is not None:
        write_json(report.to_json(), args.report, "--report")
    float_bytes = sum(int(a.nbytes) for a in model.params.values())
    q_bytes = sum(int(a.nbytes) for a in qmodel.params.values())
    counts = {s: sum(n.status == s for n in report.nodes) for s in ("quantized", "fused", "pass_through", "float")}
    kept = [{"name": n.name, "op": n.op, "reason": n.reason} for n in report.nodes if n.status == "float"]
    summary = {"output": out, "model": args.model, "report": args.report, "observer": args.observer,
               "calibration_batches": report.calibration_batches,
               "calibration_samples": report.calibration_samples, "nodes": counts, "kept_float": kept,
               "float_param_bytes": float_bytes, "quantized_param_bytes": q_bytes, "outputs": report.outputs,
               "seconds": round(time.perf_counter() - t0, 3)}
    if args.format == "json":
        print_json(summary)
        return 0
    stream = report_stream(args.output, args.report)
    ratio = q_bytes / float_bytes if float_bytes else 0.0
    print(f"wrote {out}: {counts['quantized']} ops quantized ({counts['fused']} relus fused, "
          f"{counts['pass_through']} ops on quantized values), {counts['float']} kept float; parameters "
          f"{float_bytes / 1e3:.0f} kB -> {q_bytes / 1e3:.0f} kB ({ratio:.2f}x); calibrated on "
          f"{report.calibration_samples} samples ({report.calibration_batches} batches, observer {args.observer})",
          file=stream)
    for o in report.outputs:
        print(f"  output {o['name']}: max |error| {o['max_abs_error']:.3g}, relative rms error "
              f"{o['rel_rms_error']:.3g} (on the calibration data)", file=stream)
    for k in kept:
        print(f"  float: %{k['name']} ({k['op']}): {k['reason']}", file=stream)
    print(f"{summary['seconds']} s", file=stream)
    return 0
