"""``fold_cell_decompositions``: spelled-out LSTM and GRU cells become ``aten::lstm_cell`` / ``gru_cell``.

``torch.jit.trace`` records ``nn.LSTMCell`` / ``nn.GRUCell`` as their decomposition (two
``linear``, ``unsafe_chunk``, in-place ``sigmoid_`` / ``add_`` / ``mul_``, ``tanh``), and a cell
written out by hand in the same formulas is scripted as the same ops: a dozen small nodes a step,
where the cell op is one call of the compiled recurrent loop. Matched from the new state back
(commutative ``add`` / ``mul`` operands in either order, in-place or functional, ``chunk`` or
``unsafe_chunk`` on dim 1 or ONNX's equal ``Split``, torch's gate order):

* LSTM: ``gates = linear(x, W_ih, b_ih) + linear(h, W_hh, b_hh)``; ``i, f, g, o = gates.chunk(4, 1)``;
  ``c' = sigmoid(f) * c + sigmoid(i) * tanh(g)``; ``h' = sigmoid(o) * tanh(c')``;
* GRU: ``i_r, i_z, i_n = linear(x, W_ih, b_ih).chunk(3, 1)``, ``h_r, h_z, h_n`` of
  ``linear(h, W_hh, b_hh)``; ``r = sigmoid(h_r + i_r)``, ``z = sigmoid(h_z + i_z)``,
  ``n = tanh(i_n + h_n * r)``; ``h' = (h - n) * z + n``.

The uses of ``h'`` (and ``c'``) go to the cell's outputs; the decomposition is left to dead code
elimination (a part something else reads stays). Runs before constant folding, which would fold the
first step's ``linear`` of a constant initial state. Both biases or neither.
"""
from __future__ import annotations

from ..ir.constants import const_or
from ..ir.graph import Graph, Node, Value
from ..ir.types import ListType, TensorType
from .triggers import CELL_ADD, CELL_CHUNK, CELL_MUL, CELL_SIGMOID, CELL_SPLIT, CELL_SUB, CELL_TANH

__all__ = ["fold_cell_decompositions"]

_ADD, _MUL, _SUB = CELL_ADD, CELL_MUL, CELL_SUB
_SIGMOID, _TANH, _CHUNK, _SPLIT = CELL_SIGMOID, CELL_TANH, CELL_CHUNK, CELL_SPLIT


def _op(v: Value, kinds) -> Node | None:
    """``v``'s producer if its kind is one of ``kinds`` (a tensor ``add``/``sub``: alpha 1)."""
    n = v.node
    if n.kind not in kinds or len(n.outputs) != 1:
        return None
    if n.kind in _ADD + _SUB and (len(n.inputs) != 3 or const_or(n.inputs[2], None) != 1
                                   or not isinstance(n.inputs[1].type, TensorType)):
        return None
    if n.kind in _MUL and (len(n.inputs) != 2 or not isinstance(n.inputs[1].type, TensorType)):
        return None
    return n


def _pair(v: Value, kinds):
    """The two tensor operands of a commutative ``add`` / ``mul`` producing ``v``, or None."""
    n = _op(v, kinds)
    return None if n is None else (n.inputs[0], n.inputs[1])


def _unary(v: Value, kinds) -> Value | None:
    n = _op(v, kinds)
    return None if n is None or len(n.inputs) != 1 else n.inputs[0]


def _chunk_part(v: Value, chunks: int):
    """``(source, index)`` when ``v`` is part ``index`` of ``source.chunk(chunks, 1)`` (via
    ListUnpack), or of a ``split_with_sizes`` on dim 1 in ``chunks`` equal sizes (ONNX's ``Split``)."""
    unpack = v.node
    if unpack.kind != "prim::ListUnpack" or len(unpack.outputs) != chunks:
        return None
    c = unpack.inputs[0].node
    if len(c.inputs) != 3 or const_or(c.inputs[2], None) != 1:
        return None
    if c.kind in _CHUNK and const_or(c.inputs[1], None) == chunks:
        return c.inputs[0], v.offset
    sizes = const_or(c.inputs[1], None)
    if (c.kind in _SPLIT and isinstance(sizes, (list, tuple)) and len(sizes) == chunks
            and len(set(sizes)) == 1):
        return c.inputs[0], v.offset
    return None


def _linear(v: Value):
    """``(x, w, b)`` of ``v = aten::linear(x, w, b)``."""
    n = v.node
    if n.kind != "aten::linear" or len(n.inputs) != 3:
        return None
    return tuple(n.inputs)


def _parts(a: Value, b: Value, test):
    """``test(a, b)`` or ``test(b, a)``, whichever matches."""
    return test(a, b) or test(b, a)


def _state_like(state: Value, part: Value) -> bool:
    """Whether ``state`` can be the cell's state beside the gate ``part``: both (B, H) where their
    shapes are known (the formulas would broadcast a (B, 1) or (H,) state; the cell op would not)."""
    a, b = getattr(state.type, "shape", None), getattr(part.type, "shape", None)
    if a is None or b is None:
        return True
    return len(a) == len(b) == 2 and all(x == y for x, y in zip(a, b) if isinstance(x, int) and isinstance(y, int))


def _is_none(v: Value) -> bool:
    return v.node.kind == "prim::Constant" and not v.node.attrs and not isinstance(v.type, TensorType)


def _cell_args(ih, hh):
    """``(w_ih, w_hh, b_ih, b_hh)`` of the two linears, None unless both have biases or neither."""
    (_, w_ih, b_ih), (_, w_hh, b_hh) = ih, hh
    if _is_none(b_ih) != _is_none(b_hh):
        return None
    return w_ih, w_hh, b_ih, b_hh


def _match_lstm(h_new: Value):
    """``(c' node, x, h, c, weights)`` if ``h_new`` is an LSTM cell's new hidden state."""
    ops = _pair(h_new, _MUL)
    if ops is None:
        return None

    def out_gate(o_pre, tc):
        c_new = _unary(tc, _TANH)
        o = _unary(o_pre, _SIGMOID)
        return None if c_new is None or o is None else (o, c_new)
    got = _parts(*ops, out_gate)
    if got is None:
        return None
    o, c_new = got
    terms = _pair(c_new, _ADD)
    if terms is None:
        return None

    def state_terms(fc, ig):
        fc_ops, ig_ops = _pair(fc, _MUL), _pair(ig, _MUL)
        if fc_ops is None or ig_ops is None:
            return None
        if fc.node.kind == "aten::mul_":   # would write the state the cell reads
            return None
        forget = _parts(*fc_ops, lambda f, c: (_unary(f, _SIGMOID), c) if _unary(f, _SIGMOID) is not None else None)
        inputs = _parts(*ig_ops, lambda i, g: (_unary(i, _SIGMOID), _unary(g, _TANH))
                        if _unary(i, _SIGMOID) is not None and _unary(g, _TANH) is not None else None)
        return None if forget is None or inputs is None else (forget, inputs)
    got = _parts(*terms, state_terms)
    if got is None:
        return None
    (f, c), (i, g) = got
    if not _state_like(c, f):
        return None
    parts = [_chunk_part(v, 4) for v in (i, f, g, o)]
    if any(p is None for p in parts) or [p[1] for p in parts] != [0, 1, 2, 3] \
            or any(p[0] is not parts[0][0] for p in parts):
        return None
    lin = _pair(parts[0][0], _ADD)
    if lin is None:
        return None
    ih_hh = _parts(*lin, lambda a, b: (_linear(a), _linear(b)) if _linear(a) and _linear(b) else None)
    if ih_hh is None:
        return None
    # the state's linear is the one with a (4H, H) weight; if both are (input size H), the gates
    # are the same sum either way round
    for ih, hh in (ih_hh, ih_hh[::-1]):
        if _square_in(hh, 4):
            weights = _cell_args(ih, hh)
            if weights is not None:
                return c_new.node, ih[0], hh[0], c, weights
    return None


def _square_in(lin, gates: int) -> bool:
    """Whether ``lin``'s weight is ``(gates * H, H)`` (known shape): the hidden state's linear."""
    shape = getattr(lin[1].type, "shape", None)
    return (shape is not None and len(shape) == 2 and all(isinstance(d, int) for d in shape)
            and shape[0] == gates * shape[1])


def _match_gru(h_new: Value):
    """``(x, h, weights)`` if ``h_new`` is a GRU cell's new hidden state."""
    ops = _pair(h_new, _ADD)
    if ops is None:
        return None

    def blend(dz, n):
        d = _pair(dz, _MUL)
        if d is None:
            return None

        def diff(hn, z):
            s = _op(hn, _SUB)
            if s is None or s.inputs[1] is not n:
                return None
            zz = _unary(z, _SIGMOID)
            return None if zz is None else (s.inputs[0], zz)
        got = _parts(*d, diff)
        return None if got is None else (got[0], got[1], n)
    got = _parts(*ops, blend)
    if got is None:
        return None
    h, z_pre, n = got
    if not _state_like(h, n):
        return None
    n_pre = _unary(n, _TANH)
    if n_pre is None:
        return None
    n_ops = _pair(n_pre, _ADD)
    if n_ops is None:
        return None

    def candidate(i_n, hr):
        m = _pair(hr, _MUL)
        if m is None:
            return None
        got = _parts(*m, lambda hn, r: (hn, _unary(r, _SIGMOID)) if _unary(r, _SIGMOID) is not None else None)
        return None if got is None else (i_n, got[0], got[1])
    got = _parts(*n_ops, candidate)
    if got is None:
        return None
    i_n, h_n, r_pre = got
    r_ops, z_ops = _pair(r_pre, _ADD), _pair(z_pre, _ADD)
    if r_ops is None or z_ops is None:
        return None
    parts = {}
    for name, v in (("i_n", i_n), ("h_n", h_n), *zip(("r0", "r1"), r_ops), *zip(("z0", "z1"), z_ops)):
        p = _chunk_part(v, 3)
        if p is None:
            return None
        parts[name] = p
    xs, hs = parts["i_n"][0], parts["h_n"][0]
    if xs is hs or parts["i_n"][1] != 2 or parts["h_n"][1] != 2:
        return None
    for gate, k in (("r", 0), ("z", 1)):
        got = {parts[gate + "0"], parts[gate + "1"]}
        if got != {(xs, k), (hs, k)}:
            return None
    ih, hh = _linear(xs), _linear(hs)
    if ih is None or hh is None or hh[0] is not h or not _square_in(hh, 3):
        return None
    weights = _cell_args(ih, hh)
    return None if weights is None else (ih[0], h, weights)


def fold_cell_decompositions(graph: Graph) -> bool:
    """Replace every matched decomposition by its cell op; True if any was."""
    changed = False
    for node in list(graph.all_nodes()):
        if node.owning_block is None or len(node.outputs) != 1:
            continue
        out = node.outputs[0]
        if node.kind in _MUL:
            m = _match_lstm(out)
            if m is None:
                continue
            c_node, x, h, c, weights = m
            g = graph
            hx = g.create("prim::ListConstruct", [h, c], [ListType(TensorType(getattr(h.type, "dtype", None)))],
                          source=node.source)
            hx.insert_before(c_node)
            cell = g.create("aten::lstm_cell", [x, hx.output, *weights], [out.type, c_node.outputs[0].type],
                            source=node.source)
            cell.insert_before(c_node)
            c_node.outputs[0].replace_all_uses_with(cell.outputs[1])
            out.replace_all_uses_with(cell.outputs[0])
            changed = True
        elif node.kind in _ADD:
            m = _match_gru(out)
            if m is None:
                continue
            x, h, weights = m
            cell = graph.create("aten::gru_cell", [x, h, *weights], [out.type], source=node.source)
            cell.insert_before(node)
            out.replace_all_uses_with(cell.outputs[0])
            changed = True
    return changed
