"""Shared set-up of the whole suite (``tests/`` and every ``plugins/*/tests/``): srcore's on-disk caches
go to one temporary directory per test session, never to the user's ``~/.cache/srcore``.

Everything srcore and its plugins cache on disk -- parsed schemas, plugin discovery, the rule index,
kernel records, attrs code, selections, trt_like's generated kernels (and numba's cache of them),
timing cache and engines, OpenVINO's compiled models -- lives under ``srcore.cachedir.cache_root()``,
which reads ``$SRCORE_CACHE_DIR`` each time it is called. ``pytest_configure`` sets it before any test
module is collected, so:

- the whole session shares one root (``<session basetemp>/srcore-cache``; with pytest-xdist the
  controller's basetemp, handed to every worker), so a cache filled by one test stays warm for the
  next, as ``~/.cache/srcore`` did;
- processes the tests start inherit it through the environment;
- a test that sets its own ``SRCORE_CACHE_DIR`` (``monkeypatch.setenv``) keeps its own;
- ``$SRCORE_TEST_CACHE_DIR``, when set, is the root instead (kept after the session): ``test.sh``
  shares one root between its two passes so that the second pass starts warm, as before.

A root the session made itself is removed when the session ends. ``tests/test_cache_isolation.py``
checks that a model run under the suite writes nothing to the home directory's cache.

Tests marked ``full`` (the rest of a heavy parametrization whose representative part runs by
default: other dtypes, tactics, executor x planner combinations, zoo models) are deselected unless
``$SRCORE_TESTS_FULL`` is ``1`` (docs/testing.md, "The default run and SRCORE_TESTS_FULL").

Under pytest-xdist each worker gets its share of the cores as its intra-op thread count
(``cores // workers``, at least 1: one thread on a 2-core machine with 2 workers), unless the user set
``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` or ``MKL_NUM_THREADS``: two workers each running 2-thread
OpenMP and BLAS teams on 2 cores made every team wait for a descheduled thread. Tests of the threaded
paths ask for their threads themselves (``threadpool_limits``), which raises the count above the share.

With ``--dist loadscope`` (test.sh) the modules known to be slowest are handed out first
(``tests/_schedule.py``), so that the pass does not end with one worker running them alone.

``test.sh``'s second pass collects only the test files that hold a test it runs: the first pass writes
their list (``$SRCORE_TEST_WRITE_SECOND_PASS_FILES``), the second ignores every other test file
(``$SRCORE_TEST_ONLY_FILES``); collecting the ~200 files that hold only ``one_pass`` tests cost each
worker about half of its collection.

``tests/_chaos.py`` (registered here, idle unless ``$SRCORE_TEST_CHAOS`` is set) perturbs every timing
srcore decides by, to find the tests that depend on which tactic wins (docs/testing.md, "Timing chaos").
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from _worker_threads import share_cores

pytest_plugins = ("_chaos",)   # tests/ is on the path (pyproject.toml: pythonpath)

_ROOT_KEY = pytest.StashKey[Path]()
_MADE_KEY = pytest.StashKey[bool]()
_ONLY_FILES_KEY = pytest.StashKey[frozenset]()
_PASS_FILES_KEY = pytest.StashKey[dict]()
_PASS_FILE_VARIABLES = ("SRCORE_TEST_WRITE_SECOND_PASS_FILES", "SRCORE_TEST_ONLY_FILES")
_WORKERINPUT = "srcore_cache_dir"
FULL_VARIABLE = "SRCORE_TESTS_FULL"


def full_run() -> bool:
    """Whether this is the complete run (``SRCORE_TESTS_FULL=1``), not the default one."""
    return os.environ.get(FULL_VARIABLE) == "1"


# hypothesis's per-example deadline (200 ms) and its too-slow health check are timings: on a loaded 2-core CI
# machine a property test failed on them with no wrong answer (tests never depend on timing, testing.md)
settings.register_profile("srcore", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("srcore")


@pytest.hookimpl(trylast=True)   # after pytest's tmpdir plugin has set up the session's basetemp
def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        share_cores(workerinput)
    root, made = _session_cache_root(config)
    root.mkdir(parents=True, exist_ok=True)
    config.stash[_ROOT_KEY] = root
    config.stash[_MADE_KEY] = made
    os.environ["SRCORE_CACHE_DIR"] = str(root)
    # tests assert what a load does (its passes, stages, imports): a prepared-model cache filled by an
    # earlier test would skip them. tests/test_prepared_cache.py turns it on with a root of its own.
    os.environ["SRCORE_NO_PREPARED_CACHE"] = "1"
    # test.sh's file lists are this session's: taken out of the environment, so that a pytest a test starts
    # (pytester, a subprocess) neither overwrites the list nor collects by it; xdist workers get them below
    for key in _PASS_FILE_VARIABLES:
        value = workerinput.get(key) if workerinput is not None else os.environ.pop(key, None)
        if value:
            config.stash[_PASS_FILES_KEY] = {**config.stash.get(_PASS_FILES_KEY, {}), key: value}


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """The default run deselects the tests marked ``full`` (reported as deselected, not skipped)."""
    if full_run():
        return
    kept, dropped = [], []
    for item in items:
        (dropped if item.get_closest_marker("full") is not None else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_collection_finish(session: pytest.Session) -> None:
    """With ``$SRCORE_TEST_WRITE_SECOND_PASS_FILES`` set (test.sh's first pass): write there the test
    files that hold a test the second pass runs (neither ``one_pass`` nor ``perf``), one path a line.
    Every xdist worker collects the same items and writes the same list (atomically)."""
    out = session.config.stash.get(_PASS_FILES_KEY, {}).get("SRCORE_TEST_WRITE_SECOND_PASS_FILES")
    if not out or not session.items:   # xdist's controller collects nothing
        return
    files = sorted({str(item.path.resolve()) for item in session.items
                    if item.get_closest_marker("one_pass") is None and item.get_closest_marker("perf") is None})
    tmp = f"{out}.{os.getpid()}"
    Path(tmp).write_text("".join(f"{f}\n" for f in files))
    os.replace(tmp, out)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config):
    """With ``$SRCORE_TEST_ONLY_FILES`` set (test.sh's second pass): a test file not in that list is not
    collected (it holds no test the pass runs). Directories and non-test files are left to pytest."""
    listed = config.stash.get(_PASS_FILES_KEY, {}).get("SRCORE_TEST_ONLY_FILES")
    if not listed or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    keep = config.stash.get(_ONLY_FILES_KEY, None)
    if keep is None:
        keep = frozenset(Path(listed).read_text().split("\n")) - {""}
        config.stash[_ONLY_FILES_KEY] = keep
    return None if str(collection_path.resolve()) in keep else True


def _session_cache_root(config: pytest.Config) -> tuple[Path, bool]:
    """``(root, made by this session)``."""
    workerinput = getattr(config, "workerinput", None)   # an xdist worker: the controller's root
    if workerinput is not None and _WORKERINPUT in workerinput:
        return Path(workerinput[_WORKERINPUT]), False
    given = os.environ.get("SRCORE_TEST_CACHE_DIR")
    if given:
        return Path(given).resolve(), False
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is not None:
        return factory.getbasetemp() / "srcore-cache", True
    return Path(tempfile.mkdtemp(prefix="srcore-test-cache-")), True   # pytest run with -p no:tmpdir


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist: a worker uses the controller's root (not one under its own basetemp)."""
    node.workerinput[_WORKERINPUT] = str(node.config.stash[_ROOT_KEY])
    node.workerinput.update(node.config.stash.get(_PASS_FILES_KEY, {}))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """pytest-xdist's ``--dist loadscope`` with the slowest modules first (``tests/_schedule.py``); any
    other ``--dist`` as xdist has it."""
    if config.getoption("dist", None) != "loadscope":
        return None
    from _schedule import SlowFirstScheduling

    return SlowFirstScheduling(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(_MADE_KEY, False) and not hasattr(config, "workerinput"):
        shutil.rmtree(config.stash[_ROOT_KEY], ignore_errors=True)


@pytest.fixture(scope="session")
def srcore_session_cache_dir(pytestconfig: pytest.Config) -> Path:
    """The session's srcore cache root (what ``$SRCORE_CACHE_DIR`` was set to at start-up)."""
    return pytestconfig.stash[_ROOT_KEY]


@pytest.fixture(autouse=True)
def _torch_quantized_engine_kept():
    """torch's quantized engine is put back after every test: a test that sets it (qnnpack, onednn) and
    fails or forgets to restore it would otherwise change how a later test in the same worker quantizes
    its reference model (xdist hands a worker modules in orders no one-process run sees). torch is never
    imported here; test modules that use it import it at collection, before any test runs."""
    import sys

    torch = sys.modules.get("torch")
    before = torch.backends.quantized.engine if torch is not None else None
    yield
    if before is not None:
        torch.backends.quantized.engine = before
