"""The ``srcore`` entry point: builds the argparse parser from subcommand modules and plugins.

Each core subcommand is a module ``srcore/cli/<module>.py`` listed in
``SUBCOMMANDS`` that defines ``NAME``, ``HELP``, ``configure_parser(parser)``
and ``run(args) -> int``. Adding one is adding its module name below. Plugins
add subcommands through the ``srcore_subcommands`` hook.

Exit codes: 0 ok, 1 an error (a ``srcore.SrcoreError`` or a bug), 2 bad usage.
Errors go to stderr as one message plus a hint; ``SRCORE_DEBUG=1`` shows the
traceback instead.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from ..errors import PluginError, SrcoreError, UnsupportedOpError

#: core subcommand modules, in ``srcore --help`` order; a module that does not exist yet is skipped
SUBCOMMANDS = ["convert", "run", "bench", "inspect", "batch", "serve", "list_ops", "plugins", "demo"]

_HINTS = {
    PluginError: "run 'srcore plugins' to see which plugins loaded and why others failed",
    UnsupportedOpError: "run 'srcore list-ops' to see which ops each installed plugin provides",
}


def _debug() -> bool:
    return os.environ.get("SRCORE_DEBUG", "") not in ("", "0")


def _core_modules():
    for name in SUBCOMMANDS:
        try:
            yield importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{name}":
                raise


def _plugin_subcommands(taken: set[str]):
    """Subcommands from plugins; a plugin failure never breaks the core commands."""
    try:
        from ..plugin.manager import get_plugin_manager

        pm = get_plugin_manager()
        subs = pm.registry.subcommands
    except Exception:  # reported by `srcore plugins`
        if _debug():
            traceback.print_exc()
        return []
    out = []
    for name, sub in sorted(subs.items()):
        if name in taken:
            pm._reject(pm.report(sub.provider.name), f"subcommand {name!r} is a core srcore command")
            continue
        out.append(sub)
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="srcore", description="srcore: a static inference runtime "
                                     "for graph models, on numpy, with plugin backends.")
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"srcore {__version__}")
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    subs.required = True
    taken = set()
    for mod in _core_modules():
        p = subs.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.configure_parser(p)
        p.set_defaults(_run=mod.run)
        taken.add(mod.NAME)
    for sub in _plugin_subcommands(taken):
        p = subs.add_parser(sub.name, help=f"{sub.summary} [{sub.provider}]", description=sub.summary)
        sub.configure_parser(p)
        p.set_defaults(_run=sub.run)
    return parser


def _report(exc: BaseException) -> None:
    if isinstance(exc, SrcoreError):
        print(f"srcore: error: {exc}", file=sys.stderr)
        hint = getattr(exc, "hint", None) or next(
            (h for cls, h in _HINTS.items() if isinstance(exc, cls)), None)
    else:
        print(f"srcore: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        hint = "this is a bug in srcore or a plugin; SRCORE_DEBUG=1 shows the traceback"
    if hint and hint not in str(exc):
        print(f"hint: {hint}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the subcommand; returns the exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) or a usage error (2)
        return int(exc.code or 0)
    except Exception as exc:  # a broken subcommand module or plugin parser
        if _debug():
            raise
        _report(exc)
        return 1
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `srcore list-ops | head`
        sys.stderr.close()
        return 0
    except Exception as exc:
        if _debug():
            raise
        _report(exc)
        return 1


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """Left-aligned columns separated by two spaces (the last column is not padded)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for r in [header, *rows]:
        cells = [str(c).ljust(w) for c, w in zip(r[:-1], widths)] + [str(r[-1])]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
