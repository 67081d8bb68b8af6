"""pytest-xdist's ``--dist loadscope`` with the slowest modules handed out first (``conftest.py``'s
``pytest_xdist_make_scheduler``; docs/testing.md).

xdist hands out whole modules (each runs on one worker, in file order), by default in decreasing
number of tests. The suite's slowest modules have few tests (a handful of models or documents, each
compiling kernels), so they came last, and the pass ended with one worker finishing them while the
other sat idle. Handing the longest first (largest-first list scheduling) leaves the short modules
to even the workers out at the end. Nothing else changes: a module still runs whole on one worker, in
file order, with its module fixtures and clusters started once and its seeded data as in one process.
"""
from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

#: Seconds the slowest modules take in the first pass of a fresh clone (cold kernel caches, one thread
#: per worker, Intel SPR 2 vCPUs), estimated: the CI log's 30 slowest tests (2026-11-29) summed per
#: module, plus a share for their other tests, and cold one-process runs of the trt_like modules
#: (``--durations=0``, 2026-11-29: conformance 387 s, parity 456 s before its ``FULL_ONLY`` models
#: went behind ``full``, ONNX BERTs 75 s, segment 66 s, parallel 35 s, dense routing 28 s; most of it
#: numba compiles, which the first module to need a kernel pays). Only the order matters: these go
#: first, the longest first; every other module follows in xdist's order. Refresh from a run with
#: ``--durations=0``.
SLOW_MODULES = {
    "tests/parity/test_trt_like_parity.py": 400,
    "plugins/trt_like/tests/test_conformance.py": 380,
    "tests/test_frontend_onnx_msft_bert.py": 70,
    "plugins/trt_like/tests/test_segment.py": 60,
    "tests/test_docs_examples.py": 40,
    "plugins/trt_like/tests/test_parallel.py": 35,
    "tests/conformance/test_opinfo.py": 30,
    "tests/test_scaleout_ray.py": 30,
    "tests/test_passes_dense_routing.py": 25,
    "plugins/trt_like/tests/test_segment_index.py": 20,
    "plugins/cpu/tests/test_jit_fold_binning_avg_pool.py": 20,
}


class SlowFirstScheduling(LoadScopeScheduling):
    """``--dist loadscope``, the modules of :data:`SLOW_MODULES` first (the slowest first)."""

    _ordered = False

    def _assign_work_unit(self, node) -> None:
        if not self._ordered:
            self._ordered = True
            order = {scope: i for i, scope in enumerate(self.workqueue)}
            for scope in sorted(self.workqueue, key=lambda s: (-SLOW_MODULES.get(s, 0), order[s])):
                self.workqueue.move_to_end(scope)
        super()._assign_work_unit(node)
