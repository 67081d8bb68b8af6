"""The ``srcore`` command line: list-ops (json contract), plugins, demo, plugin subcommands, exit codes."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import types

import numpy as np
import pytest

from srcore.cli import main
from srcore.cli.main import SUBCOMMANDS
from srcore.plugin import Backend, Kernel, OpLibrary, Subcommand, hookimpl
from srcore.plugin import manager as manager_mod
from srcore.plugin.manager import PluginManager

#: the command line's arguments, listings, exit codes and messages: the executor and planner play no part
pytestmark = pytest.mark.one_pass


class Demo:
    """A plugin with two ops, kernels on two backends, and a subcommand."""

    @hookimpl
    def srcore_op_libraries(self):
        yield OpLibrary("demo", schemas=("demo::scale(Tensor self, *, float s=2.0) -> Tensor",
                                         "demo::scale.out(Tensor self, *, float s=2.0, Tensor(a!) out) -> Tensor(a!)",
                                         "demo::bare(Tensor self) -> Tensor"))

    @hookimpl
    def srcore_backends(self):
        yield Backend("dcpu")
        yield Backend("dgpu")

    @hookimpl
    def srcore_kernels(self):
        yield Kernel("demo::scale", "dgpu", "native", ("float32",), np.multiply)
        yield Kernel("demo::scale", "dcpu", "out", ("float64", "float32"), np.multiply, priority=1)
        yield Kernel("demo::scale.out", "dcpu", "fallback", ("*",), np.multiply)

    @hookimpl
    def srcore_subcommands(self):
        def configure(p):
            p.add_argument("who")
        yield Subcommand("greet", "say hello", configure, lambda args: print(f"hello {args.who}") or 0)
        yield Subcommand("plugins", "clashes with a core command", lambda p: None, lambda a: 0)


class Failing:
    @hookimpl
    def srcore_kernels(self):
        raise RuntimeError("kaboom")


@pytest.fixture
def pm(monkeypatch):
    monkeypatch.delenv("SRCORE_DEBUG", raising=False)
    pm = PluginManager().load(entry_points=False)
    pm.register(Demo(), "demo", dist="srcore-demo", version="1.2")
    monkeypatch.setattr(manager_mod, "_default", pm)
    return pm


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_ops_json_is_the_documented_contract(pm, capsys):
    code, out, err = run(capsys, "list-ops", "--op", "demo::*", "--format", "json")
    assert code == 0 and err == ""
    k = lambda b, kind, dt: {"backend": b, "kind": kind, "dtypes": dt, "plugin": "srcore-demo",  # noqa: E731
                             "plugin_version": "1.2"}
    assert json.loads(out) == [
        {"name": "demo::bare", "overload": "", "schema": "demo::bare(Tensor self) -> Tensor", "kernels": []},
        {"name": "demo::scale", "overload": "", "schema": "demo::scale(Tensor self, *, float s=2.) -> Tensor",
         "kernels": [k("dcpu", "out", ["float64", "float32"]), k("dgpu", "native", ["float32"])]},
        {"name": "demo::scale", "overload": "out",
         "schema": "demo::scale.out(Tensor self, *, float s=2., Tensor(a!) out) -> Tensor(a!)",
         "kernels": [k("dcpu", "fallback", ["*"])]},
    ]


@pytest.mark.parametrize("flags, expected", [
    (["--backend", "dgpu"], [("demo::scale", "", ["dgpu"])]),
    (["--kind", "fallback"], [("demo::scale", "out", ["dcpu"])]),
    (["--plugin", "srcore-demo", "--op", "demo::scale.out"], [("demo::scale", "out", ["dcpu"])]),
    (["--plugin", "demo", "--backend", "dcpu", "--kind", "out"], [("demo::scale", "", ["dcpu"])]),
    (["--kind", "native", "--backend", "dcpu"], []),
])
def test_list_ops_filters(pm, capsys, flags, expected):
    code, out, _ = run(capsys, "list-ops", "--op", "demo::*", "--format", "json", *flags)
    got = [(e["name"], e["overload"], [k["backend"] for k in e["kernels"]]) for e in json.loads(out)]
    assert code == 0 and got == expected


@pytest.mark.parametrize("flags, message", [
    (["--plugin", "demi"], "--plugin demi: no such plugin (did you mean 'demo'?); installed: builtin (srcore), demo (srcore-demo)"),
    (["--backend", "dgpo"], "--backend dgpo: unknown backend (did you mean 'dgpu'?); installed backends: dcpu, dgpu"),
    (["--op", "demo::scal"], "--op demo::scal: no op of that name is declared (did you mean 'demo::scale'?)"),
])
def test_list_ops_filters_naming_nothing_installed_are_errors(pm, capsys, flags, message):
    """A typo in a filter used to print an empty table with exit 0."""
    code, out, err = run(capsys, "list-ops", *flags)
    assert (code, out) == (1, "") and err.splitlines()[0] == f"srcore: error: {message}"
    assert len([line for line in err.splitlines() if line.startswith("hint: ")]) == 1


def test_list_ops_table_shows_every_provider(pm, capsys):
    code, out, _ = run(capsys, "list-ops", "--op", "demo::*")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["OP", "BACKEND", "KIND", "DTYPES", "PLUGIN"]
    assert lines[1].split() == ["demo::bare", "-", "-", "-", "(no", "kernel)"]
    assert lines[2].split() == ["demo::scale", "dcpu", "out", "float64,float32", "srcore-demo", "1.2"]
    assert "3 op overload(s), 3 kernel(s)" in out


def test_plugins_table_and_json_show_failures(pm, capsys):
    pm.register(Failing(), "failing", dist="srcore-failing", version="0.1")
    code, out, _ = run(capsys, "plugins", "--format", "json")
    reports = {r["name"]: r for r in json.loads(out)}
    assert code == 1 and list(reports) == ["builtin", "demo", "failing"]  # the listing, and exit 1: one failed
    assert reports["failing"] == {"name": "failing", "dist": "srcore-failing", "version": "0.1", "status": "failed",
                                  "error": "srcore_kernels: RuntimeError: kaboom", "hooks": ["srcore_kernels"],
                                  "errors": []}
    assert any("subcommand 'plugins' is a core srcore command" in e for e in reports["demo"]["errors"])
    code, out, _ = run(capsys, "plugins")
    row = next(line for line in out.splitlines() if line.startswith("failing"))
    assert code == 1 and row.split()[:4] == ["failing", "srcore-failing", "0.1", "failed"] and "kaboom" in row


def test_plugin_subcommand_runs_and_core_commands_win(pm, capsys):
    assert run(capsys, "greet", "ada") == (0, "hello ada\n", "")
    code, out, _ = run(capsys, "plugins", "--format", "json")
    assert code == 0 and json.loads(out)  # the core `plugins`, not the plugin's


def test_demo_reports_plugins_and_kernels(pm, capsys):
    code, out, _ = run(capsys, "demo")
    assert "plugin demo       srcore-demo 1.2: loaded" in out
    assert "dcpu           2 kernels for 2 ops" in out
    # this manager has no cpu backend, so the demo model cannot load: reported, exit code 1
    assert code == 1 and "model: cannot load the demo model: UnknownBackendError: unknown backend 'cpu'" in out


def test_demo_runs_the_model_with_the_installed_plugins():
    proc = subprocess.run([sys.executable, "-c", "import sys; from srcore.cli import main; sys.exit(main())",
                           "demo"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "srcore-cpu" in proc.stdout, proc.stdout  # test.sh installs every plugin of the checkout
    err = re.search(r"max \|error\| vs numpy (\S+)", proc.stdout)
    assert err and float(err.group(1)) < 1e-4


def test_usage_errors_exit_2(pm, capsys):
    code, _, err = run(capsys, "list-ops", "--kind", "sideways")
    assert code == 2 and "invalid choice: 'sideways'" in err
    assert run(capsys, "no-such-command")[0] == 2
    assert run(capsys)[0] == 2


def test_srcore_errors_are_one_message_and_a_hint_without_traceback(pm, capsys, monkeypatch):
    from srcore.errors import PluginError

    def boom(args):
        raise PluginError("plugin x (srcore-x 1.0): something broke")
    import srcore.cli.demo as demo_mod
    monkeypatch.setattr(demo_mod, "run", boom)
    code, out, err = run(capsys, "demo")
    assert code == 1 and out == ""
    assert err == ("srcore: error: plugin x (srcore-x 1.0): something broke\n"
                   "hint: run 'srcore plugins' to see which plugins loaded and why others failed\n")
    monkeypatch.setattr(demo_mod, "run", lambda args: 1 / 0)
    code, _, err = run(capsys, "demo")
    assert code == 3 and err.startswith("srcore: internal error: ZeroDivisionError") and "Traceback" not in err
    monkeypatch.setenv("SRCORE_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        main(["demo"])


def test_adding_a_core_subcommand_is_one_module(pm, capsys, monkeypatch):
    mod = types.ModuleType("srcore.cli.hello")
    mod.NAME, mod.HELP = "hello", "say hello"
    mod.configure_parser = lambda p: p.add_argument("--n", type=int, default=1)
    mod.run = lambda args: print("hi" * args.n) or 0
    monkeypatch.setitem(sys.modules, "srcore.cli.hello", mod)
    monkeypatch.setattr(sys.modules["srcore.cli.main"], "SUBCOMMANDS", [*SUBCOMMANDS, "hello"])
    assert run(capsys, "hello", "--n", "2") == (0, "hihi\n", "")


def test_console_script_in_a_fresh_process():
    proc = subprocess.run([sys.executable, "-c", "import sys; from srcore.cli import main; sys.exit(main())",
                           "list-ops", "--op", "prim::*", "--format", "json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    entries = json.loads(proc.stdout)
    assert all(e["name"].startswith("prim::") for e in entries)
    assert entries == sorted(entries, key=lambda e: (e["name"], e["overload"]))


def test_srcore_cli_main_stays_the_function_after_its_module_is_imported():
    import importlib

    import srcore.cli

    importlib.import_module("srcore.cli.main")
    from srcore.cli import main as again
    assert callable(again) and again.__module__ == "srcore.cli.main"


def test_run_with_only_a_scalar_input_given_makes_the_tensors_random(tmp_path, capsys):
    """``-i k=3`` for a scalar input; the tensor input is random (used to fail: random inputs
    refused the scalar input even though it was given)."""
    model = tmp_path / "scale.ir"
    model.write_text("""graph(%x : Float(2, 3), %k : int):
  %y : Tensor = aten::mul(%x, %k)
  return (%x, %y)
""")
    out = tmp_path / "out.npz"
    assert main(["run", str(model), "-i", "k=3", "-o", str(out)]) == 0
    with np.load(out) as z:
        x, y = (z[k] for k in sorted(z.files))
    assert x.shape == (2, 3) and np.abs(x).sum() > 0
    np.testing.assert_allclose(y, 3 * x, rtol=1e-6)
    capsys.readouterr()
    assert main(["run", str(model)]) != 0   # the scalar is not given: an error naming it
    assert "input 'k' is a scalar (int); give it with -i k=VALUE" in capsys.readouterr().err


def test_backend_lists_may_be_comma_separated_and_a_typo_names_the_installed_backends(tmp_path, capsys):
    model = tmp_path / "twice.ir"
    model.write_text("""graph(%x : Float(2, 3)):
  %y : Tensor = aten::mul(%x, %x)
  return (%y)
""")
    out = tmp_path / "out.npz"
    for argv in (["--backend", "quantized_cpu,cpu"], ["--backend", "quantized_cpu", "--backends", "cpu"]):
        assert main(["run", str(model), *argv, "-o", str(out)]) == 0, capsys.readouterr().err
        with np.load(out) as z:
            (y,) = (z[k] for k in z.files)
        assert y.shape == (2, 3)
    capsys.readouterr()
    assert main(["run", str(model), "--backend", "cpu_"]) == 1
    err = capsys.readouterr().err
    assert "unknown backend 'cpu_' (did you mean 'cpu'?); installed backends:" in err and "trt_like" in err
    assert main(["run", str(model), "--backend", "cpu,,trt_like"]) == 2   # a usage error
    assert "empty backend name in 'cpu,,trt_like'" in capsys.readouterr().err
