"""``srcore bench MODEL``: latency and memory of srcore on one model (and ``--per-op`` metrics)."""
from __future__ import annotations

import json
import time

NAME = "bench"
HELP = "measure latency (median, p90, best-round median), load time and memory of a model"


def configure_parser(parser) -> None:
    from ._common import add_model_arguments

    add_model_arguments(parser)
    parser.add_argument("-i", "--input", action="append", metavar="NAME=FILE.npy", dest="inputs",
                        help="an input to time on (repeatable; NAME=VALUE for a scalar); inputs not given "
                        "are random, symbolic dims 1")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (default 5)")
    parser.add_argument("--runs", type=int, default=0, help="calls per round (default: ~0.2 s worth)")
    parser.add_argument("--per-op", action="store_true", help="time every node and op type")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")


def measure(call, rounds: int, runs: int) -> dict:
    """Warm up, then ``rounds`` x ``runs`` per-call timings (gc off); medians in microseconds."""
    import gc
    import statistics

    t_end = time.perf_counter() + 0.3
    n = 0
    while n < 5 or time.perf_counter() < t_end:
        call()
        n += 1
    if runs <= 0:
        t0 = time.perf_counter()
        call()
        runs = max(5, min(10000, int(0.2 / max(time.perf_counter() - t0, 1e-7))))
    gc_was = gc.isenabled()
    gc.disable()
    per_round = []
    try:
        for _ in range(rounds):
            ts = []
            for _ in range(runs):
                t0 = time.perf_counter_ns()
                call()
                ts.append(time.perf_counter_ns() - t0)
            per_round.append(ts)
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
    res = measure(lambda: rt(*inputs), args.rounds, args.runs)
    peak = peak_rss_kib()
    result = {"model": args.model, "executor": sm.options.executor,
              "planner": sm.options.memory_planner_algorithm,
              "load_ms": load_s * 1e3, "setup_ms": sm.setup_time * 1e3, "first_run_ms": first_ms,
              "arena_bytes": rt.arena_bytes, "nodes": sm.num_nodes,
              "peak_rss_increase_kib": (peak - base) if (peak is not None and base is not None) else None,
              "rss_kib": rss0, **res}
    print(f"{args.model}: {sm.num_nodes} nodes, executor={sm.options.executor}, "
          f"planner={sm.options.memory_planner_algorithm}")
    print(f"  load {result['load_ms']:.1f} ms (setup {result['setup_ms']:.1f} ms: "
          + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in sm.load_stages.items()) + f"), first run {first_ms:.3f} ms")
    result["load_stages_ms"] = {k: v * 1e3 for k, v in sm.load_stages.items()}
    print(f"  latency: best-round median {res['best_round_median_us']:.2f} us, median {res['median_us']:.2f} us, "
          f"p90 {res['p90_us']:.2f} us ({res['rounds']} x {res['runs_per_round']} calls)")
    print(f"  arena {rt.arena_bytes} bytes, peak RSS increase {result['peak_rss_increase_kib']} KiB")
    if args.per_op:
        metrics = sm.benchmark_individual_ops(inputs, warmup=5, runs=max(5, min(200, res["runs_per_round"])))
        print()
        print(metrics.format())
        result["per_op"] = metrics.to_json()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2, default=str)
    return 0
