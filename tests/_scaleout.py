"""Models and data for the scale-out tests, each with a numpy reference computed independently of srcore."""
from __future__ import annotations

import socket
from pathlib import Path

import numpy as np

import srcore
from srcore.model import Model

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "examples" / "digits" / "digits.srm"

_RNG = np.random.default_rng(7)
W = _RNG.standard_normal((3, 4)).astype(np.float32)
BIAS = _RNG.standard_normal(3).astype(np.float32)

#: two inputs, two outputs: y = relu(a @ W.T + bias) + b, z = a * 2 (rows: the symbolic dim "batch")
TWO_BY_TWO = """graph(%a : Float(batch, 4), %b : Float(batch, 3)):
  %w : Float(3, 4) = prim::Constant[param="w"]()
  %bias : Float(3) = prim::Constant[param="bias"]()
  %h : Tensor = aten::linear(%a, %w, %bias)
  %r : Tensor = aten::relu(%h)
  %one : int = prim::Constant[value=1]()
  %y : Tensor = aten::add(%r, %b, %one)
  %two : float = prim::Constant[value=2.]()
  %z : Tensor = aten::mul(%a, %two)
  return (%y, %z)
"""


def two_by_two(rows: str | int = "batch", tag: str = "") -> Model:
    """The two-input, two-output model; ``rows`` fixes the first dimension when an int; a ``tag``
    (metadata) makes a file of another checksum (workers cache models by checksum)."""
    text = TWO_BY_TWO.replace("batch", str(rows))
    return Model.from_graph(srcore.parse_graph(text, params={"w": W, "bias": BIAS}), metadata={"tag": tag} if tag else None)


def two_by_two_reference(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = a.astype(np.float32)
    return np.maximum(a @ W.T + BIAS, 0) + b.astype(np.float32), a * 2


#: one int64 input of indices into a 5-row table: out-of-range values fail in the kernel (a KernelError)
LOOKUP = """graph(%i : Long(batch)):
  %t : Float(5, 2) = prim::Constant[param="table"]()
  %zero : int = prim::Constant[value=0]()
  %y : Tensor = aten::index_select(%t, %zero, %i)
  return (%y)
"""
TABLE = np.arange(10, dtype=np.float32).reshape(5, 2)


def lookup() -> Model:
    return Model.from_graph(srcore.parse_graph(LOOKUP, params={"table": TABLE}))


def save(model: Model, path: Path) -> str:
    srcore.save(model, str(path))
    return str(path)


def data(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((rows, 4)).astype(np.float32), rng.standard_normal((rows, 3)).astype(np.float32)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound then released)."""
    return free_port()
