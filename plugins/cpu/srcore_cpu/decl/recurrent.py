"""Kernel declarations of the recurrent family: lstm/gru/rnn (.input, packed .data) and the cells."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import ANY, FLOATS, family

_k = family("recurrent")
_cell = family("recurrent_cell")

KERNELS: list[Kernel] = [
    # the matchers give every node a kernel of its own, holding that node's prepared weights
    *(_k(f"aten::{mode}.input", f"{mode}_input", FLOATS, matcher="recurrent_matcher")
      for mode in ("lstm", "gru", "rnn_tanh", "rnn_relu")),
    *(_k(f"aten::{mode}.data", f"{mode}_data", ("float32", "float64", "int64"), matcher="recurrent_matcher")
      for mode in ("lstm", "gru", "rnn_tanh", "rnn_relu")),
    *(_cell(f"aten::{mode}_cell", f"{mode}_cell", FLOATS, matcher="cell_matcher")
      for mode in ("lstm", "gru", "rnn_tanh", "rnn_relu")),
]

# the tracer records nn.LSTMCell/GRUCell as their decomposition, which splits the gates with these
KERNELS += [
    _k("aten::unsafe_chunk", "unsafe_chunk", ANY, kind="native"),
    _k("aten::unsafe_split.Tensor", "unsafe_split", ANY, kind="native"),
    _k("aten::unsafe_split_with_sizes", "unsafe_split", ANY, kind="native"),
]
