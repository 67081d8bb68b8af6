"""Table and chart of a benchmark report (the dict ``benchmarks.run`` writes as JSON)."""
from __future__ import annotations

from pathlib import Path

BASE = "srcore_codegen_standard"
LABELS = {
    "eager": "torch eager", "torchscript": "TorchScript", "static_runtime": "Static Runtime",
    "ort": "ONNX Runtime", "onnx_reference": "onnx.reference", "numpy": "numpy",
    "numpy_out": "numpy out=", "srcore_codegen_standard": "srcore codegen/standard",
    "srcore_codegen_precomputed": "srcore codegen/precomputed",
    "srcore_interp_standard": "srcore interp/standard",
    "srcore_interp_precomputed": "srcore interp/precomputed", "trt_like": "srcore trt_like",
    "trt_like_unsplit": "srcore trt_like, SIMD convs unsplit",
    "trt_like_narrow": "srcore trt_like, pointwise kernels without numba_512",
    "trt_like_nchw": "srcore trt_like, no NCHW16c layout",
    "trt_like_nchwc": "srcore trt_like, NCHW16c layout forced",
    "openvino": "srcore openvino", "openvino_bf16": "srcore openvino bf16", "ov_onnx": "OpenVINO (ONNX file)",
    "ov_onnx_bf16": "OpenVINO bf16 (ONNX file)", "openvino_nan_unchecked": "srcore openvino nan_checks=False",
    "srcore_onnx": "srcore from_onnx",
}


def fmt_us(us: float) -> str:
    if us >= 1e4:
        return f"{us / 1e3:.1f} ms"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.1f} µs"


def groups(report: dict) -> dict[tuple[str, int], list[dict]]:
    out: dict[tuple[str, int], list[dict]] = {}
    for c in report["cells"]:
        out.setdefault((c["model"], c["threads"]), []).append(c)
    return out


def base_of(cells: list[dict]) -> float | None:
    return next((c["best_round_median_us"] for c in cells if c["runner"] == BASE and c["status"] == "ok"), None)


def format_table(report: dict) -> str:
    """Per (model, threads): best-round median, median, p90, srcore÷peer, load, first call (and ÷ the
    median; ``cpu``: in CPU time, ÷ steady calls' CPU median), peak RSS, error vs eager."""
    lines = []
    head = (f"{'runner':<28}{'best-round':>11}{'median':>11}{'p90':>11}{'srcore÷it':>10}"
            f"{'load':>10}{'1st call':>11}{'1st÷med':>8}{'cpu':>6}{'ΔRSS':>9}{'rel.err':>9}")
    for (model, threads), cells in groups(report).items():
        base = base_of(cells)
        lines += ["", f"== {model}, {threads} thread(s)  (srcore÷it < 1: srcore codegen/standard is faster)", head]
        for c in cells:
            name = LABELS.get(c["runner"], c["runner"])
            if c["status"] != "ok":
                why = c.get("note") or c.get("error", "")
                lines.append(f"{name:<28}{c['status']}: {why.splitlines()[0][:110] if why else ''}")
                continue
            b = c["best_round_median_us"]
            ratio = f"{base / b:.2f}x" if base else "-"
            rss = c.get("peak_rss_increase_kib")
            first = c.get("first_call_ms")
            first_s = fmt_us(first * 1e3) if first is not None else "-"
            first_r = f"{first * 1e3 / c['median_us']:.1f}x" if first is not None else "-"
            lines.append(f"{name:<28}{fmt_us(b):>11}{fmt_us(c['median_us']):>11}{fmt_us(c['p90_us']):>11}"
                         f"{ratio:>10}{c['load_ms']:>8.0f}ms{first_s:>11}{first_r:>8}{first_cpu_ratio(c):>6}"
                         f"{(str(rss) + 'K') if rss is not None else '-':>9}{c['max_rel_err']:>9.1e}")
    return "\n".join(lines)


def first_cpu_ratio(c: dict) -> str:
    """The first call's CPU time ÷ the steady calls' median CPU time ("-" where not measured)."""
    first, steady = c.get("first_call_cpu_ms"), c.get("steady_cpu_ms")
    return f"{first / steady:.1f}x" if first is not None and steady else "-"


def markdown_tables(report: dict, threads: int = 1) -> str:
    """Markdown: best-round medians (models x runners) and srcore codegen/standard ÷ each runner."""
    runners = [r for r in LABELS if any(c["runner"] == r and c["threads"] == threads and c["status"] == "ok"
                                        for c in report["cells"])]
    lat = ["| model | " + " | ".join(LABELS[r] for r in runners) + " |", "|---" * (len(runners) + 1) + "|"]
    rat = list(lat)
    for (model, t), cells in groups(report).items():
        if t != threads:
            continue
        by = {c["runner"]: c for c in cells if c["status"] == "ok"}
        base = base_of(cells)
        lat.append(f"| {model} | " + " | ".join(fmt_us(by[r]["best_round_median_us"]) if r in by else "–"
                                              for r in runners) + " |")
        rat.append(f"| {model} | " + " | ".join(
            f"{base / by[r]['best_round_median_us']:.2f}x" if r in by and base else "–" for r in runners) + " |")
    return "\n".join(lat) + "\n\nsrcore (codegen, standard_resizing) ÷ runner (< 1: srcore faster):\n\n" + "\n".join(rat)


def first_call_table(report: dict, threads: int = 1) -> str:
    """Markdown: per model and runner, load time, first call and first call ÷ the steady median (wall
    clock; and in CPU time, ÷ the steady calls' CPU median)."""
    runners = [r for r in LABELS if any(c["runner"] == r and c["threads"] == threads and c["status"] == "ok"
                                        for c in report["cells"])]
    rows = ["| model | " + " | ".join(LABELS[r] for r in runners) + " |", "|---" * (len(runners) + 1) + "|"]
    for (model, t), cells in groups(report).items():
        if t != threads:
            continue
        by = {c["runner"]: c for c in cells if c["status"] == "ok"}

        def cell(r):
            c = by.get(r)
            if c is None or c.get("first_call_ms") is None:
                return "–"
            return (f"{c['load_ms']:.0f} ms / {fmt_us(c['first_call_ms'] * 1e3)} "
                    f"({c['first_call_ms'] * 1e3 / c['median_us']:.1f}x; cpu {first_cpu_ratio(c)})")
        rows.append(f"| {model} | " + " | ".join(cell(r) for r in runners) + " |")
    return "\n".join(rows)


TICKS = (0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100)


def plot_latency(report: dict, path: Path, threads: int = 1) -> None:
    """Per model: horizontal bars of best-round median / srcore codegen-standard's, log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    data = [(m, cells) for (m, t), cells in groups(report).items() if t == threads and base_of(cells)]
    if not data:
        return
    ncol = 2
    nrow = (len(data) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(15, 3.6 * nrow), squeeze=False)
    for ax, (model, cells) in zip(axes.flat, data):
        base = base_of(cells)
        ok = [c for c in cells if c["status"] == "ok"]
        names = [LABELS.get(c["runner"], c["runner"]) for c in ok]
        vals = [c["best_round_median_us"] / base for c in ok]
        colors = ["tab:orange" if c["runner"].startswith(("srcore", "openvino")) or c["runner"] == "trt_like"
                  else "tab:blue"
                  for c in ok]
        y = range(len(ok))
        ax.barh(list(y), vals, color=colors)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(TICKS))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.axvline(1.0, color="k", lw=0.8)
        ax.set_yticks(list(y), names, fontsize=8)
        ax.invert_yaxis()
        lo, hi = min(vals + [1.0]), max(vals + [1.0])
        ax.set_xlim(lo / 2, hi * 6)
        for i, (v, c) in enumerate(zip(vals, ok)):
            ax.text(v * 1.08, i, f"{v:.2f}x  {fmt_us(c['best_round_median_us'])}", va="center", fontsize=7.5)
        ax.set_title(f"{model}  (srcore codegen/standard = {fmt_us(base)})", fontsize=10)
        ax.grid(axis="x", which="major", alpha=0.3)
    for ax in list(axes.flat)[len(data):]:
        ax.axis("off")
    fig.suptitle(f"Best-round median latency relative to srcore (codegen, standard_resizing), {threads} thread; "
                 "log scale, < 1 = faster than srcore", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    """``python -m benchmarks.report [RESULTS.json] [--chart PNG]``: table (and chart) of a saved run."""
    import argparse
    import json

    root = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(prog="python -m benchmarks.report")
    ap.add_argument("results", nargs="?", default=str(root / "results" / "latest.json"))
    ap.add_argument("--chart", default=None, help="also draw the latency chart to this PNG")
    ap.add_argument("--markdown", action="store_true", help="also print markdown tables")
    args = ap.parse_args(argv)
    report = json.loads(Path(args.results).read_text())
    print(format_table(report))
    if args.markdown:
        for t in sorted({c["threads"] for c in report["cells"]}):
            print(f"\n### {t} thread(s)\n")
            print(markdown_tables(report, t))
            print(f"\nload / first call (first call ÷ steady median), {t} thread(s):\n")
            print(first_call_table(report, t))
    if args.chart:
        plot_latency(report, Path(args.chart))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
