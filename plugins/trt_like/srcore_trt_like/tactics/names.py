"""Rules on tactic names shared by the candidates and the engine options' list of known names
(:func:`srcore_trt_like.options.tactic_names`)."""
from __future__ import annotations


def int8_reuses(conv_tactic: str) -> bool:
    """Whether an int8 conv offers float conv tactic ``conv_tactic`` on its shifted integers (as
    ``int8_<name>``; exact while the partial sums stay below 2^24): not Winograd (its transforms
    are not integer sums), ``simd_direct`` or the OpenBLAS team variants."""
    return not conv_tactic.startswith(("winograd", "simd")) and not conv_tactic.endswith("_team")
