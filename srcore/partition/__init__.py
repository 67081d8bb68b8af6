"""The partitioner: cut a prepared graph into engine segments and per-node fallback.

For every backend in the module's priority list that has an engine builder
(``srcore_engine_builders`` hook, e.g. ``trt_like``), in order:

1. mark the nodes the builder ``supports`` and that are pure (:mod:`.segments`);
2. group them into maximal runs per block; runs shorter than
   ``Options.engine_min_block_size`` stay node by node (but a short tail whose engine
   times faster at build, :mod:`.short`);
3. cut each run out as a :class:`srcore.plugin.Segment` and ask the builder for an
   engine; put one ``srcore::engine`` node in its place (:mod:`.extract`);
4. a builder that refuses (:class:`srcore.EngineBuildError`) or fails leaves the
   nodes where they were: they run one at a time on the next backends
   (automatic fallback, as TRTorch does), unless ``require_full_compilation``.

What happened to every node is in the returned :class:`PartitionReport`
(``StaticModule.partition``; ``srcore inspect --partition``).
"""
from __future__ import annotations

from .build import PartitionReport, SegmentReport, partition_graph
from .extract import ENGINE_KIND

__all__ = ["partition_graph", "PartitionReport", "SegmentReport", "ENGINE_KIND"]
