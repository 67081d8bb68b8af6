"""The builder wing: a segment graph with concrete shapes -> an execution plan.

:mod:`.support` (the op table ``supports()`` reads and the converters follow), :mod:`.network`
(tensors and layers), :mod:`.nodes` and :mod:`.converters` (node -> layers), :mod:`.convert`
(``build_network``), :mod:`.fusion` (network rewrites), :mod:`.plan` (the generated run function
over an arena).
"""
