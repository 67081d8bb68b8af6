"""``srcore inspect MODEL``: look inside a model; one section per flag.

Sections are the table :data:`SECTIONS`: each has a flag, a help text and a
``"module:function"`` renderer ``render(ctx) -> str`` that is imported only when
its flag is given. A section added later (``--memory-plan``, ``--codegen``) is
one more :class:`Section` row; renderers share the lazily built objects of
:class:`InspectContext` (the loaded model, the prepared graph and its pass
stats, a ``StaticModule``), so nothing is computed twice. Without any section
flag, ``--graph`` is shown.
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


SECTIONS: list[Section] = [
    Section("--graph", "the graph before and after the pass pipeline, with a per-pass summary of "
            "nodes removed/added", "srcore.cli.inspect:render_graph"),
    Section("--memory-plan", "per block: managed tensors, arena bytes, no-reuse sum and liveness lower "
            "bound (inputs from -i, else random; --picture FILE.svg|png draws it)",
            "srcore.cli.inspect_runtime:render_memory_plan"),
    Section("--codegen", "the generated Python source the codegen executor runs (If/Loop bodies inlined)",
            "srcore.cli.inspect_runtime:render_codegen"),
    Section("--dispatch", "the kernel static dispatch chose for every node (op, kind, backend, plugin)",
            "srcore.cli.inspect_runtime:render_dispatch"),
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
    def module(self):
        """A ``StaticModule`` built with the command-line options (for runtime sections)."""
        from ._common import make_module

        return make_module(self.args, self.model)


def configure_parser(parser) -> None:
    from ._common import add_model_arguments

    add_model_arguments(parser)
    for s in SECTIONS:
        parser.add_argument(s.flag, action="store_true", dest=_dest(s), help=s.help)
    parser.add_argument("-i", "--input", action="append", metavar="NAME=FILE.npy", dest="inputs",
                        help="inputs for --memory-plan (others random; symbolic dims are 1)")
    parser.add_argument("--picture", metavar="FILE", help="with --memory-plan: write lifetimes against "
                        "offsets of the largest block as SVG or PNG (by extension)")


def run(args) -> int:
    from ..dispatch.lazy import import_ref

    chosen = [s for s in SECTIONS if getattr(args, _dest(s), False)] or SECTIONS[:1]
    ctx = InspectContext(args)
    texts = [import_ref(s.render)(ctx).rstrip("\n") for s in chosen]
    print("\n\n".join(texts))
    return 0


def render_graph(ctx: InspectContext) -> str:
    from ..ir.printer import print_graph
    from ..passes import summarize

    before, result = ctx.graph, ctx.prepared
    n_before = sum(1 for _ in before.all_nodes())
    n_after = sum(1 for _ in result.graph.all_nodes())
    parts = [f"== graph before preparation ({n_before} nodes)", print_graph(before).rstrip("\n"),
             "", f"== graph after preparation ({n_after} nodes)", print_graph(result.graph).rstrip("\n")]
    if result.stats:
        changed = [s for s in result.stats if s.changed or s.removed or s.added]
        parts += ["", f"== passes ({len(result.stats)} runs, {len(changed)} changed the graph; "
                  f"{n_before} -> {n_after} nodes)", summarize(changed or result.stats)]
    return "\n".join(parts)
