"""srcore's openvino engines beside OpenVINO run directly on the same model's ONNX file, ONNX Runtime,
trt_like and the cpu plugin, interleaved round after round:

    .venv/bin/python -m benchmarks.openvino_ab [--set seven|families|all] [--models ...] [--runners ...]
                                               [--threads 1[,2,...]] [--rounds 15] [--cpu-time]
                                               [--children auto|one|per-runner] [--settle 0.25]

``benchmarks.run`` measures each (model, runner) cell in its own process, one after another: on a
busy machine two cells can see different loads, and a ratio of two cells is then noise. Here every
runner of a model is loaded in one process (the artifacts ``benchmarks.run`` prepares, the runners
of ``benchmarks.cell``) and the runners take turns, round after round (the order rotated and
reversed by turns, see ``rotations``; each ~50 ms of calls a round, at least 5, each call timed,
after ``TURN_SETTLE_S`` of untimed calls that refill the caches the previous runner used); a runner's
time in a round is its median call, a ratio is computed per round from the two runners' times
in that round, and the median of those ratios is reported: a slow phase of the machine hits
both sides of each ratio. Latencies are the medians (and the best) of the round medians.
Every runner's output is checked against torch eager before it is timed (``max_rel_err``): one
further than ``TOLERANCE`` (float32; ``TOLERANCE_BF16`` for the bfloat16 runners) is reported
as ``status: "wrong"`` and not timed. The default set is the seven models and the wider family
set (``benchmarks/families.py``). Each (model, threads) of the
``--threads`` list (above 1 thread, the compute-bound models only) runs in a fresh process with
the thread environment of ``benchmarks.run`` (``OMP_NUM_THREADS`` etc.: a library loaded late,
MKL under trt_like, would otherwise start a thread per core). ``--cpu-time`` times each call in CPU time of the process
(``time.process_time_ns``, as ``benchmarks.families_ab``) instead of wall time: on a machine other
jobs keep busy, a wall-clock call also counts the time its thread waited for a core (at 1 thread;
at 2 threads CPU time sums both). Writes ``OUT/openvino_ab.json``.

Above 1 thread one process is not fair: after its turn a runner's idle thread pool spins on the
second core for up to ~0.2 s (ONNX Runtime's workers, OpenBLAS's under the cpu plugin, OpenMP's
under trt_like), so the runner after it runs at about 1-thread speed (resnet_small at 2 threads:
srcore openvino 1.07x OpenVINO on the ONNX file without ORT in the process, 1.19x with it). There
(``--children auto``, the default) every runner gets a child process of its own, loaded one after
another; the parent asks each child for its turn in the same rounds, and each turn
starts with ``--settle`` seconds of untimed calls, long enough for the previous runner's pool to
stop spinning. Untimed calls, not a pause: a process that idled 0.3 s before each block ran
srcore's openvino engine at about 1-thread speed in every round in an earlier test (performance.md,
"OpenVINO engines at 2 threads: what reaches OpenVINO"). At 1 thread all runners share one child
(``--children one``), as before.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .artifacts import flatten_outputs, load_inputs, load_refs, max_rel_err
from .cell import Skip, load_runner, preimport
from .clean_calls import clean_turn
from .machine import machine_facts
from .models import ALL_MODELS, FAMILIES, MODELS
from .prepare import prepare

ROOT = Path(__file__).resolve().parent.parent
RUNNERS = ("openvino", "ov_onnx", "ort", "trt_like", "srcore_codegen_standard", "openvino_bf16", "ov_onnx_bf16",
           "openvino_nan_unchecked")
LABELS = {"openvino": "srcore openvino", "ov_onnx": "OpenVINO (ONNX)", "ort": "ONNX Runtime",
          "trt_like": "srcore trt_like", "srcore_codegen_standard": "srcore cpu",
          "openvino_bf16": "srcore openvino bf16", "ov_onnx_bf16": "OpenVINO bf16 (ONNX)",
          "openvino_nan_unchecked": "srcore openvino, nan_checks=False"}

SETS = {"seven": list(MODELS), "families": list(FAMILIES), "all": list(ALL_MODELS)}
#: largest max. relative error (to the largest reference value) a timed runner may have
TOLERANCE = 1e-3
TOLERANCE_BF16 = 5e-2
#: seconds of untimed calls that start each turn when every runner has a child of its own: an idle
#: thread pool spins this long at most after its last call (Intel OpenMP's KMP_BLOCKTIME 0.2 s,
#: OpenBLAS's workers ~0.1 s, ONNX Runtime's less), on the core the next runner's second thread needs
SETTLE_S = 0.25
#: with every runner in one process, each turn starts with this many seconds (of the clock that
#: times the calls) of untimed calls: the previous runner's turn left its own weights and buffers
#: in the caches. mobilenet_v3 at 1 thread after OpenVINO's model of its ONNX file ran its first
#: five calls in 2.5, 2.5, 2.0, 1.8 and 1.7 ms of CPU time, then 1.6 ms (Sapphire Rapids, loaded)
TURN_SETTLE_S = 0.02
#: a turn times at least this many calls (its time is their median), and a call's size for the
#: rounds is the median of this many calls
MIN_CALLS = 5


def tolerance(runner: str) -> float:
    return TOLERANCE_BF16 if runner.endswith("bf16") else TOLERANCE


def load_checked(model: str, runner: str, threads: int, art: Path, xs, names_in, refs):
    """``(call or None, report, extra)``: the runner loaded and its output checked against torch
    eager; the call is None when it was skipped or is wrong (not timed). Keep ``extra`` alive."""
    preimport(runner)
    extra: dict = {}
    try:
        t0 = time.perf_counter()
        f = load_runner(model, runner, threads, art, xs, names_in, extra)
        load = time.perf_counter() - t0
        ys = flatten_outputs(f())
    except Skip as e:
        return None, {"status": "skipped", "note": str(e)}, extra
    err = max_rel_err(ys, refs)
    ok = err <= tolerance(runner)
    report = {"status": "ok" if ok else "wrong", "load_ms": round(load * 1e3, 1), "max_rel_err": err,
              **{k: v for k, v in extra.items() if not k.startswith("_")}}
    return (f if ok else None), report, extra


def warm_up(f, seconds: float = 0.2) -> float:
    """Calls for ``seconds``, then one timed call: its wall time in seconds (sizes the rounds)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        f()
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def settle(f, seconds: float, clock) -> None:
    """Untimed calls of ``f`` for ``seconds`` of ``clock`` (a ``*_ns`` clock), at least one."""
    end = clock() + seconds * 1e9
    f()
    while clock() < end:
        f()


def per_call(f, clock) -> float:
    """Seconds a call of ``f`` takes on ``clock`` (a ``*_ns`` clock): the median of MIN_CALLS calls.
    One call timed in wall time sized the turns until 2026-11-28: on a loaded machine it often
    included a wait for a core (6-10 ms for a 2 ms call), and srcore's mobilenet_v3 engine, sized
    first, got turns of 3 calls, all of them still refilling the caches after the previous
    runner (+40 %, where 27-call turns measured +0-5 %)."""
    return time_turn(f, MIN_CALLS, clock)


def n_calls_for(per_call: float, round_s: float) -> int:
    return max(MIN_CALLS, min(2000, int(round_s / max(per_call, 1e-7))))


def time_turn(f, n: int, clock) -> float:
    """One runner's turn of a round: the median of ``n`` timed calls, in seconds (as benchmarks.run)."""
    per = []
    for _ in range(n):
        t0 = clock()
        f()
        per.append(clock() - t0)
    return float(np.median(per)) * 1e-9


def rotations(names: list[str], rounds: int):
    """Each round's order: the runners rotated by one every second round, and every second round
    reversed, so that no runner always goes first and none always follows the same runner. A
    plain rotation keeps each runner's predecessor fixed (``a b c | b c a | ...``: ``a`` always
    follows ``c``), and the predecessor moves a runner's time by itself: at 1 thread, in one
    process, srcore's mobilenet_v3 engine ran 1.11x OpenVINO on the ONNX file in turns right after
    it and 1.05x right after itself (Sapphire Rapids, 2026-11-27; 1.08x both in random orders: turns
    of a few calls then, still refilling the caches, see ``per_call``)."""
    n = len(names)
    for k in range(rounds):
        j = (k // 2) % n if n else 0
        order = names[j:] + names[:j]
        yield order[::-1] if k % 2 else order


def finish(res: dict, times: dict[str, list[float]]) -> dict:
    for r, ts in times.items():
        t = np.array(ts) * 1e6
        res["runners"][r].update(median_us=float(np.median(t)), best_round_us=float(t.min()),
                                 rounds_us=[round(v, 2) for v in t])
    res["ratios"] = paired_ratios(times)
    return res


def measure_model(model: str, runners, threads: int, art: Path, rounds: int, round_s: float,
                  cpu_time: bool = False) -> dict:
    """Every runner in this process, taking turns (``--children one``)."""
    from threadpoolctl import threadpool_limits

    names_in, xs = load_inputs(art)
    refs = load_refs(art)
    limits = threadpool_limits(limits=threads)
    calls, keep, res = {}, [], {"model": model, "threads": threads, "children": "one", "runners": {}}
    for r in runners:
        f, res["runners"][r], extra = load_checked(model, r, threads, art, xs, names_in, refs)
        keep.append(extra)
        if f is not None:
            calls[r] = f
    clock = time.process_time_ns if cpu_time else time.perf_counter_ns
    n_calls = {}
    for r, f in calls.items():
        warm_up(f, 0.2)
        n_calls[r] = n_calls_for(per_call(f, clock), round_s)
    times: dict[str, list[float]] = {r: [] for r in calls}
    for order in rotations(list(calls), rounds):
        for r in order:
            settle(calls[r], TURN_SETTLE_S, clock)
            times[r].append(time_turn(calls[r], n_calls[r], clock))
    del limits
    return finish(res, times)


# -- one child per runner ---------------------------------------------------------------------------
REPLY = "@@REPLY@@"


def serve(model: str, runner: str, threads: int, art: Path, cpu_time: bool) -> int:
    """A runner's child (``--children per-runner``): load and check it, then run the turns the
    parent asks for on stdin (one JSON object a line), answering on stdout."""
    from threadpoolctl import threadpool_limits

    names_in, xs = load_inputs(art)
    refs = load_refs(art)
    limits = threadpool_limits(limits=threads)   # noqa: F841 (kept for the child's life)
    f, report, extra = load_checked(model, runner, threads, art, xs, names_in, refs)
    clock = time.process_time_ns if cpu_time else time.perf_counter_ns
    size = None
    if f is not None:
        warm_up(f, 0.2)
        size = per_call(f, clock)
    print(REPLY + json.dumps({"report": report, "per_call": size}, default=str), flush=True)
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("cmd") != "time" or f is None:
            break
        warm_up(f, float(msg.get("settle", 0.0)))   # untimed: other pools stop spinning, caches refill
        if msg.get("clean"):   # each call with its threads' wait for a core (families_ab --clean)
            print(REPLY + json.dumps({"records": clean_turn(f, int(msg["n"]))}), flush=True)
        else:
            print(REPLY + json.dumps({"t": time_turn(f, int(msg["n"]), clock)}), flush=True)
    return 0


class RunnerChild:
    """A child process holding one runner (``serve``), asked for one turn at a time."""

    def __init__(self, model: str, runner: str, threads: int, args, env: dict[str, str] | None = None):
        from .run import child_env

        cmd = [sys.executable, "-m", "benchmarks.openvino_ab", "--serve", model, str(threads), runner,
               "--out", args.out] + (["--cpu-time"] if args.cpu_time else [])
        self.name = f"{model} {runner} t={threads}"
        self._err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, env={**child_env(threads), **(env or {})}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True, cwd=ROOT)

    def reply(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith(REPLY):
                return json.loads(line[len(REPLY):])
        self.proc.wait()
        self._err.seek(0)
        raise RuntimeError(f"{self.name}: the child ended (exit {self.proc.returncode}): {self._err.read()[-2000:]}")

    def turn(self, n: int, settle: float) -> float:
        self._ask(n, settle, False)
        return self.reply()["t"]

    def clean_turn(self, n: int, settle: float) -> list:
        """``n`` calls as :func:`benchmarks.clean_calls.clean_turn` records, after ``settle`` s."""
        self._ask(n, settle, True)
        return self.reply()["records"]

    def _ask(self, n: int, settle: float, clean: bool) -> None:
        self.proc.stdin.write(json.dumps({"cmd": "time", "n": n, "settle": settle, "clean": clean}) + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
        self._err.close()


def measure_per_runner(model: str, threads: int, args) -> dict:
    """Every runner in a child of its own (loaded one after another: the openvino engines time
    themselves at build), taking turns round after round, each turn's timed calls after
    ``args.settle`` seconds of untimed ones: by then the previous runner's idle pool has stopped
    spinning on the core this one's second thread needs."""
    res = {"model": model, "threads": threads, "children": "per runner", "settle_s": args.settle, "runners": {}}
    started: list[RunnerChild] = []
    children: dict[str, RunnerChild] = {}
    n_calls: dict[str, int] = {}
    try:
        for r in args.runners.split(","):
            c = RunnerChild(model, r, threads, args)
            started.append(c)
            first = c.reply()
            res["runners"][r] = first["report"]
            if first["per_call"] is not None:   # else skipped or wrong: not timed
                children[r], n_calls[r] = c, n_calls_for(first["per_call"], args.round_seconds)
        times: dict[str, list[float]] = {r: [] for r in children}
        for order in rotations(list(children), args.rounds):
            for r in order:
                times[r].append(children[r].turn(n_calls[r], args.settle))
    finally:
        for c in started:
            c.close()
    return finish(res, times)


def paired_ratios(times: dict[str, list[float]]) -> dict[str, float]:
    """Medians of per-round ratios: openvino ÷ ov_onnx, and the fastest of srcore's backends ÷ ORT."""
    out = {}
    if "openvino" in times and "ov_onnx" in times:
        out["openvino/ov_onnx"] = float(np.median(np.array(times["openvino"]) / np.array(times["ov_onnx"])))
    if "openvino_nan_unchecked" in times and "ov_onnx" in times:
        out["openvino_nan_unchecked/ov_onnx"] = float(np.median(np.array(times["openvino_nan_unchecked"])
                                                                / np.array(times["ov_onnx"])))
    if "openvino_bf16" in times and "ov_onnx_bf16" in times:
        out["openvino_bf16/ov_onnx_bf16"] = float(np.median(np.array(times["openvino_bf16"])
                                                            / np.array(times["ov_onnx_bf16"])))
    ours = [r for r in ("openvino", "trt_like", "srcore_codegen_standard") if r in times]
    if ours and "ort" in times:
        fastest = min(ours, key=lambda r: np.median(times[r]))
        out["fastest_srcore"] = fastest
        out["fastest_srcore/ort"] = float(np.median(np.array(times[fastest]) / np.array(times["ort"])))
        for r in ours:
            out[f"{r}/ort"] = float(np.median(np.array(times[r]) / np.array(times["ort"])))
    return out


def _child(model: str, threads: int, args) -> dict:
    from .run import child_env

    cmd = [sys.executable, "-m", "benchmarks.openvino_ab", "--child", model, str(threads), "--runners", args.runners,
           "--rounds", str(args.rounds), "--round-seconds", str(args.round_seconds), "--out", args.out]
    if args.cpu_time:
        cmd.append("--cpu-time")
    p = subprocess.run(cmd, env=child_env(threads), capture_output=True, text=True, cwd=ROOT)
    for line in p.stdout.splitlines():
        if line.startswith("@@RESULT@@"):
            return json.loads(line[len("@@RESULT@@"):])
    raise RuntimeError(f"{model} t={threads}: no result (exit {p.returncode}): {p.stderr[-2000:]}")


def per_runner(children: str, threads: int) -> bool:
    """Whether each runner gets a child of its own: above 1 thread (``auto``) a runner's idle
    thread pool spins on the core the next runner's second thread needs (ONNX Runtime's, OpenBLAS's
    under the cpu plugin, OpenMP's under trt_like); at 1 thread none does."""
    return children == "per-runner" or (children == "auto" and threads > 1)


def fmt_us(us: float) -> str:
    return f"{us / 1e3:.2f} ms" if us >= 1e3 else f"{us:.1f} µs"


def markdown(report: dict) -> str:
    runners = [r for r in RUNNERS if any(r in m["runners"] for m in report["models"])]
    head = ["model", "threads", *[LABELS[r] for r in runners], "openvino ÷ OpenVINO (ONNX)", "fastest srcore ÷ ORT"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in report["models"]:
        cells = []
        for r in runners:
            c = m["runners"].get(r)
            if c and c["status"] == "ok":
                # bf16's error (against torch eager's float32, relative to the largest value) beside its time
                cells.append(fmt_us(c["median_us"]) + (f" ({c['max_rel_err']:.1e})" if r.endswith("bf16") else ""))
            elif c and c["status"] == "wrong":
                cells.append(f"wrong ({c['max_rel_err']:.1e})")
            else:
                cells.append("–")
        ra = m["ratios"]
        a = f"{ra['openvino/ov_onnx']:.3f}x" if "openvino/ov_onnx" in ra else "–"
        b = (f"{ra['fastest_srcore/ort']:.2f}x ({LABELS[ra['fastest_srcore']].replace('srcore ', '')})"
             if "fastest_srcore/ort" in ra else "–")
        lines.append("| " + " | ".join([m["model"], str(m["threads"]), *cells, a, b]) + " |")
    notes = {}   # why a runner was skipped (bf16 on a CPU without it: the refusal), once per runner and reason
    for m in report["models"]:
        for r, c in m["runners"].items():
            if c.get("status") == "skipped":
                notes.setdefault((r, c.get("note", "")), []).append(m["model"])
    for (r, note), models in notes.items():
        lines.append(f"\n{LABELS.get(r, r)} skipped on {len(models)} model(s): {note}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.openvino_ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", choices=sorted(SETS), default="all",
                    help="the seven models, the wider family set or both (default); --models overrides")
    ap.add_argument("--models", default=None)
    ap.add_argument("--runners", default=",".join(RUNNERS))
    ap.add_argument("--threads", default="1",
                    help="thread counts, comma-separated (1,2); above 1 only the compute-bound models run")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--round-seconds", type=float, default=0.05)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--cpu-time", action="store_true",
                    help="time calls in the process's CPU time instead of wall time (a loaded machine)")
    ap.add_argument("--children", choices=("auto", "one", "per-runner"), default="auto",
                    help="all runners in one child, or each in its own (auto: one at 1 thread, per runner above)")
    ap.add_argument("--settle", type=float, default=SETTLE_S,
                    help="seconds of untimed calls that start each turn with a child per runner")
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "THREADS"), help=argparse.SUPPRESS)
    ap.add_argument("--serve", nargs=3, metavar=("MODEL", "THREADS", "RUNNER"), help=argparse.SUPPRESS)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    out = Path(args.out)
    if args.serve:
        model, threads, runner = args.serve[0], int(args.serve[1]), args.serve[2]
        return serve(model, runner, threads, out / "artifacts" / model, args.cpu_time)
    if args.child:
        model, threads = args.child[0], int(args.child[1])
        res = measure_model(model, args.runners.split(","), threads, out / "artifacts" / model, args.rounds,
                            args.round_seconds, args.cpu_time)
        print("@@RESULT@@" + json.dumps(res, default=str))
        return 0
    report = {"command": "python -m benchmarks.openvino_ab " + " ".join(sys.argv[1:] if argv is None else argv),
              "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine_facts(),
              "models": []}
    t_start = time.perf_counter()
    models = args.models.split(",") if args.models else SETS[args.set]
    unknown = [m for m in models if m not in ALL_MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {', '.join(ALL_MODELS)}")
    for model in models:
        prepare(model, out)
        for threads in (int(t) for t in args.threads.split(",")):
            if threads > 1 and not ALL_MODELS[model][1]["compute_bound"]:
                continue
            res = (measure_per_runner(model, threads, args) if per_runner(args.children, threads)
                   else _child(model, threads, args))
            res["loadavg_1m"] = os.getloadavg()[0]
            report["models"].append(res)
            print(f"[{model} t={threads}] " + ", ".join(
                f"{r} {fmt_us(c['median_us'])}" if c["status"] == "ok" else f"{r} {c['status']}"
                for r, c in res["runners"].items()) + f"; ratios {res['ratios']}", flush=True)
    report["wall_s"] = round(time.perf_counter() - t_start, 1)
    (out / "openvino_ab.json").write_text(json.dumps(report, indent=1, default=str))
    print()
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
