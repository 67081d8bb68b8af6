"""``srcore bench MODEL``: latency and memory of srcore on one model (and ``--per-op`` metrics)."""
from __future__ import annotations

import time

#: seconds of calls per round when --runs is not given, and of warm-up before the first round
ROUND_SECONDS = 0.2
WARMUP_SECONDS = 0.3

NAME = "bench"
HELP = "measure latency (median, p90, best-round median), load time and memory of a model"


def configure_parser(parser) -> None:
    from ._common import add_model_arguments
    from .flags import positive_int
    from .output import add_format_argument

    add_model_arguments(parser)
    parser.add_argument("-i", "--input", action="append", metavar="NAME=FILE.npy", dest="inputs",
                        help="an input to time on (repeatable; NAME=VALUE for a scalar); inputs not given "
                        "are random, symbolic dims 1")
    parser.add_argument("--rounds", type=positive_int, default=5, help="timed rounds (default 5)")
    parser.add_argument("--runs", type=positive_int, default=None, help="calls per round (default: ~0.2 s worth)")
    parser.add_argument("--per-op", action="store_true", help="time every node and op type")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE ('-': stdout, "
                        "the text report then goes to stderr)")
    add_format_argument(parser, what="the results")


def measure(call, rounds: int, runs: int | None = None, desc: str = "timing") -> dict:
    """Warm up, then ``rounds`` x ``runs`` per-call timings (gc off); medians in microseconds.

    ``runs`` None (or < 1): about 0.2 s worth of calls per round. A progress bar counts the
    rounds (updated between rounds only, never inside the timed calls)."""
    import gc
    import statistics

    from ..errors import SrcoreInputError
    from ..progress import bar

    if rounds < 1:
        raise SrcoreInputError(f"rounds must be >= 1, not {rounds}")

    t_end = time.perf_counter() + WARMUP_SECONDS
    n = 0
    while n < 5 or time.perf_counter() < t_end:
        call()
        n += 1
    if runs is None or runs <= 0:
        t0 = time.perf_counter()
        call()
        runs = max(5, min(10000, int(ROUND_SECONDS / max(time.perf_counter() - t0, 1e-7))))
    gc_was = gc.isenabled()
    gc.disable()
    per_round = []
    try:
        with bar(rounds, desc, unit="round") as b:
            for _ in range(rounds):
                ts = []
                for _ in range(runs):
                    t0 = time.perf_counter_ns()
                    call()
                    ts.append(time.perf_counter_ns() - t0)
                per_round.append(ts)
                b.update()
    finally:
        if gc_was:
            gc.enable()
    pooled = sorted(t for r in per_round for t in r)
    medians = [statistics.median(r) for r in per_round]
    return {"runs_per_round": runs, "rounds": rounds,
            "best_round_median_us": min(medians) / 1e3,
            "median_us": statistics.median(pooled) / 1e3,
            "p90_us": pooled[int(0.9 * (len(pooled) - 1))] / 1e3}


def peak_rss_reset() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss_kib() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def run(args) -> int:
    from ._common import load_model, make_module, parse_inputs
    from .output import check_output_path, claim_stdout, print_json, report_stream, write_json

    check_output_path(args.json, "--json")
    claim_stdout(args, ("--json", args.json))
    out = None if args.format == "json" else report_stream(args.json)
    t0 = time.perf_counter()
    model = load_model(args.model)
    sm = make_module(args, model)
    load_s = time.perf_counter() - t0
    inputs = parse_inputs(sm, args.inputs)
    rt = sm.runtime()
    t0 = time.perf_counter()
    rt(*inputs)
    first_ms = (time.perf_counter() - t0) * 1e3
    rss0 = peak_rss_kib()
    peak_rss_reset()
    base = peak_rss_kib()
    res = measure(lambda: rt(*inputs), args.rounds, args.runs, desc="bench")
    peak = peak_rss_kib()
    result = {"model": args.model, "executor": sm.options.executor,
              "planner": sm.options.memory_planner_algorithm, "backends": list(sm.options.backends),
              "load_ms": load_s * 1e3, "setup_ms": sm.setup_time * 1e3, "first_run_ms": first_ms,
              "load_stages_ms": {k: v * 1e3 for k, v in sm.load_stages.items()},
              "arena_bytes": rt.arena_bytes, "nodes": sm.num_nodes,
              "peak_rss_increase_kib": (peak - base) if (peak is not None and base is not None) else None,
              "rss_kib": rss0, **res, "per_op": None}
    if out is not None:
        _print_summary(result, out)
    if args.per_op:
        metrics = sm.benchmark_individual_ops(inputs, warmup=5, runs=max(5, min(200, res["runs_per_round"])))
        if out is not None:
            print(file=out)
            print(metrics.format(), file=out)
        result["per_op"] = metrics.to_json()
    if args.json:
        write_json(result, args.json, "--json")
    if args.format == "json":
        print_json(result)
    return 0


def _print_summary(result: dict, out) -> None:
    stages = ", ".join(f"{k} {v:.1f}" for k, v in result["load_stages_ms"].items())
    print(f"{result['model']}: {result['nodes']} nodes, executor={result['executor']}, "
          f"planner={result['planner']}", file=out)
    print(f"  load {result['load_ms']:.1f} ms (setup {result['setup_ms']:.1f} ms: {stages}), "
          f"first run {result['first_run_ms']:.3f} ms", file=out)
    print(f"  latency: best-round median {result['best_round_median_us']:.2f} us, median "
          f"{result['median_us']:.2f} us, p90 {result['p90_us']:.2f} us ({result['rounds']} x "
          f"{result['runs_per_round']} calls)", file=out)
    print(f"  arena {result['arena_bytes']} bytes, peak RSS increase {result['peak_rss_increase_kib']} KiB",
          file=out)
