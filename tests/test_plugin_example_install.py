"""A real install of examples/plugin-example into a fresh venv: discovery through its entry point, and use.

The venv is created with ``--system-site-packages`` and a ``.pth`` that adds
this interpreter's site directories, so it sees srcore (editable) and its
dependencies; the example itself is REALLY installed with pip into the new venv.
"""
from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

#: a pip install of the example plugin and its discovery: the executor and planner play no part
pytestmark = pytest.mark.one_pass

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "plugin-example"

SNIPPET = textwrap.dedent("""
    import sys
    import numpy as np
    import srcore
    from srcore.dispatch import resolve_node
    from srcore.ir import Graph, TensorType

    pm = srcore.get_plugin_manager()
    assert pm.report("example").status == "loaded", pm.report("example")
    assert "srcore_example.kernels" not in sys.modules        # discovery imports no kernel module
    assert pm.registry.shape_rules.lookup("example::scaled_tanh").provider.dist == "srcore-plugin-example"
    g = Graph()
    x = g.add_input(TensorType("float64", (4,)), "x")
    st = g.insert("example::scaled_tanh", [x, g.insert_constant(3.0)], [TensorType("float64", (4,))])
    relu = g.insert("aten::relu", [x], [TensorType("float64", (4,))])
    rk = resolve_node(st, pm.kernel_table, ["cpu"])
    data = np.array([-2.0, -0.5, 0.0, 1.5])
    out = np.empty(4)
    assert rk.kind == "out" and rk.fn(data, scale=3.0, out=out) is out
    np.testing.assert_allclose(out, 3.0 * np.tanh(data))
    rr = resolve_node(relu, pm.kernel_table, ["cpu"])
    assert (rr.kernel.provider.dist, rr.kernel.priority) == ("srcore-plugin-example", 10), rr
    np.testing.assert_array_equal(rr.fn(data), np.maximum(data, 0))
    print("ok", rk.kernel.provider)
""")


@pytest.mark.slow
def test_pip_install_of_the_example_plugin(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    purelib = subprocess.check_output([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                      text=True).strip()
    parents = [p for p in site.getsitepackages() if os.path.isdir(p)]
    # process this interpreter's site dirs (and their .pth files: the editable srcore install) after the venv's
    Path(purelib, "_srcore_parent.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in parents))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SRCORE_DISABLE", "PYTHON"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    # from a copy: building in place leaves build/ and an .egg-info in the checkout, whose entry point then
    # loads the example plugin a second time wherever examples/plugin-example is on sys.path
    src = tmp_path / "plugin-example"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run([py, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-cache-dir", str(src)], check=True, env=env, cwd=tmp_path, timeout=120)
    assert list(Path(purelib).glob("srcore_plugin_example-*.dist-info")), "not installed into the new venv"

    proc = subprocess.run([py, "-c", "import sys; from srcore.cli import main; sys.exit(main())", "list-ops",
                           "--op", "example::*", "--format", "json"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    (entry,) = json.loads(proc.stdout)
    assert entry["name"] == "example::scaled_tanh" and entry["overload"] == ""
    assert entry["schema"] == "example::scaled_tanh(Tensor self, *, float scale=1.) -> Tensor"
    assert entry["kernels"] == [{"backend": "cpu", "kind": "out", "dtypes": ["float32", "float64"],
                                 "plugin": "srcore-plugin-example", "plugin_version": "0.1.0"}]

    proc = subprocess.run([py, "-c", SNIPPET], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok srcore-plugin-example 0.1.0")
