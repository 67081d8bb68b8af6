"""srcore's command line: ``srcore SUBCOMMAND ...`` (one module per subcommand). See docs/cli.md."""
from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run the ``srcore`` command; returns the exit code (0 ok, 1 srcore error, 2 usage)."""
    from .main import main as _main

    return _main(argv)


__all__ = ["main"]
