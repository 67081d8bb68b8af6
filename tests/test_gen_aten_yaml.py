"""``tools/gen_aten_yaml.py`` regenerates the checked-in ``srcore/ops/aten.yaml`` exactly: no line of it
is kept by hand (a hand-added overload that the tool does not know is lost at the next regeneration).
Needs the torch the file was generated from (its header names the version); skipped otherwise."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

#: a generated file, no executor or planner: the second pass (test.sh) deselects it
pytestmark = pytest.mark.one_pass

ROOT = Path(__file__).resolve().parent.parent
YAML = ROOT / "srcore" / "ops" / "aten.yaml"


def _tool():
    spec = importlib.util.spec_from_file_location("gen_aten_yaml", ROOT / "tools" / "gen_aten_yaml.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_regenerating_gives_the_checked_in_file(capsys):
    torch = pytest.importorskip("torch")
    made_with = re.search(r"\(torch ([^)]+)\)", YAML.read_text()[:400]).group(1)
    if made_with != torch.__version__:
        pytest.skip(f"aten.yaml was generated with torch {made_with}, this is {torch.__version__}")
    tool = _tool()
    assert tool.main(["--check"]) == 0, "tools/gen_aten_yaml.py would write a different srcore/ops/aten.yaml"


def test_extra_overloads_are_written_alone(tmp_path):
    """An EXTRA_OVERLOADS entry adds that overload, not its name's others (searchsorted's ``.out``)."""
    pytest.importorskip("torch")
    tool = _tool()
    text, missing = tool.render(set(), {"searchsorted": ("Tensor",), "nonesuch": ("x",)})
    funcs = [line for line in text.splitlines() if line.startswith("- func:")]
    assert funcs == [f for f in funcs if f.startswith("- func: aten::searchsorted.Tensor(")] and len(funcs) == 1
    assert missing == ["nonesuch.x"]
