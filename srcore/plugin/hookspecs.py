"""The hooks a plugin can implement: each takes no argument and yields records.

Every hook is a generator of records from :mod:`srcore.plugin.types`; the
plugin manager calls one plugin's implementation at a time, stamps each
record with the plugin (entry-point name, distribution, version) and checks it.
Nothing is registered by side effect. Reference: docs/plugin-hooks.md.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

import pluggy

if TYPE_CHECKING:
    from .types import Backend, Decomposition, DType, EngineBuilder, Kernel, OpLibrary, ShapeRule, Subcommand

_hookspec = pluggy.HookspecMarker("srcore")


class SrcoreSpecs:
    """The hook specifications of the ``srcore`` project (entry-point group ``srcore.plugins``)."""

    @_hookspec
    def srcore_op_libraries(self) -> Iterable[OpLibrary]:
        """Declare ops: schema strings, or a ``- func:`` YAML file shipped in the plugin's package.

        Every schema must be in the library's namespace. A kernel may only be
        registered for a declared op.

        **Example:**

        .. code-block:: python

            @hookimpl
            def srcore_op_libraries():
                yield OpLibrary("example", schemas=(
                    "example::scaled_tanh(Tensor self, *, float scale=1.0) -> Tensor",))
                yield OpLibrary.from_resource("mylib", "srcore_mylib", "ops.yaml")
        """
        yield from ()

    @_hookspec
    def srcore_dtypes(self) -> Iterable[DType]:
        """Declare dtypes beyond numpy's, so that kernels may list them.

        **Example:**

        .. code-block:: python

            @hookimpl
            def srcore_dtypes():
                yield DType("quint8", kind="quantized", storage="uint8", params={"qmin": 0, "qmax": 255})
        """
        yield from ()

    @_hookspec
    def srcore_backends(self) -> Iterable[Backend]:
        """Declare backend names that kernels and engine builders can target.

        **Example:**

        .. code-block:: python

            @hookimpl
            def srcore_backends():
                yield Backend("cpu", "numpy kernels")
        """
        yield from ()

    @_hookspec
    def srcore_kernels(self) -> Iterable[Kernel]:
        """Provide kernels: one op overload, one backend, a kind (out/native/fallback), dtypes.

        Give ``impl`` (and ``matcher``) as ``"module:attribute"`` strings so that
        the kernel module is imported only when a model uses the op.

        **Example:**

        .. code-block:: python

            @hookimpl
            def srcore_kernels():
                yield Kernel(op="aten::relu", backend="cpu", kind="out", dtypes=("float32", "float64"),
                             impl="srcore_cpu.kernels.activation:relu_out")
        """
        yield from ()

    @_hookspec
    def srcore_shape_rules(self) -> Iterable[ShapeRule]:
        """Give dtype/shape rules for ops: ``rule(ctx)`` returns one type per node output.

        The core's own rules come through this hook too (the builtin plugin).
        A rule may only name declared ops; an op that already has a rule keeps
        the first one (builtin first, then plugins by name).

        **Example:**

        .. code-block:: python

            @hookimpl
            def srcore_shape_rules():
                # example::scaled_tanh keeps the dtype and shape of its input
                yield ShapeRule(ops=("example::scaled_tanh",), rule="srcore_example.shapes:same_as_self")
        """
        yield from ()

    @_hookspec
    def srcore_decompositions(self) -> Iterable[Decomposition]:
        """Rewrite ops as small graphs of other ops, for backends that have no kernel for them.

        At load, a node whose op has no out or native kernel on any listed backend is replaced by
        its decomposition (then by the decomposition's own, up to a depth); the load report says so.
        The core's decompositions come through this hook too (the builtin plugin).

        **Example:**

        .. code-block:: python

            @hookimpl
            def srcore_decompositions():
                yield Decomposition("aten::__and__.Tensor",
                                    "graph(%self : Tensor, %other : Tensor):\\n"
                                    "  %r : Tensor = aten::bitwise_and(%self, %other)\\n"
                                    "  return (%r)\\n")
        """
        yield from ()

    @_hookspec
    def srcore_engine_builders(self) -> Iterable[EngineBuilder]:
        """Provide an engine backend: which nodes it supports, and how to build and load engines.

        **Example:**

        .. code-block:: python

            @hookimpl
            def srcore_engine_builders():
                yield EngineBuilder("trt_like", supports="srcore_trt_like.builder.support:supports",
                                    build="srcore_trt_like.engine:build",
                                    load="srcore_trt_like.engine:load")
        """
        yield from ()

    @_hookspec
    def srcore_subcommands(self) -> Iterable[Subcommand]:
        """Add a ``srcore NAME`` subcommand to the command line.

        ``configure_parser(parser)`` adds arguments to an argparse parser;
        ``run(args)`` returns the exit code.

        **Example:**

        .. code-block:: python

            @hookimpl
            def srcore_subcommands():
                yield Subcommand("hello", "print a greeting",
                                 configure_parser=lambda p: p.add_argument("--name", default="world"),
                                 run=lambda args: print(f"hello {args.name}") or 0)
        """
        yield from ()


from .hook_names import HOOK_RECORDS, record_type  # noqa: E402,F401  (here too: their old home)
