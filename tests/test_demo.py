"""``srcore demo``: the shipped digits classifier runs, is accurate, and agrees with torch on the same weights."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import srcore
from srcore.cli import main

DIGITS = Path(__file__).resolve().parents[1] / "examples" / "digits"
FAST = ["--rounds", "1", "--runs", "3"]


def _accuracy(out: str) -> float:
    m = re.search(r"held-out accuracy (\d\.\d+) \((\d+)/(\d+)\)", out)
    assert m, out
    return float(m.group(1))


def _cpu_installed() -> bool:
    reports = srcore.get_plugin_manager().reports
    return any(r.name == "cpu" and r.status == "loaded" for r in reports)


pytestmark = pytest.mark.skipif(not _cpu_installed(), reason="srcore-cpu is not installed")


def test_demo_subprocess_prints_accuracy_latency_and_pointer():
    proc = subprocess.run([sys.executable, "-c", "import sys; from srcore.cli import main; sys.exit(main())",
                           "demo", *FAST], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert _accuracy(out) >= 0.9
    assert "single-sample runs agree" in out
    assert re.search(r"srcore \(codegen\)\s+[\d.]+ [mu]s\s+[\d.]+ [mu]s", out)
    assert re.search(r"srcore \(interpreter\)\s+[\d.]+ [mu]s\s+[\d.]+ [mu]s", out)
    assert "plugin cpu" in out and "srcore inspect" in out


def test_demo_in_process_accuracy_matches_numpy_count(capsys):
    assert main(["demo", *FAST, "--no-torch"]) == 0
    out = capsys.readouterr().out
    # independent count: the shipped split's labels against the model's predictions recomputed here
    with np.load(DIGITS / "digits_test.npz") as d:
        x, y = d["x"], d["y"]
    pred = srcore.StaticModule(srcore.load(DIGITS / "digits.srm"), backends=("cpu",))(x).argmax(1)
    assert _accuracy(out) == pytest.approx(float((pred == y).mean()), abs=1e-4)
    assert _accuracy(out) >= 0.9
    assert "eager" not in out and "torch" not in out.split("latency")[1]


def test_shipped_model_agrees_with_torch_on_the_same_weights():
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(DIGITS))
    try:
        from net import DigitsNet
    finally:
        sys.path.remove(str(DIGITS))
    net = DigitsNet().eval()
    with np.load(DIGITS / "digits_torch.npz") as w:
        net.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files})
    with np.load(DIGITS / "digits_test.npz") as d:
        x, y = d["x"], d["y"]
    with torch.inference_mode():
        ref = net(torch.from_numpy(x)).numpy()
    model = srcore.load(DIGITS / "digits.srm")
    for executor in ("codegen", "interpreter"):
        sm = srcore.StaticModule(model, options=srcore.Options(executor=executor), backends=("cpu",))
        got = sm(x)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
        for i in (0, 7, len(x) - 1):  # a batch of 1 is a different input signature
            np.testing.assert_allclose(sm(x[i:i + 1]), ref[i:i + 1], rtol=1e-4, atol=1e-4)
    assert float((ref.argmax(1) == y).mean()) >= 0.9
    assert x.shape[1:] == (1, 8, 8) and x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1


def test_demo_with_a_missing_held_out_split_names_the_file(tmp_path, capsys):
    m = tmp_path / "m.srm"
    m.write_bytes((DIGITS / "digits.srm").read_bytes())
    assert main(["demo", "--model", str(m), *FAST]) == 1
    err = capsys.readouterr().err
    assert "m_test.npz: no such file" in err and "--data" in err


def test_demo_with_explicit_model_and_data(tmp_path, capsys):
    m, d = tmp_path / "other.srm", tmp_path / "split.npz"
    m.write_bytes((DIGITS / "digits.srm").read_bytes())
    with np.load(DIGITS / "digits_test.npz") as z:
        np.savez(d, x=z["x"][:50], y=z["y"][:50])
    # no net.py / weights beside this copy: torch is simply not timed
    assert main(["demo", "--model", str(m), "--data", str(d), *FAST]) == 0
    out = capsys.readouterr().out
    assert "/50)" in out and _accuracy(out) >= 0.9
