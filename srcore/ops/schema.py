"""The function schema language of native_functions.yaml, as an immutable model.

``FunctionSchema.parse(text)`` reads one schema such as
``aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor`` with a
tokenizer and a recursive-descent parser; ``str(schema)`` prints it back in the
canonical form torch itself prints (``torch._C.FunctionSchema.__str__``).

Grammar (``?`` optional, ``*`` repeated)::

    schema   := opname '(' [arg (',' arg)*] ')' '->' returns
    opname   := [ident '::'] ident ['.' ident]
    arg      := '*' | '...' | type ident ['=' default]
    returns  := '...' | '(' ')' | '(' ret (',' ret)* ')' | ret
    ret      := '...' | type [ident]
    type     := primary (alias | '[' [int] ']' | '?')*
    primary  := ident ['.' ident]* ['(' type (',' type)* ')']   # Dict(str, t), Future(t)
              | '(' type (',' type)* ')'                         # tuple
    alias    := '(' ('*' | set) ['!'] ['->' ('*' | set)] ')'     set := ident ('|' ident)*
    default  := number | 'inf' | '-inf' | 'nan' | string | 'True' | 'False' | 'None'
              | '[' [default (',' default)*] ']' | ident
"""
from __future__ import annotations

import math
from typing import Any

import attrs

import re

from ..errors import SchemaError

__all__ = ["FunctionSchema", "Argument", "Return", "SchemaType", "BaseType", "OptionalType",
           "ListType", "TupleType", "GenericType", "AliasInfo", "Default"]

_MAX_DEPTH = 32  # nesting of types/defaults; deeper text is an error, not a RecursionError


# -- types ---------------------------------------------------------------------------------
@attrs.frozen
class AliasInfo:
    """An alias annotation: ``(a)``, ``(a!)``, ``(a -> *)``, ``(*)``, ``(b|a)``."""

    sets: tuple[str, ...]
    is_write: bool = False
    after: tuple[str, ...] | None = None

    def __str__(self) -> str:
        s = "|".join(self.sets) + ("!" if self.is_write else "")
        if self.after is not None:
            s += " -> " + "|".join(self.after)
        return f"({s})"


def _alias_str(alias: AliasInfo | None) -> str:
    return "" if alias is None else str(alias)


class SchemaType:
    """Base class of schema types."""

    __slots__ = ()
    alias: AliasInfo | None

    def is_mutable(self) -> bool:
        """True if this type (or an element type) carries a write (``!``) alias."""
        return False


@attrs.frozen
class BaseType(SchemaType):
    """A named type: ``Tensor``, ``int``, ``Scalar``, ``t``, ``__torch__.x.Y`` ... with an alias."""

    name: str
    alias: AliasInfo | None = None

    def is_mutable(self) -> bool:
        return self.alias is not None and self.alias.is_write

    def __str__(self) -> str:
        return self.name + _alias_str(self.alias)


@attrs.frozen
class OptionalType(SchemaType):
    """``T?``."""

    elem: SchemaType
    alias: AliasInfo | None = None

    def is_mutable(self) -> bool:
        return self.elem.is_mutable() or (self.alias is not None and self.alias.is_write)

    def __str__(self) -> str:
        return f"{self.elem}?" + _alias_str(self.alias)


@attrs.frozen
class ListType(SchemaType):
    """``T[]`` or fixed-size ``T[N]``; ``alias`` is the list's own (``Tensor[](a)``)."""

    elem: SchemaType
    size: int | None = None
    alias: AliasInfo | None = None

    def is_mutable(self) -> bool:
        return self.elem.is_mutable() or (self.alias is not None and self.alias.is_write)

    def __str__(self) -> str:
        return f"{self.elem}[{'' if self.size is None else self.size}]" + _alias_str(self.alias)


@attrs.frozen
class TupleType(SchemaType):
    """``(T1, T2, ...)`` as used by prim ops."""

    elems: tuple[SchemaType, ...]
    alias: AliasInfo | None = None

    def is_mutable(self) -> bool:
        return any(e.is_mutable() for e in self.elems)

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.elems)) + ")" + _alias_str(self.alias)


@attrs.frozen
class GenericType(SchemaType):
    """A parameterised type: ``Dict(str, Tensor)``, ``Future(t)``, ``Union(int, str)``."""

    name: str
    args: tuple[SchemaType, ...]
    alias: AliasInfo | None = None

    def is_mutable(self) -> bool:
        return self.alias is not None and self.alias.is_write

    def __str__(self) -> str:
        return f"{self.name}(" + ", ".join(map(str, self.args)) + ")" + _alias_str(self.alias)


# -- defaults ------------------------------------------------------------------------------
#: enum-like identifiers of native_functions.yaml and the integer TorchScript carries for them
ENUM_DEFAULTS: dict[str, int] = {
    "contiguous_format": 0, "preserve_format": 1, "channels_last": 2, "channels_last_3d": 3,
    "Mean": 1, "Sum": 2, "strided": 0, "sparse_coo": 1,
    "long": 4, "int": 3, "float": 6, "double": 7, "bool": 11, "half": 5,
}


@attrs.frozen
class Default:
    """A default value: the Python ``value`` and its canonical ``text``."""

    value: Any
    text: str

    def __str__(self) -> str:
        return self.text


def _quote(s: str) -> str:
    out = ['"']
    for ch in s:
        esc = _ESCAPES_OUT.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append("\\%03o" % (ord(ch) & 0xFF))
    out.append('"')
    return "".join(out)


_ESCAPES_OUT = {"\\": "\\\\", "'": "\\'", '"': '\\"', "\a": "\\a", "\b": "\\b", "\f": "\\f",
                "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _float_text(d: float) -> str:
    # torch's IValue printing: integral doubles as "1.", others with max_digits10
    if math.isinf(d):
        return "inf" if d > 0 else "-inf"
    if math.isnan(d):
        return "nan"
    if abs(d) < 1e10 and d == int(d):
        return ("-" if d == 0 and math.copysign(1, d) < 0 else "") + f"{int(d)}."
    return "%.17g" % d


def value_text(v: Any) -> str:
    """Canonical text of a plain default value."""
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _float_text(v)
    if isinstance(v, str):
        return _quote(v)
    if isinstance(v, tuple):
        return "[" + ", ".join(value_text(x) for x in v) + "]"
    raise TypeError(f"not a default value: {v!r}")


# -- arguments and the schema ---------------------------------------------------------------
@attrs.frozen
class Argument:
    """One argument: ``Tensor self``, ``Scalar alpha=1`` (``kwarg_only`` after ``*``)."""

    name: str
    type: SchemaType
    default: Default | None = None
    kwarg_only: bool = False

    @property
    def has_default(self) -> bool:
        return self.default is not None

    def __str__(self) -> str:
        s = f"{self.type} {self.name}"
        return s if self.default is None else f"{s}={self.default}"


@attrs.frozen
class Return:
    """One return: a type and an optional name."""

    name: str | None
    type: SchemaType

    def __str__(self) -> str:
        return str(self.type) if self.name is None else f"{self.type} {self.name}"


@attrs.frozen
class FunctionSchema:
    """An op overload's signature, e.g. ``aten::add.Tensor(Tensor self, ...) -> Tensor``."""

    name: str
    overload_name: str
    arguments: tuple[Argument, ...]
    returns: tuple[Return, ...]
    is_vararg: bool = False
    is_varret: bool = False

    @classmethod
    def parse(cls, text: str, *, source: str | None = None) -> "FunctionSchema":
        """Parse one schema; raise :class:`srcore.SchemaError` naming the column."""
        return _Parser(text, source).schema()

    @property
    def qualified_name(self) -> str:
        return f"{self.name}.{self.overload_name}" if self.overload_name else self.name

    @property
    def namespace(self) -> str:
        ns, sep, _ = self.name.partition("::")
        return ns if sep else ""

    @property
    def base_name(self) -> str:
        return self.name.rpartition("::")[2]

    @property
    def positional(self) -> list[Argument]:
        return [a for a in self.arguments if not a.kwarg_only]

    @property
    def kwarg_only(self) -> list[Argument]:
        return [a for a in self.arguments if a.kwarg_only]

    @property
    def out_arguments(self) -> list[Argument]:
        """The kwarg-only arguments written in place (``*, Tensor(a!) out``)."""
        return [a for a in self.arguments if a.kwarg_only and a.type.is_mutable()]

    @property
    def is_out(self) -> bool:
        """An out overload: writes into kwarg-only ``Tensor(a!)`` arguments."""
        return bool(self.out_arguments)

    @property
    def is_mutable(self) -> bool:
        """Any argument carries a write alias (``!``): in-place and out overloads."""
        return any(a.type.is_mutable() for a in self.arguments)

    def argument(self, name: str) -> Argument:
        for a in self.arguments:
            if a.name == name:
                return a
        raise KeyError(f"{self.qualified_name} has no argument {name!r}")

    def __str__(self) -> str:
        parts = []
        star = False
        for a in self.arguments:
            if a.kwarg_only and not star:
                parts.append("*")
                star = True
            parts.append(str(a))
        if self.is_vararg:
            parts.append("...")
        rets = [str(r) for r in self.returns]
        if self.is_varret:
            rets.append("...")
        if len(self.returns) == 1 and not self.is_varret and not rets[0].startswith("("):
            ret = rets[0]
        elif not self.returns and self.is_varret:
            ret = "..."
        else:
            ret = "(" + ", ".join(rets) + ")"
        return f"{self.qualified_name}({', '.join(parts)}) -> {ret}"


# -- tokenizer -----------------------------------------------------------------------------
_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<op>::|->|\.\.\.|[()\[\],?!*=|.\-])
""", re.VERBOSE)

_EOF = "end of schema"
_ESCAPES_IN = {"n": "\n", "t": "\t", "f": "\f", "v": "\v", "a": "\a", "b": "\b", "r": "\r",
               "\\": "\\", "'": "'", '"': '"', "0": "\0"}


def _tokenize(text: str, source: str | None) -> list[tuple[str, str, int]]:
    """``(kind, text, column)`` triples; kind is ``num``/``ident``/``str``/the operator/``eof``."""
    toks = []
    pos, n = 0, len(text)
    match = _TOKEN.match
    while pos < n:
        m = match(text, pos)
        if m is None:
            ch = text[pos]
            what = "unterminated string" if ch in "\"'" else f"unexpected character {ch!r}"
            raise SchemaError(what, text=text, column=pos + 1, expected="a token", source=source)
        kind = m.lastgroup
        if kind != "ws":
            tok = m.group()
            toks.append((tok if kind == "op" else kind, tok, pos + 1))
        pos = m.end()
    toks.append(("eof", "", n + 1))
    return toks


def _unquote(tok: str) -> str:
    body, out, i = tok[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567" and body[i + 1:i + 4].isdigit() and len(body[i + 1:i + 4]) == 3:
                out.append(chr(int(body[i + 1:i + 4], 8)))
                i += 4
                continue
            out.append(_ESCAPES_IN.get(nxt, "\\" + nxt))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


# -- parser --------------------------------------------------------------------------------
_COMMON_TYPES: dict[str, BaseType] = {}


def _base(name: str) -> BaseType:
    t = _COMMON_TYPES.get(name)
    if t is None:
        t = _COMMON_TYPES[name] = BaseType(name)
    return t


#: parameterised type names; any other name followed by '(' carries an alias annotation
GENERIC_TYPES = frozenset({"Dict", "Future", "Await", "RRef", "Union", "Optional", "List", "Tuple"})
_INT_TYPES = {"int", "SymInt"}
_FLOAT_TYPES = {"float"}


class _Parser:
    """Recursive descent over the token list; every failure is a SchemaError with a column."""

    __slots__ = ("text", "source", "toks", "i", "depth")

    def __init__(self, text: str, source: str | None):
        if not isinstance(text, str):
            raise SchemaError(f"a schema must be a string, not {type(text).__name__}", source=source)
        self.text = text
        self.source = source
        self.toks = _tokenize(text, source)
        self.i = 0
        self.depth = 0

    # helpers
    def peek(self, k: int = 0) -> str:
        return self.toks[min(self.i + k, len(self.toks) - 1)][0]

    def fail(self, expected: str, tok=None) -> SchemaError:
        tok = tok or self.toks[self.i]
        got = _EOF if tok[0] == "eof" else repr(tok[1])
        return SchemaError(f"expected {expected}, got {got}", text=self.text, column=tok[2],
                           expected=expected, source=self.source)

    def expect(self, kind: str, what: str | None = None) -> str:
        tok = self.toks[self.i]
        if tok[0] != kind:
            raise self.fail(what or (f"'{kind}'" if kind not in ("ident", "num", "str") else
                                     {"ident": "a name", "num": "a number", "str": "a string"}[kind]))
        self.i += 1
        return tok[1]

    def accept(self, kind: str) -> bool:
        if self.toks[self.i][0] == kind:
            self.i += 1
            return True
        return False

    def enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise self.fail(f"at most {_MAX_DEPTH} levels of nesting")

    # schema := opname '(' args ')' '->' returns
    def schema(self) -> FunctionSchema:
        name, overload = self.opname()
        self.expect("(")
        args, vararg = self.arguments()
        self.expect(")", "',' or ')'")
        self.expect("->")
        rets, varret = self.returns()
        if self.peek() != "eof":
            raise self.fail("end of schema")
        return FunctionSchema(name, overload, args, rets, vararg, varret)

    def opname(self) -> tuple[str, str]:
        name = self.expect("ident", "an operator name")
        if self.accept("::"):
            name = f"{name}::{self.expect('ident', 'an operator name')}"
        overload = self.expect("ident", "an overload name") if self.accept(".") else ""
        return name, overload

    def arguments(self) -> tuple[tuple[Argument, ...], bool]:
        args: list[Argument] = []
        kwarg_only = vararg = False
        if self.peek() == ")":
            return (), False
        while True:
            if vararg:
                raise self.fail("')' after '...'")
            tok = self.toks[self.i]
            if self.accept("*"):
                if kwarg_only:
                    raise self.fail("a single '*'", tok)
                kwarg_only = True
            elif self.accept("..."):
                vararg = True
            else:
                typ = self.type_()
                name = self.expect("ident", "an argument name")
                default = None
                if self.accept("="):
                    default = self.default(typ)
                args.append(Argument(name, typ, default, kwarg_only))
            if not self.accept(","):
                return tuple(args), vararg

    def returns(self) -> tuple[tuple[Return, ...], bool]:
        if self.accept("..."):
            return (), True
        if self.peek() == "(" and not self._paren_is_type():
            self.i += 1
            rets: list[Return] = []
            varret = False
            if self.accept(")"):
                return (), False
            while True:
                if varret:
                    raise self.fail("')' after '...'")
                if self.accept("..."):
                    varret = True
                else:
                    rets.append(self.ret())
                if not self.accept(","):
                    break
            self.expect(")", "',' or ')'")
            return tuple(rets), varret
        return (self.ret(),), False

    def _paren_is_type(self) -> bool:
        # `-> (Tensor, Tensor)` is a return list, `-> (Tensor, Tensor)[]` a single list type:
        # find the matching ')' and look at what follows it
        depth, j = 0, self.i
        while j < len(self.toks):
            k = self.toks[j][0]
            if k in ("(", "["):
                depth += 1
            elif k in (")", "]"):
                depth -= 1
                if depth == 0:
                    return self.toks[j + 1][0] in ("[", "?") if k == ")" else False
            elif k == "eof":
                return False
            j += 1
        return False

    def ret(self) -> Return:
        typ = self.type_()
        name = self.expect("ident") if self.peek() == "ident" else None
        return Return(name, typ)

    # types
    def type_(self) -> SchemaType:
        self.enter()
        tok = self.toks[self.i]
        if tok[0] == "(":
            self.i += 1
            elems = [self.type_()]
            while self.accept(","):
                elems.append(self.type_())
            self.expect(")", "',' or ')'")
            typ: SchemaType = TupleType(tuple(elems))
        elif tok[0] == "ident":
            self.i += 1
            name = tok[1]
            while self.peek() == "." and self.peek(1) == "ident":
                self.i += 2
                name += "." + self.toks[self.i - 1][1]
            if name in GENERIC_TYPES and self.peek() == "(":
                self.i += 1
                params = [self.type_()]
                while self.accept(","):
                    params.append(self.type_())
                self.expect(")", "',' or ')'")
                typ = GenericType(name, tuple(params))
            else:
                typ = _base(name)
        else:
            raise self.fail("a type")
        while True:  # postfix: alias, [N], ?
            k = self.peek()
            if k == "(":
                if typ.alias is not None:
                    raise self.fail("a single alias annotation")
                typ = attrs.evolve(typ, alias=self.alias())
            elif k == "[":
                self.i += 1
                size = int(self.expect("num", "a list size or ']'")) if self.peek() == "num" else None
                if size is not None and not self.toks[self.i - 1][1].isdigit():
                    raise self.fail("an integer list size", self.toks[self.i - 1])
                self.expect("]")
                typ = ListType(typ, size)
            elif k == "?":
                self.i += 1
                typ = OptionalType(typ)
            else:
                break
        self.depth -= 1
        return typ

    def alias(self) -> AliasInfo:
        self.expect("(")
        sets = self.alias_set()
        write = self.accept("!")
        after = self.alias_set() if self.accept("->") else None
        self.expect(")", "')' closing the alias annotation")
        return AliasInfo(sets, write, after)

    def alias_set(self) -> tuple[str, ...]:
        if self.accept("*"):
            return ("*",)
        sets = [self.expect("ident", "an alias set name or '*'")]
        while self.accept("|"):
            sets.append(self.expect("ident", "an alias set name"))
        return tuple(sets)

    # defaults
    def default(self, typ: SchemaType) -> Default:
        start = self.toks[self.i]
        lit = self.literal()
        return _coerce(typ, lit, lambda msg: self.fail(msg, start))

    def literal(self) -> Any:
        """A raw literal: ``('int'|'float'|'str'|'ident'|'list', value)``."""
        self.enter()
        tok = self.toks[self.i]
        kind = tok[0]
        self.i += 1
        if kind == "-":
            nxt = self.toks[self.i]
            if nxt[0] == "num" or (nxt[0] == "ident" and nxt[1] in ("inf", "nan")):
                inner = self.literal()
                out = (inner[0], -inner[1])
            else:
                raise self.fail("a number after '-'")
        elif kind == "num":
            txt = tok[1]
            out = ("int", int(txt)) if txt.isdigit() else ("float", float(txt))
        elif kind == "str":
            out = ("str", _unquote(tok[1]))
        elif kind == "ident":
            word = tok[1]
            if word in ("True", "False"):
                out = ("bool", word == "True")
            elif word == "None":
                out = ("none", None)
            elif word in ("inf", "nan"):
                out = ("float", float(word))
            else:
                out = ("ident", word)
        elif kind == "[":
            items = []
            if not self.accept("]"):
                items.append(self.literal())
                while self.accept(","):
                    items.append(self.literal())
                self.expect("]", "',' or ']'")
            out = ("list", tuple(items))
        else:
            self.i -= 1
            raise self.fail("a default value")
        self.depth -= 1
        return out


def _coerce(typ: SchemaType, lit: tuple[str, Any], fail) -> Default:
    """Type-directed default: ``float eps=1`` is ``1.``, ``int[2] stride=1`` is ``[1, 1]``."""
    kind, v = lit
    if kind == "none":
        return Default(None, "None")
    if kind == "ident":
        return Default(ENUM_DEFAULTS.get(v, v), v)
    inner = typ.elem if isinstance(typ, OptionalType) else typ
    if isinstance(inner, ListType):
        if kind != "list":
            if inner.size is None:
                raise fail(f"a list default for {typ}")
            # torch keeps the single-int spelling (`int[2] padding=0`) in its printout
            item = _coerce(inner.elem, lit, fail)
            return Default((item.value,) * inner.size, item.text)
        items = tuple(_coerce(inner.elem, item, fail).value for item in lit[1])
        return Default(items, value_text(items))
    if kind == "list":
        if isinstance(inner, BaseType) and inner.name in ("Any", "t"):
            items = tuple(_coerce(inner, item, fail).value for item in v)
            return Default(items, value_text(items))
        raise fail(f"a {typ} default, not a list")
    name = inner.name if isinstance(inner, BaseType) else None
    if name in _FLOAT_TYPES and kind == "int" and inner is typ:
        # torch converts `float x=1` but keeps `float? x=1` an int (prims::var); so do we
        v = float(v)
    elif name in _INT_TYPES and kind == "float":
        raise fail(f"an integer default for {typ}")
    elif name == "bool" and kind not in ("bool",):
        raise fail(f"True or False for {typ}")
    elif name == "str" and kind != "str":
        raise fail(f"a string default for {typ}")
    return Default(v, value_text(v))
