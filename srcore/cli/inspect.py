"""``srcore inspect MODEL``: look inside a model; one section per flag.

Sections are the table :data:`SECTIONS`: each has a flag, a help text and a
``"module:function"`` renderer ``render(ctx) -> str`` that is imported only when
its flag is given, and an ``html`` renderer (same signature, returns an HTML
fragment) for ``--html FILE``. A section added later is one more
:class:`Section` row; renderers share the lazily built objects of
:class:`InspectContext` (the loaded model, the prepared graph and its pass
stats, a ``StaticModule``, the memory plan and dispatch rows), so nothing is
computed twice. Without any section flag, ``--graph`` is shown; ``--html FILE``
alone writes every section to FILE (and prints none), with section flags it
prints and writes those.
"""
from __future__ import annotations

import functools
from typing import Any

import attrs

NAME = "inspect"
HELP = "show a model's graph before and after preparation (and, with plugins' help, more)"


@attrs.frozen
class Section:
    flag: str       # "--graph"
    help: str
    render: str     # "module:function", called with an InspectContext, returns text
    title: str = ""  # the heading of the section in the HTML report
    html: str = ""  # "module:function", called with an InspectContext, returns an HTML fragment
    metavar: str = ""  # the flag takes a value (``--partition BACKEND``) instead of being a switch
    json: str = ""  # "module:function", called with an InspectContext, returns JSON data (``--format json``)

    @property
    def key(self) -> str:
        """The section's key in ``--format json`` output (``memory_plan``)."""
        return self.flag.lstrip("-").replace("-", "_")


_HTML = "srcore.cli.inspect_html:"
_RUNTIME = "srcore.cli.inspect_runtime:"

SECTIONS: list[Section] = [
    Section("--graph", "the graph before and after the pass pipeline, with a per-pass summary of "
            "nodes removed/added", "srcore.cli.inspect:render_graph", "Graph and passes", _HTML + "graph_html",
            json="srcore.cli.inspect:graph_json"),
    Section("--memory-plan", "per block: managed tensors, arena bytes, no-reuse sum and liveness lower "
            "bound (inputs from -i, else random; --picture FILE.svg|png draws it)",
            "srcore.cli.inspect_runtime:render_memory_plan", "Memory plan", _HTML + "memory_plan_html",
            json=_RUNTIME + "memory_plan_json"),
    Section("--codegen", "the generated Python source the codegen executor runs (If/Loop bodies inlined)",
            "srcore.cli.inspect_runtime:render_codegen", "Generated code", _HTML + "codegen_html",
            json=_RUNTIME + "codegen_json"),
    Section("--dispatch", "the kernel static dispatch chose for every node (op, kind, backend, plugin)",
            "srcore.cli.inspect_runtime:render_dispatch", "Static dispatch", _HTML + "dispatch_html",
            json=_RUNTIME + "dispatch_json"),
    Section("--partition", "engine segments of BACKEND (e.g. trt_like, ahead of the --backend list): "
            "which nodes each engine holds, its layers and tactics, and every node left to per-node "
            "kernels with the reason", "srcore.cli.inspect_partition:render_partition", "Engine partition",
            "srcore.cli.inspect_partition:partition_html", metavar="BACKEND",
            json="srcore.cli.inspect_partition:partition_json"),
]


def _dest(section: Section) -> str:
    return "section_" + section.flag.lstrip("-").replace("-", "_")


class InspectContext:
    """What the sections share; each attribute is computed on first use."""

    def __init__(self, args):
        self.args = args

    @functools.cached_property
    def model(self):
        from ._common import load_model

        return load_model(self.args.model)

    @functools.cached_property
    def graph(self):
        """The model's graph, parameters bound (so passes that look at weights can run)."""
        model = self.model
        if getattr(model, "params", None):
            try:
                model.bind_params()
            except Exception:  # a graph that names no unknown parameter is fine as it is
                pass
        return model.graph

    @functools.cached_property
    def input_types(self) -> list[Any]:
        from ..ir.types import TensorType

        types = []
        for spec in getattr(self.model, "input_specs", ()):
            is_tensor = getattr(spec, "shape", None) is not None or (
                getattr(spec, "dtype", None) not in ("int", "float", "bool", "str"))
            types.append(TensorType(spec.dtype, spec.shape) if is_tensor and hasattr(spec, "shape") else None)
        return types if len(types) == len(self.graph.inputs) else None

    @functools.cached_property
    def prepared(self):
        """A :class:`srcore.passes.PrepareResult` (the graph untouched when ``--no-optimize``)."""
        from ..passes import PrepareResult, prepare

        if getattr(self.args, "no_optimize", False):
            return PrepareResult(self.graph.copy(), [])
        return prepare(self.graph, input_types=self.input_types)

    @functools.cached_property
    def graph_texts(self) -> tuple[str, str]:
        """The IR text of the graph before and after the pass pipeline."""
        from ..ir.printer import print_graph

        return print_graph(self.graph).rstrip("\n"), print_graph(self.prepared.graph).rstrip("\n")

    @functools.cached_property
    def node_counts(self) -> tuple[int, int]:
        """Nodes (nested blocks included) before and after the pass pipeline."""
        return (sum(1 for _ in self.graph.all_nodes()), sum(1 for _ in self.prepared.graph.all_nodes()))

    @functools.cached_property
    def module(self):
        """A ``StaticModule`` built with the command-line options (for runtime sections)."""
        from ._common import make_module

        return make_module(self.args, self.model)

    @functools.cached_property
    def memory_plan(self):
        """A :class:`srcore.cli.inspect_runtime.MemoryPlanData` for the ``-i`` (else random) inputs."""
        from .inspect_runtime import memory_plan_data

        return memory_plan_data(self)

    @functools.cached_property
    def dispatch(self):
        """:class:`srcore.cli.inspect_runtime.DispatchRow` per processed node of the module."""
        from .inspect_runtime import dispatch_rows

        return dispatch_rows(self.module)


def configure_parser(parser) -> None:
    from ._common import add_model_arguments
    from .output import add_format_argument

    add_model_arguments(parser)
    for s in SECTIONS:
        if s.metavar:
            parser.add_argument(s.flag, metavar=s.metavar, dest=_dest(s), help=s.help)
        else:
            parser.add_argument(s.flag, action="store_true", dest=_dest(s), help=s.help)
    parser.add_argument("-i", "--input", action="append", metavar="NAME=FILE.npy", dest="inputs",
                        help="inputs for --memory-plan (others random; symbolic dims are 1); with --partition, "
                        "the engines show their plans for these shapes (NAME=FILE.npy or NAME=1x3x64x64)")
    parser.add_argument("--picture", metavar="FILE", help="draw the memory plan's lifetimes against offsets of "
                        "the largest block as SVG or PNG (by extension; '-': SVG to stdout); implies --memory-plan")
    parser.add_argument("--html", metavar="FILE", help="write a self-contained HTML report to FILE ('-': stdout): "
                        "a header (inputs, parameters, node counts, load times), contents and every section, "
                        "or only the sections whose flags are given (those are also printed as text)")
    add_format_argument(parser, what="the sections")


def run(args) -> int:
    from ..dispatch.lazy import import_ref
    from .inspect_runtime import PICTURE_SUFFIXES, write_picture
    from .output import check_output_path, claim_stdout, print_json, report_stream

    html, picture = getattr(args, "html", None), getattr(args, "picture", None)
    check_output_path(html, "--html")
    check_output_path(picture, "--picture", suffixes=PICTURE_SUFFIXES)
    claim_stdout(args, ("--html", html), ("--picture", picture))
    if picture:  # the picture is the memory plan's
        setattr(args, _dest(SECTIONS[1]), True)
    flagged = [s for s in SECTIONS if getattr(args, _dest(s), False)]
    out = report_stream(html, picture)
    ctx = InspectContext(args)
    if args.format == "json":
        print_json({"model": args.model, "sections": {s.key: import_ref(s.json)(ctx)
                                                      for s in flagged or SECTIONS[:1]}})
        printed = []
    elif html is None:
        printed = flagged or SECTIONS[:1]
    else:  # the report is the output: print only the sections asked for, and none into stdout's HTML
        printed = flagged if html != "-" else []
    texts = [import_ref(s.render)(ctx).rstrip("\n") for s in printed]
    if texts:
        print("\n\n".join(texts), file=out)
    notes = []
    if picture:
        notes.append(write_picture(ctx, picture))
    if html is not None:
        from .inspect_html import write_report

        sections = flagged or SECTIONS
        write_report(ctx, sections, html)
        if html != "-":
            notes.append(f"wrote {html} ({', '.join(s.flag for s in sections)})")
    if notes and args.format != "json":
        print(("\n" if texts else "") + "\n".join(notes), file=out)
    return 0


def render_graph(ctx: InspectContext) -> str:
    from ..passes import summarize

    result = ctx.prepared
    n_before, n_after = ctx.node_counts
    text_before, text_after = ctx.graph_texts
    parts = [f"== graph before preparation ({n_before} nodes)", text_before,
             "", f"== graph after preparation ({n_after} nodes)", text_after]
    if result.stats:
        changed = changed_passes(result.stats)
        parts += ["", f"== passes ({len(result.stats)} runs, {len(changed)} changed the graph; "
                  f"{n_before} -> {n_after} nodes)", summarize(changed or result.stats)]
    return "\n".join(parts)


def graph_json(ctx: InspectContext) -> dict:
    """``--graph`` for ``--format json``: both graphs as IR text, node counts and every pass run."""
    n_before, n_after = ctx.node_counts
    before, after = ctx.graph_texts
    passes = [{"name": s.name, "iteration": s.iteration, "nodes_before": s.nodes_before,
               "nodes_after": s.nodes_after, "removed": s.removed, "added": s.added, "seconds": s.seconds,
               "changed": bool(s.changed or s.removed or s.added)} for s in ctx.prepared.stats]
    return {"nodes_before": n_before, "nodes_after": n_after, "before": before, "after": after, "passes": passes}


def changed_passes(stats) -> list:
    """The pass runs that changed the graph (what the per-pass summary lists)."""
    return [s for s in stats if s.changed or s.removed or s.added]
