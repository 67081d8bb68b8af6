"""The benchmark harness: model set == the reference, numpy floor == torch, smoke run end to end."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import pytest

torch = pytest.importorskip("torch")

#: the benchmark harness: each srcore runner names its executor and planner; the rest is torch, numpy and ONNX Runtime
pytestmark = pytest.mark.one_pass

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # benchmarks/ is a top-level package of the checkout, not installed
    sys.path.insert(0, str(ROOT))

from benchmarks import cell  # noqa: E402
from benchmarks.artifacts import load_inputs, load_refs, max_rel_err, save_inputs, save_refs  # noqa: E402
from benchmarks.models import MODELS  # noqa: E402
from benchmarks.numpy_floor import FLOORS  # noqa: E402
from _shared import require_shared  # noqa: E402

# the cheap ones by default; mlp_wide / resnet_small build ~100 MB of weights
FAST = ["mlp_tiny", "elementwise_chain", "control_flow", "transformer_block", "transformer_block_explicit"]


def _load_ref(name: str):
    path = require_shared(f"bench/{name}.py")
    spec = importlib.util.spec_from_file_location(f"_ref_bench_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", FAST + ["mlp_wide"])
def test_models_identical_to_reference(name):
    ref = _load_ref("models")
    assert set(MODELS) == set(ref.MODELS)
    assert MODELS[name][1]["compute_bound"] == ref.MODELS[name][1]["compute_bound"]
    m, inp = MODELS[name][0]()
    r, rinp = ref.MODELS[name][0]()
    assert len(inp) == len(rinp) and all(torch.equal(a, b) for a, b in zip(inp, rinp))
    sd, rsd = m.state_dict(), r.state_dict()
    assert list(sd) == list(rsd)
    assert all(torch.equal(sd[k], rsd[k]) for k in sd)
    assert not m.training
    with torch.inference_mode():
        assert torch.equal(m(*inp), r(*rinp))


def test_resnet_bn_statistics_identical_to_reference():
    ref = _load_ref("models")
    m, inp = MODELS["resnet_small"][0]()
    r, rinp = ref.MODELS["resnet_small"][0]()
    assert torch.equal(inp[0], rinp[0])
    sd, rsd = m.state_dict(), r.state_dict()
    assert list(sd) == list(rsd) and all(torch.equal(sd[k], rsd[k]) for k in sd)
    assert float(sd["bn1.running_var"].min()) >= 0.5  # non-trivial statistics were drawn


@pytest.mark.parametrize("name", ["mlp_tiny", "elementwise_chain", "mlp_wide"])
def test_numpy_floor_matches_torch_and_reference(name):
    m, inp = MODELS[name][0]()
    sd = {k: v.numpy() for k, v in m.state_dict().items()}
    x = inp[0].numpy()
    with torch.inference_mode():
        want = m(*inp).numpy()
    impl = FLOORS[name](sd, x.shape)
    scale = np.abs(want).max()
    for f in (impl.plain, impl.out, impl.out):  # out= twice: the buffers are reused correctly
        got = f(x)
        assert got.dtype == np.float32 and got.shape == want.shape
        assert np.abs(got - want).max() / scale < 2e-5
    ref = _load_ref("numpy_impls").NUMPY_IMPLS[name](sd, x.shape)
    np.testing.assert_allclose(impl.plain(x), ref.straight(x), rtol=1e-5, atol=1e-6 * scale)
    np.testing.assert_allclose(impl.out(x), ref.prealloc(x), rtol=1e-5, atol=1e-6 * scale)


def test_failing_cell_is_a_result_not_a_crash(tmp_path, capsys):
    art = tmp_path / "artifacts" / "mlp_tiny"
    art.mkdir(parents=True)
    save_inputs(art, ["x"], [np.zeros((1, 64), np.float32)])
    save_refs(art, [np.zeros((1, 10), np.float32)])
    (art / "model.srm.error").write_text("ConversionError: no kernel for aten::foo")
    assert cell.main(["mlp_tiny", "srcore_codegen_standard", "1", str(art)]) == 0
    res = json.loads(capsys.readouterr().out.split("@@RESULT@@")[1])
    assert res["status"] == "skipped" and "aten::foo" in res["note"]
    assert cell.main(["mlp_tiny", "eager", "1", str(art)]) == 0  # no eager_state.pt: an error
    res = json.loads(capsys.readouterr().out.split("@@RESULT@@")[1])
    assert res["status"] == "error" and "eager_state.pt" in res["error"]


def test_smoke_run_end_to_end(tmp_path):
    """``python -m benchmarks.run --smoke``: fresh processes, outputs checked against eager, JSON + table."""
    runners = "eager,numpy_out,ort,srcore_codegen_standard"
    p = subprocess.run([sys.executable, "-m", "benchmarks.run", "--smoke", "--models", "mlp_tiny",
                        "--runners", runners, "--out", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    report = json.loads((tmp_path / "smoke.json").read_text())
    cells = {c["runner"]: c for c in report["cells"]}
    assert set(cells) == set(runners.split(","))
    for name in ("eager", "numpy_out", "srcore_codegen_standard"):
        c = cells[name]
        assert c["status"] == "ok", c
        assert c["max_rel_err"] < 1e-5
        assert 0 < c["best_round_median_us"] <= c["median_us"] * 1.5
        assert c["median_us"] <= c["p90_us"]
        assert c["load_ms"] > 0
        # the first call in CPU time beside the steady calls' (deliverable 4 on a loaded machine)
        assert c["first_call_cpu_ms"] >= 0 and c["steady_cpu_ms"] >= 0
    assert cells["ort"]["status"] in ("ok", "skipped")
    assert cells["srcore_codegen_standard"]["arena_bytes"] > 0
    assert "srcore codegen/standard" in p.stdout and "1.00x" in p.stdout
    # the children ran without the OpenBLAS overrides the environment may set
    assert all(d.get("internal_api") for d in cells["numpy_out"]["blas"])


def test_the_table_gives_the_first_call_over_the_steady_one_in_wall_and_cpu_time():
    from benchmarks.report import first_call_table, format_table

    c = {"model": "mlp_tiny", "runner": "srcore_codegen_standard", "threads": 1, "status": "ok",
         "best_round_median_us": 10.0, "median_us": 10.0, "p90_us": 12.0, "load_ms": 5.0, "first_call_ms": 0.03,
         "first_call_cpu_ms": 0.025, "steady_cpu_ms": 0.01, "peak_rss_increase_kib": 4, "max_rel_err": 0.0}
    old = {k: v for k, v in c.items() if k not in ("first_call_cpu_ms", "steady_cpu_ms")}   # an older report
    row = [line for line in format_table({"cells": [c]}).splitlines() if line.startswith("srcore codegen")][0]
    assert "3.0x" in row and "2.5x" in row, row
    assert "cpu 2.5x" in first_call_table({"cells": [c]}) and "cpu -" in first_call_table({"cells": [old]})


def test_plan_two_threads_only_for_compute_bound_models():
    from benchmarks.run import RUNNERS_2T, plan_cells

    cells = plan_cells(["mlp_tiny", "mlp_wide"], ["eager", "onnx_reference", "srcore_codegen_standard"], [1, 2])
    assert ("mlp_tiny", "eager", 2) not in cells and ("mlp_tiny", "eager", 1) in cells
    assert ("mlp_wide", "eager", 2) in cells and ("mlp_wide", "onnx_reference", 2) not in cells
    assert all(r in RUNNERS_2T for m, r, t in cells if t == 2)
    assert len(cells) == 3 + 3 + 2


def test_merge_keeps_the_least_disturbed_pass_of_each_cell():
    from benchmarks.run import merge_reports

    def cell(model, us, status="ok"):
        c = {"model": model, "runner": "eager", "threads": 1, "status": status}
        return {**c, "best_round_median_us": us} if status == "ok" else c

    old = {"command": "a", "prepare": {}, "wall_s": 1, "date": "d0",
           "cells": [cell("mlp_tiny", 10.0), cell("mlp_wide", 100.0), cell("control_flow", 0, "error")]}
    new = {"command": "b", "prepare": {}, "wall_s": 2, "date": "d1",
           "cells": [cell("mlp_tiny", 12.0), cell("mlp_wide", 80.0), cell("control_flow", 50.0)]}
    got = {c["model"]: c for c in merge_reports(old, new)["cells"]}
    assert got["mlp_tiny"]["best_round_median_us"] == 10.0
    assert got["mlp_tiny"]["passes_best_round_us"] == [10.0, 12.0]
    assert got["mlp_wide"]["best_round_median_us"] == 80.0
    assert got["control_flow"]["status"] == "ok"  # a pass that worked beats one that failed


def test_several_inputs_of_any_dtype_through_every_kind_of_runner(tmp_path, capsys):
    """index_ops takes float32 logits and int64 ids and returns four outputs (int64, float32, int64,
    float32): its artifacts keep both inputs by forward's names, and the eager, TorchScript, Static
    Runtime, ORT and srcore cells feed both and check all four outputs against torch eager."""
    from benchmarks.prepare import prepare

    status = prepare("index_ops", tmp_path)
    art = tmp_path / "artifacts" / "index_ops"
    names, xs = load_inputs(art)
    assert names == ["logits", "penalty_ids"] and [x.dtype for x in xs] == [np.float32, np.int64]
    refs = load_refs(art)
    assert [r.dtype for r in refs] == [np.int64, np.float32, np.int64, np.float32]
    for runner in ("eager", "torchscript", "static_runtime", "ort", "srcore_codegen_standard"):
        assert cell.main(["index_ops", runner, "1", str(art), "--quick"]) == 0
        res = json.loads(capsys.readouterr().out.split("@@RESULT@@")[1])
        if runner == "ort" and res["status"] == "skipped":  # onnxruntime is in the bench extra only
            assert "onnxruntime" in res["note"] or "model.onnx" in res["note"], res
            continue
        assert res["status"] == "ok", res
        assert res["max_rel_err"] < 1e-5, (runner, res["max_rel_err"])
        assert res["first_call_ms"] > 0 and res["second_call_ms"] > 0
    assert status["model.onnx"] in ("ok", "cached") or importlib.util.find_spec("onnx") is None


def test_max_rel_err_compares_every_output():
    a = np.array([1.0, -2.0, 4.0], np.float32)
    ids = np.array([3, 1], np.int64)
    assert max_rel_err([a, ids], [a, ids]) == 0.0
    assert max_rel_err([a + np.float32(0.04), ids], [a, ids]) == pytest.approx(0.01, rel=1e-5)
    assert max_rel_err([a, ids + 1], [a, ids]) == float("inf")        # integers exactly
    assert max_rel_err([a], [a, ids]) == float("inf")                 # an output missing
    assert max_rel_err([a[:2], ids], [a, ids]) == float("inf")        # a shape differs
    inf = np.array([-np.inf, 1.0], np.float32)
    assert max_rel_err([inf], [inf]) == 0.0                            # masked scores match
    assert max_rel_err([np.array([0.0, 1.0], np.float32)], [inf]) == float("inf")


def test_sets_select_the_seven_the_families_or_both():
    from benchmarks.models import FAMILIES, MODELS
    from benchmarks.run import SETS, parse_args

    assert SETS["seven"] == list(MODELS) and SETS["families"] == list(FAMILIES)
    assert SETS["all"] == list(MODELS) + list(FAMILIES)
    assert parse_args([]).set == "all" and parse_args(["--set", "families"]).set == "families"
    assert {"mobilenet_v3", "unet_small", "bert_encoder", "lstm_gru", "detection_head", "index_ops",
            "audio_conv1d"} <= set(FAMILIES)


def test_ort_profile_sums_ort_kernel_time_by_op_type_and_by_node(tmp_path):
    """``benchmarks.ort_profile``: ORT's profiler events of the model's own ONNX file, per run."""
    from benchmarks import ort_profile
    from benchmarks.prepare import prepare

    prepare("index_ops", tmp_path)
    by_op, count, by_node = ort_profile.profile("index_ops", 3, tmp_path)
    assert by_op and set(count) == set(by_op) and min(count.values()) >= 1
    assert min(by_op.values()) >= 0 and sum(by_op.values()) > 0
    assert sum(by_node.values()) == pytest.approx(sum(by_op.values()))
    assert not list(tmp_path.glob("ort_profile_*"))          # the profiler's file is removed


@pytest.mark.one_pass  # the runners name their executor and planner
def test_families_ab_times_runners_in_one_process_and_checks_outputs(tmp_path, monkeypatch):
    """``benchmarks.families_ab``: every runner's output checked, a best-round median each, ratios to
    eager; a runner whose output is wrong stops the measurement."""
    from benchmarks import families_ab

    rows = families_ab.measure(["index_ops"], ["eager", "srcore_codegen_standard"], 2, tmp_path)
    (row,) = rows
    assert row["eager_us"] > 0 and row["srcore_codegen_standard_us"] > 0
    assert row["srcore_codegen_standard/eager"] == pytest.approx(row["srcore_codegen_standard_us"] / row["eager_us"])
    # a runner loaded without the cpu plugin's SIMD conv, timed in CPU time; the variable restored
    monkeypatch.delenv("SRCORE_CPU_SIMD_CONV", raising=False)
    (row,) = families_ab.measure(["index_ops"], ["srcore_codegen_standard+nosimd"], 1, tmp_path, cpu_time=True)
    assert row["srcore_codegen_standard+nosimd_us"] > 0 and "SRCORE_CPU_SIMD_CONV" not in os.environ
    # chained suffixes: each variable set while the runner loads, put back after
    monkeypatch.setenv("SRCORE_CPU_MKL", "1")
    assert families_ab._strip_suffixes("cpu+nomkl+nosplit") == ("cpu", ["SRCORE_CPU_SPLIT_GEMM", "SRCORE_CPU_MKL"])
    assert families_ab._suffix_env("cpu+omp+nomkl") == ("cpu", {"SRCORE_CPU_MKL": "0", "SRCORE_CPU_OMP_TEAM": "1"})
    assert families_ab._suffix_env("cpu+nomkl+omp") == ("cpu", {"SRCORE_CPU_MKL": "0", "SRCORE_CPU_OMP_TEAM": "1"})
    assert families_ab._suffix_env("trt_like+tightwait") == ("trt_like", {"SRCORE_TRT_LIKE_TIGHT_WAIT": "1"})
    assert families_ab._suffix_env("trt_like+smallsplit") == ("trt_like", {"SRCORE_TRT_LIKE_SMALL_SGEMM_SPLIT": "1"})
    seen = []
    real_load = cell.load_runner
    monkeypatch.setattr(cell, "load_runner", lambda *a: (seen.append((os.environ.get("SRCORE_CPU_MKL"),
                                                                      os.environ.get("SRCORE_CPU_SPLIT_GEMM"))),
                                                         real_load(*a))[1])
    families_ab.measure(["index_ops"], ["srcore_codegen_standard+nomkl+nosplit"], 1, tmp_path)
    assert seen == [("0", "0")] and os.environ["SRCORE_CPU_MKL"] == "1" and "SRCORE_CPU_SPLIT_GEMM" not in os.environ
    monkeypatch.setattr(cell, "load_runner", real_load)
    real = cell.load_runner

    def wrong(model, runner, *a):
        fn = real(model, runner, *a)
        return (lambda: [o * 2 + 1 for o in cell.flatten_outputs(fn())]) if runner == "eager" else fn
    monkeypatch.setattr(cell, "load_runner", wrong)
    with pytest.raises(AssertionError, match="eager: wrong output"):
        families_ab.measure(["index_ops"], ["eager"], 1, tmp_path)



def test_thread_scaling_times_each_runner_at_one_and_two_threads_in_one_process(tmp_path, monkeypatch):
    """``benchmarks.thread_scaling``: each runner loaded at 1 and at 2 threads (trt_like's intra-op count
    read under ``threadpool_limits``), both outputs checked, a best-round median each."""
    from benchmarks import thread_scaling
    from srcore_trt_like.kernels import threads as trt_threads

    seen = []
    real = cell.load_runner

    def load(model, runner, threads, *a):
        seen.append((threads, trt_threads._blas_threads()))
        return real(model, runner, threads, *a)
    monkeypatch.setattr(cell, "load_runner", load)
    (row,) = thread_scaling.measure(["mlp_tiny"], ["trt_like"], 1, tmp_path)
    assert row["trt_like_1t_us"] > 0 and row["trt_like_2t_us"] > 0
    assert seen == [(1, 1), (2, 2)]
    monkeypatch.setattr(cell, "load_runner", lambda *a: (lambda: [np.zeros(1, np.float32)]))
    with pytest.raises(AssertionError, match="trt_like at 1 threads: wrong output"):
        thread_scaling.measure(["mlp_tiny"], ["trt_like"], 1, tmp_path)


@pytest.mark.one_pass
def test_engine_threads_reports_layers_and_the_cpu_of_each_thread(tmp_path):
    """``benchmarks.engine_threads``: a trt_like engine's layers with their tactics, and CPU time per
    call by thread, the calling thread's covering the call's own work."""
    pytest.importorskip("srcore_trt_like")
    from benchmarks import engine_threads

    r = engine_threads.cell("mlp_tiny", 1, 20, tmp_path)
    assert r["median_ms"] > 0 and r["best_ms"] <= r["median_ms"]
    assert r["layers"] and all("[" in label and ms > 0 for label, ms in r["layers"])
    (caller,) = [ms for name, ms in r["cpu_ms_per_call"].items() if name.startswith("caller")]
    assert 0 < caller
    assert r["governors"] == {"team": 0, "solo": 0, "waits": 0, "held": 0, "pinned": 0}   # one thread: no team regions


@pytest.mark.one_pass
def test_engine_threads_profiles_the_cpu_plugin_alone_by_node(tmp_path):
    """``--backend cpu``: no engine, so the slowest nodes (op, kind, backend) with their times, and the
    same CPU time per thread."""
    pytest.importorskip("srcore_trt_like")
    from benchmarks import engine_threads

    r = engine_threads.cell("mlp_tiny", 1, 20, tmp_path, backend="cpu")
    assert r["backend"] == "cpu" and r["layers"]
    assert all("cpu" in label and ms >= 0 for label, ms in r["layers"])
    assert any(name.startswith("caller") for name in r["cpu_ms_per_call"])


@pytest.mark.full   # ~5 s: prepares mlp_tiny's artifacts and builds its engine
def test_engine_gap_splits_a_call_into_glue_and_layers(tmp_path):
    """``benchmarks.engine_gap``: the engine's plan, one entry per kernel layer, the no-op-kernel
    glue cheaper than the call, and the numba kernels restored after the wrapper timing."""
    pytest.importorskip("srcore_trt_like")
    from benchmarks import engine_gap
    from numba.core.registry import CPUDispatcher

    import srcore_trt_like.kernels.squeeze_excite as se

    row = engine_gap.measure("mlp_tiny", tmp_path, rounds=1)
    assert row["layers"] == sum(s.fn is not None for s in row["_plan"].steps) > 0
    assert 0 < row["glue"] < row["call"] and row["hot"] > 0 and row["in_sequence"] > 0
    engine_gap.wrappers([row], rounds=1)
    assert sum(n for n, _ in row["wrappers"].values()) == row["layers"]
    assert isinstance(se._pool, CPUDispatcher)


@pytest.mark.one_pass
def test_team_handover_reports_the_control_and_the_team_region():
    """``benchmarks.team_handover``: the machine's own 2-thread control and the team region's cost and
    join latency, from a few calls."""
    pytest.importorskip("srcore_trt_like")
    from benchmarks import team_handover

    c = team_handover.control(rounds=2, gemms=1)
    assert c["seq_ms"] > 0 and c["par_ms"] > 0 and c["best"] == pytest.approx(c["seq_ms"] / c["par_ms"])
    h = team_handover.handover(calls=5, part_rows=64, parts=4)
    assert h["alone_us"] > 0 and h["region_us"] > 0 and 0 <= h["joined"] <= 1
    assert (h["join_us"] > 0) == (h["joined"] > 0)      # nan (no join) compares False


@pytest.mark.full       # ~5 s: a 2-thread child process that builds an engine
@pytest.mark.one_pass
def test_engine_threads_child_gets_the_thread_count_in_its_environment(tmp_path, capsys, monkeypatch):
    """``benchmarks.engine_threads`` runs each cell with ``OMP/MKL/OPENBLAS_NUM_THREADS`` set (MKL and
    OpenMP read them, ``threadpool_limits`` alone leaves the engine's MKL tactics on one thread)."""
    pytest.importorskip("srcore_trt_like")
    from benchmarks import engine_threads

    for var in engine_threads.THREAD_VARS:
        monkeypatch.delenv(var, raising=False)     # the child gets them from the parent, not by inheritance
    engine_threads.main(["--models", "mlp_tiny", "--threads", "2", "--calls", "2", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "failed" not in out
    assert "OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2" in out
    assert "the engine's MKL tactics 2" in out


@pytest.mark.full       # ~5 s: converts a small encoder and builds its engines
@pytest.mark.one_pass
def test_engine_threads_profiles_an_engine_on_its_own_inputs():
    """An engine after an embedding lookup gets float activations, not the model's int64 ids (as in
    bert_encoder): each engine's layers are profiled on the inputs it really receives."""
    pytest.importorskip("srcore_trt_like")
    import srcore
    from benchmarks import engine_threads
    from benchmarks.families import BertEncoder

    torch.manual_seed(0)
    m = BertEncoder(vocab=50, d=32, layers=1, heads=2, ff=64, max_len=16).eval()
    ids, mask = torch.randint(1, 50, (1, 8)), torch.ones(1, 8, dtype=torch.int64)
    sm = srcore.StaticModule(srcore.from_torchscript(torch.jit.trace(m, (ids, mask)), (ids, mask)),
                             backends=("trt_like", "cpu"), options=srcore.Options(engine_options={"timing": False}))
    engines = [pn.fn.fn for b in sm.blocks for pn in b.nodes if pn.fn is not None and hasattr(pn.fn.fn, "profile")]
    assert engines and any(pn.fn is not None and pn.fn.backend == "cpu" for b in sm.blocks for pn in b.nodes)
    with pytest.raises(srcore.SrcoreInputError, match="int64|missing input"):  # the model's inputs are no engine's
        [e.profile(ids.numpy(), mask.numpy()) for e in engines]
    layers = engine_threads.engine_layers(sm, [ids.numpy(), mask.numpy()])
    assert all(ms > 0 for _, ms in layers)
    labels = [label for label, _ in layers]
    assert any(label.startswith("layer_norm") for label in labels)
    assert any(label.startswith(("softmax", "attention")) for label in labels)   # attention may be one fused layer


@pytest.mark.one_pass
def test_trt_like_conv_tables_name_every_tactic_trt_like_offers(capsys):
    """``benchmarks.trt_like_conv`` takes its tactic names from trt_like's own list: every conv tactic
    (and its max-pool fusion) has a distinct column head, and a layer whose candidates include the
    newest tactics prints with the fastest one named."""
    pytest.importorskip("srcore_trt_like")
    from srcore_trt_like.conv import conv_tactics
    from srcore_trt_like.options import CONV_TACTICS

    from benchmarks import trt_like_conv as tc

    order = tc.tactic_order()
    assert set(CONV_TACTICS) <= set(order)
    assert len({tc.short(n) for n in order}) == len(order)
    rng = np.random.default_rng(0)
    layer = dict(name="l", x=rng.standard_normal((1, 16, 14, 14), dtype=np.float32),
                 w=rng.standard_normal((32, 16, 3, 3), dtype=np.float32), b=np.zeros(32, np.float32),
                 stride=(1, 1), padding=(1, 1), relu=True, residual=None)
    ts = conv_tactics(tc._spec(layer), layer["w"], layer["b"])
    names = [t.name for t in ts]
    best = {(0, n): 1e-3 * (len(names) - k) for k, n in enumerate(names)}      # the last offered is fastest
    best.update({(0, "cpu"): 2e-3, (0, "torch"): 4e-3})
    tc.report([layer], [ts], best, 0, 1, 1, markdown=True)
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| l |"))
    assert row.split(" | ")[4 + len(names)] == tc.short(names[-1])
    assert all(tc.short(n) in out.splitlines()[3] for n in names)


@pytest.mark.one_pass  # srcore's runners use the default executor and planner
def test_heldout_ab_times_factory_models_and_checks_outputs():
    """``benchmarks.heldout_ab``: models from a factory, each runner checked against eager before it
    is timed (one whose output differs stops the measurement), ratios to eager and ORT."""
    import torch

    from benchmarks import heldout_ab

    factories = heldout_ab._factories("heldout_models:HELDOUT")
    (row,) = heldout_ab.measure(factories, ["index_graph"], ["eager", "ort", "srcore_cpu"], "script", 1, True)
    assert min(row["eager_us"], row["ort_us"], row["srcore_cpu_us"]) > 0
    assert row["srcore_cpu/ort"] == pytest.approx(row["srcore_cpu_us"] / row["ort_us"])

    class ScriptedDiffers(torch.nn.Module):
        def forward(self, x):
            if torch.jit.is_scripting():
                return x + 1.0
            return x
    with pytest.raises(AssertionError, match="srcore_cpu: wrong output"):
        heldout_ab.measure({"m": lambda: (ScriptedDiffers(), (torch.ones(4, 4),))}, ["m"], ["eager", "srcore_cpu"],
                           "script", 1, False)


@pytest.mark.one_pass
def test_heldout_ab_times_a_model_onnx_cannot_take_without_ort(monkeypatch, capsys):
    """A model torch.onnx's exporter refuses (a zoo has such models) costs its ORT column, not the run:
    the other runners are timed and the line says why ORT is missing."""
    import torch

    from benchmarks import heldout_ab

    def refuse(module, inputs, f):
        raise torch.onnx.errors.OnnxExporterError("Unsupported: ONNX export of operator adaptive_avg_pool2d")
    monkeypatch.setattr(heldout_ab, "_export_onnx", refuse)
    factories = heldout_ab._factories("heldout_models:HELDOUT")
    (row,) = heldout_ab.measure(factories, ["index_graph"], ["eager", "ort", "srcore_cpu"], "script", 1, True)
    assert "ort_us" not in row and row["srcore_cpu_us"] > 0
    assert "adaptive_avg_pool2d" in row["skipped"]["ort"]
    assert "ort skipped: torch.onnx cannot export it" in capsys.readouterr().out


def test_families_ab_refuses_an_unknown_runner_naming_it(capsys):
    """A runner name that is no runner (the tables' "cpu" column is ``srcore_codegen_standard``) stops the
    command before anything is timed, naming it and the known ones."""
    from benchmarks import families_ab

    with pytest.raises(SystemExit) as exc:
        families_ab.main(["--models", "index_ops", "--runners", "eager,cpu+nomkl"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown runner(s) cpu+nomkl" in err and "srcore_codegen_standard" in err


def test_layer_profile_takes_a_factory_model(tmp_path, capsys):
    """``benchmarks.layer_profile --factory``: a zoo model built by its factory, profiled layer by layer
    in trt_like beside ORT's nodes of its ONNX export; a name the table lacks stops it, naming the table."""
    from threadpoolctl import threadpool_limits

    from benchmarks import layer_profile

    with threadpool_limits(1):
        layer_profile.main(["nbeats", "--factory", "heldout6_models:MODELS", "--rounds", "1", "--calls", "1",
                            "--out", str(tmp_path)])
    out = capsys.readouterr().out
    trt, ort = out.split("nbeats: ONNX Runtime")
    assert trt.startswith("nbeats: trt_like, 1 thread") and "[" in trt   # layers with their tactics
    # N-BEATS's eleven Linear layers are Gemm nodes (ReLUs fused in by ORT) after ORT's transformers
    assert sum(line.split()[-1] in ("Gemm", "FusedGemm") for line in ort.splitlines()[1:]) >= 10
    assert not list(tmp_path.glob("layer_profile_*.json"))   # ORT's profile file removed
    with pytest.raises(SystemExit, match="no_such_model: not in heldout6_models:MODELS"):
        layer_profile.main(["no_such_model", "--factory", "heldout6_models:MODELS", "--out", str(tmp_path)])


def test_layer_profile_takes_a_model_split_around_a_cpu_node(tmp_path, capsys):
    """crnn's LSTM runs on the cpu plugin between two engines: the engine fed the model's inputs is
    profiled (its two conv + max pool layers), the one after the LSTM (other inputs) is left out."""
    from threadpoolctl import threadpool_limits

    from benchmarks import layer_profile

    with threadpool_limits(1):
        layer_profile.main(["crnn", "--factory", "heldout2_models:MODELS", "--rounds", "1", "--calls", "1",
                            "--out", str(tmp_path)])
    trt, ort = capsys.readouterr().out.split("crnn: ONNX Runtime")
    layers = trt.splitlines()[1:]
    assert sum("conv_max_pool" in line for line in layers) == 2, trt
    assert not any(line.split(" -> ")[0].split()[-1] in ("gemm", "log_softmax") for line in layers), trt
    assert "LSTM" in ort


@pytest.mark.full       # ~10 s: a child process importing torch and compiling the native team
def test_native_split_ab_prints_every_variant_of_each_product():
    """``benchmarks.native_split_ab``: per bert product a line with one thread, the splits and torch; then
    transformer_block's fused encoder layer the same ways."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "benchmarks.native_split_ab", "--rounds", "1", "--calls", "2",
                        "--gap-us", "4"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if "x torch)" in ln]
    assert len(lines) == 6 and lines[-1].startswith("encoder layer") and all(ln.split()[1] != "" and " one " in f" {ln} " and "torch " in ln for ln in lines)
