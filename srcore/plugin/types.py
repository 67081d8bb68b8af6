"""The records plugins yield from their hooks (all immutable attrs classes).

A plugin never registers anything by side effect: each hook yields records,
and the plugin manager stamps each record with the plugin that provided it.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Union

import attrs

from .._convert import to_tuple as _to_tuple
from .._lazy import lazy_getattr
from .._repr import shared_repr

#: the kernel kinds, in the order static dispatch tries them
KERNEL_KINDS = ("out", "native", "fallback")

#: in a kernel's ``dtypes``: every quantized dtype (``quint8``, ``qint8``, ``qint32``). ``"*"`` does not
#: include them (their stored integers are not their values); a kernel that never reads a tensor's
#: elements, or moves them and keeps the parameters, lists ``("*", ANY_QUANTIZED)``
ANY_QUANTIZED = "quantized"

_ID_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_ID = _ID_START | frozenset("0123456789")
_NAME_CHARS = _ID | {"-"}


def _line(value: str) -> str:
    """``value`` as a regex's ``^...$`` sees it under ``re.match``: ``$`` also matches before a final newline."""
    return value[:-1] if value.endswith("\n") else value


def _is_ident(text: str) -> bool:   # [A-Za-z_][A-Za-z0-9_]*
    return bool(text) and text[0] in _ID_START and _ID.issuperset(text)


def _op_or_wildcard(value: str) -> bool:
    ns, sep, rest = _line(value).partition("::")
    if not (sep and _is_ident(ns)):
        return False
    if rest == "*":
        return True
    name, dot, overload = rest.partition(".")
    return _is_ident(name) and (not dot or (bool(overload) and _ID.issuperset(overload)))


def _plugin_name(value: str) -> bool:
    text = _line(value)
    return bool(text) and text[0] in _ID_START and _NAME_CHARS.issuperset(text)


_REF_ASCII = _ID | {"."}


def _ref_part(text: str) -> bool:   # [\w.]+ (\w: Unicode word characters, str.isalnum or "_", as re's)
    if text.isascii():   # the usual case, as fast as the regex (a full registry checks ~1,400 references)
        return bool(text) and _REF_ASCII.issuperset(text)
    return all(c == "." or c == "_" or c.isalnum() for c in text)


def _impl_ref(value: str) -> bool:
    module, sep, attr = _line(value).partition(":")
    return bool(sep) and _ref_part(module) and _ref_part(attr)


class _Pattern:
    """A ``re`` pattern's ``match``: for its first :data:`_STR_CALLS` uses a function with str methods equal to it
    (``tests/test_plugin_name_patterns.py`` checks them against the regex), after that the compiled regex's.
    A selective start validates a dozen names, and compiling the three regexes was ~0.3 ms of it; a full
    registry checks ~4,000, where the regex's C matcher is the faster one (and its compiling is paid once)."""

    __slots__ = ("pattern", "match", "_test", "_calls")

    def __init__(self, pattern: str, test: Callable[[str], bool]):
        self.pattern, self._test, self._calls = pattern, test, 0
        self.match = self._match

    def _match(self, value: str):
        self._calls += 1
        if self._calls > _STR_CALLS:
            return self.regex_match()(value)
        return self._test(value)

    def regex_match(self):
        """The compiled regex's ``match`` (from now on also :attr:`match`): for checking many names in a row
        (compiled through ``srcore._re_cache``: ``re``'s compiler skipped from the second start)."""
        from .._re_cache import compile as compile_cached

        self.match = compile_cached(self.pattern).match
        return self.match


_STR_CALLS = 64


#: a kernel or shape rule may also serve a whole namespace: ``"aten::*"`` (a generic fallback)
_OP_OR_WILDCARD_RE = _Pattern(r"^[A-Za-z_][A-Za-z0-9_]*::(\*|[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)?)$", _op_or_wildcard)
_NAME_RE = _Pattern(r"^[A-Za-z_][A-Za-z0-9_\-]*$", _plugin_name)

ImplRef = Union[str, Callable[..., Any]]


def _check_name(kind: str):
    def check(inst, attribute, value):
        if not isinstance(value, str) or not _NAME_RE.match(value):
            raise ValueError(f"invalid {kind} name {value!r}")
    return check


_REF_RE = _Pattern(r"^[\w.]+:[\w.]+$", _impl_ref)


def _check_impl(inst, attribute, value):
    if value is None and attribute.name == "matcher":
        return
    if callable(value):
        return
    if isinstance(value, str) and _REF_RE.match(value):
        return
    raise ValueError(f"{attribute.name} must be a callable or a 'module:attribute' string, not {value!r}")


@attrs.frozen
@shared_repr
class PluginInfo:
    """Who provided a record: the plugin (entry point) name, its distribution and version."""

    name: str
    dist: str | None = None
    version: str | None = None

    def __str__(self) -> str:
        dist = self.dist or self.name
        return f"{dist} {self.version}" if self.version else dist


BUILTIN = PluginInfo("builtin", "srcore", None)

_SLOTS: dict[type, tuple] = {}
_MemberDescriptor = type(PluginInfo.name)  # a slot's descriptor (attrs.frozen classes are slotted)


def _slots_of(cls) -> tuple:
    """``(descriptors of every field but provider, provider's descriptor)`` of a slotted record class;
    ``((), None)`` for a class that keeps its fields in a ``__dict__``."""
    found = {}
    for name in (a.name for a in attrs.fields(cls)):
        desc = next((k.__dict__[name] for k in cls.__mro__ if name in k.__dict__), None)
        if type(desc) is not _MemberDescriptor:
            return (), None
        found[name] = desc
    provider = found.pop("provider")
    return tuple(found.values()), provider


def _stamp(record, plugin: PluginInfo):
    """A copy of ``record`` with ``provider=plugin``.

    ``attrs.evolve`` would run every validator and converter again on values that passed them
    when the record was made; with ~1,300 records stamped at every full-registry start-up that is a
    few ms. The slots are copied through their descriptors (about half the time of ``getattr`` and
    ``object.__setattr__`` by name), which also sets the fields of a frozen instance.
    """
    cls = type(record)
    slots = _SLOTS.get(cls)
    if slots is None:
        slots = _SLOTS[cls] = _slots_of(cls)
    fields, provider = slots
    new = object.__new__(cls)
    if provider is None:
        for a in attrs.fields(cls):
            object.__setattr__(new, a.name, plugin if a.name == "provider" else getattr(record, a.name))
        return new
    for d in fields:
        d.__set__(new, d.__get__(record))
    provider.__set__(new, plugin)
    return new


@attrs.frozen
@shared_repr
class Backend:
    """A backend name kernels can be registered for (``cpu``, ``quantized_cpu``, ...)."""

    name: str = attrs.field(validator=_check_name("backend"))
    description: str = ""
    provider: PluginInfo | None = attrs.field(default=None, eq=False)

    def provided_by(self, plugin: PluginInfo) -> "Backend":
        return _stamp(self, plugin)


@attrs.frozen
@shared_repr
class Kernel:
    """An implementation of one op overload for one backend and a set of dtypes.

    ``op`` is ``"ns::name"`` (the overload with an empty name) or ``"ns::name.overload"``, or
    ``"ns::*"``: every op of the namespace (a generic kernel, such as a fallback, whose matcher
    decides node by node; tried after the kernels of the op itself).
    ``kind`` is ``"out"``, ``"native"`` or ``"fallback"``. ``impl`` and ``matcher``
    are callables or ``"module:attribute"`` strings imported only when a model
    uses the op. ``dtypes`` lists the dtype names the kernel accepts (``"*"``: any but the quantized
    ones; ``"quantized"`` (:data:`ANY_QUANTIZED`): every quantized dtype).
    On a tie (same op, backend, dtype, kind) the higher ``priority`` wins, then the
    plugin name that sorts first.
    """

    op: str = attrs.field()
    backend: str = attrs.field(validator=_check_name("backend"))
    kind: str = attrs.field()
    dtypes: tuple[str, ...] = attrs.field(converter=_to_tuple)
    impl: ImplRef = attrs.field(validator=_check_impl, eq=False)
    matcher: ImplRef | None = attrs.field(default=None, validator=_check_impl, eq=False)
    priority: int = 0
    provider: PluginInfo | None = attrs.field(default=None, eq=False)
    #: where the kernel was bound (``ops.yaml:12`` for a ``dispatch:`` line), for error messages
    source: str | None = attrs.field(default=None, eq=False)

    @op.validator
    def _check_op(self, attribute, value):
        if not isinstance(value, str) or not _OP_OR_WILDCARD_RE.match(value):
            raise ValueError(f"invalid op name {value!r}: expected 'namespace::name', 'namespace::name.overload' "
                             "or 'namespace::*'")

    @kind.validator
    def _check_kind(self, attribute, value):
        if value not in KERNEL_KINDS:
            raise ValueError(f"invalid kernel kind {value!r}: expected one of {', '.join(KERNEL_KINDS)}")

    @dtypes.validator
    def _check_dtypes(self, attribute, value):
        if not value:
            raise ValueError(f"kernel for {self.op} lists no dtypes (use ('*',) for any)")

    @property
    def is_wildcard(self) -> bool:
        return self.op.endswith("::*")

    def provided_by(self, plugin: PluginInfo) -> "Kernel":
        return _stamp(self, plugin)


#: a Kernel as plain data, the fields in this order (srcore.plugin.record_cache stores these)
KERNEL_ROW_FIELDS = ("op", "backend", "kind", "dtypes", "impl", "matcher", "priority", "source")


def kernel_rows_valid(rows) -> bool:
    """Whether every row (``KERNEL_ROW_FIELDS``, ``impl``/``matcher`` as ``"module:attr"`` strings) passes
    ``Kernel``'s validators (and has an int priority), checked in one pass without building the records."""
    ref, op_re, name_re = _REF_RE.regex_match(), _OP_OR_WILDCARD_RE.regex_match(), _NAME_RE.regex_match()
    for row in rows:
        if type(row) is not tuple or len(row) != 8:
            return False
        op, backend, kind, dtypes, impl, matcher, priority, source = row
        if not (type(op) is str and op_re(op) and type(backend) is str and name_re(backend) and kind in KERNEL_KINDS
                and type(dtypes) is tuple and dtypes and type(impl) is str and ref(impl)
                and (matcher is None or (type(matcher) is str and ref(matcher))) and type(priority) is int):
            return False
    return True


def kernels_from_rows(rows, provider: PluginInfo | None) -> list["Kernel"]:
    """``[Kernel(*row, provider=provider) for row in rows]`` for rows that passed :func:`kernel_rows_valid`,
    without running the validators again (a full-registry start builds ~930 this way)."""
    fields, prov = _slots_of(Kernel)
    by_name = dict(zip((a.name for a in attrs.fields(Kernel) if a.name != "provider"), fields))
    d_op, d_backend, d_kind, d_dtypes, d_impl, d_matcher, d_priority, d_source = (by_name[f] for f in KERNEL_ROW_FIELDS)
    new, cls, out = object.__new__, Kernel, []
    for op, backend, kind, dtypes, impl, matcher, priority, source in rows:
        k = new(cls)
        d_op.__set__(k, op)
        d_backend.__set__(k, backend)
        d_kind.__set__(k, kind)
        d_dtypes.__set__(k, dtypes)
        d_impl.__set__(k, impl)
        d_matcher.__set__(k, matcher)
        d_priority.__set__(k, priority)
        d_source.__set__(k, source)
        prov.__set__(k, provider)
        out.append(k)
    return out


@attrs.frozen
@shared_repr
class ArgInfo:
    """What a matcher sees of one argument: its schema name, IR type, and value if constant.

    ``derived`` (engine builders' ``supports`` only): not a constant, but known once the input
    shapes are (computed from ``aten::size`` and constants by int and list ops, e.g. the ``shape``
    of ``y.reshape(y.size(0), -1)``); a segment holding the node gets a copy of that computation,
    which :meth:`Segment.specialize` folds into constants for concrete input shapes. A list of
    tensors an engine node reads (``torch.cat([a, b])``) is copied into its segment the same way,
    its tensors becoming segment inputs (see docs/partitioning.md, *Dependency resolution*).
    """

    name: str
    type: Any
    is_constant: bool = False
    value: Any = None
    derived: bool = False
    #: a list built in the graph (``prim::ListConstruct``, e.g. the ``tensors`` of ``aten::cat``): the
    #: types of its elements; None for any other argument
    elements: tuple | None = None


@attrs.frozen
@shared_repr
class NodeInfo:
    """What a matcher sees of a node: op, schema, arguments (in schema order) and output types."""

    op: str
    schema: Any
    args: tuple[ArgInfo, ...]
    output_types: tuple[Any, ...]
    source: str | None = None

    def arg(self, name: str) -> ArgInfo:
        for a in self.args:
            if a.name == name:
                return a
        raise KeyError(f"{self.op} has no argument {name!r}")

    def const(self, name: str, default: Any = KeyError) -> Any:
        """The constant value of argument ``name`` (its schema default when the node leaves it out,
        as a call may leave out trailing defaulted arguments); ``default`` (or KeyError) if not
        constant."""
        if all(a.name != name for a in self.args):
            d = self._schema_default(name)
            if d is not None:
                return d.value
        a = self.arg(name)
        if a.is_constant:
            return a.value
        if default is KeyError:
            raise KeyError(f"argument {name!r} of {self.op} is not a constant")
        return default

    def is_const(self, name: str) -> bool:
        if all(a.name != name for a in self.args) and self._schema_default(name) is not None:
            return True
        return self.arg(name).is_constant

    def _schema_default(self, name: str):
        """The schema's default of argument ``name`` if the node omits it (else None)."""
        for i, a in enumerate(getattr(self.schema, "arguments", None) or ()):
            if a.name == name:
                return getattr(a, "default", None) if i >= len(self.args) else None
        return None


@attrs.frozen
@shared_repr
class Specialized:
    """A matcher's answer: call ``fn`` with only some of the node's arguments.

    ``args`` are argument positions (schema order) passed positionally, or
    :class:`Const` values; ``kwargs`` are ``(keyword, position or Const)`` pairs.
    Out variants still get ``out=``.
    """

    fn: Callable[..., Any] = attrs.field(eq=False)
    args: tuple[int | Const, ...] = attrs.field(default=(), converter=_to_tuple)
    kwargs: tuple[tuple[str, int | Const], ...] = attrs.field(default=(), converter=_to_tuple)


def is_const(value: Any) -> bool:
    """``isinstance(value, Const)``, without building the class (no Const exists before its module is imported)."""
    mod = sys.modules.get("srcore.plugin.const")
    return mod is not None and isinstance(value, mod.Const)


#: records built on first use: those only engine backends and the partitioner use
#: (``srcore.plugin.engine_types``; a model without engine backends never needs them), and the records of
#: the hooks a selective start never calls (``srcore.plugin.hook_types``)
__getattr__ = lazy_getattr(__name__, {
    **{n: f"srcore.plugin.engine_types:{n}" for n in ("Segment", "EngineOp", "EngineData")},
    **{n: f"srcore.plugin.hook_types:{n}" for n in ("OpLibrary", "DType", "Decomposition", "EngineBuilder",
                                                   "Subcommand", "ShapeRule")},
    "Const": "srcore.plugin.const:Const",
}, globals())
