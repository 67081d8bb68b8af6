"""Static dispatch: choose, once per node at load, the kernel that will run it.

For each node, backends are tried in the caller's priority order; for each
backend the kinds ``out``, ``native``, ``fallback`` in that order; within a
kind the kernels in table order (priority, then plugin name). The first kernel
that accepts the node's dispatch dtypes and whose matcher (if any) does not
decline wins. See docs/static-dispatch.md.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import attrs

from .._lazylog import DEBUG, LazyLogger
from .._repr import shared_repr
from ..errors import UnsupportedOpError
from ..ir.alias import mutated_inputs
from ..ir.quant import QDTYPES
from ..ir.types import ListType, TensorType, Type, lazy_type
from ..plugin.types import ANY_QUANTIZED, KERNEL_KINDS, ArgInfo, Kernel, NodeInfo, Specialized
from .lazy import resolve_ref
from .table import STANDARD_DTYPES, KernelTable, op_key

log = LazyLogger("srcore.dispatch")

#: node kinds the runtime executes itself; they never need a kernel
STRUCTURAL_KINDS = frozenset({
    "prim::Constant",  # a value in the value array, set once at load
    "prim::If",        # the runtime picks a sub-block runner
    "prim::Loop",      # the runtime drives the sub-block runner
    "prim::fork",      # the runtime launches the sub-block as a task
    "aten::wait",      # the runtime waits for a forked task
    "prim::Param",     # block inputs
    "prim::Return",    # block outputs
})


@attrs.frozen
@shared_repr
class ResolvedKernel:
    """The outcome of dispatch for one node: call ``fn`` (or ``specialized``) the ``kind`` way."""

    kernel: Kernel
    fn: Callable[..., Any] = attrs.field(eq=False)
    specialized: Specialized | None
    kind: str
    backend: str
    #: True when some of the node's dtypes were unknown at load: ``fn`` checks them on every call
    checks_dtypes: bool = False
    #: for a ``fallback`` kernel: why no out or native kernel was taken
    reason: str | None = None


def _collect_dtypes(t: Type, out: list[str]) -> None:
    if isinstance(t, TensorType):
        if t.dtype is not None:
            out.append(t.dtype)
    elif isinstance(t, (ListType, lazy_type("OptionalType"))):
        _collect_dtypes(t.elem, out)
    elif isinstance(t, lazy_type("TupleType")):
        for e in t.elems:
            _collect_dtypes(e, out)


def _unknown_dtype(t: Type) -> bool:
    if isinstance(t, TensorType):
        return t.dtype is None
    if isinstance(t, (ListType, lazy_type("OptionalType"))):
        return _unknown_dtype(t.elem)
    if isinstance(t, lazy_type("TupleType")):
        return any(_unknown_dtype(e) for e in t.elems)
    return False


def has_unknown_dtypes(node) -> bool:
    """True if a tensor input or output of ``node`` has no known dtype (propagation could not tell)."""
    return any(_unknown_dtype(v.type) for v in (*node.inputs, *node.outputs))


def dispatch_dtypes(node) -> tuple[str, ...]:
    """The dtypes of the node's tensor inputs and outputs (sorted, unique; unknown dtypes skipped)."""
    found: list[str] = []
    for v in (*node.inputs, *node.outputs):
        _collect_dtypes(v.type, found)
    return tuple(sorted(set(found)))


def accepts_dtypes(kernel: Kernel, dtypes: Iterable[str]) -> bool:
    """Whether ``kernel`` takes every one of ``dtypes``.

    ``"*"`` stands for every dtype whose stored numbers are its values: not the quantized ones, whose
    stored integers mean nothing without their scale and zero point (a generic kernel would compute on
    the codes and drop the parameters). A kernel takes those only if it lists them, or
    ``"quantized"`` (every quantized dtype: kernels that never read a tensor's elements, such as list
    construction or ``aten::size``). See docs/static-dispatch.md.
    """
    listed = kernel.dtypes
    if "*" not in listed and ANY_QUANTIZED not in listed:
        return all(d in listed for d in dtypes)
    return all(d in listed or (ANY_QUANTIZED in listed if d in QDTYPES else "*" in listed) for d in dtypes)


def node_schema(node, table: KernelTable | None = None):
    """The node's resolved schema: ``node.schema``, else the table's registry's answer, else None."""
    if node.schema is not None:
        return node.schema
    registry = getattr(table, "schemas", None)
    if registry is not None and hasattr(registry, "resolve"):
        try:
            return registry.resolve(node)
        except Exception:  # an unresolvable node is reported as unsupported with its kind
            return None
    return None


def node_op(node, schema=None) -> str:
    """The qualified overload name dispatch looks up (``node.kind`` when there is no schema)."""
    if schema is not None:
        return op_key(getattr(schema, "qualified_name", None) or node.kind)
    return node.kind


def _source(node) -> str | None:
    return str(node.source) if getattr(node, "source", None) is not None else None


def node_info(node, schema=None, op: str | None = None) -> NodeInfo:
    """What a matcher sees: arguments in schema order with their types and constant values."""
    sargs = list(getattr(schema, "arguments", None) or ()) if schema is not None else []
    args = []
    for i, v in enumerate(node.inputs):
        name = getattr(sargs[i], "name", f"arg{i}") if i < len(sargs) else f"arg{i}"
        const = v.node.kind == "prim::Constant"
        value = v.node.attrs.get("value") if const else None
        if not const and _constant_list(v):
            const, value = True, [x.node.attrs.get("value") for x in v.node.inputs]
        elements = tuple(x.type for x in v.node.inputs) if v.node.kind == "prim::ListConstruct" else None
        args.append(ArgInfo(name, v.type, const, value, elements=elements))
    return NodeInfo(op or node_op(node, schema), schema, tuple(args), tuple(o.type for o in node.outputs),
                    _source(node))


def _constant_list(v) -> bool:
    """A ``prim::ListConstruct`` of constants that nothing writes to (e.g. an RNN's weight list):
    matchers see it as a constant list of the values."""
    if v.node.kind != "prim::ListConstruct" or not all(x.node.kind == "prim::Constant" for x in v.node.inputs):
        return False
    return not any(u.offset in mutated_inputs(u.user) for u in v.uses)


def _try_kernel(kernel: Kernel, info_fn: Callable[[], NodeInfo], op: str) -> ResolvedKernel | None:
    if kernel.matcher is None:
        fn = resolve_ref(kernel.impl, provider=kernel.provider, op=op, source=kernel.source)
        return ResolvedKernel(kernel, fn, None, kernel.kind, kernel.backend)
    matcher = resolve_ref(kernel.matcher, provider=kernel.provider, op=op, what="matcher", source=kernel.source)
    answer = matcher(info_fn())
    if answer is None:
        return None
    if isinstance(answer, Specialized):
        return ResolvedKernel(kernel, answer.fn, answer, kernel.kind, kernel.backend)
    if callable(answer):
        return ResolvedKernel(kernel, answer, None, kernel.kind, kernel.backend)
    from ..errors import PluginError
    who = kernel.provider.name if kernel.provider else "?"
    raise PluginError(f"plugin {who} ({kernel.provider}): matcher of the {kernel.kind} kernel for {op} "
                      f"returned {answer!r}; expected a callable, a Specialized or None")


def resolve_node(node, table: KernelTable, backends: Sequence[str], dtypes: Sequence[str] | None = None,
                 kinds: Sequence[str] = KERNEL_KINDS) -> ResolvedKernel | None:
    """The kernel for ``node``, or None if no backend in ``backends`` can run it.

    ``dtypes`` defaults to :func:`dispatch_dtypes`; ``kinds`` (a subset of
    ``out, native, fallback``, tried in that order) can leave out out variants.
    A kernel is never chosen for a dtype it does not list: when some of the
    node's dtypes are unknown, the most general kernel that accepts the known
    ones is chosen (``"*"``, then the most numpy dtypes, then the longest dtype
    list): over all the backends when the known dtypes are numpy's (a float
    model whose dtypes propagation could not tell keeps its cpu kernels when
    quantized_cpu comes first), within each backend in order when one is a
    plugin's (``aten::cat`` of a ``Tensor[]`` into a known ``quint8``) and, unless it
    accepts any dtype (``"*"`` and ``"quantized"``), wrapped so that it checks the dtypes of its
    arrays on every call (``ResolvedKernel.checks_dtypes``): a ``"*"`` kernel refuses a quantized
    array there.
    Matchers and ``"module:attr"`` impls are imported here, only for
    candidates that reach them.
    """
    schema = node_schema(node, table)
    if schema is None and _declared_overloads(node, table):
        return None   # the op is declared but its inputs fit no overload: a kernel by name would guess
    op = node_op(node, schema)
    unknown = dtypes is None and has_unknown_dtypes(node)
    dts = dispatch_dtypes(node) if dtypes is None else tuple(dtypes)
    info: list[NodeInfo] = []

    def get_info() -> NodeInfo:  # built once, only if a matcher asks
        if not info:
            info.append(node_info(node, schema, op))
        return info[0]

    kinds = [k for k in KERNEL_KINDS if k in kinds]
    if unknown and all(d in STANDARD_DTYPES for d in dts):
        # most general first ("*", then the most numpy dtypes, then the most dtypes), over all backends;
        # a fallback kernel (any dtype, generic) only after every out and native kernel
        candidates = [k for backend in backends for kind in kinds for k in table.lookup(op, backend, kind)]
        candidates.sort(key=lambda k: (k.kind == "fallback", _generality(k)))
    else:  # backends in order; with an unknown dtype beside a plugin's (a quint8 output), the most general
        candidates = [k for backend in backends for kind in kinds
                      for k in (sorted(table.lookup(op, backend, kind), key=_generality) if unknown
                                else table.lookup(op, backend, kind))]
    for kernel in candidates:
        if not accepts_dtypes(kernel, dts):
            continue
        resolved = _try_kernel(kernel, get_info, op)
        if resolved is not None:
            if unknown and not ("*" in kernel.dtypes and ANY_QUANTIZED in kernel.dtypes):
                from .guard import dtype_guard

                resolved = attrs.evolve(resolved, fn=dtype_guard(resolved.fn, kernel, op), checks_dtypes=True)
            if kernel.kind == "fallback":
                resolved = attrs.evolve(resolved, reason=fallback_reason(node, op, dts, table, backends))
            return resolved
    return None


def _declared_overloads(node, table: KernelTable) -> tuple:
    registry = getattr(table, "schemas", None)
    if registry is None or not hasattr(registry, "overloads"):
        return ()
    return tuple(registry.overloads(node.kind))


def _generality(kernel: Kernel) -> tuple:
    """Sort key, most general first: ``"*"``, then the kernels listing the most numpy dtypes (an
    unknown dtype is far more likely a numpy one than a plugin's, such as ``quint8``), then the most."""
    standard = sum(1 for d in kernel.dtypes if d in STANDARD_DTYPES)
    return ("*" not in kernel.dtypes, ANY_QUANTIZED not in kernel.dtypes, -standard, -len(kernel.dtypes))


def fallback_reason(node, op: str, dts: tuple[str, ...], table: KernelTable, backends: Sequence[str]) -> str:
    """Why a node got a fallback kernel: no out/native kernel at all, or none for its dtypes."""
    others = [k for k in table.kernels_for(op) if k.kind != "fallback" and k.backend in backends]
    where = ", ".join(backends)
    if not others:
        declared = getattr(table.schemas, "find", lambda q: None)(op) is not None
        return (f"no out or native kernel for {op} on {where}"
                + ("" if declared else " (an op srcore does not declare; its schema came with the model)"))
    taken = "; ".join(dict.fromkeys(f"{k.kind} kernel of {_who(k)} on {k.backend} takes ({', '.join(k.dtypes)})"
                                    for k in others))
    return f"no out or native kernel for {op} takes dtypes ({', '.join(dts) or 'none'}): {taken}"


def _who(k: Kernel) -> str:
    p = k.provider
    return f"{p.dist or p.name} {p.version or ''}".strip() if p else "?"


def _alternatives(op: str, dts: tuple[str, ...], table: KernelTable, backends: Sequence[str],
                  kinds: Sequence[str] = KERNEL_KINDS) -> tuple[str, ...]:
    lines = []
    said_star = False   # why "*" does not cover a quantized dtype: said once
    for k in table.kernels_for(op):
        who = _who(k)
        if k.backend not in backends:
            why = f"for backend {k.backend}"
        elif k.kind not in kinds:
            why = (f"on {k.backend}, but fallback kernels are off (Options(allow_fallback=False), --no-fallback)"
                   if k.kind == "fallback" else f"on {k.backend}, but {k.kind} kernels are off for this load")
        elif not accepts_dtypes(k, dts):
            why = f"for dtypes ({', '.join(k.dtypes)}) on {k.backend}"
            if "*" in k.dtypes and not said_star:   # refused for a quantized dtype: say why "*" did not cover it
                said_star = True
                why += (" ('*' is not a quantized dtype: a kernel must list it to get its stored integers "
                        "and keep its scale and zero point)")
        else:
            why = f"on {k.backend}, but its matcher declined this node"
        article = "an" if k.kind == "out" else "a"
        lines.append(f"{who} has {article} {k.kind} kernel {why}")
    return tuple(dict.fromkeys(lines))


def _out_form_only(node, schema, table: KernelTable) -> str | None:
    """When the only overload ``node``'s inputs fit is an out= form nobody implements (``aten::relu(%x, %x)``
    fits ``aten::relu.out`` with ``%x`` as ``out``), say that no overload takes those arguments."""
    if schema is None or not schema.is_out or table.kernels_for(op_key(schema.qualified_name)):
        return None
    registry = getattr(table, "schemas", None)
    others = [s for s in (registry.overloads(node.kind) if registry is not None else ()) if not s.is_out]
    types = ", ".join(str(v.type) for v in node.inputs)
    text = (f"no overload of {node.kind} takes these {len(node.inputs)} input(s) ({types}): they fit only the "
            f"out= form {schema.qualified_name}, which no installed plugin implements")
    if others:
        text += "; the other overloads take:" + "".join(f"\n        {s}" for s in others)
    return text


def _schema_problem(node, table: KernelTable) -> str:
    """Why ``node`` has no schema: an op nobody declares (with the closest declared name), or
    inputs that fit none of its overloads."""
    registry = getattr(table, "schemas", None)
    if registry is None or not hasattr(registry, "overloads"):
        return "no schema is known for this op"
    overloads = registry.overloads(node.kind)
    if overloads:
        return (f"no overload of {node.kind} takes these {len(node.inputs)} input(s) and "
                f"{len(node.outputs)} output(s); the declared overloads take:"
                + "".join(f"\n        {s}" for s in overloads))
    import difflib

    names = sorted({q.split(".", 1)[0] for q in registry.names()})
    close = difflib.get_close_matches(node.kind, names, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"no op {node.kind!r} is declared by srcore or any installed plugin{hint}"


def _walk(block):
    for n in block.nodes:
        yield n
        for b in n.blocks:
            yield from _walk(b)


def _log_choice(node, rk: ResolvedKernel) -> None:
    p = rk.kernel.provider
    who = (p.dist or p.name) if p else "?"
    where = f"  # {node.source}" if getattr(node, "source", None) is not None else ""
    if rk.kind == "fallback":  # the slow generic path: worth knowing without -vv
        log.info("%s runs on the fallback kernel of %s on %s (no out or native kernel accepts it)%s",
                 node.kind, who, rk.backend, where)
    else:
        log.debug("%s -> %s %s kernel on %s (%s)%s", node.kind, rk.kernel.op, rk.kind, rk.backend, who, where)


def resolve_graph(graph, table: KernelTable, backends: Sequence[str] = ("cpu",),
                  kinds: Sequence[str] = KERNEL_KINDS,
                  fixed: dict[Any, ResolvedKernel] | None = None) -> dict[Any, ResolvedKernel]:
    """Resolve every non-structural node of ``graph`` (sub-blocks included), with :func:`resolve_node`.

    ``fixed`` maps nodes already resolved elsewhere (the partitioner's engine nodes) to
    their kernels.

    Returns ``{node: ResolvedKernel}``. If any node has no kernel, raises one
    :class:`srcore.UnsupportedOpError` listing every such node, with its
    schema, dtypes and source, and which installed plugin has the op for
    another backend or dtype.
    """
    resolved: dict[Any, ResolvedKernel] = {}
    missing: list[Unsupported] = []
    backends = tuple(backends)
    for node in _walk(graph.block):
        if node.kind in STRUCTURAL_KINDS:
            continue
        if fixed and node in fixed:
            resolved[node] = fixed[node]
            continue
        rk = resolve_node(node, table, backends, kinds=kinds)
        if rk is not None:
            resolved[node] = rk
            if rk.kind == "fallback" or log.isEnabledFor(DEBUG):
                _log_choice(node, rk)
            continue
        schema = node_schema(node, table)
        op = node_op(node, schema)
        dts = dispatch_dtypes(node)
        alts = _alternatives(op, dts, table, backends, kinds)
        shown = str(schema) if schema is not None else node.kind
        out_only = _out_form_only(node, schema, table)
        if out_only is not None:
            alts, shown = (out_only,), f"{node.kind}({', '.join(str(v.type) for v in node.inputs)})"
        elif schema is None and _declared_overloads(node, table):   # kernels by name do not matter here
            alts = (_schema_problem(node, table),)
        elif schema is None:
            alts = (_schema_problem(node, table), *alts)
        from .unsupported import Unsupported   # (a class a load that dispatches every node never builds)

        missing.append(Unsupported(node, op, shown, dts, _source(node), alts))
    if missing:
        head = (f"{len(missing)} node(s) have no kernel on backend(s) {', '.join(backends)}:")
        exc = UnsupportedOpError("\n".join([head, *(m.describe() for m in missing)]), missing)
        if all(m.alternatives and m.alternatives[0].startswith("no overload of") for m in missing):
            exc.hint = "the nodes' arguments fit no overload: 'srcore list-ops --op NAME' lists each op's overloads"
        else:
            exc.hint = "install or enable a plugin that provides them ('srcore list-ops' shows what is installed)"
        raise exc
    return resolved


def __getattr__(name: str):   # ``resolve.Unsupported`` as before (PEP 562), from its own module
    if name == "Unsupported":
        from .unsupported import Unsupported

        return Unsupported
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
