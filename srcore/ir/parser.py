"""Parse IR text (TorchScript's printed graph syntax) into a :class:`Graph`.

See ``docs/ir-text.md`` for the grammar. Every syntax or typing error raises
:class:`srcore.GraphParseError` with line, column and the offending token.
"""
from __future__ import annotations

from typing import Any, Mapping

from .._lazyre import LazyPattern
from .graph import Block, Graph, Node, SourceLocation, Value
from .lexer import Lexer, Token
from .syntax import MAX_DEPTH, TypeSyntax, coerce_constant
from .quant import is_quantized, storage_dtype
from .names import BLOCK_OWNERS   # (not from .verify: a load does not verify, ~0.3 ms of imports)
from .infer import infer_block_input_type, infer_output_type
from .types import BOOL, FUNCTION, INT, NONE, TENSOR, AnyType, OptionalType, TensorType, Type

__all__ = ["parse_graph", "parse_source_location", "coerce_constant", "UNKNOWN_TENSOR"]

#: ``attrs["tensor"]`` of a tensor constant whose value the text does not carry.
UNKNOWN_TENSOR = "<Tensor>"

def _is_block_name(text: str) -> bool:
    """``re.fullmatch(r"block\\d+", text)`` (``\\d``: ``str.isdecimal``) without compiling a pattern at load."""
    return text.startswith("block") and text[5:].isdecimal()


# The three patterns below are matched with str methods (each function is its regex, checked against it by
# tests/test_ir_parser_patterns.py): a load parses locations and tensor literals, and compiling the three
# regexes was ~0.3 ms of a cold start.
_SOURCE_PATTERN = r"^(.*?):(\d+)(?::(\d+))?$"
# torch's dump of a tensor value: numbers, spaces, newlines, ``(1,.,.) =`` headers,
# ending in ``[ CPUFloatType{2,3} ]``
_TENSOR_DUMP_PATTERN = r"[^\[\]\"%#]*?\[ [A-Za-z0-9_]+Type\{[0-9,]*\} \]"
_SCALAR_TENSOR_PATTERN = r"\{[^{}\[\]\n]*\}"
_IDENT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_DIGITS_COMMAS = frozenset("0123456789,")


def _source_parts(text: str) -> tuple[str, str, str | None] | None:
    """``re.match(_SOURCE_PATTERN, text).groups()`` (None: no match) for a ``text`` without a final newline
    (the caller strips it). The rest after the file must be ``:digits`` or ``:digits:digits`` up to the end,
    so the file ends at the last or the second-to-last colon; the lazy ``.*?`` takes the shorter file; ``.``
    matches no newline; ``\\d`` is ``str.isdecimal``."""
    parts = text.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdecimal() and parts[2].isdecimal() and "\n" not in parts[0]:
        return parts[0], parts[1], parts[2]
    parts = text.rsplit(":", 1)
    if len(parts) == 2 and parts[1].isdecimal() and "\n" not in parts[0]:
        return parts[0], parts[1], None
    return None


def _scalar_tensor_end(text: str, pos: int) -> int | None:
    """Where ``re.compile(_SCALAR_TENSOR_PATTERN).match(text, pos)`` ends (None: no match): ``{`` then the
    first of ``{}[]`` or a newline must be ``}``."""
    if not text.startswith("{", pos):
        return None
    line_end = text.find("\n", pos + 1)
    close = text.find("}", pos + 1, len(text) if line_end < 0 else line_end)
    if close < 0 or any(text.find(c, pos + 1, close) >= 0 for c in "{[]"):
        return None
    return close + 1


def _tensor_dump_end(text: str, pos: int) -> int | None:
    """Where ``re.compile(_TENSOR_DUMP_PATTERN).match(text, pos)`` ends (None: no match). The prefix holds
    none of ``[]"%#``, so the ``[`` of ``[ XType{...} ]`` is the first ``[`` from ``pos`` on; the type name
    is the whole run of ``[A-Za-z0-9_]`` after ``[ `` (``{`` ends it) and ends in ``Type``; the sizes are the
    whole run of ``[0-9,]``."""
    i = text.find("[", pos)
    if i < 0 or any(text.find(c, pos, i) >= 0 for c in ']"%#'):
        return None
    if not text.startswith("[ ", i):
        return None
    j = i + 2
    while j < len(text) and text[j] in _IDENT_CHARS:
        j += 1
    name = text[i + 2:j]
    if len(name) <= 4 or not name.endswith("Type") or not text.startswith("{", j):
        return None
    j += 1
    while j < len(text) and text[j] in _DIGITS_COMMAS:
        j += 1
    return j + 3 if text.startswith("} ]", j) else None
_SCOPE = LazyPattern(r"[^#\n]*")


def parse_graph(text: str, params: Mapping[str, Any] | None = None, *,
                filename: str | None = None, locate: bool = True) -> Graph:
    """Parse IR text into a Graph.

    ``params`` maps parameter names to numpy arrays: ``prim::Constant[param="w"]()``
    gets ``attrs["value"] = params["w"]`` (a name missing from ``params`` is an
    error). Without ``params`` such constants keep only their name.

    A node without a ``# file:line:col`` comment gets its own position in ``text``
    (``filename``, or ``<graph>`` as in parse errors) as its source, so later errors (shapes, kernels) point
    at the line; ``locate=False`` leaves such nodes without a source.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_graph expects str, not {type(text).__name__}")
    p = _Parser(text, params, filename)
    p.locate = locate
    return p.parse()


class _Parser(TypeSyntax):
    def __init__(self, text: str, params: Mapping[str, Any] | None, filename: str | None,
                 lexer: Lexer | None = None):
        self.lx = lexer if lexer is not None else Lexer(text, filename)
        self.params = params
        self.g = Graph()
        self.scopes: list[dict[str, Value]] = [{}]
        self.defined: set[str] = set()
        self.depth = 0
        self.locate = False

    # -- graph ----------------------------------------------------------------------
    def parse(self) -> Graph:
        g = self.graph_def()
        graphs = [g]
        self.skip_blank()
        # torch's ``with prim::DifferentiableGraph_0 = graph(...)`` subgraph sections
        while self.peek().kind == "IDENT" and self.peek().text == "with":
            self.lx.next()
            ktok = self.expect("IDENT", "the kind of the nodes that run this subgraph")
            self.expect("=")
            subparser = _Parser("", self.params, None, lexer=self.lx)
            subparser.locate = self.locate
            sub = subparser.graph_def()
            users = [n for h in graphs for n in h.all_nodes() if n.kind == ktok.text]
            if not users:
                raise self.lx.error(f"no {ktok.text} node uses this subgraph", ktok)
            for n in users:
                n.attrs["Subgraph"] = sub
            graphs.append(sub)
            self.skip_blank()
        self.expect("EOF", "end of input after 'return'")
        return g

    def graph_def(self) -> Graph:
        """``graph(...): ... return (...)``."""
        self.skip_blank()
        tok = self.expect("IDENT", "'graph'")
        if tok.text != "graph":
            raise self.lx.error("expected 'graph'", tok)
        self.expect("(")
        for name, t, tok in self.decl_list(")"):  # torch types an untyped graph input as a Tensor
            self.define(tok, name, self.g.add_input(TENSOR if t is None else t, name))
        self.expect(":")
        self.accept("COMMENT")
        self.end_of_line()
        self.body(self.g.block)
        self.skip_blank()
        tok = self.peek()
        if tok.kind != "IDENT" or tok.text != "return":
            raise self.lx.error("expected a node or 'return'", tok)
        self.lx.next()
        for v in self.value_list():
            self.g.register_output(v)
        self.accept("COMMENT")
        return self.g

    def decl_list(self, close: str) -> list[tuple[str, Type | None, Token]]:
        """``%a : T, %b : T`` up to ``close`` (newlines allowed); an untyped ``%a`` has type None."""
        out = []
        self.skip_nl()
        if self.accept(close):
            return out
        while True:
            self.skip_nl()
            tok = self.expect("VALUE", "a value name like %x")
            out.append((tok.text, self.type_() if self.accept(":") else None, tok))
            self.skip_nl()
            if self.accept(close):
                return out
            self.expect(",", f"',' or '{close}'")

    def value_list(self) -> list[Value]:
        """``(%a, %b)``."""
        self.expect("(")
        out = []
        self.skip_nl()
        if self.accept(")"):
            return out
        while True:
            self.skip_nl()
            out.append(self.use(self.expect("VALUE", "a value like %x")))
            self.skip_nl()
            if self.accept(")"):
                return out
            self.expect(",", "',' or ')'")

    # -- values ---------------------------------------------------------------------
    def use(self, tok: Token) -> Value:
        for scope in reversed(self.scopes):
            v = scope.get(tok.text)
            if v is not None:
                return v
        raise self.lx.error(f"undefined value %{tok.text}", tok)

    def define(self, tok: Token, name: str, value: Value) -> None:
        # torch's parser lets a later definition shadow an earlier one (Static Runtime's
        # _scaled_mm test names an input and a constant %bias): later uses see the new value,
        # which keeps the unique name the graph gave it
        shadows = name in self.defined
        self.defined.add(name)
        self.scopes[-1][name] = value
        if value.name != name and not shadows:  # Graph._unique renamed it: keep the text's name
            self.g._names.discard(value.name)
            value.name = name
            self.g._names.add(name)

    # -- nodes ----------------------------------------------------------------------
    def body(self, block: Block) -> None:
        while True:
            self.skip_blank()
            tok = self.peek()
            if tok.kind in ("ARROW", "EOF") or (tok.kind == "IDENT" and tok.text in ("return", "with")):
                return
            if tok.kind == "IDENT" and _is_block_name(tok.text):
                raise self.lx.error("a block here must follow a node that owns blocks", tok)
            self.node(block)

    def node(self, block: Block) -> None:
        outs: list[tuple[str, Type | None, Token]] = []
        start = self.peek().pos
        if self.peek().kind == "VALUE":
            while True:
                tok = self.expect("VALUE")
                outs.append((tok.text, self.type_() if self.accept(":") else None, tok))
                if not self.accept(","):
                    break
        # a node without outputs is written ``prim::RaiseException(%m)`` (torch) or ``= prim::...``
        if outs or self.peek().kind != "IDENT":
            self.expect("=", "'='" if outs else "a node ('%x : T = kind(...)')")
        ktok = self.expect("IDENT", "an operator name like aten::add")
        if "::" not in ktok.text:
            raise self.lx.error("an operator name needs a namespace (aten::add)", ktok)
        n = self.g.create(ktok.text)
        if self.peek().kind == "[":
            self.attributes(n)
        for v in self.value_list():
            n.add_input(v)
        if self.peek().kind == "," :  # torch's ``, scope: __module.fc``
            self.lx.next()
            st = self.expect("IDENT", "'scope'")
            if st.text != "scope":
                raise self.lx.error("expected 'scope:'", st)
            self.expect(":")
            m = _SCOPE.match(self.lx.text, self.lx.raw_pos())
            n.meta["scope"] = m.group(0).strip()
            self.lx.seek(m.end())
        c = self.accept("COMMENT")
        if c is not None:
            n.source = parse_source_location(c.text)
        if n.source is None and self.locate:
            n.source = SourceLocation(self.lx.filename or "<graph>", *self.lx.line_col(start), in_text=True)
        self.end_of_line()
        block.append(n)
        # blocks follow on the next lines
        while True:
            self.skip_blank()
            tok = self.peek()
            if not (tok.kind == "IDENT" and _is_block_name(tok.text)):
                break
            if n.kind not in BLOCK_OWNERS:
                raise self.lx.error(f"{n.kind} cannot own blocks", tok)
            self.lx.next()
            self.sub_block(n)
        for i, (name, t, tok) in enumerate(outs):
            if t is None:  # torch's rule: the schema's return type, else what the node builds
                t = infer_output_type(n, i, len(outs))
            self.define(tok, name, n.add_output(t, name))
        if n.kind == "prim::Constant":
            self.check_constant(n, ktok)
        self.check_block_arity(n, ktok)

    def sub_block(self, n: Node) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.lx.error("blocks nested too deeply")
        b = n.add_block()
        self.scopes.append({})
        self.expect("(")
        for i, (name, t, tok) in enumerate(self.decl_list(")")):
            if t is None:
                t = infer_block_input_type(n, i)
            self.define(tok, name, b.add_input(t, name))
        self.expect(":")
        self.accept("COMMENT")
        self.end_of_line()
        self.body(b)
        self.expect("ARROW", "'-> (...)' ending the block")
        for v in self.value_list():
            b.register_output(v)
        self.accept("COMMENT")
        self.end_of_line()
        self.scopes.pop()
        self.depth -= 1

    def check_block_arity(self, n: Node, tok: Token) -> None:
        nout = len(n.outputs)
        if n.kind == "prim::If":
            if len(n.blocks) != 2:
                raise self.lx.error(f"prim::If needs 2 blocks, got {len(n.blocks)}", tok)
            if len(n.inputs) != 1:
                raise self.lx.error(f"prim::If takes 1 condition, got {len(n.inputs)} inputs", tok)
            _check_type(self, tok, "prim::If condition", n.inputs[0], BOOL)
            for i, b in enumerate(n.blocks):
                if b.inputs or len(b.outputs) != nout:
                    raise self.lx.error(f"block{i} of prim::If must take no inputs and return {nout} "
                                        f"values (the node's outputs), not {len(b.outputs)}", tok)
        elif n.kind == "prim::Loop":
            if len(n.blocks) != 1:
                raise self.lx.error(f"prim::Loop needs 1 block, got {len(n.blocks)}", tok)
            b = n.blocks[0]
            if len(n.inputs) != nout + 2 or len(b.inputs) != nout + 1 or len(b.outputs) != nout + 1:
                raise self.lx.error(
                    f"prim::Loop with {nout} carried values needs {nout + 2} inputs (trip count, "
                    f"condition, carried), a block with {nout + 1} inputs and {nout + 1} outputs; got "
                    f"{len(n.inputs)}, {len(b.inputs)}, {len(b.outputs)}", tok)
            _check_type(self, tok, "prim::Loop trip count", n.inputs[0], INT)
            _check_type(self, tok, "prim::Loop condition", n.inputs[1], BOOL)
            _check_type(self, tok, "prim::Loop body condition", b.outputs[0], BOOL)

    # -- attributes -----------------------------------------------------------------
    def attributes(self, n: Node) -> None:
        self.expect("[")
        while True:
            self.skip_nl()
            tok = self.expect("IDENT", "an attribute name")
            if tok.text in n.attrs:
                raise self.lx.error(f"attribute {tok.text} given twice", tok)
            self.expect("=")
            if n.kind == "prim::Constant" and tok.text == "value":
                tensor = self.tensor_literal()
                if tensor is not None:
                    n.attrs["tensor"] = tensor
                else:
                    n.attrs["value"] = self.literal()
            else:
                n.attrs[tok.text] = self.literal()
            self.skip_nl()
            if self.accept("]"):
                return
            self.expect(",", "',' or ']'")

    def tensor_literal(self) -> str | None:
        """A tensor value as torch prints it (``<Tensor>``, ``{0.5}``, a dump): kept as text."""
        self.lx.peek()  # skip whitespace
        pos = self.lx.peek().pos
        text = self.lx.text
        if text.startswith("<Tensor>", pos):
            self.lx.seek(pos + len("<Tensor>"))
            return UNKNOWN_TENSOR
        end = _scalar_tensor_end(text, pos)
        if end is not None:
            self.lx.seek(end)
            return text[pos:end]
        end = _tensor_dump_end(text, pos)
        if end is not None:
            self.lx.seek(end)
            return UNKNOWN_TENSOR
        return None

    def check_constant(self, n: Node, tok: Token) -> None:
        if len(n.outputs) != 1 or n.inputs or n.blocks:
            raise self.lx.error("prim::Constant has no inputs and exactly one output", tok)
        if n.output.type == FUNCTION:  # torch's function constants: [name="relu", ...]
            return
        if set(n.attrs) - {"value", "param", "tensor"} or len(n.attrs) > 1:
            raise self.lx.error("prim::Constant takes one attribute: value= or param=", tok)
        t = n.output.type
        if "param" in n.attrs:
            name = n.attrs["param"]
            if not isinstance(name, str):
                raise self.lx.error("param= takes a string (the parameter's name)", tok)
            if not isinstance(t, TensorType):
                raise self.lx.error(f"a param constant must have a tensor type, not {t}", tok)
            if self.params is not None:
                if name not in self.params:
                    raise self.lx.error(f"parameter {name!r} is not in the given params", tok)
                value = self.params[name]
                if is_quantized(t.dtype):
                    value = self.quantized_param(name, value, t, tok)
                n.attrs["value"] = value
            return
        if "tensor" in n.attrs:
            if not isinstance(t, TensorType):
                raise self.lx.error(f"a tensor constant must have a tensor type, not {t}", tok)
            return
        if "value" not in n.attrs:
            if t != NONE and not isinstance(t, OptionalType):
                raise self.lx.error(f"prim::Constant() without value= must be NoneType, not {t}", tok)
            return
        try:
            n.attrs["value"] = coerce_constant(n.attrs["value"], t)
        except TypeError as e:
            raise self.lx.error(f"constant does not match its type {t}: {e}", tok) from None

    def quantized_param(self, name: str, value: Any, t: TensorType, tok: Token):
        """A quantized parameter: its stored integers (as a file holds them) with the parameters of
        its declared type."""
        import numpy as np

        from ..qarray import QuantizedArray

        if t.qparams is None:
            raise self.lx.error(f"quantized parameter {name!r} has no scale and zero point in its type {t}", tok)
        want = storage_dtype(t.dtype)
        if not isinstance(value, np.ndarray) or value.dtype != np.dtype(want):
            got = value.dtype if isinstance(value, np.ndarray) else type(value).__name__
            raise self.lx.error(f"quantized parameter {name!r} ({t.dtype}) must be stored as {want}, not {got}", tok)
        if t.shape is not None and tuple(t.shape) != value.shape:
            raise self.lx.error(f"parameter {name!r} has shape {value.shape}, its type says {t}", tok)
        if isinstance(value, QuantizedArray) and value.qdtype == t.dtype and value.qparams == t.qparams:
            return value
        return QuantizedArray.wrap(value.view(np.ndarray), t.dtype, t.qparams)


def _check_type(p: _Parser, tok: Token, what: str, v: Value, want: Type) -> None:
    if v.type != want and not isinstance(v.type, AnyType):
        raise p.lx.error(f"{what} must be {want}, not %{v.name} : {v.type}", tok)


def parse_source_location(comment: str) -> SourceLocation | None:
    """``path/file.py:LINE[:COL]`` -> SourceLocation; None if the text is not a location."""
    parts = _source_parts(comment.strip())
    if parts is None:
        return None
    return SourceLocation(parts[0], int(parts[1]), int(parts[2]) if parts[2] else None)
