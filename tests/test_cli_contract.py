"""The ``srcore`` command's user-facing contract (docs/cli.md): exit codes, one hint per error, output
paths checked before the work, ``-`` for stdout, numeric flags validated, ``--format json`` schemas,
logging and progress bars. Most tests call ``srcore.cli.main`` in process; a few run a real process
(``python -m srcore`` and the console script) where the process boundary is the point."""
from __future__ import annotations

import io
import json
import logging
import re
import struct
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest

import srcore
from srcore import errors as E
from srcore.cli import main
from srcore.cli import errors as cli_errors
from srcore.cli.main import build_parser
from srcore.cli.output import load_schema

pytestmark = pytest.mark.one_pass

ROOT = Path(__file__).resolve().parents[1]

RELU = "graph(%x : Float(2, 3)):\n  %y : Tensor = aten::relu(%x)\n  return (%y)\n"
#: nested tuple outputs: (relu(x), (x * 2, x + 1))
NESTED = """graph(%x : Float(2, 3)):
  %two : int = prim::Constant[value=2]()
  %one : int = prim::Constant[value=1]()
  %r : Tensor = aten::relu(%x)
  %d : Tensor = aten::mul(%x, %two)
  %p : Tensor = aten::add(%x, %one, %one)
  %inner : (Tensor, Tensor) = prim::TupleConstruct(%d, %p)
  return (%r, %inner)
"""


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("SRCORE_DEBUG", raising=False)
    monkeypatch.delenv("SRCORE_LOG", raising=False)


@pytest.fixture
def relu_ir(tmp_path) -> Path:
    p = tmp_path / "relu.ir"
    p.write_text(RELU)
    return p


@pytest.fixture
def srm(tmp_path) -> Path:
    """A small saved model with two weights (linear + relu)."""
    g = srcore.parse_graph("""graph(%x : Float(batch, 4)):
  %w : Float(3, 4) = prim::Constant[param="w"]()
  %b : Float(3) = prim::Constant[param="b"]()
  %h : Tensor = aten::linear(%x, %w, %b)
  %y : Tensor = aten::relu(%h)
  return (%y)
""", params={"w": np.arange(12, dtype=np.float32).reshape(3, 4) / 10, "b": np.ones(3, np.float32)})
    path = tmp_path / "lin.srm"
    srcore.save(srcore.Model.from_graph(g), path)
    return path


def call(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def hints(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("hint: ")]


def assert_one_error(err: str, prefix: str = "srcore: error: ") -> None:
    """An error is its message (maybe several lines) and exactly one hint line, last, no traceback."""
    assert err.startswith(prefix), err
    assert len(hints(err)) == 1 and err.rstrip("\n").splitlines()[-1].startswith("hint: "), err
    assert "Traceback" not in err


# -- errors: exit codes and exactly one hint --------------------------------------------------------
def _instances():
    """One instance of every public error class (constructors differ)."""
    out = []
    for name in E.__all__:
        cls = getattr(E, name)
        if not issubclass(cls, BaseException) or not issubclass(cls, E.SrcoreError):
            continue  # srcore.SrcoreWarning is a warning: printed as one 'srcore: warning:' line
        if issubclass(cls, E.GraphParseError):
            out.append(cls("bad token", line=1, column=2, token="%"))
        elif issubclass(cls, E.UnsupportedOpError):
            out.append(cls("1 node(s) have no kernel", []))
        else:
            out.append(cls("something is wrong"))
    return out + [cli_errors.OutputPathError("-o x: no such directory")]


@pytest.mark.parametrize("exc", _instances(), ids=lambda e: type(e).__name__)
def test_every_error_kind_prints_one_message_and_one_specific_hint(exc):
    buf = io.StringIO()
    assert cli_errors.report(exc, buf) == 1
    err = buf.getvalue()
    assert_one_error(err)
    if type(exc) is not E.SrcoreError:  # every subclass has advice of its own, not the generic one
        assert cli_errors.hint_for(exc) != cli_errors.hint_for(E.SrcoreError("x")), type(exc).__name__


def test_internal_errors_exit_3_and_os_errors_about_a_file_exit_1():
    buf = io.StringIO()
    assert cli_errors.report(ZeroDivisionError("division by zero"), buf) == 3
    assert buf.getvalue().startswith("srcore: internal error: ZeroDivisionError") and len(hints(buf.getvalue())) == 1
    buf = io.StringIO()
    assert cli_errors.report(PermissionError(13, "Permission denied", "/root/m.srm"), buf) == 1
    assert buf.getvalue().splitlines()[0] == "srcore: error: /root/m.srm: Permission denied"


def test_no_message_carries_its_own_hint_line():
    """The hint is the exception's ``hint`` attribute; a ``hint:`` inside a message printed two."""
    offenders = []
    for path in (ROOT / "srcore").rglob("*.py"):
        if path.parent.name == "cli" and path.name in ("errors.py", "main.py"):  # the printers themselves
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"""["'](\\n)?hint: """, line):
                offenders.append(f"{path.relative_to(ROOT)}:{i}")
    assert offenders == []


def _subcommands():
    return [a for a in build_parser()._subparsers._group_actions[0].choices.items()]


def test_exit_codes_of_every_subcommand(capsys, tmp_path, relu_ir, monkeypatch):
    """0 for a good call, 1 for a missing model (or a bad filter), 2 for a bad flag, 3 for a bug."""
    missing = tmp_path / "missing.srm"
    user_errors = {"convert": [missing.with_suffix(".pt")], "run": [missing], "bench": [missing],
                   "inspect": [missing], "check": [missing], "list-ops": ["--backend", "nope"],
                   "plugins": None, "demo": ["--model", missing]}
    good = {"run": [relu_ir], "inspect": [relu_ir], "check": [relu_ir], "list-ops": ["--op", "aten::relu"],
            "plugins": []}
    names = [name for name, _ in _subcommands()]
    assert set(user_errors) <= set(names)
    for name in names:
        code, _, err = call(capsys, name, "--no-such-flag")
        assert code == 2, name
        assert_one_error(err[err.index(f"srcore {name}: error:"):], prefix=f"srcore {name}: error:")
        if user_errors.get(name) is not None:
            code, out, err = call(capsys, name, *user_errors[name])
            assert code == 1, (name, err)
            assert_one_error(err)
        if name in good:
            code, out, err = call(capsys, name, *good[name])
            assert code == 0 and out, (name, err)
    import srcore.cli.plugins as plugins_mod

    monkeypatch.setattr(plugins_mod, "run", lambda args: {}["boom"])
    code, _, err = call(capsys, "plugins")
    assert code == 3 and err.startswith("srcore: internal error: KeyError")
    assert_one_error(err, prefix="srcore: internal error:")


# -- numeric flags ---------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, flag", [
    (["bench", "m.srm", "--rounds", "0"], "--rounds"),
    (["bench", "m.srm", "--rounds", "-2"], "--rounds"),
    (["bench", "m.srm", "--runs", "-5"], "--runs"),
    (["bench", "m.srm", "--runs", "0"], "--runs"),
    (["bench", "m.srm", "--runs", "many"], "--runs"),
    (["demo", "--rounds", "0"], "--rounds"),
    (["demo", "--runs", "-1"], "--runs"),
    (["run", "m.srm", "--seed", "-1"], "--seed"),
    (["check", "m.srm", "--seed", "-3"], "--seed"),
    (["convert", "m.pt", "--input", "x=float32:1,-4"], "--input"),
    (["convert", "m.pt", "--input", "x=float99:1,4"], "--input"),
    (["convert", "m.pt", "--dynamic", "x:-1=batch"], "--dynamic"),
    (["convert", "m.pt", "--dynamic", "x:0="], "--dynamic"),
])
def test_bad_flag_values_are_usage_errors_naming_the_flag(capsys, argv, flag):
    code, out, err = call(capsys, *argv)
    assert code == 2 and out == ""
    assert f"error: argument {flag}: " in err and len(hints(err)) == 1


def test_every_numeric_flag_is_validated():
    """The sweep: no subcommand takes a bare ``type=int``/``float`` (``--runs -5`` meant "auto")."""
    bare = [f"{name} {a.option_strings[0]}" for name, sub in _subcommands() for a in sub._actions
            if a.type in (int, float)]
    assert bare == []


# -- output paths ----------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ["convert", "{model}", "-o", "{bad}/x.srm"],
    ["run", "{model}", "-o", "{bad}/x.npz"],
    ["bench", "{model}", "--json", "{bad}/b.json"],
    ["inspect", "{model}", "--picture", "{bad}/p.svg"],
    ["inspect", "{model}", "--html", "{bad}/r.html"],
    ["run", "{model}", "-o", "{dir}"],
])
def test_unwritable_outputs_fail_before_any_work(capsys, tmp_path, relu_ir, monkeypatch, argv):
    from srcore.cli import _common, convert

    def no_work(*a, **k):
        raise AssertionError("the work started before the output path was checked")
    monkeypatch.setattr(_common, "load_model", no_work)
    monkeypatch.setattr(convert, "convert", no_work)
    model = relu_ir.with_suffix(".pt") if argv[0] == "convert" else relu_ir
    model.touch()
    args = [a.format(model=model, bad=tmp_path / "no-such-dir", dir=tmp_path) for a in argv]
    code, out, err = call(capsys, *args)
    assert (code, out) == (1, ""), err
    assert_one_error(err)
    assert err.startswith(f"srcore: error: {args[2]} {args[3]}: ")
    assert "no such directory" in err or "is a directory" in err


def test_picture_without_memory_plan_writes_it_and_an_unknown_type_is_a_usage_error(capsys, tmp_path, relu_ir):
    import xml.etree.ElementTree as ET

    code, out, err = call(capsys, "inspect", relu_ir, "--picture", tmp_path / "p.gif")
    assert code == 2 and "--picture" in err and ".svg, .png" in err and not (tmp_path / "p.gif").exists()
    code, out, _ = call(capsys, "inspect", relu_ir, "--picture", tmp_path / "p.svg")
    assert code == 0 and "== memory plan" in out and f"wrote {tmp_path / 'p.svg'}" in out
    assert ET.parse(tmp_path / "p.svg").getroot().tag == "{http://www.w3.org/2000/svg}svg"
    code, out, _ = call(capsys, "inspect", relu_ir, "--picture", tmp_path / "p.png")
    assert code == 0 and (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_dash_is_stdout_and_two_claims_on_stdout_are_a_usage_error(capsys, tmp_path, relu_ir):
    code, out, err = call(capsys, "bench", relu_ir, "--rounds", "1", "--runs", "2", "--json", "-")
    assert code == 0 and not (Path.cwd() / "-").exists()
    assert json.loads(out)["rounds"] == 1 and "latency: best-round median" in err   # the text went to stderr
    code, out, err = call(capsys, "inspect", relu_ir, "--picture", "-")
    assert code == 0 and out.startswith("<svg") and "== memory plan" in err
    code, out, err = call(capsys, "run", relu_ir, "-o", "-", "--format", "json")
    assert code == 2 and "-o and --format json both write to standard output" in err


def test_run_saves_nested_tuple_outputs_flattened(capsys, tmp_path):
    model = tmp_path / "nested.ir"
    model.write_text(NESTED)
    x = np.array([[-1.5, 0.0, 2.0], [3.0, -4.0, 0.5]], np.float32)
    np.save(tmp_path / "x.npy", x)
    code, out, err = call(capsys, "run", model, "-i", f"x={tmp_path / 'x.npy'}", "-o", tmp_path / "o.npz")
    assert code == 0, err
    with np.load(tmp_path / "o.npz") as z:
        got = {k: z[k] for k in z.files}
    names = sorted(got)
    assert len(names) == 3 and [n.count(".") for n in names] == [0, 1, 1]
    np.testing.assert_array_equal(got[names[0]], np.maximum(x, 0))
    np.testing.assert_array_equal(got[names[1]], x * 2)
    np.testing.assert_array_equal(got[names[2]], x + 1)
    code, out, _ = call(capsys, "run", model, "-i", f"x={tmp_path / 'x.npy'}", "--format", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, load_schema("run"))
    assert [o["name"] for o in doc["outputs"]] == names and doc["outputs"][1]["head"] == (x * 2).ravel().tolist()


def test_bad_npy_input_is_a_user_error_naming_the_input(capsys, tmp_path, relu_ir):
    (tmp_path / "x.npy").write_bytes(b"not an array")
    code, _, err = call(capsys, "run", relu_ir, "-i", f"x={tmp_path / 'x.npy'}")
    assert code == 1 and err.startswith(f"srcore: error: -i x={tmp_path / 'x.npy'}: not a readable .npy")
    assert_one_error(err)


@pytest.mark.parametrize("argv, message", [
    (["run", "{relu}", "-i", "=x.npy"], "-i '=x.npy': expected NAME=FILE.npy"),
    (["run", "{junk}.srm"], "header length"),
    (["run", "{tmp}"], "is a directory, not a model file"),
    (["check", "{junk}.srm"], "check 'file' failed"),
    (["inspect", "{relu}", "--partition", "cpu"], "--partition cpu: no engine builder for that backend"),
    (["inspect", "{relu}", "--partition", "nope"], "unknown backend 'nope'"),
    (["run", "{relu}", "-i", "x=[[1, 2, 3]]"], "input 'x'"),
])
def test_user_mistakes_are_user_errors_not_bugs(capsys, tmp_path, relu_ir, argv, message):
    """The sweep: bad files, bad inputs and bad names exit 1 with one hint, never 3 (internal error)."""
    junk = tmp_path / "junk"
    (tmp_path / "junk.srm").write_bytes(bytes(range(256)) * 4)
    code, out, err = call(capsys, *[a.format(relu=relu_ir, junk=junk, tmp=tmp_path) for a in argv])
    assert code == 1 and message in err.splitlines()[0], err
    assert_one_error(err)


# -- dispatch errors -------------------------------------------------------------------------------
def test_wrong_arity_says_no_overload_takes_the_arguments(capsys, tmp_path):
    model = tmp_path / "arity.ir"
    # three inputs: two would bind aten::relu.out(self, *, out) (IR passes keyword-only arguments
    # positionally, as TorchScript does)
    model.write_text("graph(%x : Float(2, 3)):\n  %y : Tensor = aten::relu(%x, %x, %x)\n  return (%y)\n")
    code, _, err = call(capsys, "run", model)
    assert code == 1
    assert_one_error(err)
    assert "no overload of aten::relu takes these 3 input(s)" in err and "aten::relu(Tensor self) -> Tensor" in err
    assert "fit no overload" in hints(err)[0] and "install" not in hints(err)[0]


# -- verify levels and srcore check ----------------------------------------------------------------
def _flip(path: Path, where: str) -> None:
    """Flip one byte: in the first weight ("data") or in the graph text of the header ("header")."""
    b = bytearray(path.read_bytes())
    n = struct.unpack("<Q", b[:8])[0]
    if where == "data":
        b[8 + n + 1] ^= 0x40
    else:
        i = b.index(b"aten::relu")
        b[i + 6] = ord("R")
    path.write_bytes(bytes(b))


def test_what_each_verify_level_catches(srm, tmp_path):
    good = srcore.load(srm)
    damaged = tmp_path / "data.srm"
    damaged.write_bytes(srm.read_bytes())
    _flip(damaged, "data")
    loaded = srcore.load(damaged)  # the default verify="header" does not read the weights
    assert any(not np.array_equal(loaded.params[k], good.params[k]) for k in good.params)
    with pytest.raises(srcore.SrcoreFormatError, match="data checksum mismatch"):
        srcore.load(damaged, verify="full")
    header = tmp_path / "header.srm"
    header.write_bytes(srm.read_bytes())
    _flip(header, "header")
    for verify in ("header", "full"):
        with pytest.raises(srcore.SrcoreFormatError, match="header checksum mismatch"):
            srcore.load(header, verify=verify)
    truncated = tmp_path / "short.srm"
    truncated.write_bytes(srm.read_bytes()[:-3])
    with pytest.raises(srcore.SrcoreFormatError):
        srcore.load(truncated)


def test_check_passes_a_sound_model_and_fails_a_damaged_one(capsys, srm, tmp_path):
    code, out, err = call(capsys, "check", srm, "--run", "--format", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, load_schema("check"))
    assert code == 0 and doc["ok"] and [c["name"] for c in doc["checks"]] == ["file", "plugins", "load", "run"]
    assert doc["inputs"] == [{"name": "x", "dtype": "float32", "shape": ["batch", 4]}]
    damaged = tmp_path / "damaged.srm"
    damaged.write_bytes(srm.read_bytes())
    _flip(damaged, "data")
    code, out, err = call(capsys, "check", damaged)
    assert code == 1 and out.startswith("FAIL file") and "data checksum mismatch" in out
    assert_one_error(err)
    assert "check 'file' failed" in err and ".srm" in hints(err)[0]


def test_check_reports_missing_ops_and_load_failures(capsys, tmp_path):
    model = tmp_path / "ghost.ir"
    model.write_text("graph(%x : Float(2)):\n  %y : Tensor = ghost::op(%x)\n  return (%y)\n")
    code, out, err = call(capsys, "check", model, "--format", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, load_schema("check"))
    assert code == 1 and [c["ok"] for c in doc["checks"]] == [True, False, None]
    assert "ghost::op" in doc["checks"][1]["detail"]
    assert_one_error(err)


def test_load_warnings_are_srcore_warning_lines_and_check_lists_them(capsys, tmp_path, monkeypatch):
    """A model whose op has no shape rule loads with a SrcoreWarning: one ``srcore: warning:`` line
    (not Python's file:line form), and ``srcore check`` lists what the load lost."""
    import types

    from srcore.plugin import manager as manager_mod
    from srcore.plugin.manager import PluginManager

    sys.path.insert(0, str(ROOT / "examples" / "plugin-example"))
    try:
        import srcore_example
    finally:
        sys.path.pop(0)
    pm = PluginManager().load()
    pm.register(types.SimpleNamespace(srcore_op_libraries=srcore_example.srcore_op_libraries,
                                      srcore_kernels=srcore_example.srcore_kernels),  # no shape rule
                "example", dist="srcore-plugin-example", version="dev")
    monkeypatch.setattr(manager_mod, "_default", pm)
    model = tmp_path / "tanh.ir"
    model.write_text("graph(%x : Float(2, 3)):\n  %s : float = prim::Constant[value=2.]()\n"
                     "  %y : Tensor = example::scaled_tanh(%x, %s)\n  return (%y)\n")
    code, out, err = call(capsys, "run", model)
    assert code == 0, err
    assert err.startswith("srcore: warning: loading this model, srcore lost facts")
    assert "no shape rule for example::scaled_tanh" in err and "Warning:" not in err
    code, out, err = call(capsys, "check", model, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["ok"] and any("no shape rule for example::scaled_tanh" in w for w in doc["warnings"])
    assert err == ""


# -- --format json schemas -------------------------------------------------------------------------
def _json_commands(relu_ir: Path):
    return {"run": ["run", relu_ir], "bench": ["bench", relu_ir, "--rounds", "1", "--runs", "2", "--per-op"],
            "inspect": ["inspect", relu_ir, "--graph", "--memory-plan", "--codegen", "--dispatch"],
            "list-ops": ["list-ops", "--op", "aten::add*"], "plugins": ["plugins"], "check": ["check", relu_ir],
            "select": ["select", relu_ir, "-o", relu_ir.parent / "selection.yaml"]}


def test_every_reporting_subcommand_has_a_json_schema_that_its_output_fits(capsys, relu_ir):
    from srcore.cli.main import _core_modules

    core = {m.NAME for m in _core_modules()}  # a plugin's subcommand ships and tests its own schema
    with_json = sorted(name for name, sub in _subcommands() for a in sub._actions
                       if name in core and "--format" in a.option_strings and "json" in a.choices)
    assert {"convert", "run", "bench", "inspect", "list-ops", "plugins", "check"} <= set(with_json)
    commands = _json_commands(relu_ir)
    for name in with_json:
        schema = load_schema(name)
        jsonschema.Draft202012Validator.check_schema(schema)
        if name not in commands:
            continue  # convert: test_convert_json_and_stdout
        code, out, err = call(capsys, *commands[name], "--format", "json")
        assert code == 0, err
        jsonschema.validate(json.loads(out), schema)
        assert "\x1b" not in out and "\r" not in err  # no progress bar anywhere near JSON


def test_every_json_field_is_documented_in_cli_md():
    doc = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name, _ in _subcommands():
        try:
            schema = load_schema(name)
        except FileNotFoundError:
            continue
        section = doc[doc.index(f"## `srcore {name}`"):]
        section = section[:section.find("\n## ", 1)]
        props = schema.get("properties") or schema["items"]["properties"]
        missing = [p for p in props if f"`{p}`" not in section and f'"{p}"' not in section]
        assert missing == [], f"docs/cli.md, srcore {name}: fields not documented: {missing}"


def test_convert_json_and_stdout(capsysbinary, tmp_path):
    torch = pytest.importorskip("torch")
    pt = tmp_path / "lin.pt"
    torch.jit.save(torch.jit.script(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()), pt)
    code = main(["convert", str(pt), "--input", "x=float32:2,4", "--format", "json"])
    out, err = capsysbinary.readouterr()
    doc = json.loads(out)
    jsonschema.validate(doc, load_schema("convert"))
    assert code == 0 and doc["output"] == str(tmp_path / "lin.srm") and doc["params"] == 2
    code = main(["convert", str(pt), "--input", "x=float32:2,4", "-o", "-"])
    out, err = capsysbinary.readouterr()
    assert code == 0 and err.startswith(b"wrote -")
    (tmp_path / "copy.srm").write_bytes(out)
    streamed, saved = srcore.load(tmp_path / "copy.srm", verify="full"), srcore.load(tmp_path / "lin.srm")
    assert streamed.params.keys() == saved.params.keys()
    assert all(np.array_equal(streamed.params[k], saved.params[k]) for k in saved.params)


# -- logging and progress --------------------------------------------------------------------------
def test_verbose_and_srcore_log_turn_on_logging(capsys, relu_ir, monkeypatch):
    code, out, err = call(capsys, "run", relu_ir)
    assert code == 0 and err == ""
    code, out, err = call(capsys, "run", relu_ir, "-v")
    assert code == 0 and re.search(r"info +srcore\.runtime: loaded 1 nodes on (\w+,)*cpu .* passes [\d.]+ ms", err)
    assert "srcore.dispatch" not in err
    monkeypatch.setenv("SRCORE_LOG", "debug")
    code, out, err = call(capsys, "run", relu_ir)
    assert re.search(r"debug +srcore\.dispatch: aten::relu -> aten::relu out kernel on cpu \(srcore-cpu\)", err)
    logging.getLogger("srcore").setLevel(logging.WARNING)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bars_only_on_a_terminal_and_never_with_q_or_json(relu_ir, monkeypatch, capsys):
    from srcore import progress

    monkeypatch.setattr(progress, "DELAY", 0.0)
    runs = {}
    for label, extra, tty in [("tty", [], True), ("quiet", ["-q"], True), ("json", ["--format", "json"], True),
                              ("pipe", [], False)]:
        err = _Tty() if tty else io.StringIO()
        monkeypatch.setattr(sys, "stderr", err)
        assert main(["bench", str(relu_ir), "--rounds", "3", "--runs", "2", *extra]) == 0
        runs[label] = err.getvalue()
    capsys.readouterr()
    assert re.search(r"bench: +0%.*0/3", runs["tty"])  # a bar was drawn (and cleared: leave=False)
    assert all("round" not in runs[k] for k in ("quiet", "json", "pipe")), runs
    assert not progress.active()  # main() turns bars off again when it returns


# -- the real process ------------------------------------------------------------------------------
def test_python_m_srcore_streams_npz_to_stdout_and_the_console_script_exit_codes(tmp_path, relu_ir):
    proc = subprocess.run([sys.executable, "-m", "srcore", "run", str(relu_ir), "-o", "-", "--seed", "3"],
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    with np.load(io.BytesIO(proc.stdout)) as z:
        (y,) = (z[k] for k in z.files)
    x = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)  # run's random inputs
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    assert proc.stderr.decode().startswith("output: float32[2, 3]")
    script = Path(sys.executable).with_name("srcore")
    proc = subprocess.run([str(script), "bench", str(relu_ir), "--rounds", "0"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "srcore bench: error: argument --rounds: must be an integer >= 1, not '0'" in proc.stderr
    assert len(hints(proc.stderr)) == 1
