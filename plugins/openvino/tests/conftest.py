"""The openvino plugin's tests share ``openvino_cases`` (graphs of one node per case); put this
directory on the import path (the suite imports test modules with ``--import-mode=importlib``)."""
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(__file__)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


import pytest


@pytest.fixture(scope="session")
def _srcore_cache_root(tmp_path_factory):
    return tmp_path_factory.mktemp("srcore-cache")


@pytest.fixture(autouse=True)
def _cache_in_tmp(monkeypatch, _srcore_cache_root):
    """Engines built by these tests cache OpenVINO's compiled models in a temporary directory,
    never in the user's ``~/.cache/srcore/openvino`` (one per test session: identical models built
    by several tests still hit the cache)."""
    monkeypatch.setenv("SRCORE_CACHE_DIR", str(_srcore_cache_root))
