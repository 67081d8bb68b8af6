"""Errors of the trt_like tactics: every one is a :class:`srcore.errors.SrcoreError`."""
from __future__ import annotations

from srcore.plugin import SrcoreError


class TacticSpecError(SrcoreError):
    """A conv/pool spec a tactic cannot compute (bad sizes, channels not divisible by groups,
    an algorithm that does not apply to the shape), or a call whose arrays contradict the spec;
    the message names the layer field and the value at fault."""
