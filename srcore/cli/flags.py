"""Argument types for numeric flags: a bad value is a usage error (exit 2) naming the flag.

``parser.add_argument("--rounds", type=positive_int, default=5)``: argparse
prints ``srcore bench: error: argument --rounds: must be an integer >= 1, not '0'``.
Every numeric flag of every subcommand uses one of these (a flag whose 0 or -1
meant "automatic" takes ``None`` as its default instead).
"""
from __future__ import annotations

import argparse
import math
from typing import Callable


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, not {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, not {text!r}")
        return value

    parse.__name__ = f"integer >= {low}"  # what argparse names in its own messages
    return parse


def float_in(low: float, high: float = math.inf, *, low_open: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite float in ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    bound = f"{'>' if low_open else '>='} {low:g}" + (f" and <= {high:g}" if high != math.inf else "")

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number {bound}, not {text!r}") from None
        if not math.isfinite(value) or value < low or (low_open and value == low) or value > high:
            raise argparse.ArgumentTypeError(f"must be a number {bound}, not {text!r}")
        return value

    parse.__name__ = f"number {bound}"
    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)
positive_float = float_in(0.0, low_open=True)
