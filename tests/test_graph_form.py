"""The prepared cache's graph form (``srcore.format.graph_form``) builds the graph the IR parser builds from the same
file: on the golden graphs, the example models and graphs with blocks, sources, scopes and every constant kind;
``same_graph`` tells apart graphs that differ in any part a reader sees; a prepared-cache entry records the form and
a load of it neither parses nor imports the parser."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from srcore.format import graph_form
from srcore.format.safetensors_io import Container
from srcore.ir.parser import parse_graph
from srcore.ir.printer import print_graph

ROOT = Path(__file__).resolve().parents[1]

MIXED = """graph(%x : Float(batch, 3), %o : Tensor?, %t : (int, float)):
  %w : Float(4, 3) = prim::Constant[param="w"]()
  %a : int[] = prim::Constant[value=[1, 2]]()
  %three : int = prim::Constant[value=3]()
  %f : float = prim::Constant[value=-inf]()
  %g : float = prim::Constant[value=0.1]()
  %s : str = prim::Constant[value="a \\"q\\" b"]()
  %b : bool = prim::Constant[value=1]()
  %n : NoneType = prim::Constant()
  %l : float[] = prim::Constant[value=[0.5, -2.0]]()
  %z : Tensor = prim::Constant[value={0.5}]()
  %dev : Device = prim::Constant[value="cpu"]()
  %y : Float(batch, 4) = aten::linear(%x, %w, %n), scope: __module.fc # m.py:3:4
  %c : bool = aten::gt(%f, %g) # m.py:5
  %r : Float(batch, 4) = prim::If(%c)
    block0():
      %r1 : Float(batch, 4) = aten::relu(%y)
      -> (%r1)
    block1():
      -> (%y)
  %k : Float(batch, 4) = prim::Loop(%three, %b, %r)
    block0(%i : int, %acc : Float(batch, 4)):
      %acc2 : Float(batch, 4) = aten::add(%acc, %y, %i)
      -> (%b, %acc2)
  %u : Float(batch, 4)[] = prim::ListConstruct(%k, %r)
  return (%k, %u, %s, %l, %z, %dev)
"""


def _graphs():
    texts = []
    for p in sorted((ROOT / "tests" / "golden").rglob("*.ir")):   # each holds a graph before and after a pass
        texts += [(f"{p.name}#{i}", None, part)
                  for i, part in enumerate(re.split(r"(?m)^(?=graph\()", p.read_text())) if part.startswith("graph(")]
    for p in sorted((ROOT / "examples").rglob("*.srm")):
        c = Container(p)
        texts.append((p.name, {n: c.array(n) for n in c.entries}, c.metadata["graph"]))
    texts.append(("mixed", {"w": np.ones((4, 3), np.float32)}, MIXED))
    return texts


@pytest.mark.one_pass   # the form and the parser alone, no executor or planner: the second pass (test.sh) deselects it
@pytest.mark.parametrize("name,params,text", _graphs(), ids=lambda v: v if isinstance(v, str) and len(v) < 60 else "")
def test_the_form_builds_the_graph_the_parser_builds(name, params, text):
    parsed = parse_graph(text, params=params, locate=False)
    form = graph_form.encode(parsed, params)
    assert form is not None, name
    built = graph_form.decode(form, params)
    assert graph_form.same_graph(parsed, built)
    assert print_graph(built) == print_graph(parsed)
    for n, m in zip(parsed.all_nodes(), built.all_nodes()):
        if "param" in n.attrs and params is not None:
            assert m.attrs["value"] is params[n.attrs["param"]]   # the file's own array, not a copy


def _twice(text, params=None):
    return parse_graph(text, params=params, locate=False), parse_graph(text, params=params, locate=False)


@pytest.mark.one_pass   # the form and the parser alone, no executor or planner: the second pass (test.sh) deselects it
@pytest.mark.parametrize("change", ["name", "type", "attr_type", "attr_order", "source", "input", "uses", "meta", "counter"])
def test_same_graph_sees_each_difference(change):
    a, b = _twice(MIXED.replace('[param="w"]', '[value={0.5}]').replace("%w : Float(4, 3)", "%w : Tensor"))
    assert graph_form.same_graph(a, b)
    nodes = [n for n in b.all_nodes()]
    const = next(n for n in nodes if n.attrs.get("value") == [1, 2])
    if change == "name":
        const.output.name = "other"
    elif change == "type":
        from srcore.ir.types import ListType, FLOAT

        const.output.type = ListType(FLOAT)
    elif change == "attr_type":
        const.attrs["value"] = [1.0, 2]   # equal, another Python type
    elif change == "attr_order":
        lin = next(n for n in nodes if n.kind == "aten::linear")
        lin.attrs.update(p=1, q=2)
        a_lin = next(n for n in a.all_nodes() if n.kind == "aten::linear")
        a_lin.attrs.update(q=2, p=1)
    elif change == "source":
        next(n for n in nodes if n.kind == "aten::gt").source = None
    elif change == "input":
        add = next(n for n in nodes if n.kind == "aten::add")
        add.replace_input(1, add.inputs[0])
    elif change == "uses":   # the same inputs, the uses listed in another order
        y = next(n for n in nodes if n.kind == "aten::linear").output
        assert len(y.uses) > 1
        y.uses.reverse()
    elif change == "meta":
        next(n for n in nodes if n.kind == "aten::linear").meta["scope"] = "__module.other"
    elif change == "counter":
        b._counter += 1
    assert not graph_form.same_graph(a, b)


@pytest.mark.one_pass   # the form and the parser alone, no executor or planner: the second pass (test.sh) deselects it
def test_what_the_form_cannot_carry_gets_no_form():
    g = parse_graph(MIXED.replace('[param="w"]', '[value={0.5}]').replace("%w : Float(4, 3)", "%w : Tensor"),
                    locate=False)
    assert graph_form.encode(g, None) is not None
    const = next(n for n in g.all_nodes() if n.attrs.get("value") == [1, 2])
    const.attrs["value"] = (1, 2)   # JSON would give a list back
    assert graph_form.encode(g, None) is None
    const.attrs["value"] = np.int64(3)
    assert graph_form.encode(g, None) is None
    located = parse_graph("graph(%x : Float(2)):\n  %y : Float(2) = aten::relu(%x)\n  return (%y)\n")
    assert graph_form.encode(located, None) is None   # a position in the text (in_text), which no file carries
    # a parameter constant that is not the file's array
    w = np.ones((4, 3), np.float32)
    p = parse_graph(MIXED, params={"w": w}, locate=False)
    assert graph_form.encode(p, {"w": w.copy()}) is None


@pytest.mark.one_pass   # the form and the parser alone, no executor or planner: the second pass (test.sh) deselects it
def test_a_damaged_or_foreign_form_is_not_used(tmp_path):
    from srcore.format.srm import _from_form

    assert _from_form("f.srm", '{"version": 99}', {}) is None
    assert _from_form("f.srm", "not json", {}) is None
    assert _from_form("f.srm", '{"version": 1, "types": [["?", 1]], "names": [], "counter": 0, "block": [[], [], []]}',
                      {}) is None


CHILD = """
import json, sys, numpy as np, srcore
x = np.load(sys.argv[2])["x"][:5]
sm = srcore.StaticModule(srcore.load(sys.argv[1]))
y = sm(x)
print("@@", json.dumps({"cache": sm.prepared_cache, "parser": "srcore.ir.parser" in sys.modules,
                        "lexer": "srcore.ir.lexer" in sys.modules, "y": y.tolist()}))
"""


def test_an_entry_records_the_form_and_a_hit_does_not_import_the_parser(tmp_path):
    digits = ROOT / "examples" / "digits"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "SRCORE_NO_PREPARED_CACHE")}
    env["SRCORE_CACHE_DIR"] = str(tmp_path / "cache")

    def child():
        out = subprocess.run([sys.executable, "-c", CHILD, str(digits / "digits.srm"), str(digits / "digits_test.npz")],
                             env=env, capture_output=True, text=True, check=True)
        import json

        return json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("@@"))[2:])

    first, second = child(), child()
    assert (first["cache"], second["cache"]) == ("miss", "hit")
    assert first["parser"] and not second["parser"] and not second["lexer"]
    assert second["y"] == first["y"]
    (entry,) = (tmp_path / "cache" / "prepared").glob("*/*.srm")
    c = Container(entry)
    params = {n: c.array(n) for n in c.entries}
    assert graph_form.same_graph(parse_graph(c.metadata["graph"], params=params, locate=False),
                                 graph_form.decode(c.metadata["graph_form"], params))
