"""``srcore inspect`` sections about the loaded StaticModule: memory plan, codegen, dispatch.

Each section is split in two: a data function (``memory_plan_data``,
``dispatch_rows``, ``codegen_source``) that the text renderers here and the
HTML renderers of :mod:`srcore.cli.inspect_html` share, and the text renderer.
"""
from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class MemoryPlanData:
    """What ``--memory-plan`` shows: the inputs it planned for and ``StaticModule.memory_report`` rows."""

    algorithm: str
    inputs: str                     # "x=(1, 8)"
    rows: list[dict[str, Any]]      # StaticModule.memory_report(...) rows (with "requests" and "plan")
    labels: dict[int, str]          # slot -> "%name", for the pictures

    def largest(self) -> dict[str, Any]:
        """The row of the block with the largest arena (the one ``--picture`` draws)."""
        return max(self.rows, key=lambda r: r["arena_bytes"])


def memory_plan_data(ctx) -> MemoryPlanData:
    """Plan every block for the ``-i`` inputs (others random); use ``ctx.memory_plan`` (cached)."""
    from ._common import parse_inputs

    sm = ctx.module
    inputs = parse_inputs(sm, getattr(ctx.args, "inputs", None))
    rows = sm.memory_report(*inputs)
    shapes = ", ".join(f"{n}={tuple(getattr(x, 'shape', ()))}" for n, x in zip(sm.input_names, inputs))
    labels = {v: f"%{sm.values[v].name}" for r in rows for v in r["plan"].offsets}
    return MemoryPlanData(sm.options.memory_planner_algorithm, shapes, rows, labels)


def render_memory_plan(ctx) -> str:
    from ..memory.report import summary_rows

    data = ctx.memory_plan
    return "\n".join([f"== memory plan ({data.algorithm}) for inputs {data.inputs}", summary_rows(data.rows)])


def memory_plan_json(ctx) -> dict[str, Any]:
    """``--memory-plan`` for ``--format json``: the planner, the inputs and one object per block."""
    from ..memory.report import summary_table

    keys = ("block", "owner", "managed_tensors", "arena_bytes", "no_reuse_bytes", "lower_bound_bytes",
            "arena_over_lower_bound", "arena_over_no_reuse")
    data = ctx.memory_plan
    return {"algorithm": data.algorithm, "inputs": data.inputs,
            "blocks": [dict(zip(keys, row)) for row in summary_table(data.rows)]}


#: file types ``--picture`` writes (``-``: SVG to stdout)
PICTURE_SUFFIXES = (".svg", ".png")


def write_picture(ctx, dest: str) -> str:
    """Draw the largest block's lifetimes against offsets to ``dest`` (.svg, .png or ``-``); a one-line note."""
    from ..memory.report import render_png, render_svg
    from .output import open_output

    data = ctx.memory_plan
    main = data.largest()
    title = f"{ctx.args.model}: block {main['block']} ({main['owner']})"
    if dest.lower().endswith(".png"):
        with open_output(dest, "--picture", binary=True) as f:
            render_png(main["requests"], main["plan"], f, title=title, labels=data.labels)
    else:
        with open_output(dest, "--picture") as f:
            f.write(render_svg(main["requests"], main["plan"], title=title, labels=data.labels))
    return f"wrote {dest} (block {main['block']}: lifetimes against offsets)"


CODEGEN_TITLE = "generated code (one function for the graph, one per prim::fork body)"


def codegen_source(ctx) -> str:
    """The source the codegen executor runs (generated now when the executor is the interpreter)."""
    sm = ctx.module
    gen = sm.codegen
    if gen is None:
        from ..runtime.codegen import generate

        gen = generate(sm)
    return gen.source


def render_codegen(ctx) -> str:
    return f"== {CODEGEN_TITLE}\n" + codegen_source(ctx).rstrip("\n")


def codegen_json(ctx) -> dict[str, Any]:
    return {"executor": ctx.module.options.executor, "source": codegen_source(ctx)}


@attrs.frozen
class DispatchRow:
    """One processed node and the kernel static dispatch chose for it (``kind`` "runtime": none)."""

    block: int
    owner: str                      # the block's owning node kind, or "graph"
    position: int
    node: Any                       # the srcore.ir.Node
    op: str                         # the kernel's op (with overload), or the node kind
    kind: str                       # "out", "native", "fallback", "structural" or "runtime"
    backend: str
    plugin: str
    reason: str = ""                # for a fallback: why no out or native kernel was taken


def dispatch_rows(sm) -> list[DispatchRow]:
    """Every processed node of every block of ``sm``, in block then position order."""
    rows = []
    report = getattr(sm, "load_report", None)
    reasons = {f.node: f.reason for f in (report.fallbacks if report is not None else ())}
    for b in sm.blocks:
        owner = _owner(b)
        for pn in b.nodes:
            fn = pn.fn
            if fn is None:
                rows.append(DispatchRow(b.index, owner, pn.position, pn.node, pn.node.kind, "runtime", "", ""))
            else:
                reason = reasons.get(repr(pn.node).strip(), "") if fn.kind == "fallback" else ""
                rows.append(DispatchRow(b.index, owner, pn.position, pn.node, fn.op, fn.kind, fn.backend or "",
                                        fn.plugin or "", reason))
    return rows


def render_dispatch(ctx) -> str:
    sm = ctx.module
    lines = [f"== static dispatch (backends: {', '.join(sm.options.backends)})"]
    by_block: dict[int, list[DispatchRow]] = {}
    for r in ctx.dispatch:
        by_block.setdefault(r.block, []).append(r)
    for b in sm.blocks:  # every block, also one without nodes
        lines.append(f"block {b.index} ({_owner(b)}):")
        for r in by_block.get(b.index, ()):
            if r.kind == "runtime":
                lines.append(f"  {r.position:4d} {r.op:40s} (runtime)")
            else:
                lines.append(f"  {r.position:4d} {r.op:40s} {r.kind:8s} {r.backend:10s} {r.plugin}")
                if r.reason:
                    lines.append(f"       fell back: {r.reason}")
    decomposed = getattr(getattr(sm, "load_report", None), "decomposed", ())
    if decomposed:
        lines.append("decomposed at load (no out or native kernel on these backends):")
        lines.extend(f"  {d.describe()}" for d in decomposed)
    return "\n".join(lines)


def dispatch_json(ctx) -> dict[str, Any]:
    """``--dispatch`` for ``--format json``: the backends and one object per processed node."""
    rows = [{"block": r.block, "owner": r.owner, "position": r.position, "op": r.op, "kind": r.kind,
             "backend": r.backend or None, "plugin": r.plugin or None,
             "source": str(r.node.source) if getattr(r.node, "source", None) is not None else None}
            for r in ctx.dispatch]
    return {"backends": list(ctx.module.options.backends), "nodes": rows}


def _owner(block_info) -> str:
    node = block_info.block.owning_node
    return node.kind if node is not None else "graph"
