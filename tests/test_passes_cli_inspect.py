"""``srcore inspect MODEL --graph``: the graph before/after preparation and the per-pass summary."""
from __future__ import annotations

from pathlib import Path

import pytest

from srcore.cli.main import main

#: srcore inspect --graph prints graphs: nothing runs
pytestmark = pytest.mark.one_pass

SEED = (Path(__file__).parent / "golden/passes/prepare/seed_article.ir").read_text().split("# ---- after")[0]


def test_inspect_graph_shows_before_after_and_passes(tmp_path, capsys):
    path = tmp_path / "seed.ir"
    path.write_text(SEED)
    assert main(["inspect", str(path), "--graph"]) == 0
    out = capsys.readouterr().out
    before, after = out.split("== graph after preparation")
    assert before.count("prim::Loop") == 2 and "aten::t" in before
    after_graph, passes = after.split("== passes")
    assert "prim::Loop" not in after_graph and after_graph.count("aten::sum") == 1
    assert "(11 nodes)" in before and "(2 nodes)" in after_graph
    rows = {line.split()[0]: line for line in passes.splitlines()[2:] if line.strip()}
    assert "eliminate_dead_code" in rows and "-8" in rows["eliminate_dead_code"]
    assert "peephole" in rows and "-1" in rows["peephole"]


def test_inspect_defaults_to_graph_and_no_optimize(tmp_path, capsys):
    path = tmp_path / "seed.ir"
    path.write_text(SEED)
    assert main(["inspect", str(path), "--no-optimize"]) == 0
    out = capsys.readouterr().out
    assert out.count("prim::Loop") == 4  # before and (unchanged) after
    assert "== passes" not in out


def test_inspect_missing_file_is_an_error(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "nope.ir")]) == 1
    assert "no such file" in capsys.readouterr().err
