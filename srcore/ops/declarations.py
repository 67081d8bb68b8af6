"""Op declaration files: native_functions.yaml-style ``- func: <schema>`` lists.

::

    - func: example::scaled_tanh(Tensor self, *, float scale=1.0) -> Tensor
      doc: tanh(self) * scale
      tags: [pointwise]
      variants: function

RFC-0020 lets plugins declare ops *and bind kernels* in native_functions.yaml
form, so the keys of that file are accepted too::

    - func: acosh(Tensor self) -> Tensor          # no namespace: the library's
      variants: function, method
      structured_delegate: acosh.out               # run by acosh.out's kernels (as out variants)

    - func: acosh.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
      structured: True
      structured_inherits: TensorIteratorBase
      dispatch:
        CPU, CUDA: acosh_out                        # backend(s) -> kernel

A ``dispatch`` key is a comma list of backends (srcore's names, or torch's
dispatch keys: ``CPU`` is ``cpu``, ``QuantizedCPU`` is ``quantized_cpu``); its
value is a kernel, ``"module:attr"`` or a bare name in the declaring package,
or a mapping ``{kernel: ..., dtypes: [...]}``. Accepted keys are ``func``
(required), ``doc``, ``tags``, ``variants``, ``dispatch``, ``structured``,
``structured_delegate``, ``structured_inherits`` and ``python_module``; anything
else is an error naming ``file:line``, as is a schema that does not parse
(``file:line:col``), an operator overload declared twice, or a
``structured_delegate`` that names no out overload of the file.
"""
from __future__ import annotations

import os

import attrs

from .._repr import shared_repr
from ..errors import DeclarationError, SchemaError
from .schema import FunctionSchema

__all__ = ["Declaration", "DispatchEntry", "load_declarations", "parse_declarations", "ALLOWED_KEYS"]

ALLOWED_KEYS = ("func", "doc", "tags", "variants", "dispatch", "structured", "structured_delegate",
                "structured_inherits", "python_module")
_DISPATCH_KEYS = ("kernel", "dtypes")
_NAME_RE = r"[A-Za-z_][A-Za-z0-9_]*"
_STR = "tag:yaml.org,2002:str"
# yaml is imported on first parse: a start-up served by the schema cache never pays for it


@attrs.frozen
@shared_repr
class Declaration:
    """One declared op overload and where it was declared (``file:line``)."""

    schema: FunctionSchema
    source: str
    doc: str | None = None
    tags: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    dispatch: tuple[DispatchEntry, ...] = ()
    structured: bool = False
    structured_delegate: str | None = None
    structured_inherits: str | None = None
    python_module: str | None = None


def load_declarations(path_or_text: str | os.PathLike, *, source: str | None = None) -> list[Declaration]:
    """Read a declaration file (a path) or declaration text (a string holding a newline or ``func:``).

    ``source`` names the file in error messages and in ``Declaration.source``.
    """
    if isinstance(path_or_text, os.PathLike) or ("\n" not in path_or_text and "func:" not in path_or_text):
        from pathlib import Path   # not at import: a start never reads a file here (srcore.cachedir)

        path = Path(path_or_text)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise DeclarationError(f"cannot read declaration file: {e}", source=str(path)) from None
        return parse_declarations(text, source or str(path))
    return parse_declarations(path_or_text, source or "<declarations>")


def parse_declarations(text: str, source: str) -> list[Declaration]:
    """Parse declaration ``text``; ``source`` is the file name used in errors."""
    import yaml

    try:
        root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        problem = getattr(e, "problem", None) or str(e)
        raise DeclarationError(f"invalid YAML: {problem}", source=where) from None
    if root is None:
        return []
    if not isinstance(root, yaml.SequenceNode):
        raise DeclarationError("a declaration file is a list of '- func: <schema>' entries",
                               source=_where(source, root))
    out: list[Declaration] = []
    seen: dict[str, str] = {}
    for entry in root.value:
        decl = _entry(entry, source)
        name = decl.schema.qualified_name
        if name in seen and seen[name] != decl.source:
            raise DeclarationError(f"{name} is declared twice (first at {seen[name]})", source=decl.source)
        seen[name] = decl.source
        out.append(decl)
    _check_delegates(out)
    return out


def _check_delegates(decls: list[Declaration]) -> None:
    """A ``structured_delegate`` names an out overload of the same file (``acosh.out``)."""
    by_name = {_unqualified(d.schema.qualified_name): d for d in decls}
    for d in decls:
        if d.structured_delegate is None:
            continue
        target = by_name.get(_unqualified(d.structured_delegate))
        if target is None:
            raise DeclarationError(f"structured_delegate {d.structured_delegate!r} of "
                                   f"{d.schema.qualified_name} is not declared in this file", source=d.source)
        if not target.schema.is_out:
            raise DeclarationError(f"structured_delegate {d.structured_delegate!r} of {d.schema.qualified_name} "
                                   "is not an out overload (it writes no '*, Tensor(a!) out')", source=d.source)


def _unqualified(name: str) -> str:
    return name.split("::", 1)[1] if "::" in name else name


def _where(source: str, node, col: bool = False) -> str:
    m = node.start_mark
    return f"{source}:{m.line + 1}:{m.column + 1}" if col else f"{source}:{m.line + 1}"


def _entry(node, source: str) -> Declaration:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        raise DeclarationError("expected a mapping with a 'func' key", source=_where(source, node))
    fields: dict[str, yaml.Node] = {}
    for key, value in node.value:
        k = key.value if isinstance(key, yaml.ScalarNode) else None
        if k not in ALLOWED_KEYS:
            raise DeclarationError(f"unknown key {k!r} (allowed: {', '.join(ALLOWED_KEYS)})",
                                   source=_where(source, key))
        if k in fields:
            raise DeclarationError(f"duplicate key {k!r}", source=_where(source, key))
        fields[k] = value
    if "func" not in fields:
        raise DeclarationError("missing the 'func' key", source=_where(source, node))
    func = fields["func"]
    text = _string(func, "func", source)
    try:
        schema = FunctionSchema.parse(text)
    except SchemaError as e:
        raise _schema_error(e, func, text, source) from None
    doc = _string(fields["doc"], "doc", source) if "doc" in fields else None
    tags = _names(fields.get("tags"), "tags", source)
    variants = _names(fields.get("variants"), "variants", source)
    dispatch = _dispatch(fields["dispatch"], source) if "dispatch" in fields else ()
    structured = _bool(fields["structured"], "structured", source) if "structured" in fields else False
    delegate = inherits = module = None
    if "structured_delegate" in fields:
        delegate = _string(fields["structured_delegate"], "structured_delegate", source)
        if dispatch:
            raise DeclarationError("an op with a structured_delegate is run by its delegate's kernels: "
                                   "give it no dispatch of its own", source=_where(source, fields["dispatch"]))
    if "structured_inherits" in fields:
        inherits = _string(fields["structured_inherits"], "structured_inherits", source)
    if "python_module" in fields:
        module = _string(fields["python_module"], "python_module", source)
    if structured and not schema.is_out:
        raise DeclarationError(f"structured: True on {schema.qualified_name}, which is not an out overload "
                               "(the functional form names it with structured_delegate)",
                               source=_where(source, fields["structured"]))
    return Declaration(schema, _where(source, node), doc, tags, variants, dispatch, structured, delegate,
                       inherits, module)


def _bool(node, key: str, source: str) -> bool:
    import yaml

    if not isinstance(node, yaml.ScalarNode) or node.value not in ("True", "true", "False", "false"):
        raise DeclarationError(f"{key!r} must be True or False", source=_where(source, node))
    return node.value in ("True", "true")


def _dispatch(node, source: str) -> tuple[DispatchEntry, ...]:
    """``dispatch:`` as entries: ``CPU, CUDA: kernel`` or ``cpu: {kernel: mod:attr, dtypes: [float32]}``."""
    import re

    import yaml

    if not isinstance(node, yaml.MappingNode):
        raise DeclarationError("'dispatch' must map backends to kernels", source=_where(source, node))
    entries = []
    for key, value in node.value:
        backends = tuple(b.strip() for b in _string(key, "dispatch backend", source).split(","))
        bad = [b for b in backends if not re.fullmatch(_NAME_RE, b)]
        if bad:
            raise DeclarationError(f"bad backend name {bad[0]!r} in dispatch", source=_where(source, key, col=True))
        dtypes: tuple[str, ...] = ("*",)
        if isinstance(value, yaml.MappingNode):
            fields = {}
            for k, v in value.value:
                name = k.value if isinstance(k, yaml.ScalarNode) else None
                if name not in _DISPATCH_KEYS:
                    raise DeclarationError(f"unknown key {name!r} in a dispatch entry (allowed: "
                                           f"{', '.join(_DISPATCH_KEYS)})", source=_where(source, k))
                fields[name] = v
            if "kernel" not in fields:
                raise DeclarationError("a dispatch entry needs a 'kernel'", source=_where(source, value))
            kernel_node = fields["kernel"]
            if "dtypes" in fields:
                dtypes = _names(fields["dtypes"], "dtypes", source)
                if not dtypes:
                    raise DeclarationError("'dtypes' lists no dtype (use '*' for any)",
                                           source=_where(source, fields["dtypes"]))
        else:
            kernel_node = value
        kernel = _string(kernel_node, "kernel", source)
        if not re.fullmatch(rf"{_NAME_RE}(\.{_NAME_RE})*(:{_NAME_RE}(\.{_NAME_RE})*)?", kernel):
            raise DeclarationError(f"bad kernel reference {kernel!r}: expected 'module:attr' or a name in the "
                                   "declaring package", source=_where(source, kernel_node, col=True))
        from .dispatch_entry import DispatchEntry

        entries.append(DispatchEntry(backends, kernel, dtypes, _where(source, key)))
    return tuple(entries)


def _string(node, key: str, source: str) -> str:
    import yaml

    if not isinstance(node, yaml.ScalarNode) or node.tag != _STR:
        raise DeclarationError(f"{key!r} must be a string", source=_where(source, node))
    return node.value


def _names(node, key: str, source: str) -> tuple[str, ...]:
    """``tags: [a, b]`` or ``tags: a, b`` (native_functions.yaml writes ``variants: function, method``)."""
    import yaml

    if node is None:
        return ()
    if isinstance(node, yaml.ScalarNode) and node.tag == _STR:
        return tuple(p.strip() for p in node.value.split(",") if p.strip())
    if isinstance(node, yaml.SequenceNode) and all(
            isinstance(n, yaml.ScalarNode) and n.tag == _STR for n in node.value):
        return tuple(n.value for n in node.value)
    raise DeclarationError(f"{key!r} must be a string or a list of strings", source=_where(source, node))


def _schema_error(e: SchemaError, node, text: str, source: str) -> DeclarationError:
    """Map the schema column to a file position (exact for one-line plain and quoted scalars)."""
    m = node.start_mark
    line, col = m.line + 1, m.column + 1
    if e.column is not None and "\n" not in text:
        col += (e.column - 1) + (1 if node.style in ("'", '"') else 0)
    msg = str(e).split(" at column ", 1)[0]
    err = DeclarationError(msg, text=text, column=e.column, expected=e.expected, source=f"{source}:{line}:{col}")
    return err


def __getattr__(name: str):   # ``declarations.DispatchEntry`` as before (PEP 562), from its own module
    if name == "DispatchEntry":
        from .dispatch_entry import DispatchEntry

        return DispatchEntry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
