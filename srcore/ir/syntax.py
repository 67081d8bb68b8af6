"""The token-level layer of the IR text parser: token helpers, literals and types.

:class:`TypeSyntax` reads what can appear inside a node or a declaration (``Float(2, *, n)``,
``int[]?``, ``[1, (2, 3)]``); :class:`srcore.ir.parser` builds graphs on top of it.
"""
from __future__ import annotations

from typing import Any

from ..errors import QuantizationError
from .lexer import Lexer, Token
from .quant import check_qparams, qparams_from_kwargs
from .types import (ANY, OPAQUE_TYPE_NAMES, BOOL, FLOAT, INT, NONE, SIMPLE_TYPES, TORCH_TO_DTYPE, DeviceType,
                    DictType, ListType, OptionalType, StrType, TensorType, TupleType, Type, AnyType, NumberType, is_union)
# (the types of srcore.ir.rare_types are imported where the text names one: a graph without any builds none)

_DIM_KWARGS = {"strides", "requires_grad", "device"}
_QUANT_KWARGS = {"scale", "zero_point", "axis"}
MAX_DEPTH = 200


class TypeSyntax:
    """Token helpers, literals and types over a :class:`Lexer` (``self.lx``)."""

    lx: Lexer

    # -- token helpers --------------------------------------------------------------
    def peek(self) -> Token:
        return self.lx.peek()

    def expect(self, kind: str, what: str | None = None) -> Token:
        tok = self.lx.peek()
        if tok.kind != kind:
            raise self.lx.error(f"expected {what or repr(kind)}", tok)
        return self.lx.next()

    def accept(self, kind: str) -> Token | None:
        if self.lx.peek().kind == kind:
            return self.lx.next()
        return None

    def skip_nl(self) -> None:
        while self.peek().kind == "NL":
            self.lx.next()

    def skip_blank(self) -> None:
        """Skip empty and comment-only lines."""
        while self.peek().kind in ("NL", "COMMENT"):
            self.lx.next()

    def end_of_line(self) -> None:
        tok = self.peek()
        if tok.kind == "EOF":
            return
        self.expect("NL", "end of line")

    # -- literals ---------------------------------------------------------------------
    def literal(self, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise self.lx.error("literal nested too deeply")
        tok = self.lx.next()
        k = tok.kind
        if k == "INT":
            return int(tok.text)
        if k == "FLOAT":
            return float(tok.text)
        if k == "STRING":
            return tok.text
        if k == "IDENT" and tok.text in ("None", "True", "False"):
            return {"None": None, "True": True, "False": False}[tok.text]
        if k == "IDENT" and tok.text == "annotate" and self.peek().kind == "(":
            return self.annotated_literal(depth)
        if k == "IDENT":  # a type-valued attribute: prim::profile[profiled_type=Float(2, 3)]
            self.lx.seek(tok.pos)
            return self.type_(depth + 1)
        if k in ("[", "("):
            close = "]" if k == "[" else ")"
            items = []
            self.skip_nl()
            while not self.accept(close):
                items.append(self.literal(depth + 1))
                self.skip_nl()
                if self.accept(","):
                    self.skip_nl()
                    continue
                self.expect(close, f"',' or '{close}'")
                break
            return items if k == "[" else tuple(items)
        raise self.lx.error("expected a constant (number, string, list, tuple, None)", tok)

    def annotated_literal(self, depth: int) -> Any:
        """torch's ``annotate(List[int], [])``: the value; the Python-style type is the value's own type."""
        self.expect("(")
        nest = 0
        while True:  # skip the type: up to the ',' at bracket depth 0
            tok = self.lx.next()
            if tok.kind in ("[", "("):
                nest += 1
            elif tok.kind in ("]", ")"):
                nest -= 1
            elif tok.kind == "," and nest == 0:
                break
            elif tok.kind in ("EOF", "NL"):
                raise self.lx.error("expected annotate(Type, value)", tok)
        value = self.literal(depth + 1)
        self.expect(")", "')' closing annotate(...)")
        return value

    # -- types ----------------------------------------------------------------------
    def type_(self, depth: int = 0) -> Type:
        if depth > MAX_DEPTH:
            raise self.lx.error("type nested too deeply")
        tok = self.peek()
        if tok.kind == "(":
            self.lx.next()
            elems = []
            while not self.accept(")"):
                elems.append(self.type_(depth + 1))
                if not self.accept(","):
                    self.expect(")", "',' or ')'")
                    break
            t: Type = TupleType(tuple(elems))
        elif tok.kind == "IDENT":
            self.lx.next()
            t = self.named_type(tok, depth)
        else:
            raise self.lx.error("expected a type", tok)
        while True:  # suffixes: T[] and T?
            if self.peek().kind == "[" :
                self.lx.next()
                self.expect("]", "']' (list type T[])")
                t = ListType(t)
            elif self.accept("?"):
                t = OptionalType(t)
            else:
                return t

    def named_type(self, tok: Token, depth: int) -> Type:
        name = tok.text
        if name == "Dict":
            self.expect("(")
            k = self.type_(depth + 1)
            self.expect(",")
            v = self.type_(depth + 1)
            self.expect(")")
            return DictType(k, v)
        if name in ("Future", "Await", "RRef"):  # torch reads Future(T), prints Future[T]: take both
            close = "]" if self.accept("[") else (self.expect("(", "'(' or '['") and ")")
            elem = self.type_(depth + 1)
            self.expect(close)
            from .rare_types import FutureType, WrapperType

            return FutureType(elem) if name == "Future" else WrapperType(name, elem)
        if name == "Union":
            self.expect("(")
            elems = [self.type_(depth + 1)]
            while self.accept(","):
                elems.append(self.type_(depth + 1))
            self.expect(")", "',' or ')'")
            from .rare_types import UnionType

            return UnionType(tuple(elems))
        if name in TORCH_TO_DTYPE or name == "Tensor":
            dtype = TORCH_TO_DTYPE.get(name)
            if self.peek().kind == "(":
                return self.tensor_type(dtype, tok)
            if name == "Tensor":
                return TensorType()
            return TensorType(dtype, None)
        if name in SIMPLE_TYPES:
            return SIMPLE_TYPES[name]
        if "." in name:  # __torch__.models.MLP: a class / module type
            from .rare_types import ClassType

            return ClassType(name)
        if name in OPAQUE_TYPE_NAMES:
            from .rare_types import OpaqueType

            return OpaqueType(name)
        if _is_type_variable(name):  # a schema's type variable (t, t1, tVal): any type
            return ANY
        raise self.lx.error(f"unknown type {name}", tok)

    def tensor_type(self, dtype: str | None, tok: Token) -> TensorType:
        """A tensor type's parenthesised part: dims, then torch's keywords and quantization parameters
        (``QUInt8(1, 8, scale=0.05, zero_point=64)``)."""
        quant: dict = {}
        dims = self.dims(quant)
        if not quant:
            return TensorType(dtype, dims)
        try:
            qparams = qparams_from_kwargs(quant)
            check_qparams(dtype, qparams, dims)
        except QuantizationError as exc:
            raise self.lx.error(f"bad quantization parameters: {exc}", tok) from None
        return TensorType(dtype, dims, qparams)

    def dims(self, quant: dict | None = None) -> tuple | None:
        """``(2, *, batch, strides=[..], requires_grad=0, device=cpu)`` or ``(...)``; quantization
        keywords (``scale=``, ``zero_point=``, ``axis=``; after the dims or after ``...``) go into
        ``quant`` when given."""
        self.expect("(")
        if self.accept("ELLIPSIS"):
            if quant is not None and self.accept(","):
                while True:
                    self.quant_kwarg(self.expect("IDENT", "scale=, zero_point= or axis="), quant)
                    if not self.accept(","):
                        break
            self.expect(")")
            return None
        dims: list = []
        kwargs: set[str] = set()
        while not self.accept(")"):
            tok = self.lx.next()
            if tok.kind == "IDENT" and self.peek().kind == "=" and tok.text in _QUANT_KWARGS and quant is not None:
                self.quant_kwarg(tok, quant)
            elif tok.kind == "IDENT" and self.peek().kind == "=" and tok.text in _DIM_KWARGS:
                self.lx.next()
                kwargs.add(tok.text)
                self.dim_kwarg(tok.text)
            elif kwargs or quant:
                raise self.lx.error("dimensions must come before strides=/device=/requires_grad=/scale=", tok)
            elif tok.kind == "INT":
                if int(tok.text) < 0:
                    raise self.lx.error("a dimension cannot be negative", tok)
                dims.append(int(tok.text))
                if self.accept(":"):  # old torch printed size:stride (Float(1:150528, ...))
                    self.expect("INT", "a stride")
            elif tok.kind == "*":
                dims.append(None)
            elif tok.kind == "IDENT" and tok.text == "SS" and self.peek().kind == "(":
                self.lx.next()
                num = self.expect("INT", "an integer (symbolic shape id)")
                self.expect(")")
                dims.append(f"SS({num.text})")
            elif tok.kind == "IDENT" and "::" not in tok.text and "." not in tok.text:
                dims.append(tok.text)
            elif tok.kind == "STRING":  # a symbolic dim that is not an identifier ("n+1")
                dims.append(tok.text)
            else:
                raise self.lx.error("expected a dimension (integer, *, or a symbol)", tok)
            if not self.accept(","):
                self.expect(")", "',' or ')'")
                break
        if not dims and kwargs and "strides" not in kwargs:
            return None  # torch prints a tensor of unknown sizes as Float(requires_grad=0, ...)
        return tuple(dims)

    def quant_kwarg(self, tok: Token, quant: dict) -> None:
        if tok.text not in _QUANT_KWARGS:
            raise self.lx.error("expected scale=, zero_point= or axis=", tok)
        self.expect("=")
        if tok.text in quant:
            raise self.lx.error(f"{tok.text}= given twice", tok)
        quant[tok.text] = self.literal()

    def dim_kwarg(self, key: str) -> None:
        if key == "device":
            self.expect("IDENT", "a device name")
            if self.accept(":"):
                self.expect("INT", "a device index")
        else:
            self.literal()


def _is_type_variable(name: str) -> bool:
    return name == "t" or (name[0] == "t" and len(name) > 1 and (name[1:].isdigit() or name[1].isupper()))


def coerce_constant(value: Any, t: Type) -> Any:
    """Convert a parsed literal to the Python value its type means (0/1 for bool, ...)."""
    if isinstance(t, OptionalType):
        return None if value is None else coerce_constant(value, t.elem)
    if t == BOOL:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise TypeError(f"{value!r} is not a bool")
    if t == INT:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TypeError(f"{value!r} is not an int")
    if t == FLOAT:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise TypeError(f"{value!r} is not a float")
    if isinstance(t, (StrType, DeviceType)):
        if isinstance(value, str):
            return value
        raise TypeError(f"{value!r} is not a string")
    if t == NONE:
        if value is None:
            return None
        raise TypeError(f"{value!r} is not None")
    if isinstance(t, ListType):
        if isinstance(value, list):
            return [coerce_constant(v, t.elem) for v in value]
        raise TypeError(f"{value!r} is not a list")
    if isinstance(t, TupleType):
        if isinstance(value, tuple) and len(value) == len(t.elems):
            return tuple(coerce_constant(v, e) for v, e in zip(value, t.elems))
        raise TypeError(f"{value!r} is not a {len(t.elems)}-tuple")
    if isinstance(t, (AnyType, NumberType)):
        return value
    if is_union(t):
        # the element type the value already is first: the 0 of a Union(float, int)[] stays an int
        fits = []
        for e in t.elems:
            try:
                fits.append(coerce_constant(value, e))
            except TypeError:
                continue
        if not fits:
            raise TypeError(f"{value!r} is none of {t}")
        return next((v for v in fits if type(v) is type(value)), fits[0])
    raise TypeError(f"constants of type {t} are not supported")
