"""Tokenizer and recursive-descent parser of the function schema language (grammar in
:mod:`srcore.ops.schema`, whose ``FunctionSchema.parse`` calls :func:`parse_schema`)."""
from __future__ import annotations

import re
from typing import Any

import attrs

from ..errors import SchemaError
from .schema import (_MAX_DEPTH, ENUM_DEFAULTS, AliasInfo, Argument, BaseType, Default, FunctionSchema, GenericType,
                     ListType, OptionalType, Return, SchemaType, TupleType, value_text)


def parse_schema(text: str, source: str | None = None) -> FunctionSchema:
    """Parse one schema; :class:`srcore.SchemaError` names the position (and ``source``) of an error."""
    return _Parser(text, source).schema()


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
                size = None
                if self.peek() == "num":
                    tok = self.toks[self.i]
                    if not tok[1].isdigit():   # "int[.2]", "int[2.0]": a number, not a size
                        raise self.fail("a list size (a whole number) or ']'")
                    size = int(self.expect("num"))
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
