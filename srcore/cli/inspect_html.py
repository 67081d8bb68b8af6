"""``srcore inspect MODEL --html FILE``: the inspect sections as one self-contained HTML page.

The page needs nothing else: CSS is inline, pictures are inline SVG (the
memory plan's lifetime picture comes from :func:`srcore.memory.report.render_svg`),
and there is no script. Every section renderer here takes the same
:class:`srcore.cli.inspect.InspectContext` as the text renderers and reads the
same cached data (graph texts, pass stats, memory plan rows, dispatch rows,
codegen source), so asking for text and HTML computes nothing twice.

Every string that comes from the model (names, node sources, attribute
values, the file name) goes through :func:`html.escape` before it reaches the
page, so a model cannot inject markup.
"""
from __future__ import annotations

import logging
import re
import sys
from datetime import datetime, timezone
from html import escape
from typing import Any, Iterable, Sequence

from ..errors import SrcoreError
from .errors import OutputPathError

#: at most this many lifetime pictures (the blocks with the largest arenas) per report
MAX_PICTURES = 8

KIND_HELP = {
    "out": "out variant: writes into a planned buffer",
    "native": "native kernel: allocates its result",
    "fallback": "fallback kernel (boxed, slow path)",
    "structural": "run by the runtime itself",
    "runtime": "no kernel: the runtime runs this node (If, Loop, fork, ...)",
}

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
main,header,nav,footer{max-width:1200px;margin:0 auto;padding:0 24px}
header{padding-top:16px}h1{font-size:1.5em;margin:.4em 0}h2{margin-top:0;border-bottom:1px solid #d7dbe2;
padding-bottom:.2em}h3{font-size:1.05em;margin:1.2em 0 .4em}
section,nav .box,header .box{background:#fff;border:1px solid #d7dbe2;border-radius:6px;padding:16px 20px;
margin:16px 0}
table{border-collapse:collapse;font-size:.9em}th,td{padding:3px 10px;text-align:left;vertical-align:top;
border-bottom:1px solid #eceef2}th{background:#f0f2f5}td.num,th.num{text-align:right;
font-variant-numeric:tabular-nums}tr.block th{background:#e4e8ef}tr.unchanged{color:#8a93a3}
pre{background:#fbfbfc;border:1px solid #e3e6eb;border-radius:4px;padding:10px;overflow:auto;font-size:.85em;
line-height:1.35;margin:.4em 0}code,pre{font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace}
.k{color:#0b5cad;font-weight:600}.v{color:#7a3e9d}.c{color:#8a93a3}.kw{color:#b3261e;font-weight:600}
.kind{display:inline-block;border-radius:3px;padding:0 6px;font-size:.85em;font-weight:600;color:#fff}
.kind-out{background:#2e7d32}.kind-native{background:#1565c0}.kind-fallback{background:#e65100}
.kind-structural,.kind-runtime{background:#6b7280}
.bar{display:inline-block;height:.8em;background:#4e79a7;border-radius:2px;vertical-align:middle}
.error{background:#fdecea;border:1px solid #f5c2c0;border-radius:4px;padding:8px 12px;color:#8a1c12}
figure{margin:12px 0;overflow:auto}figcaption{font-size:.85em;color:#5b6474}
details>summary{cursor:pointer;font-weight:600;margin:.5em 0}.muted{color:#5b6474}
"""


class ReportWriteError(OutputPathError):
    """The ``--html`` report cannot be written to the path given; names the path."""


def write_report(ctx, sections: Sequence, dest: str) -> None:
    """Render ``sections`` (``srcore.cli.inspect.Section`` rows) and write them to ``dest`` (``-``: stdout)."""
    doc = render_report(ctx, sections)
    if dest == "-":
        sys.stdout.write(doc)
        return
    try:
        with open(dest, "w", encoding="utf-8") as f:
            f.write(doc)
    except OSError as exc:
        raise ReportWriteError(f"--html {dest}: cannot write the report: {exc.strerror or exc}") from None


def render_report(ctx, sections: Sequence) -> str:
    """The whole page: header, contents, one ``<section>`` per section (errors shown in place)."""
    from ..dispatch.lazy import import_ref

    body = []
    for s in sections:
        try:
            inner = import_ref(s.html)(ctx)
        except SrcoreError as exc:  # the rest of the report is still worth having
            logging.getLogger("srcore.cli").warning("%s section of the report: %s", s.flag, exc)
            inner = f'<p class="error">{escape(f"{type(exc).__name__}: {exc}")}</p>'
        body.append(f'<section id="{_anchor(s)}"><h2>{escape(s.title)}</h2>\n{inner}\n</section>')
    toc = "".join(f'<li><a href="#{_anchor(s)}">{escape(s.title)}</a> <span class="muted">({escape(s.flag)})'
                  f'</span></li>' for s in sections)
    title = f"srcore inspect {ctx.args.model}"
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>", f"<style>{_CSS}</style>", "</head>", "<body>",
        _header(ctx), f'<nav><div class="box"><h2>Contents</h2><ol>{toc}</ol></div></nav>',
        "<main>", *body, "</main>",
        f'<footer><p class="muted">srcore {escape(_version())}</p></footer>', "</body>", "</html>", ""])


# -- header ----------------------------------------------------------------------------------------
def _header(ctx) -> str:
    model = ctx.model
    facts = [("model file", f"<code>{escape(str(ctx.args.model))}</code>"),
             ("srcore", escape(_version())),
             ("date", escape(datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))),
             ("inputs", _inputs_table(model))]
    params = getattr(model, "params", None) or {}
    n_elems = sum(int(getattr(a, "size", 0)) for a in params.values())
    n_bytes = sum(int(getattr(a, "nbytes", 0)) for a in params.values())
    facts.append(("parameters", f"{len(params):,} tensors, {n_elems:,} elements, {n_bytes:,} bytes"))
    n_before, n_after = ctx.node_counts
    nodes = f"{n_before:,} before the pass pipeline, {n_after:,} after"
    for key, value in sorted((getattr(model, "metadata", None) or {}).items()):
        facts.append((f"metadata: {key}", escape(str(value))))
    try:
        sm = ctx.module
    except SrcoreError as exc:  # e.g. an op no backend implements: --graph still works
        facts += [("nodes", nodes), ("load", f'<span class="error">{escape(str(exc))}</span>')]
    else:
        o = sm.options
        nodes += f"; {sm.num_nodes:,} processed nodes in {len(sm.blocks)} blocks"
        facts += [("nodes", nodes),
                  ("options", escape(f"backends {', '.join(o.backends)}; executor {o.executor}; planner "
                                     f"{o.memory_planner_algorithm}; optimize {o.optimize}")),
                  ("load stages", _stages_table(sm.load_stages, sm.setup_time))]
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{v}</td></tr>" for k, v in facts)
    return (f'<header><h1>srcore inspect <code>{escape(str(ctx.args.model))}</code></h1>'
            f'<div class="box"><table class="facts">{rows}</table></div></header>')


def _inputs_table(model) -> str:
    specs = {s.name: s for s in getattr(model, "input_specs", ())}
    rows = []
    for i, v in enumerate(model.graph.inputs):
        name = v.name or f"input{i}"
        s = specs.get(name)
        if s is not None:
            shape = "?" if s.shape is None else "[" + ", ".join(str(d) for d in s.shape) + "]"
            rows.append((name, f"{s.dtype} {shape}"))
        else:
            rows.append((name, str(v.type)))
    if not rows:
        return "none"
    return "<table>" + "".join(f"<tr><td><code>{escape(n)}</code></td><td><code>{escape(t)}</code></td></tr>"
                               for n, t in rows) + "</table>"


def _stages_table(stages: dict[str, float], total: float) -> str:
    top = max(stages.values(), default=0.0) or 1.0
    rows = "".join(f'<tr><td>{escape(name)}</td><td class="num">{sec * 1e3:.2f} ms</td>'
                   f'<td><span class="bar" style="width:{max(1.0, 200 * sec / top):.0f}px"></span></td></tr>'
                   for name, sec in stages.items())
    return f'<table>{rows}<tr><th>total</th><th class="num">{total * 1e3:.2f} ms</th><th></th></tr></table>'


# -- sections --------------------------------------------------------------------------------------
def graph_html(ctx) -> str:
    """Before/after IR text, op counts per kind, and the per-pass table (changed runs highlighted)."""
    from .inspect import changed_passes

    n_before, n_after = ctx.node_counts
    text_before, text_after = ctx.graph_texts
    stats = ctx.prepared.stats
    changed = {id(s) for s in changed_passes(stats)}
    if getattr(ctx.args, "no_optimize", False):
        parts = [f"<p>{n_before:,} nodes; <code>--no-optimize</code>: the pass pipeline did not run.</p>"]
    else:
        parts = [f"<p>{n_before:,} nodes before the pass pipeline, {n_after:,} after; {len(stats)} pass runs, "
                 f"{len(changed)} changed the graph.</p>"]
    if stats:
        head = _head(["pass", "iteration", "nodes before", "nodes after", "removed", "added", "time (ms)"], range(1, 7))
        rows = "".join(
            f'<tr class="{"changed" if id(s) in changed else "unchanged"}"><td>{escape(s.name)}</td>'
            + _nums([s.iteration or "", s.nodes_before, s.nodes_after, f"-{s.removed}", f"+{s.added}",
                     f"{s.seconds * 1e3:.2f}"]) + "</tr>" for s in stats)
        parts.append(f"<h3>Passes</h3><table>{head}{rows}</table>")
    parts.append("<h3>Nodes per op</h3>" + _op_counts(ctx.graph, ctx.prepared.graph))
    parts.append(f'<details open><summary>Graph after the pass pipeline ({n_after:,} nodes)</summary>'
                 f'<pre class="ir">{_highlight_ir(text_after)}</pre></details>')
    parts.append(f'<details><summary>Graph before the pass pipeline ({n_before:,} nodes)</summary>'
                 f'<pre class="ir">{_highlight_ir(text_before)}</pre></details>')
    return "\n".join(parts)


def dispatch_html(ctx) -> str:
    """One row per processed node (block by block): outputs, op, kernel kind, backend, plugin, source."""
    sm, rows = ctx.module, ctx.dispatch
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.kind] = counts.get(r.kind, 0) + 1
    legend = ", ".join(f'{_kind(k)} {n}' for k, n in sorted(counts.items()))
    head = _head(["#", "outputs", "op", "kind", "backend", "plugin", "source"], [0])
    body, block = [], None
    for r in rows:
        if r.block != block:
            body.append("</tbody>" if block is not None else "")
            block = r.block
            body.append(f'<tbody><tr class="block"><th colspan="7">block {r.block} ({escape(r.owner)})</th></tr>')
        outs = ", ".join(f"%{v.name}" for v in r.node.outputs) or "-"
        body.append(
            f'<tr data-block="{r.block}" data-position="{r.position}" data-op="{escape(r.op)}" '
            f'data-kind="{escape(r.kind)}"><td class="num">{r.position}</td><td><code>{escape(outs)}</code></td>'
            f"<td><code>{escape(r.op)}</code></td><td{_reason_attr(r)}>{_kind(r.kind)}</td><td>{escape(r.backend)}</td>"
            f"<td>{escape(r.plugin)}</td>{_source_cell(r.node.source)}</tr>")
    return (f"<p>Backends, highest priority first: {escape(', '.join(sm.options.backends))}. "
            f"{len(rows)} nodes: {legend}.</p><table>{head}{''.join(body)}{'</tbody>' if rows else ''}</table>")


def _reason_attr(row) -> str:
    reason = getattr(row, "reason", "")
    return f' title="fell back: {escape(reason)}"' if reason else ""


def memory_plan_html(ctx) -> str:
    """The per-block plan table and, for the largest blocks, the lifetime picture as inline SVG."""
    from ..memory.report import SUMMARY_COLUMNS, render_svg, summary_table

    data = ctx.memory_plan
    head = _head(SUMMARY_COLUMNS, range(2, len(SUMMARY_COLUMNS)))
    body = "".join(f"<tr><td>{b}</td><td>{escape(str(owner))}</td>"
                   + _nums([n, f"{arena:,}", f"{nr:,}", f"{lb:,}", f"{r_lb:.3f}", f"{r_sum:.3f}"]) + "</tr>"
                   for b, owner, n, arena, nr, lb, r_lb, r_sum in summary_table(data.rows))
    parts = [f"<p>Planner <code>{escape(data.algorithm)}</code>, inputs <code>{escape(data.inputs)}</code> "
             f"(bytes; <em>lower bound</em>: the most bytes alive at once).</p><table>{head}{body}</table>"]
    drawn = sorted((r for r in data.rows if r["requests"]), key=lambda r: -r["arena_bytes"])
    for r in drawn[:MAX_PICTURES]:
        title = f"block {r['block']} ({r['owner']})"
        svg = render_svg(r["requests"], r["plan"], title=f"{ctx.args.model}: {title}", labels=data.labels)
        parts.append(f"<figure>{svg}<figcaption>{escape(title)}: managed tensors as rectangles, node "
                     f"positions across, byte offsets up (hover for names)</figcaption></figure>")
    if len(drawn) > MAX_PICTURES:
        parts.append(f'<p class="muted">{len(drawn) - MAX_PICTURES} smaller blocks not drawn.</p>')
    if not drawn:
        parts.append('<p class="muted">No block has managed tensors: nothing to draw.</p>')
    return "\n".join(parts)


def codegen_html(ctx) -> str:
    """The generated source, keywords highlighted."""
    from .inspect_runtime import CODEGEN_TITLE, codegen_source

    return (f"<p>The {escape(CODEGEN_TITLE)}.</p>"
            f'<pre class="code">{_highlight_py(codegen_source(ctx).rstrip())}</pre>')


# -- helpers ---------------------------------------------------------------------------------------
def _anchor(section) -> str:
    return section.flag.lstrip("-")


def _version() -> str:
    from .. import __version__

    return __version__


def _head(names: Sequence[str], numeric: Iterable[int]) -> str:
    """A header row; the columns at indexes ``numeric`` are right-aligned."""
    num, right = ' class="num"', set(numeric)
    cells = "".join(f'<th{num if i in right else ""}>{escape(n)}</th>' for i, n in enumerate(names))
    return f"<thead><tr>{cells}</tr></thead>"


def _nums(values: Iterable[Any]) -> str:
    return "".join(f'<td class="num">{escape(str(v))}</td>' for v in values)


def _kind(kind: str) -> str:
    k = escape(kind)
    return f'<span class="kind kind-{k}" title="{escape(KIND_HELP.get(kind, kind))}">{k}</span>'


def _source_cell(source) -> str:
    """The node's source location; an installed library's path from ``site-packages/`` on (full in the tooltip)."""
    full = str(source or "")
    short = full.rsplit("site-packages/", 1)[-1]
    return f'<td class="muted" title="{escape(full)}">{escape(short)}</td>'


def _op_counts(before, after) -> str:
    def count(g) -> dict[str, int]:
        out: dict[str, int] = {}
        for n in g.all_nodes():
            out[n.kind] = out.get(n.kind, 0) + 1
        return out

    b, a = count(before), count(after)
    rows = "".join(f"<tr><td><code>{escape(k)}</code></td>" + _nums([b.get(k, 0), a.get(k, 0),
                                                                     f"{a.get(k, 0) - b.get(k, 0):+d}"]) + "</tr>"
                   for k in sorted(set(b) | set(a)))
    return f"<table>{_head(['op', 'before', 'after', 'change'], (1, 2, 3))}{rows}</table>"


# One pass over already-escaped text (no "<" left in it), so the spans added cannot be matched again.
_IR_TOKENS = re.compile(r"(?P<c> # [^\n]*)|(?P<k>\b[A-Za-z_]\w*::[\w.]+)|(?P<v>%[\w.]+)")
_PY_TOKENS = re.compile(r"(?P<c>#[^\n]*)|(?P<kw>\b(?:def|return|if|else|elif|for|while|in|not|and|or|is|"
                        r"None|True|False|break|continue|pass)\b)")


def _highlight(text: str, pattern: re.Pattern) -> str:
    return pattern.sub(lambda m: f'<span class="{m.lastgroup}">{m.group(0)}</span>', escape(text, quote=False))


def _highlight_ir(text: str) -> str:
    return _highlight(text, _IR_TOKENS)


def _highlight_py(text: str) -> str:
    return _highlight(text, _PY_TOKENS)
