"""The command line of engine backends: ``srcore build``, the engine flags of run/bench/inspect/check,
``inspect --partition -i``, ``list-ops --engine``."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from srcore.cli.main import main
from srcore.cli.output import load_schema

pytestmark = pytest.mark.one_pass

ROOT = Path(__file__).resolve().parents[3]
DIGITS = ROOT / "examples" / "digits" / "digits.srm"


def call(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_build_then_a_fresh_process_loads_without_building(capsys, tmp_path):
    out_path = tmp_path / "digits.engine.srm"
    # built in a fresh process too, as a user does: the plans record the process's intra-op thread count,
    # which in this long-lived test process depends on which threading layer an earlier test started
    built = subprocess.run([sys.executable, "-m", "srcore", "build", str(DIGITS), "-o", str(out_path), "--backend",
                            "trt_like,cpu", "--profile", "x=1x1x8x8:4x1x8x8:16x1x8x8", "--format", "json"],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    report = json.loads(built.stdout)
    jsonschema.validate(report, load_schema("build"))
    assert report["engines"] == [{"name": "trt_like_engine_0", "backend": "trt_like", "nodes": 7, "serialized": True}]
    env = dict(os.environ, SRCORE_LOG="info")
    run = subprocess.run([sys.executable, "-m", "srcore", "run", str(out_path), "--backend", "trt_like,cpu",
                          "--profile", "x=4x1x8x8"], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "plan for inputs (4, 1, 8, 8) loaded from the serialized engine" in run.stderr, run.stderr
    assert "trt_like_engine_0: 7 node(s) loaded into an engine" in run.stderr
    assert not re.search(r"plan for inputs .* built in", run.stderr) and "timed the tactics" not in run.stderr
    assert "output: float32[1, 10]" in run.stdout     # random inputs: symbolic dims are 1


def test_build_refuses_a_model_without_engines_and_stdout(capsys, tmp_path):
    code, _, err = call(capsys, "build", DIGITS, "-o", tmp_path / "x.srm", "--backend", "trt_like,cpu",
                        "--fallback-op", "srcore::conv2d_relu", "--fallback-op", "aten::linear",
                        "--fallback-op", "srcore::linear_relu")
    assert code == 1 and "no segment went into an engine on trt_like, cpu: nothing to build" in err
    code, _, err = call(capsys, "build", DIGITS, "-o", "-")
    assert code == 2 and "an engine file is written to a file" in err


def test_engine_flags_reach_the_partitioner(capsys):
    code, out, err = call(capsys, "inspect", DIGITS, "--partition", "trt_like", "--format", "json",
                          "--min-block-size", "2", "--fallback-op", "aten::linear", "--fallback-module", "nothing",
                          "--engine-option", "timing=false", "-i", "x=2x1x8x8")
    assert code == 0, err
    part = json.loads(out)["sections"]["partition"]
    assert [r["reason"] for r in part["refused"]] == ["listed in Options.engine_fallback_ops"]
    (seg,) = [s for s in part["segments"] if s["status"] == "engine"]
    assert "plan for inputs (2, 1, 8, 8)" in seg["description"]
    code, _, err = call(capsys, "inspect", DIGITS, "--partition", "trt_like", "--require-full-compilation",
                        "--fallback-op", "aten::linear")
    assert code == 1 and "not every node is in an engine" in err
    code, _, err = call(capsys, "run", DIGITS, "--backend", "trt_like,cpu", "--engine-option", "fusoin=false")
    assert code == 1 and "unknown trt_like engine option 'fusoin' (did you mean 'fusion'?)" in err
    code, _, err = call(capsys, "run", DIGITS, "--engine-option", "timing")
    assert code == 2 and "expected KEY=VALUE" in err
    code, _, err = call(capsys, "run", DIGITS, "--backend", "trt_like,cpu", "--profile", "x=2x3x8x8")
    assert code == 1 and "has 3 in dim 1, the input's spec (batch, 1, 8, 8) fixes it at 1" in err


def test_list_ops_engine_prints_the_op_table(capsys):
    code, out, err = call(capsys, "list-ops", "--engine", "trt_like", "--op", "aten::conv2d")
    assert code == 0, err
    assert "weight, bias, stride, padding, dilation, groups" in out and "a 4-D (N, C, H, W) input" in out
    code, out, _ = call(capsys, "list-ops", "--engine", "trt_like", "--format", "json")
    entries = json.loads(out)
    jsonschema.validate(entries, load_schema("list-ops"))
    by_name = {e["name"] + (f".{e['overload']}" if e["overload"] else ""): e["engine"] for e in entries}
    add = by_name["aten::add.Tensor"]
    assert add["backend"] == "trt_like" and add["constants"] == ["alpha"] and "int64, int32, int16, int8, uint8" in add["notes"]
    assert by_name["aten::relu"] == {"backend": "trt_like", "constants": [], "notes": ""}
    assert "aten::logcumsumexp" not in by_name and "aten::reshape" in by_name
    code, _, err = call(capsys, "list-ops", "--engine", "cpu")
    assert code == 1 and "--engine cpu: not an engine backend" in err
