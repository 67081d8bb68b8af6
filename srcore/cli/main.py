"""The ``srcore`` entry point: builds the argparse parser from subcommand modules and plugins.

Each core subcommand is a module ``srcore/cli/<module>.py`` listed in
``SUBCOMMANDS`` that defines ``NAME``, ``HELP``, ``configure_parser(parser)``
and ``run(args) -> int``. Adding one is adding its module name below. Plugins
add subcommands through the ``srcore_subcommands`` hook.

Exit codes (:mod:`srcore.cli.errors`): 0 ok, 1 user error (a ``srcore.SrcoreError``),
2 usage error, 3 internal error (a bug). Errors go to stderr as one message plus
one hint line; ``SRCORE_DEBUG=1`` shows the traceback instead. Every subcommand
also takes ``-v/--verbose`` (logging, :mod:`srcore.log`) and ``-q/--quiet`` (no
progress bars, :mod:`srcore.progress`). See docs/cli.md.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
import warnings

from . import errors as cli_errors

#: core subcommand modules, in ``srcore --help`` order; a module that does not exist yet is skipped
SUBCOMMANDS = ["convert", "run", "bench", "inspect", "check", "build", "quantize", "batch", "serve", "list_ops", "plugins",
               "select",
               "demo"]


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with a usage error printed as ``usage``, ``PROG: error: ...`` and one hint line (exit 2)."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(cli_errors.EXIT_USAGE, f"{self.prog}: error: {message}\n"
                  f"hint: '{self.prog} --help' describes every option\n")


def _global_options(suppress: bool) -> ArgumentParser:
    """-v/-q, accepted before and after the subcommand (the subcommand's copy does not reset them)."""
    p = ArgumentParser(add_help=False)
    d = (lambda v: argparse.SUPPRESS) if suppress else (lambda v: v)
    p.add_argument("-v", "--verbose", action="count", default=d(0),
                   help="log what srcore does to stderr (-v: load stages and times, fallbacks; -vv: also every "
                   "dispatch choice); also SRCORE_LOG=info|debug")
    p.add_argument("-q", "--quiet", action="store_true", default=d(False), help="no progress bars")
    return p


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
        pm.load_all()  # every installed plugin's subcommands, with SRCORE_SELECTION too
        subs = pm.registry.subcommands
    except Exception:  # reported by `srcore plugins`
        if _debug():
            traceback.print_exc()
        return []
    out = []
    for name, sub in sorted(subs.items()):
        if name in taken:
            pm.reject(sub.provider.name, f"subcommand {name!r} is a core srcore command")
            continue
        out.append(sub)
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="srcore", parents=[_global_options(False)],
                            description="srcore: a static inference runtime for graph models, on numpy, with "
                            "plugin backends. Exit codes: 0 ok, 1 error, 2 usage error, 3 internal error.")
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"srcore {__version__}")
    parser.subcommand_parsers = {}
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    subs.required = True
    taken = set()
    common = _global_options(True)
    for mod in _core_modules():
        p = subs.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP, parents=[common])
        mod.configure_parser(p)
        p.set_defaults(_run=mod.run)
        taken.add(mod.NAME)
        parser.subcommand_parsers[mod.NAME] = p
    for sub in _plugin_subcommands(taken):
        p = subs.add_parser(sub.name, help=f"{sub.summary} [{sub.provider}]", description=sub.summary,
                            parents=[common])
        sub.configure_parser(p)
        p.set_defaults(_run=sub.run)
        parser.subcommand_parsers[sub.name] = p
    return parser


def _setup(args) -> None:
    """Logging and progress bars, as the global flags and the environment ask."""
    from .. import log, progress

    log.configure(log.level_from(getattr(args, "verbose", 0), getattr(args, "quiet", False)))
    progress.enable(not getattr(args, "quiet", False) and getattr(args, "format", None) != "json")


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """srcore's own warnings (``srcore.SrcoreWarning``) as ``srcore: warning: ...`` lines, not Python's
    ``file:line: Category:`` form; other warnings as Python shows them."""
    from ..errors import SrcoreWarning

    if issubclass(category, SrcoreWarning):
        import logging

        logging.getLogger("srcore.cli").warning("%s", message)
    else:
        _python_showwarning(message, category, filename, lineno, file, line)


_python_showwarning = warnings.showwarning


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the subcommand; returns the exit code (see :mod:`srcore.cli.errors`)."""
    from .. import log

    # building the parser loads the plugins (their subcommands): log that too when asked
    log.configure(log.level_from(_count_verbose(sys.argv[1:] if argv is None else argv)))
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
        if extra:  # reported by the subcommand's parser, whose usage says what it takes
            parser.subcommand_parsers.get(args.command, parser).error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help, --version (0) or a usage error (2)
        return int(exc.code or 0)
    except Exception as exc:  # a broken subcommand module or plugin parser
        if _debug():
            raise
        return cli_errors.report(exc)
    shown = warnings.showwarning
    try:
        _setup(args)
        warnings.showwarning = _show_warning
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return cli_errors.EXIT_INTERRUPTED
    except BrokenPipeError:  # `srcore list-ops | head`
        _silence_stdout()
        return 0
    except cli_errors.UsageError as exc:
        return cli_errors.report_usage(exc, f"srcore {args.command}")
    except Exception as exc:
        if _debug():
            raise
        return cli_errors.report(exc, command=args.command)
    finally:
        from .. import progress

        progress.enable(False)
        warnings.showwarning = shown


def _count_verbose(argv) -> int:
    n = 0
    for a in argv:
        if a == "--":
            break
        if a == "--verbose":
            n += 1
        elif a.startswith("-") and not a.startswith("--") and set(a[1:]) == {"v"}:
            n += len(a) - 1
    return n


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (tests): nothing to flush
        pass


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """Left-aligned columns separated by two spaces (the last column is not padded)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for r in [header, *rows]:
        cells = [str(c).ljust(w) for c, w in zip(r[:-1], widths)] + [str(r[-1])]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
