"""How the ``srcore`` command fails: exit codes, usage errors, and the one-message-one-hint report.

Exit codes (the contract, docs/cli.md):

====  ==========================================================================
0     success
1     user error: bad input, a bad or corrupted model, a missing plugin, an
      output path that cannot be written (any :class:`srcore.SrcoreError`, or
      an ``OSError`` naming a file)
2     usage error: an unknown flag, a bad flag value (argparse), or flags that
      do not go together (:class:`UsageError`)
3     internal error: any other exception, a bug in srcore or a plugin
130   interrupted (Ctrl-C)
====  ==========================================================================

Every error is written to stderr as ``srcore: error: MESSAGE`` (the message may
span lines) followed by exactly one ``hint: ...`` line. The hint is the
exception's ``hint`` attribute when it has one, else the first entry of
:data:`HINTS` that the exception is an instance of. Messages never carry their
own ``hint:`` line.
"""
from __future__ import annotations

import sys

from ..errors import (ConversionError, DeclarationError, EngineBuildError, EngineOptionError, GraphParseError,
                      KernelError, MemoryPlanError, PassError, PluginError, QuantizationError, SchemaError, SelectionError, ShapeError, SrcoreError,
                      SrcoreFormatError, SrcoreInputError, UnknownBackendError, UnsupportedOpError,
                      VerificationError)

EXIT_OK = 0
EXIT_USER_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Flags that do not go together (exit 2), found after parsing; ``command`` is the subcommand."""

    def __init__(self, message: str, command: str | None = None):
        super().__init__(message)
        self.command = command


class OutputPathError(SrcoreError):
    """An output path that cannot be written (no such directory, a directory, no permission)."""

    hint = "choose a file in an existing, writable directory ('-' writes to standard output)"


#: the hint printed for an error of each kind, most specific first (the first isinstance match wins)
HINTS: list[tuple[type, str]] = [
    (UnknownBackendError, "run 'srcore plugins' to see the installed plugins and the backends they provide"),
    (UnsupportedOpError, "run 'srcore list-ops' to see which ops each installed plugin provides"),
    (PluginError, "run 'srcore plugins' to see which plugins loaded and why others failed"),
    (SrcoreFormatError, "the file is not a sound .srm model: make it again with 'srcore convert' or srcore.save "
                        "('srcore check MODEL' verifies a file)"),
    (SrcoreInputError, "'srcore check MODEL' lists the model's inputs; give them with -i NAME=FILE.npy "
                       "(NAME=VALUE for a scalar)"),
    (ConversionError, "docs/frontends.md lists what each frontend converts"),
    (GraphParseError, "docs/ir-text.md describes the IR text"),
    (DeclarationError, "docs/op-declarations.md describes declaration files"),
    (SchemaError, "docs/op-declarations.md describes the schema syntax"),
    (VerificationError, "docs/ir-text.md lists the graph invariants ('srcore inspect MODEL --no-optimize' shows "
                        "the graph as converted)"),
    (ShapeError, "the input shapes must fit the model's input specs ('srcore check MODEL' lists them)"),
    (MemoryPlanError, "--planner standard_resizing plans for every input size"),
    (PassError, "--no-optimize skips the pass pipeline"),
    (QuantizationError, "docs/quantization.md describes quantized values, their parameters and what runs "
                        "on them"),
    (SelectionError, "docs/selective-build.md describes selection files; 'srcore select' writes one for "
                     "your models"),
    (KernelError, "SRCORE_DEBUG=1 shows the kernel's traceback"),
    (EngineOptionError, "docs/trt-like.md lists trt_like's engine options and the profile syntax"),
    (EngineBuildError, "put 'cpu' after the engine backend (--backend trt_like,cpu) to run refused segments "
                       "node by node"),
    (OSError, "check the path and its permissions"),
    (SrcoreError, "'srcore COMMAND --help' describes the command; SRCORE_DEBUG=1 shows the traceback"),
]

INTERNAL_HINT = "this is a bug in srcore or a plugin; SRCORE_DEBUG=1 shows the traceback"


def hint_for(exc: BaseException, command: str | None = None) -> str:
    """The one hint line printed under ``exc`` (without the ``hint:`` prefix); ``command`` (the
    subcommand's name) fills the ``COMMAND`` of a generic hint."""
    own = getattr(exc, "hint", None)
    if isinstance(own, str) and own:
        return own
    for cls, hint in HINTS:
        if isinstance(exc, cls):
            return hint.replace("COMMAND", command) if command else hint
    return INTERNAL_HINT


def is_user_error(exc: BaseException) -> bool:
    """SrcoreErrors, and OSErrors about a named file (unreadable input, full disk), are the user's to fix."""
    return isinstance(exc, SrcoreError) or (isinstance(exc, OSError) and exc.filename is not None)


def report(exc: BaseException, file=None, command: str | None = None) -> int:
    """Print ``exc`` as one error message and one hint line; returns the exit code (1 or 3)."""
    file = file or sys.stderr
    if isinstance(exc, SrcoreError):
        print(f"srcore: error: {exc}", file=file)
        code = EXIT_USER_ERROR
    elif is_user_error(exc):
        name = exc.filename if exc.filename2 is None else f"{exc.filename} -> {exc.filename2}"
        print(f"srcore: error: {name}: {exc.strerror or exc}", file=file)
        code = EXIT_USER_ERROR
    else:
        print(f"srcore: internal error: {type(exc).__name__}: {exc}", file=file)
        print(f"hint: {INTERNAL_HINT}", file=file)
        return EXIT_INTERNAL
    print(f"hint: {hint_for(exc, command)}", file=file)
    return code


def report_usage(exc: UsageError, prog: str, file=None) -> int:
    """A usage error found after parsing, printed as argparse prints its own; returns 2."""
    file = file or sys.stderr
    print(f"{prog}: error: {exc}", file=file)
    print(f"hint: '{prog} --help' describes every option", file=file)
    return EXIT_USAGE
