"""``srcore_example`` (examples/plugin-example) imported from the checkout, without installing it.

The package is loaded by file location instead of putting its directory on ``sys.path``: a
directory on ``sys.path`` that holds an egg-info (left by a local ``pip install -e``) would make
every plugin manager of the process discover it as an installed plugin as well.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "examples" / "plugin-example" / "srcore_example"


def import_example():
    """The ``srcore_example`` module (its kernels and rules import lazily, as ``srcore_example.<module>``)."""
    mod = sys.modules.get("srcore_example")
    if mod is not None:
        return mod
    spec = importlib.util.spec_from_file_location("srcore_example", PACKAGE / "__init__.py",
                                                  submodule_search_locations=[str(PACKAGE)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["srcore_example"] = mod
    spec.loader.exec_module(mod)
    return mod
