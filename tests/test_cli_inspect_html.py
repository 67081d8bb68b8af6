"""``srcore inspect MODEL --html FILE``: a self-contained, well-formed, escaped HTML report.

The references are independent of the report: a ``StaticModule`` built here (its
processed nodes, memory report and generated source), the IR printer, the model's
parameters, and :mod:`html.parser` / :mod:`xml.etree` to read the page back.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import srcore
from srcore.cli import _common
from srcore.cli.inspect_html import ReportWriteError
from srcore.cli.main import main
from srcore.format.srm import load
from srcore.ir.parser import parse_graph
from srcore.ir.printer import print_graph
from srcore.model import Model
from srcore.passes import prepare
from srcore.runtime.static_module import StaticModule

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits.srm"
SECTIONS = {"graph", "memory-plan", "codegen", "dispatch", "partition"}

# a Loop whose trip count is only known at run time (so it is not unrolled) around an If
CONTROL_FLOW = """\
graph(%x : Float(batch, 4)):
  %zero : int = prim::Constant[value=0]()
  %n : int = aten::size(%x, %zero)
  %t : bool = prim::Constant[value=1]()
  %none : NoneType = prim::Constant()
  %y : Tensor = prim::Loop(%n, %t, %x) # cf.py:3:4
    block0(%i : int, %h : Tensor):
      %s : Tensor = aten::sum(%h, %none) # cf.py:4:8
      %g : Tensor = aten::gt(%s, %zero)
      %b : bool = aten::Bool(%g)
      %h2 : Tensor = prim::If(%b) # cf.py:5:8
        block0():
          %a : Tensor = aten::tanh(%h)
          -> (%a)
        block1():
          %sig : Tensor = aten::sigmoid(%h)
          %d : Tensor = aten::mul(%sig, %h)
          -> (%d)
      -> (%t, %h2)
  %out : Tensor = aten::relu(%y)
  return (%out)
"""

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


class Page(HTMLParser):
    """Reads a page back: every element with its attributes and text; unbalanced tags are errors."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[dict] = []
        self.stack: list[dict] = []
        self.errors: list[str] = []
        self.feed(text)
        self.close()
        self.errors += [f"<{e['tag']}> not closed" for e in self.stack]

    def handle_starttag(self, tag, attrs):
        el = {"tag": tag, "attrs": dict(attrs), "text": []}
        self.elements.append(el)
        if tag not in VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag, attrs):
        self.elements.append({"tag": tag, "attrs": dict(attrs), "text": []})

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1]["tag"] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1]['tag'] if self.stack else None}>")
            return
        self.stack.pop()

    def handle_data(self, data):
        for el in self.stack:
            el["text"].append(data)

    def find(self, tag: str, **attrs) -> list[dict]:
        return [e for e in self.elements if e["tag"] == tag
                and all(e["attrs"].get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def text(self, el: dict) -> str:
        return "".join(el["text"])

    def section(self, sid: str) -> str:
        (el,) = self.find("section", id=sid)
        return self.text(el)


def write(capsys, tmp_path, model, *flags) -> tuple[Page, str, str, str]:
    """Run ``srcore inspect MODEL FLAGS --html tmp/report.html``; the page (checked well-formed), its text,
    stdout and stderr."""
    dest = tmp_path / "report.html"
    code = main(["inspect", str(model), *flags, "--html", str(dest)])
    out, err = capsys.readouterr()
    assert code == 0, err
    text = dest.read_text(encoding="utf-8")
    page = Page(text)
    assert page.errors == [], page.errors[:5]
    return page, text, out, err


def svgs(text: str) -> list[ET.Element]:
    return [ET.fromstring(m) for m in re.findall(r"<svg\b.*?</svg>", text, re.S)]


def dispatch_rows(page: Page) -> list[tuple[int, int, str, str]]:
    return [(int(e["attrs"]["data-block"]), int(e["attrs"]["data-position"]), e["attrs"]["data-op"],
             e["attrs"]["data-kind"]) for e in page.find("tr") if "data-kind" in e["attrs"]]


def reference_dispatch(sm) -> list[tuple[int, int, str, str]]:
    return [(b.index, pn.position, pn.fn.op if pn.fn else pn.node.kind, pn.fn.kind if pn.fn else "runtime")
            for b in sm.blocks for pn in b.nodes]


@pytest.fixture
def cf_model(tmp_path) -> Path:
    path = tmp_path / "cf.ir"
    path.write_text(CONTROL_FLOW)
    return path


def test_html_alone_writes_every_section_self_contained(tmp_path, capsys):
    page, text, out, _ = write(capsys, tmp_path, DIGITS)
    assert out.strip() == f"wrote {tmp_path / 'report.html'} (--graph, --memory-plan, --codegen, --dispatch, --partition)"
    assert text.startswith("<!DOCTYPE html>")
    assert {e["attrs"]["id"] for e in page.find("section")} == SECTIONS
    assert {e["attrs"]["href"] for e in page.find("a")} == {f"#{s}" for s in SECTIONS}  # the contents
    # nothing to fetch, nothing to run: no scripts, stylesheets, images or external references
    assert not page.find("script") and not page.find("link") and not page.find("img")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text)
    assert len(page.find("style")) == 1

    model = load(DIGITS)
    sm = StaticModule(load(DIGITS), backends=("cpu",))
    (header,) = page.find("header")
    head = page.text(header)
    n_elems = sum(a.size for a in model.params.values())
    n_bytes = sum(a.nbytes for a in model.params.values())
    assert f"{len(model.params)} tensors, {n_elems:,} elements, {n_bytes:,} bytes" in head
    assert str(DIGITS) in head and srcore.__version__ in head and "float32 [batch, 1, 8, 8]" in head
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", head)
    before = sum(1 for _ in model.graph.all_nodes())
    after = sum(1 for _ in prepare(model.graph, input_types=[model.input_specs[0].tensor_type()]).graph.all_nodes())
    assert f"{before} before the pass pipeline, {after} after" in head
    assert f"{sm.num_nodes} processed nodes" in head
    for stage in sm.load_stages:
        assert re.search(rf"{stage}\s*[\d.]+ ms", head), stage

    # the dispatch table shows where each node came from (converted models store package-relative paths;
    # an absolute one is shown from site-packages/ on, in full as a tooltip: the test below)
    src = {e["attrs"]["title"]: page.text(e) for e in page.find("td", **{"class": "muted"}) if "title" in e["attrs"]}
    full = str(next(pn.node.source for pn in sm.blocks[0].nodes if pn.node.kind == "srcore::conv2d_relu"))
    assert full.startswith("torch/nn/") and src[full] == full
    # the code section is the generated source, unchanged by the highlighting
    (code,) = page.find("pre", **{"class": "code"})
    gen = StaticModule(model, backends=("cpu",), options=srcore.Options(executor="codegen")).codegen
    assert page.text(code) == gen.source.rstrip()   # generated for the section whatever the executor
    # the memory plan table has the StaticModule's figures, and one picture of the one block
    rows = sm.memory_report(*_common.random_inputs(sm))
    assert f"{rows[0]['arena_bytes']:,}" in page.section("memory-plan")
    (svg,) = svgs(text)
    assert len(svg.findall("{http://www.w3.org/2000/svg}rect/{http://www.w3.org/2000/svg}title")) == \
        rows[0]["managed_tensors"]


def test_dispatch_table_lists_every_processed_node_with_its_kernel(tmp_path, capsys, cf_model):
    page, text, _, _ = write(capsys, tmp_path, cf_model)
    model = _common.load_model(str(cf_model))
    sm = StaticModule(model, backends=("cpu",))
    rows = dispatch_rows(page)
    assert rows == reference_dispatch(sm)
    assert {r[0] for r in rows} == {b.index for b in sm.blocks} and len(sm.blocks) == 4
    # every node of the prepared graph but its constants has a row (op "ns::name.overload" of kind "ns::name")
    kinds = Counter(n.kind for n in sm.graph.all_nodes() if n.kind != "prim::Constant")
    assert Counter(op.split(".")[0] for _, _, op, _ in rows) == kinds
    assert {"prim::Loop", "prim::If", "aten::mul"} <= set(kinds)
    section = page.section("dispatch")
    assert "block 1 (prim::Loop)" in section and "block 3 (prim::If)" in section
    # the kinds are coloured: one badge class per kind
    badges = {e["attrs"]["class"] for e in page.find("span") if "kind" in e["attrs"].get("class", "").split()}
    assert badges == {f"kind kind-{k}" for _, _, _, k in rows}
    # the graph section shows both graphs as the IR printer prints them, and the pass runs
    pres = [page.text(e) for e in page.find("pre", **{"class": "ir"})]
    prepared = prepare(model.graph, input_types=[model.input_specs[0].tensor_type()])
    assert pres == [print_graph(prepared.graph).rstrip("\n"), print_graph(model.graph).rstrip("\n")]
    assert all(s.name in page.section("graph") for s in prepared.stats)
    # one lifetime picture per block with managed tensors (here: the If's else branch), valid XML
    plan = sm.memory_report(*_common.random_inputs(sm))
    managed = [r for r in plan if r["managed_tensors"]]
    pictures = svgs(text)
    assert len(pictures) == len(managed) == 1
    titles = [t.text for t in pictures[0].iter("{http://www.w3.org/2000/svg}title")]
    assert len(titles) == managed[0]["managed_tensors"] and titles[0].startswith("%sig: 16 bytes")  # (1, 4) float32


def test_section_flags_limit_the_report_and_keep_the_terminal_text(tmp_path, capsys, cf_model):
    assert main(["inspect", str(cf_model), "--dispatch", "--codegen"]) == 0
    plain = capsys.readouterr().out
    page, text, out, _ = write(capsys, tmp_path, cf_model, "--dispatch", "--codegen")
    assert out == plain + f"\nwrote {tmp_path / 'report.html'} (--codegen, --dispatch)\n"
    assert {e["attrs"]["id"] for e in page.find("section")} == {"codegen", "dispatch"}
    assert not svgs(text) and "prim::Loop" in page.section("dispatch")


def test_html_to_stdout_is_only_the_page(capsys, cf_model):
    assert main(["inspect", str(cf_model), "--graph", "--html", "-"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("<!DOCTYPE html>") and out.rstrip().endswith("</html>")
    page = Page(out)
    assert page.errors == [] and [e["attrs"]["id"] for e in page.find("section")] == ["graph"]


EVIL = '<script>alert("x")</script>'


def test_strings_from_the_model_cannot_inject_markup(tmp_path, capsys, monkeypatch):
    ir = ("graph(%x : Float(2, 4)):\n"
          '  %s : str = prim::Constant[value="</pre><script>alert(1)</script>"]()\n'
          f"  %y : Tensor = aten::relu(%x) # {EVIL}.py:1:2\n"
          "  %out : Tensor = aten::tanh(%y)\n"
          "  return (%out)\n")
    path = tmp_path / '<script>alert("f")&<b>.ir'  # no "/" in a file name
    path.write_text(ir)
    graph = parse_graph(ir)
    graph.inputs[0].name = "<img src=x onerror=alert(2)>"
    for n in graph.all_nodes():
        if n.kind == "aten::relu":
            n.output.name = EVIL
    model = Model.from_graph(graph, metadata={"<b>note</b>": "<i>&amp;</i>"})
    monkeypatch.setattr(_common, "load_model", lambda p: model)
    page, text, _, _ = write(capsys, tmp_path, path)
    assert not page.find("script") and not page.find("img") and not page.find("b") and not page.find("i")
    assert "<script" not in text and "<img" not in text
    # the strings are all there, as text
    before = [page.text(e) for e in page.find("pre", **{"class": "ir"})][1]
    assert before == print_graph(graph).rstrip("\n")
    assert "</pre><script>alert(1)</script>" in before and f"# {EVIL}.py:1:2" in before  # (printer: safe names)
    dispatch = page.section("dispatch")
    assert f"%{EVIL}" in dispatch and f"{EVIL}.py:1:2" in dispatch
    head = page.text(page.find("header")[0])
    assert str(path) in head and "<img src=x onerror=alert(2)>" in head and "<i>&amp;</i>" in head
    assert str(path) in page.text(page.find("title")[0])
    for svg in svgs(text):  # the picture's labels are escaped as XML too
        assert all(not el.tag.endswith("script") for el in svg.iter())


def test_a_path_that_cannot_be_written_is_a_clear_error(tmp_path, capsys, cf_model, monkeypatch):
    from srcore.cli.errors import OutputPathError

    monkeypatch.delenv("SRCORE_DEBUG", raising=False)
    for dest, why in ((tmp_path / "no-such-dir" / "r.html", "no such directory"), (tmp_path, "is a directory")):
        assert main(["inspect", str(cf_model), "--html", str(dest)]) == 1
        out, err = capsys.readouterr()
        assert err.startswith(f"srcore: error: --html {dest}: ") and why in err.splitlines()[0]
        assert "Traceback" not in err and out == ""
    monkeypatch.setenv("SRCORE_DEBUG", "1")
    with pytest.raises(OutputPathError, match="no-such-dir"):
        main(["inspect", str(cf_model), "--html", str(tmp_path / "no-such-dir" / "r.html")])
    assert issubclass(ReportWriteError, OutputPathError) and issubclass(OutputPathError, srcore.SrcoreError)


def test_a_section_that_fails_is_reported_in_place(tmp_path, capsys):
    path = tmp_path / "scalar.ir"  # a scalar input: --memory-plan needs it from -i
    path.write_text("graph(%x : Float(2, 4), %k : int):\n"
                    "  %y : Tensor = aten::mul(%x, %k)\n"
                    "  return (%y)\n")
    page, _, _, err = write(capsys, tmp_path, path)
    assert err.startswith("srcore: warning: --memory-plan section of the report: input 'k'")
    (box,) = [e for e in page.find("p", **{"class": "error"})]
    assert "input 'k' is a scalar (int)" in page.text(box) and "give it with -i k=VALUE" in page.section("memory-plan")
    assert {e["attrs"]["id"] for e in page.find("section")} == SECTIONS
    np.save(tmp_path / "x.npy", np.ones((2, 4), np.float32))
    page, _, _, _ = write(capsys, tmp_path, path, "-i", f"x={tmp_path / 'x.npy'}", "-i", "k=3")
    assert not page.find("p", **{"class": "error"}) and "x=(2, 4), k=()" in page.section("memory-plan")


def test_no_optimize_shows_the_graph_as_converted(tmp_path, capsys, cf_model):
    page, _, _, _ = write(capsys, tmp_path, cf_model, "--graph", "--no-optimize")
    after, before = [page.text(e) for e in page.find("pre", **{"class": "ir"})]
    assert after == before == print_graph(_common.load_model(str(cf_model)).graph).rstrip("\n")
    assert "the pass pipeline did not run" in page.section("graph") and not page.find("tr", **{"class": "changed"})


def test_an_absolute_library_path_is_shortened_with_the_full_path_as_tooltip():
    from srcore.cli.inspect_html import _source_cell

    cell = _source_cell("/venv/lib/python3.11/site-packages/torch/nn/functional.py:12:3")
    assert cell == ('<td class="muted" title="/venv/lib/python3.11/site-packages/torch/nn/functional.py:12:3">'
                    "torch/nn/functional.py:12:3</td>")
