"""``srcore.Options``: how a StaticModule loads and runs a model."""
from __future__ import annotations

import os

import attrs

from .._repr import shared_repr

_PLANNERS = ("standard_resizing", "precomputed_offsets")
#: the default backend priority list: quantized nodes on quantized_cpu, the rest on cpu (a default
#: backend that is not installed is left out; one asked for by name is an error)
DEFAULT_BACKENDS = ("quantized_cpu", "cpu")
_EXECUTORS = ("codegen", "interpreter")


def _one_of(choices):
    def check(inst, attribute, value):
        if value not in choices:
            from ..errors import SrcoreError

            raise SrcoreError(f"Options.{attribute.name}={value!r}: choose one of {', '.join(map(repr, choices))}")
    return check


def _names(value) -> tuple:
    """Names as a tuple; one string is one name (``backends="cpu"``), not its letters."""
    return (value,) if isinstance(value, str) else tuple(value)


def _all_str(inst, attribute, value):
    if not value and attribute.name == "backends" or not all(isinstance(v, str) and v for v in value):
        from ..errors import SrcoreError

        raise SrcoreError(f"Options.{attribute.name}={value!r}: expected one or more names (strings)"
                          if attribute.name == "backends" else
                          f"Options.{attribute.name}={value!r}: expected names (strings)")


def _positive_int(inst, attribute, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        from ..errors import SrcoreError

        raise SrcoreError(f"Options.{attribute.name}={value!r}: expected a whole number >= 1")


def _selection(value):
    """A path as ``str`` (Options stay hashable); a ``Selection`` object as it is."""
    return os.fspath(value) if isinstance(value, (str, os.PathLike)) else value


def _items(value) -> tuple:
    """A mapping (or pairs) as sorted ``(key, value)`` pairs: Options stay hashable."""
    return tuple(sorted(dict(value).items()))


@attrs.frozen
@shared_repr
class Options:
    """Load- and run-time options of a :class:`srcore.StaticModule`.

    memory_planner_algorithm
        ``"standard_resizing"`` (default): managed tensors with disjoint lifetimes share
        storage groups; slot sizes come from the first run of an input signature and grow
        when a later run needs more (that run allocates the bigger tensors itself).
        ``"precomputed_offsets"``: greedy-by-size offsets (arXiv:2001.03288, 5.2), computed
        once per planned signature; never resized.
    replan_on_growth
        With ``precomputed_offsets``, what a run whose tensors are bigger than planned does:
        ``True`` (default) computes a new plan for that signature; ``False`` raises
        :class:`srcore.MemoryPlanError` before any kernel runs.
    manage_output_tensors
        Put the graph's outputs produced by out variants into one separate arena per run,
        freed when the last returned array dies.
    enable_out_variant
        ``False`` plans no memory: out-variant kernels are called with ``out=None`` and
        allocate their results like natives do (to compare with and without planning).
    executor
        ``"codegen"`` (default): one generated straight-line Python function per block.
        ``"interpreter"``: the reference loop over processed nodes.
    warm_up
        ``True`` (default): a model whose input specs fix one signature (every input a tensor of
        fixed shape and dtype) is run at load through ``sm(x)``, after its buffers are planned and
        their pages written: twice on the same zero inputs, then up to 12 runs in all within 10 ms,
        other values in turn with the zeros, so that its first call runs what a steady one does
        (numpy's and the kernels' first-use paths, cold pages, what kernels bind at a second
        call, branches zeros never take, bytecode the interpreter specialises from a function's
        9th run). Skipped for graphs with random or side-effecting ops (the warm-up would draw
        random numbers, print, raise...); a warm-up that fails is ignored (the first call reports
        the error). ``False``: no warm-up run.
    check_inputs
        Check number, dtype, rank and shape of the inputs against the input specs, once
        per new input signature, raising :class:`srcore.SrcoreInputError`.
    optimize
        Run :func:`srcore.passes.prepare_for_static_runtime` on the graph at load.
    backends
        Backend priority list used by static dispatch (the ``backends=`` argument of
        ``StaticModule`` overrides it); default ``("quantized_cpu", "cpu")``: a node with a
        quantized dtype runs on ``quantized_cpu``, the others on ``cpu``. A backend with an engine builder (``trt_like``)
        first takes the segments it supports as compiled engines; the rest runs node by
        node on the backends of the list (see docs/partitioning.md).
    engine_min_block_size
        Segments with fewer nodes than this stay node by node (TRTorch's ``min_block_size``),
        unless the segment is the whole graph (nothing would run outside the engine).
    engine_fallback_ops
        Ops never put into an engine (``"aten::softmax"`` names every overload; TRTorch's
        ``torch_executed_ops``).
    engine_fallback_modules
        Modules whose nodes never go into an engine (Torch-TensorRT's ``torch_executed_modules``):
        a module path (``"layer1.0"``, every module under it too) or a class name (``"BasicBlock"``,
        or qualified, ``"torchvision.models.resnet.BasicBlock"``), matched against the module
        hierarchy the TorchScript frontend records on each node.
    require_full_compilation
        Raise :class:`srcore.EngineBuildError` unless every node is in an engine.
    engine_options
        Options handed to the engine builders (``Segment.option(key)``); each builder
        documents its own (trt_like: docs/trt-like.md).
    selection
        A selective build: a file written by ``srcore select`` (or its ``Selection``). The
        module's registry then holds only the ops, kernels and rules that file lists, and a
        model that needs anything else fails to load, naming it. Default: ``SRCORE_SELECTION``
        if set, else every installed plugin's records.
    allow_fallback
        ``True`` (default): a node no out or native kernel (nor a decomposition) can run
        gets a ``fallback`` kernel (srcore-cpu's torch fallback when torch is installed).
        ``False``: such nodes fail the load (``srcore.UnsupportedOpError`` names them).
    prepared_cache
        ``True`` (default, unless ``SRCORE_NO_PREPARED_CACHE=1``): a model read from a ``.srm`` file
        (``srcore.load``) is kept prepared in ``$SRCORE_CACHE_DIR/prepared/`` once its first call returned, and a
        later process loading the same file (same bytes, options, registry and srcore sources) loads that
        instead: no pass, no shape propagation (``srcore.runtime.prepared_cache``). ``False``: neither
        read nor written. It is no part of a prepared record's fingerprint.

    The environment variables ``SRCORE_EXECUTOR`` and ``SRCORE_MEMORY_PLANNER`` change the
    defaults of ``executor`` and ``memory_planner_algorithm`` (the test suite runs once with
    each executor and each planner this way).
    """

    memory_planner_algorithm: str = attrs.field(
        factory=lambda: os.environ.get("SRCORE_MEMORY_PLANNER", "standard_resizing"), validator=_one_of(_PLANNERS))
    replan_on_growth: bool = True
    manage_output_tensors: bool = False
    enable_out_variant: bool = True
    executor: str = attrs.field(factory=lambda: os.environ.get("SRCORE_EXECUTOR", "codegen"),
                                validator=_one_of(_EXECUTORS))
    check_inputs: bool = True
    warm_up: bool = True
    optimize: bool = True
    backends: tuple[str, ...] = attrs.field(default=DEFAULT_BACKENDS, converter=_names, validator=_all_str)
    engine_min_block_size: int = attrs.field(default=3, validator=_positive_int)
    engine_fallback_ops: tuple[str, ...] = attrs.field(default=(), converter=_names, validator=_all_str)
    engine_fallback_modules: tuple[str, ...] = attrs.field(default=(), converter=_names, validator=_all_str)
    require_full_compilation: bool = False
    engine_options: tuple[tuple[str, object], ...] = attrs.field(default=(), converter=_items)
    allow_fallback: bool = True
    selection: object = attrs.field(default=None, converter=_selection, eq=False)
    prepared_cache: bool = attrs.field(
        factory=lambda: os.environ.get("SRCORE_NO_PREPARED_CACHE", "") in ("", "0"))
