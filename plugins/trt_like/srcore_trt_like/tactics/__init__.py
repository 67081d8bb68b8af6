"""The tactics wing: for every layer, which implementation runs it.

:mod:`.records` (``Tactic``, ``Candidate``, ``Kernel``), :mod:`.table` (THE table of tactic
records), :mod:`.choose` (per layer: filter, time, rank, the timing cache), :mod:`.timing` (the one
timing algorithm), :mod:`.timing_cache`, and the candidates of each family: :mod:`.conv`,
:mod:`.conv_pool`, :mod:`.mkl`, :mod:`.nn`, :mod:`.pointwise`, :mod:`.numpy_layers`; :mod:`.names`: rules on tactic
names shared with the engine options.
"""
