"""Op declaration files: native_functions.yaml-style ``- func: <schema>`` lists.

::

    - func: example::scaled_tanh(Tensor self, *, float scale=1.0) -> Tensor
      doc: tanh(self) * scale
      tags: [pointwise]
      variants: function

Accepted keys are ``func`` (required), ``doc``, ``tags`` and ``variants``; anything
else is an error naming ``file:line``, as is a schema that does not parse
(``file:line:col``) or an operator overload declared twice.
"""
from __future__ import annotations

import os
from pathlib import Path

import attrs

from ..errors import DeclarationError, SchemaError
from .schema import FunctionSchema

__all__ = ["Declaration", "load_declarations", "parse_declarations", "ALLOWED_KEYS"]

ALLOWED_KEYS = ("func", "doc", "tags", "variants")
_STR = "tag:yaml.org,2002:str"
# yaml is imported on first parse: a start-up served by the schema cache never pays for it


@attrs.frozen
class Declaration:
    """One declared op overload and where it was declared (``file:line``)."""

    schema: FunctionSchema
    source: str
    doc: str | None = None
    tags: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()


def load_declarations(path_or_text: str | os.PathLike, *, source: str | None = None) -> list[Declaration]:
    """Read a declaration file (a path) or declaration text (a string holding a newline or ``func:``).

    ``source`` names the file in error messages and in ``Declaration.source``.
    """
    if isinstance(path_or_text, os.PathLike) or ("\n" not in path_or_text and "func:" not in path_or_text):
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
    return out


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
    return Declaration(schema, _where(source, node), doc, tags, variants)


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
