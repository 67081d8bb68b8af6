"""Every example of README.md and docs/*.md runs: ```python blocks, the `srcore ...` lines of shell
blocks, and ```ir blocks (which must parse).

Blocks of one file run in order, in one namespace, in a fresh temporary directory
(so a block may use what an earlier one defined or wrote). A block preceded by a
``<!-- no-test: REASON -->`` line is not run; the reason is required (use it
sparingly: for signatures and fragments, or for commands that need what a test
cannot have). A fragment that needs context ("given a graph ...") gets it from a
hidden setup: an HTML comment ``<!-- test-setup`` ... ``-->`` whose lines run, at
that point, as Python (invisible in the rendered page). Setup code sees ``ROOT``
(the checkout) and ``monkeypatch`` (pytest's, undone after the file).

Each ``srcore ...`` line of a ```sh (bash, console, shell) block runs in process,
at that point of the file, in the same directory, and must exit 0 (a redirection
or pipe after it is cut off; lines that are not ``srcore`` commands do not run).
So that timing examples stay cheap, ``srcore bench``/``demo`` rounds are shortened
(the flags still parse and apply). Every such line of every block, run or not,
must parse. A file whose blocks import torch is skipped when torch is not
installed. The temporary directory holds a copy of the shipped digits model as
``digits.srm``, and of ``examples/digits/`` (examples written to run from the
checkout's root). A file with no visible Python example (only setups and shell
commands) runs in the first test pass only: its commands test the CLI, which the
executor and planner of the second pass do not change.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NO_TEST = re.compile(r"^<!-- no-test(?::\s*(?P<reason>.*?))?\s*-->$")
RUN = "<!-- test-run -->"
SHELL = ("sh", "bash", "console", "shell")
SETUP = "<!-- test-setup"
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)[^\n]*$")


class Block:
    def __init__(self, path: Path, line: int, lang: str, code: str, skip: bool, run: bool = False,
                 setup: bool = False, reason: str | None = None):
        self.path, self.line, self.lang, self.code, self.skip, self.run = path, line, lang, code, skip, run
        self.setup, self.reason = setup, reason

    def __repr__(self) -> str:
        return f"{self.path.name}:{self.line}"


def extract(path: Path) -> list[Block]:
    """Fenced code blocks, with their language, first code line and no-test marker."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() == SETUP:
            start, i = i, i + 1
            body = []
            while i < len(lines) and lines[i].strip() != "-->":
                body.append(lines[i])
                i += 1
            blocks.append(Block(path, start + 2, "python", "\n".join(body) + "\n", False, setup=True))
            i += 1
            continue
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group("fence"), m.group("lang").lower(), i
        prev = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        i += 1
        body = []
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1
        indent = len(m.group("indent"))
        code = "\n".join(b[indent:] if b[:indent].isspace() else b for b in body) + "\n"
        no_test = NO_TEST.match(prev)
        blocks.append(Block(path, start + 2, lang, code, no_test is not None, prev == RUN,
                            reason=(no_test.group("reason") or "") if no_test else None))
    return blocks


def _runnable(b: Block) -> bool:
    return not b.skip and (b.lang in ("python", "py", "ir") or (b.lang in SHELL and bool(_commands(b))))


def _python_files() -> list[Path]:
    return [p for p in DOC_FILES if any(_runnable(b) for b in extract(p))]


def _commands(b: Block) -> list[tuple[int, str]]:
    """``(line, command)`` for each ``srcore`` command line of a shell block (comments, pipes cut off)."""
    out = []
    for k, line in enumerate(b.code.splitlines()):
        line = line.strip().removeprefix("$ ")
        cmd = re.split(r" #|\||&&|;| \d?>", line, maxsplit=1)[0].strip()
        if cmd.split()[:1] in (["srcore"], [".venv/bin/srcore"]):
            out.append((b.line + k, cmd))
    return out


@pytest.mark.one_pass   # parsing only
def test_the_extractor_finds_blocks_and_markers(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("text\n\n```python\na = 1\n```\n\n<!-- no-test -->\n```python\nboom(\n```\n\n"
                   "```sh\nsrcore plugins\n```\n  ```python\n  b = a + 1\n  ```\n"
                   "<!-- test-setup\nc = 3\n-->\n<!-- test-run -->\n```sh\nsrcore plugins  # all\nls\n```\n",
                   encoding="utf-8")
    blocks = extract(doc)
    assert [(b.lang, b.skip, b.line) for b in blocks] == [("python", False, 4), ("python", True, 9),
                                                          ("sh", False, 13), ("python", False, 16),
                                                          ("python", False, 19), ("sh", False, 23)]
    assert [b.run for b in blocks] == [False] * 5 + [True]
    assert _commands(blocks[5]) == [(23, "srcore plugins")]
    assert blocks[3].code == "b = a + 1\n" and blocks[4].code == "c = 3\n"


def _params():
    """One test per doc file with runnable blocks; one_pass when it has no visible Python example."""
    out = []
    for p in _python_files():
        visible = any(b.lang in ("python", "py") and not b.setup and not b.skip for b in extract(p))
        out.append(pytest.param(p, marks=() if visible else (pytest.mark.one_pass,),
                                id=str(p.relative_to(ROOT))))
    return out


@pytest.mark.one_pass   # parsing only
def test_every_no_test_marker_gives_a_reason():
    bare = [f"{p.relative_to(ROOT)}:{b.line}" for p in DOC_FILES for b in extract(p) if b.skip and not b.reason]
    assert bare == [], "write <!-- no-test: why --> above these blocks"


def _shorten_timing(monkeypatch) -> None:
    """bench and demo time a fraction of what they would (what the docs claim is the flags, not times)."""
    from srcore.cli import bench

    monkeypatch.setattr(bench, "ROUND_SECONDS", 0.005)
    monkeypatch.setattr(bench, "WARMUP_SECONDS", 0.005)


@pytest.mark.parametrize("path", _params())
def test_python_examples_run(path: Path, tmp_path, monkeypatch):
    blocks = [b for b in extract(path) if _runnable(b)]
    if any(re.search(r"^\s*(import torch|from torch)", b.code, re.M) for b in blocks):
        pytest.importorskip("torch")
    shutil.copy(ROOT / "examples" / "digits" / "digits.srm", tmp_path / "digits.srm")
    shutil.copytree(ROOT / "examples" / "digits", tmp_path / "examples" / "digits",
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(tmp_path)
    # engines' plans and compiled models (trt_like, OpenVINO) go to the suite's cache root (conftest.py:
    # $SRCORE_CACHE_DIR, never ~/.cache/srcore), shared by the xdist workers and test.sh's two passes;
    # a root per worker's basetemp compiled every example's kernels again in each worker and pass
    _shorten_timing(monkeypatch)
    ns: dict = {"__name__": "__docs__", "ROOT": ROOT, "monkeypatch": monkeypatch}
    for b in blocks:
        if b.lang in SHELL:
            from srcore.cli import main

            for line, cmd in _commands(b):
                assert main(shlex.split(cmd)[1:]) == 0, f"{path.name}:{line}: `{cmd}` failed"
            continue
        if b.lang == "ir":
            import srcore

            try:
                srcore.parse_graph(b.code, filename=f"{b.path.name}:{b.line}")
            except srcore.SrcoreError as exc:
                pytest.fail(f"the IR example at {b!r} does not parse: {exc}")
            continue
        try:
            exec(compile(b.code, f"{b.path}:{b.line}", "exec"), ns)
        except Exception as exc:
            pytest.fail(f"the example at {b!r} fails: {type(exc).__name__}: {exc}\n{b.code}")


def _srcore_commands() -> list[tuple[str, str]]:
    return [(f"{path.relative_to(ROOT)}:{line}", cmd) for path in DOC_FILES for b in extract(path)
            if b.lang in SHELL and not b.skip for line, cmd in _commands(b)]


def _inline_srcore_spans() -> list[tuple[str, str, list[str]]]:
    """``(where, subcommand, flags)`` for each inline code span of the docs that starts with ``srcore X``."""
    out = []
    for path in DOC_FILES:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"`(srcore ([a-z][a-z-]*)[^`\n]*)`", text):
            flags = re.findall(r"(?<![\w-])(--?[a-zA-Z][a-zA-Z0-9-]*)", m.group(1).split(" ", 2)[2] if
                               m.group(1).count(" ") >= 2 else "")
            line = text[:m.start()].count("\n") + 1
            out.append((f"{path.relative_to(ROOT)}:{line}", m.group(2), flags))
    return out


@pytest.mark.one_pass   # parsing only
def test_flags_named_in_inline_srcore_commands_exist():
    """`srcore inspect MODEL --memory-plan-picture` in prose fails when the flag is not the command's."""
    from srcore.cli.main import build_parser

    parser = build_parser()
    wrong = []
    for where, command, flags in _inline_srcore_spans():
        sub = parser.subcommand_parsers.get(command)
        if sub is None:
            if command not in ("COMMAND", "NAME", "PLUGIN-SUBCOMMAND"):
                wrong.append(f"{where}: no command {command!r}")
            continue
        wrong += [f"{where}: srcore {command} has no option {f}" for f in flags
                  if f not in sub._option_string_actions and not f.isupper()]
    assert wrong == []


def parses(cmd: str) -> bool:
    """Whether ``srcore``'s argument parser accepts the command line (``--help`` counts as accepted)."""
    from srcore.cli.main import build_parser

    try:
        build_parser().parse_args(shlex.split(cmd)[1:])
    except SystemExit as exc:  # --help exits 0; a bad subcommand or flag exits 2
        return exc.code == 0
    return True


@pytest.mark.one_pass   # parsing only
def test_parses_rejects_unknown_flags_and_commands(capsys):
    assert parses("srcore inspect m.srm --dispatch --memory-plan --picture p.svg")
    assert parses("srcore inspect m.srm --partition trt_like")
    assert not parses("srcore inspect m.srm --partition")       # the flag takes a backend
    assert not parses("srcore inspect m.srm --engines")
    assert not parses("srcore convert")
    assert not parses("srcore frobnicate m.srm")


@pytest.mark.one_pass   # parsing only
@pytest.mark.parametrize("where,cmd", _srcore_commands() or [("none", "")], ids=lambda v: v)
def test_srcore_commands_in_shell_blocks_parse(where, cmd, capsys):
    if not cmd:
        pytest.skip("no srcore command in a shell block")
    assert parses(cmd), f"{where}: `{cmd}` is not a valid srcore command line: {capsys.readouterr().err}"
