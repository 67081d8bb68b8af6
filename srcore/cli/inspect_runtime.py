"""``srcore inspect`` sections about the loaded StaticModule: memory plan, codegen, dispatch."""
from __future__ import annotations


def render_memory_plan(ctx) -> str:
    from ..memory.report import render_png, render_svg, summary_rows
    from ._common import parse_inputs

    sm = ctx.module
    inputs = parse_inputs(sm, getattr(ctx.args, "inputs", None))
    rows = sm.memory_report(*inputs)
    shapes = ", ".join(f"{n}={tuple(getattr(x, 'shape', ()))}" for n, x in zip(sm.input_names, inputs))
    text = [f"== memory plan ({sm.options.memory_planner_algorithm}) for inputs {shapes}", summary_rows(rows)]
    picture = getattr(ctx.args, "picture", None)
    if picture:
        labels = {v: f"%{sm.values[v].name}" for r in rows for v in r["plan"].offsets}
        main = max(rows, key=lambda r: r["arena_bytes"])
        title = f"{ctx.args.model}: block {main['block']} ({main['owner']})"
        if picture.lower().endswith(".png"):
            render_png(main["requests"], main["plan"], picture, title=title, labels=labels)
        else:
            with open(picture, "w", encoding="utf-8") as f:
                f.write(render_svg(main["requests"], main["plan"], title=title, labels=labels))
        text.append(f"wrote {picture} (block {main['block']}: lifetimes against offsets)")
    return "\n".join(text)


def render_codegen(ctx) -> str:
    sm = ctx.module
    gen = sm._codegen
    if gen is None:
        from ..runtime.codegen import generate

        gen = generate(sm)
    return "== generated code (one function for the graph, one per prim::fork body)\n" + gen.source.rstrip("\n")


def render_dispatch(ctx) -> str:
    sm = ctx.module
    lines = [f"== static dispatch (backends: {', '.join(sm.options.backends)})"]
    for b in sm.blocks:
        owner = b.block.owning_node.kind if b.block.owning_node is not None else "graph"
        lines.append(f"block {b.index} ({owner}):")
        for pn in b.nodes:
            fn = pn.fn
            if fn is None:
                lines.append(f"  {pn.position:4d} {pn.node.kind:40s} (runtime)")
            else:
                lines.append(f"  {pn.position:4d} {fn.op:40s} {fn.kind:8s} {fn.backend or '':10s} {fn.plugin or ''}")
    return "\n".join(lines)
