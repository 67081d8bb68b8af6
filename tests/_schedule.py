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

#: CPU seconds the slowest modules take in the first pass of a fresh clone, measured (``tools/module_cpu.py``:
#: the whole default first pass, 2 workers, ``--dist loadscope`` in this order, fresh ``NUMBA_CACHE_DIR`` and
#: cache root, one thread per worker, AMD EPYC 2 vCPUs, 2026-11-29; most of it numba compiles, which the first
#: module to need a kernel pays). ``test_scaleout_ray.py``'s figure is its wall (CI logs): its Ray processes'
#: CPU is not the worker's. Only the order matters: these go first, the longest first; every other module
#: follows in xdist's order. Refresh from a run with ``-p module_cpu`` (docs/testing.md).
SLOW_MODULES = {
    "tests/parity/test_trt_like_parity.py": 320,
    "plugins/trt_like/tests/test_conformance.py": 251,
    "tests/parity/test_model_zoo.py": 76,
    "tests/test_frontend_onnx_msft_bert.py": 54,
    "plugins/trt_like/tests/test_attention_fusion.py": 43,
    "plugins/trt_like/tests/test_segment.py": 35,
    "tests/parity/test_family_models.py": 33,
    "tests/parity/test_bench_models.py": 32,
    "tests/test_passes_dense_routing.py": 30,
    "tests/parity/test_heldout11_zoo.py": 28,
    "plugins/trt_like/tests/test_pointwise.py": 24,
    "tests/parity/test_heldout12_zoo.py": 24,
    "plugins/trt_like/tests/test_parallel.py": 23,
    "tests/parity/test_heldout9_zoo.py": 23,
    "tests/test_docs_examples.py": 23,
    "tests/parity/test_heldout8_zoo.py": 22,
    "tests/parity/test_heldout_zoo.py": 22,
    "plugins/trt_like/tests/test_nchwc_split.py": 22,
    "tests/parity/test_heldout10_zoo.py": 21,
    "plugins/cpu/tests/test_jit_fold_binning_avg_pool.py": 21,
    "tests/test_scaleout_ray.py": 20,
    "plugins/trt_like/tests/test_data_layers.py": 19,
    "tests/conformance/test_opinfo.py": 16,
    "plugins/trt_like/tests/test_segment_index.py": 12,
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
