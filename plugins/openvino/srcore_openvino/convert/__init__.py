"""Segment graph -> OpenVINO model: the converter table (:mod:`.table`), filled by one module
per op family, and the model builder (:mod:`.model`)."""
from . import attention, conv, layout, matrix, norm, pointwise, reduce, resize, rnn  # noqa: F401  (fill the table)
from .table import TABLE, Rule, rule_for

__all__ = ["TABLE", "Rule", "rule_for"]
