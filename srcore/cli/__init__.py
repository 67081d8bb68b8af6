"""srcore's command line: ``srcore SUBCOMMAND ...`` (one module per subcommand). See docs/cli.md.

The entry point is ``srcore.cli:main``. The submodule ``srcore.cli.main`` is
imported here first and the name ``main`` bound to the function afterwards:
otherwise importing the submodule later would replace the package attribute
``main`` (the function) with the module.
"""
from __future__ import annotations

from . import main as _main_module  # noqa: F401  (see above: must come before the next line)
from .main import main

__all__ = ["main"]
