"""One benchmark cell in a fresh process: ``python -m benchmarks.cell MODEL RUNNER THREADS ARTIFACTS_DIR``.

Loads the runner's artifact (timed: file -> ready callable), times the first call
(``first_call_ms``, and ``first_call_cpu_ms`` beside the median CPU time of a few steady calls,
``steady_cpu_ms``: no call may pay for a build), checks every output against torch
eager, resets the peak RSS, measures latency with the protocol of ``srcore bench``
and prints one JSON object on stdout. Models take any number of inputs of any
dtype (``artifacts.py``). Thread counts are fixed
by the parent through the environment and here through torch / threadpoolctl /
ORT options. Errors are reported as ``{"status": "error", "error": ...}``.
"""
from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

from srcore.cli.bench import measure, peak_rss_kib, peak_rss_reset

from .artifacts import flatten_outputs, load_inputs, load_refs, max_rel_err

SRCORE_RUNNERS = {
    "srcore_codegen_standard": ("codegen", "standard_resizing"),
    "srcore_codegen_precomputed": ("codegen", "precomputed_offsets"),
    "srcore_interp_standard": ("interpreter", "standard_resizing"),
    "srcore_interp_precomputed": ("interpreter", "precomputed_offsets"),
}
PEER_RUNNERS = ("eager", "torchscript", "static_runtime", "ort", "onnx_reference", "numpy", "numpy_out",
                "ov_onnx", "ov_onnx_bf16")
#: srcore with an engine backend first: runner -> (backends, engine options)
ENGINE_RUNNERS = {
    "trt_like": (("trt_like", "cpu"), {}),
    # without the SIMD convs split over the intra-op threads (same as trt_like at 1 thread): A/B of the split
    "trt_like_unsplit": (("trt_like", "cpu"), {"exclude_tactics": ["simd_direct_split", "depthwise_simd_split",
                                                                   "simd_direct_split+max_pool"]}),
    # without the SIMD direct conv split over the OpenMP team (simd_direct_omp, simd_direct_rows_omp): A/B of those
    "trt_like_simd_omp_unsplit": (("trt_like", "cpu"), {"exclude_tactics": [
        "simd_direct_omp", "simd_direct_rows_omp", "simd_direct_omp+max_pool", "simd_direct_rows_omp+max_pool"]}),
    # with the NCHW16c 1x1 / depthwise layers split over the OpenMP team offered (off by default): A/B of those
    "trt_like_nchwc_split": (("trt_like", "cpu"), {"nchwc_split": True}),
    # with them split by bands of rows offered instead (off by default): A/B of those
    "trt_like_nchwc_rows": (("trt_like", "cpu"), {"nchwc_rows": True}),
    # the NCHW16c layout forced, its 1x1 / depthwise layers split by rows wherever offered (the build's
    # timing, beside a busy core, keeps them on one thread): their time in a model's sequence
    "trt_like_rows_forced": (("trt_like", "cpu"), {"nchwc": True, "nchwc_rows": True, "exclude_tactics": [
        "pointwise_nchw16c", "depthwise_nchw16c"]}),
    # without MKL's GEMMs split by weight columns over the OpenMP team: A/B of the split
    "trt_like_mkl_unsplit": (("trt_like", "cpu"), {"exclude_tactics": ["mkl_split"]}),
    # without attention heads split over srcore.conv's team: A/B of the split
    "trt_like_heads_unsplit": (("trt_like", "cpu"), {"exclude_tactics": ["mkl_heads_team"]}),
    # without the OpenMP splits of attention heads, group norms, resizes, softmax and layer norm rows
    # (mkl_heads_omp, numba_split): A/B of those splits
    "trt_like_omp_unsplit": (("trt_like", "cpu"), {"exclude_tactics": ["mkl_heads_omp", "numba_split"]}),
    # without the NCHW16c dense conv's splits over the OpenMP team (conv_nchw16c_omp, conv_nchw16c_rows_omp):
    # A/B of those splits (its large layers then split on srcore.conv's Python team, as before them)
    "trt_like_conv_unsplit": (("trt_like", "cpu"), {"exclude_tactics": ["conv_nchw16c_omp", "conv_nchw16c_rows_omp"]}),
    # fused pointwise kernels at LLVM's default vector width only (no 512-bit twin): A/B of numba_512
    "trt_like_narrow": (("trt_like", "cpu"), {"exclude_tactics": ["numba_512"]}),
    # without the NCHW16c kernels on 8-lane vectors (..._nchw16c_h8: AVX2-sized register blocks): A/B of those
    "trt_like_no_h8": (("trt_like", "cpu"), {"exclude_tactics": ["pointwise_nchw16c_h8", "depthwise_nchw16c_h8",
                                                                 "dense_nchw16c_h8", "conv_nchw16c_h8",
                                                                 "conv_nchwc_planes_h8", "conv_nchw16c_h8_omp",
                                                                 "conv_nchw16c_h8_rows_omp", "dense_nchw16c_h8_omp",
                                                                 "conv_nchwc_planes_h8_omp",
                                                                 "conv_nchwc_planes_h8_rows_omp"]}),
    # without the 8-lane kernels' OpenMP split twins (..._h8_omp, ..._h8_rows_omp; 2026-11-29): the engines main
    # built before them, in the same process: A/B of those twins
    "trt_like_no_h8_split": (("trt_like", "cpu"), {"exclude_tactics": [
        *(f"{t}{suffix}" for t in ("conv_nchw16c_h8_omp", "conv_nchw16c_h8_rows_omp", "dense_nchw16c_h8_omp")
          for suffix in ("", "+max_pool")),
        "pointwise_nchw16c_h8_omp", "depthwise_nchw16c_h8_omp", "pointwise_nchw16c_h8_rows_omp",
        "depthwise_nchw16c_h8_rows_omp", "conv_nchwc_planes_h8_omp", "conv_nchwc_planes_h8_rows_omp"]}),
    # the NCHW16c 1x1 / depthwise splits by blocks and by rows both offered (each off by default), the
    # 8-lane twins with them: what the timing makes of every split of a mobile net
    "trt_like_nchwc_all_splits": (("trt_like", "cpu"), {"nchwc_split": True, "nchwc_rows": True}),
    # without the packed-panel numba SGEMM (tactics/sgemm.py): A/B of it
    "trt_like_no_sgemm": (("trt_like", "cpu"), {"exclude_tactics": ["packed_sgemm", "packed_sgemm16", "pointwise_sgemm",
                                                                   "dense_tile_nchw16c"]}),
    # without Winograd on the packed-panel SGEMM's tile (conv/winograd_sgemm.py; 2026-11-29), one thread and its
    # OpenMP split: A/B of those in one process
    "trt_like_no_wino_sgemm": (("trt_like", "cpu"), {"exclude_tactics": [
        "winograd_f4x4_sgemm", "winograd_f2x2_sgemm", "winograd_f4x4_sgemm_omp", "winograd_f2x2_sgemm_omp"]}),
    # without the packed-panel SGEMM's GEMMs at any thread count: at 2+ threads, the split (packed_sgemm_split,
    # kernels/sgemm_split.py) and the one-thread kernel on the layers too small to split (2026-11-29): A/B of those
    "trt_like_no_sgemm_split": (("trt_like", "cpu"), {"exclude_tactics": ["packed_sgemm", "packed_sgemm16",
                                                                         "packed_sgemm_split",
                                                                         "packed_sgemm16_split"]}),
    # main's 2-thread set before 2026-11-29 (tl2tsmall): neither the SGEMM-tile 1x1 / stem tactics (then offered at
    # one thread only) nor their OpenMP split twins (conv/tile_split.py): A/B of those at 2 threads
    "trt_like_no_tile_2t": (("trt_like", "cpu"), {"exclude_tactics": [
        f"{t}{suffix}" for t in ("pointwise_sgemm", "dense_tile_nchw16c", "pointwise_sgemm_omp", "dense_tile_nchw16c_omp")
        for suffix in ("", "+max_pool")]}),
    # the one-thread tactics offered, their split twins not: A/B of the twins alone
    "trt_like_no_tile_split": (("trt_like", "cpu"), {"exclude_tactics": [
        f"{t}{suffix}" for t in ("pointwise_sgemm_omp", "dense_tile_nchw16c_omp") for suffix in ("", "+max_pool")]}),
    # permutes by numpy's transposed copy only (before transpose_tiles, tactics/data.py): A/B of that tactic
    "trt_like_no_transpose_tiles": (("trt_like", "cpu"), {"exclude_tactics": ["transpose_tiles"]}),
    # without a mobile net's blocks as one split step each (tactics/block_fuse.py): A/B of the fused blocks
    "trt_like_no_block_fuse": (("trt_like", "cpu"), {"exclude_tactics": ["block_omp"]}),
    # without the NCHW16c layout between convs (builder/layout.py): A/B of the layout
    "trt_like_nchw": (("trt_like", "cpu"), {"nchwc": False}),
    # the layout forced on wherever it applies (the default times it per run of layers)
    "trt_like_nchwc": (("trt_like", "cpu"), {"nchwc": True}),
    # trt_like_rows_forced without the plan's thread choice: an engine of forced splits, A/B of the choice
    "trt_like_rows_forced_noplan": (("trt_like", "cpu"), {"nchwc": True, "nchwc_rows": True, "thread_plan": False,
                                                          "exclude_tactics": ["pointwise_nchw16c", "depthwise_nchw16c"]}),
    # every split layer on its team, no sequence timing of the plan's thread choice (tactics/thread_plan.py)
    "trt_like_noplan": (("trt_like", "cpu"), {"thread_plan": False}),
    "openvino": (("openvino", "cpu"), {}),
    "openvino_bf16": (("openvino", "cpu"), {"precision": "bf16"}),
    "openvino_nan_unchecked": (("openvino", "cpu"), {"nan_checks": False}),
}
#: srcore on the ONNX file the ORT cells run (``srcore.from_onnx``), codegen + standard_resizing as the
#: base srcore runner: the ratio of the two is what the ONNX frontend costs against from_torchscript
ONNX_RUNNERS = ("srcore_onnx",)
RUNNERS = (*PEER_RUNNERS, *SRCORE_RUNNERS, *ENGINE_RUNNERS, *ONNX_RUNNERS)
#: runners for an A/B in one process (``benchmarks.families_ab --runners``), left out of ``benchmarks.run``'s default
AB_ONLY_RUNNERS = ("trt_like_nchw", "trt_like_nchwc", "trt_like_nchwc_rows", "trt_like_rows_forced", "trt_like_no_h8",
                   "trt_like_no_h8_split", "trt_like_nchwc_all_splits", "trt_like_no_sgemm",
                   "trt_like_no_wino_sgemm", "trt_like_no_sgemm_split", "trt_like_no_tile_2t", "trt_like_no_tile_split",
                   "trt_like_noplan", "trt_like_rows_forced_noplan", "trt_like_no_transpose_tiles",
                   "trt_like_no_block_fuse")


#: runners whose output must be within this of torch eager's (relative to its largest value) to be
#: timed; the others record ``max_rel_err`` only
CHECKED_RUNNERS = {"openvino": 1e-3, "openvino_nan_unchecked": 1e-3, "ov_onnx": 1e-3,
                   "openvino_bf16": 5e-2, "ov_onnx_bf16": 5e-2}


class Skip(Exception):
    """The runner does not apply to this model or its peer is not installed (a note, not an error)."""


def _torch(threads: int):
    import torch

    torch.set_num_threads(threads)
    ctx = torch.inference_mode()  # kept alive for the whole cell: a temporary one does nothing
    ctx.__enter__()
    return torch, ctx


def _feed(input_names: list[str], names: list[str], xs: list) -> dict:
    """``{name: array}`` for the inputs a session declares (ONNX may drop an unused one)."""
    by = dict(zip(names, xs))
    missing = [n for n in input_names if n not in by]
    if missing:
        raise RuntimeError(f"the ONNX model's inputs {missing} are not among the saved inputs {names}")
    return {n: by[n] for n in input_names}


def load_runner(model: str, runner: str, threads: int, art: Path, xs: list, names: list[str], extra: dict):
    """Return a zero-argument callable that runs one inference (and returns the output)."""
    if runner == "eager":
        torch, ctx = _torch(threads)
        from .models import ALL_MODELS

        m, _ = ALL_MODELS[model][0]()
        m.load_state_dict(torch.load(art / "eager_state.pt"))
        m.eval()
        ts = [torch.from_numpy(x) for x in xs]
        extra["_keep"] = ctx
        return lambda: m(*ts)
    if runner in ("torchscript", "static_runtime"):
        torch, ctx = _torch(threads)
        extra["_keep"] = ctx
        mod = torch.jit.load(str(art / "model.pt")).eval()
        frozen = torch.jit.freeze(mod)
        ts = [torch.from_numpy(x) for x in xs]
        if runner == "torchscript":
            f = torch.jit.optimize_for_inference(frozen)
            return lambda: f(*ts)
        sm = torch._C._jit_to_static_module(frozen._c)
        return lambda: sm(*ts)
    if runner == "ort":
        try:
            import onnxruntime as ort
        except ImportError as e:
            raise Skip(f"onnxruntime not installed: {e}") from None
        _require(art / "model.onnx")
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(str(art / "model.onnx"), so, providers=["CPUExecutionProvider"])
        feed = _feed([i.name for i in sess.get_inputs()], names, xs)
        extra["ort_version"] = ort.__version__
        return lambda: sess.run(None, feed)
    if runner == "onnx_reference":
        try:
            from onnx.reference import ReferenceEvaluator
        except ImportError as e:
            raise Skip(f"onnx not installed: {e}") from None
        _require(art / "model.onnx")
        ev = ReferenceEvaluator(str(art / "model.onnx"))
        feed = _feed(list(ev.input_names), names, xs)
        return lambda: ev.run(None, feed)
    if runner in ("ov_onnx", "ov_onnx_bf16"):
        return _ov_onnx(art, threads, xs, names, extra, "bf16" if runner.endswith("bf16") else "f32")
    if runner in ("numpy", "numpy_out"):
        import numpy as np

        from .numpy_floor import FLOORS

        if model not in FLOORS:
            raise Skip(f"no hand-written numpy version of {model}")
        sd = dict(np.load(art / "weights.npz"))
        x = xs[0]
        impl = FLOORS[model](sd, x.shape)
        f = impl.plain if runner == "numpy" else impl.out
        return lambda: f(x)
    if runner in SRCORE_RUNNERS or runner in ENGINE_RUNNERS or runner in ONNX_RUNNERS:
        import srcore

        srm = art / ("model_onnx.srm" if runner == "srcore_onnx" else "model.srm")
        _require(srm)
        m = srcore.load(str(srm))
        if runner in ENGINE_RUNNERS:
            backends, engine_options = ENGINE_RUNNERS[runner]
            builders = srcore.get_plugin_manager().registry.engine_builders
            names = set(builders) if isinstance(builders, dict) else {getattr(b, "backend", b) for b in builders}
            if backends[0] not in names:
                raise Skip(f"no engine builder for backend {backends[0]} (its plugin is not installed?)")
            opts = srcore.Options(engine_options=engine_options)
        else:
            ex, pl = SRCORE_RUNNERS.get(runner, ("codegen", "standard_resizing"))
            opts, backends = srcore.Options(executor=ex, memory_planner_algorithm=pl), None
        if runner == "openvino_bf16":
            from srcore_openvino.device import bf16_refusal

            why = bf16_refusal()
            if why is not None:
                raise Skip(why)
        sm = srcore.StaticModule(m, options=opts, backends=backends)
        if runner in ENGINE_RUNNERS:
            extra["engines"] = [f"{s.name}: {s.status}{' (' + s.reason + ')' if s.reason else ''}"
                                for s in sm.partition.segments]
        rt = sm.runtime()
        extra["_sm"], extra["_rt"] = sm, rt
        return lambda: rt(*xs)
    raise Skip(f"unknown runner {runner!r}")


def _ov_onnx(art: Path, threads: int, xs: list, names: list[str], extra: dict, precision: str):
    """OpenVINO run directly on the model's ONNX file: the same compile settings and calling
    convention as srcore's openvino engines (one infer request, the input shared, the output copied)."""
    try:
        import openvino as ov
    except ImportError as e:
        raise Skip(f"openvino not installed: {e}") from None
    _require(art / "model.onnx")
    if precision == "bf16":
        from srcore_openvino.device import bf16_refusal

        why = bf16_refusal()
        if why is not None:
            raise Skip(why)
    try:
        from srcore_openvino.engine import compile_config   # the settings srcore's engines use
    except ImportError as e:
        raise Skip(f"srcore-openvino not installed: {e}") from None
    core = ov.Core()
    model = core.read_model(str(art / "model.onnx"))
    compiled = core.compile_model(model, "CPU", compile_config(precision, threads))
    req = compiled.create_infer_request()
    extra["openvino_version"] = ov.__version__

    feed = _feed([p.get_any_name() for p in compiled.inputs], names, xs)
    tensors = [ov.Tensor(feed[p.get_any_name()], shared_memory=True) for p in compiled.inputs]
    n_out = len(compiled.outputs)

    def call():
        for i, t in enumerate(tensors):
            req.set_input_tensor(i, t)
        req.infer()
        return [req.get_output_tensor(i).data.copy() for i in range(n_out)]
    return call


def _require(path: Path) -> None:
    if not path.exists():
        err = path.with_suffix(path.suffix + ".error")
        msg = err.read_text() if err.exists() else "not prepared"
        raise Skip(f"artifact {path.name} missing: {msg}")


def preimport(runner: str) -> None:
    mods = {"eager": "torch", "torchscript": "torch", "static_runtime": "torch", "ort": "onnxruntime",
            "onnx_reference": "onnx.reference", "ov_onnx": "openvino", "ov_onnx_bf16": "openvino"}.get(
        runner, "srcore" if runner.startswith("srcore") or runner in ENGINE_RUNNERS else None)
    for mod in (mods, "openvino" if runner.startswith("openvino") else None):
        if mod:
            try:
                __import__(mod)
            except ImportError:
                pass  # load_runner reports the skip


def blas_info() -> list[dict]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keep = ("internal_api", "version", "architecture", "num_threads", "threading_layer", "filepath")
    return [{k: d.get(k) for k in keep} for d in threadpool_info()]


def run_cell(model: str, runner: str, threads: int, art: Path, quick: bool) -> dict:

    res: dict = {"model": model, "runner": runner, "threads": threads}
    extra: dict = {}
    names, xs = load_inputs(art)
    refs = load_refs(art)
    from threadpoolctl import threadpool_limits

    preimport(runner)  # load time is file -> ready callable, not the library's import
    limits = threadpool_limits(limits=threads)  # every BLAS / OpenMP pool loaded in this process
    t0 = time.perf_counter()
    call = load_runner(model, runner, threads, art, xs, names, extra)
    res["load_ms"] = (time.perf_counter() - t0) * 1e3
    peak_rss_reset()  # after load: the peak below is what inference adds
    base = peak_rss_kib()
    t0, c0 = time.perf_counter(), time.process_time()
    y = call()
    res["first_call_ms"] = (time.perf_counter() - t0) * 1e3
    res["first_call_cpu_ms"] = (time.process_time() - c0) * 1e3
    ys = flatten_outputs(y)   # (not timed: the steady calls below are not flattened either)
    res["max_rel_err"] = max_rel_err(ys, refs)
    tol = CHECKED_RUNNERS.get(runner)
    if tol is not None and not res["max_rel_err"] <= tol:   # a wrong answer is not timed
        res.update(status="wrong", error=f"max relative error {res['max_rel_err']:.2e} > {tol:g} against torch eager")
        return res
    t0 = time.perf_counter()
    call()
    dt = time.perf_counter() - t0
    res["second_call_ms"] = dt * 1e3
    # the first call against steady calls in CPU time too (the process's, every thread's): on a
    # loaded machine a wall-clock first call is one sample of the scheduler's delays
    cpu = []
    for _ in range(3 if dt > 0.1 else 9):
        c0 = time.process_time()
        call()
        cpu.append(time.process_time() - c0)
    res["steady_cpu_ms"] = sorted(cpu)[len(cpu) // 2] * 1e3
    if quick:
        rounds, runs = 2, 3
    elif dt > 0.1:  # slow peers (onnx.reference on convolutions): fewer calls
        rounds, runs = 4, 3
    else:
        rounds, runs = 10, max(3, min(5000, int(0.1 / max(dt, 1e-7))))
    res.update(measure(call, rounds, runs))
    peak = peak_rss_kib()
    res["peak_rss_increase_kib"] = (peak - base) if peak is not None and base is not None else None
    res["blas"] = blas_info()
    del limits
    if "_sm" in extra:
        res["arena_bytes"] = extra["_rt"].arena_bytes
        rows = extra["_sm"].memory_report(*xs)
        res["memory"] = [{k: r[k] for k in ("block", "owner", "managed_tensors", "arena_bytes",
                                            "no_reuse_bytes", "lower_bound_bytes", "algorithm")} for r in rows]
    res.update({k: v for k, v in extra.items() if not k.startswith("_")})
    res["status"] = "ok"
    return res


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    quick = "--quick" in argv
    model, runner, threads, art = [a for a in argv if a != "--quick"]
    try:
        res = run_cell(model, runner, int(threads), Path(art), quick)
    except Skip as e:
        res = {"model": model, "runner": runner, "threads": int(threads), "status": "skipped", "note": str(e)}
    except Exception as e:  # noqa: BLE001 - a failing cell is a result, not a crash
        tb = traceback.format_exc(limit=-3)
        res = {"model": model, "runner": runner, "threads": int(threads), "status": "error",
               "error": f"{type(e).__name__}: {e}"[:2000], "traceback": tb[-3000:]}
    print("@@RESULT@@" + json.dumps(res, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
