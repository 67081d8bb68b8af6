"""Iterating torch's OpInfo samples without the costs torch's test harness adds outside its own tests.

torch's sample iterator (``TrackedInputIter``, torch.testing._internal.common_utils) does two things
per use that cost far more than the samples in a large pytest process, and neither matters here:

- on creation it looks for the calling ``unittest.TestCase`` with ``inspect.stack()``, which reads
  every frame's source file and scans ``sys.modules`` (there is no TestCase here: it finds None);
- before every sample it reseeds with ``set_rng_seed`` -> ``torch.manual_seed``, which also queues
  the seed for CUDA, XPU and MTIA; without those devices initialized each queueing records
  ``traceback.format_stack()`` of the ~50 pytest frames: ~10 ms a sample, about three quarters of
  test_opinfo_conformance's 35,000 samples.

:func:`quick_samples` replaces the first by ``None`` (what it returns here) and the second by the
same seeding of the generators CPU samples draw from (torch's CPU generator, ``random``, numpy's
global state), so every sample is the same tensor as before.
"""
from __future__ import annotations

import contextlib
import random

import numpy as np
import torch


def _seed_cpu(seed=None):
    """``common_utils.set_rng_seed`` for CPU samples: the CPU generator ``torch.manual_seed`` seeds
    (it returns ``default_generator.manual_seed(seed)``), ``random`` and numpy, as it does."""
    from torch.testing._internal import common_utils

    seed = common_utils.SEED if seed is None else seed
    torch.default_generator.manual_seed(int(seed))
    random.seed(seed)
    if common_utils.TEST_NUMPY:
        np.random.seed(seed)


@contextlib.contextmanager
def quick_samples():
    """OpInfo sample iteration without the TestCase search and the accelerator seed queueing."""
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core as opinfo_core

    # extract_test_fn is bound in both modules (opinfo.core imports it by name): patch both;
    # set_rng_seed is looked up in common_utils by the iterator's __next__
    saved = [(m, "extract_test_fn", m.extract_test_fn) for m in (common_utils, opinfo_core)]
    saved.append((common_utils, "set_rng_seed", common_utils.set_rng_seed))
    for m, name, _ in saved:
        setattr(m, name, (lambda: None) if name == "extract_test_fn" else _seed_cpu)
    try:
        yield
    finally:
        for m, name, fn in saved:
            setattr(m, name, fn)
