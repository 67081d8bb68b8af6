"""Every error srcore raises on bad input derives from :class:`SrcoreError`.

Each error names the culprit in the user's terms: a file position for text,
the node and its source for graphs, the input name for runtime inputs, the
plugin, distribution and version for plugins.
"""
from __future__ import annotations

__all__ = [
    "SrcoreError",
    "SchemaError",
    "DeclarationError",
    "GraphParseError",
    "VerificationError",
    "ShapeError",
    "UnsupportedOpError",
    "UnknownBackendError",
    "PluginError",
    "RegistrationError",
    "SrcoreInputError",
    "SrcoreFormatError",
    "ConversionError",
    "PassError",
    "MemoryPlanError",
    "KernelError",
    "EngineBuildError",
    "EngineOptionError",
    "SelectionError",
    "QuantizationError",
    "ClusterError",
    "SrcoreWarning",
]


class SrcoreError(Exception):
    """Base class of every error srcore raises on bad input or an unsupported model."""


class SchemaError(SrcoreError):
    """A function schema that does not parse; names the column and what was expected."""

    def __init__(self, message: str, *, text: str | None = None, column: int | None = None,
                 expected: str | None = None, source: str | None = None):
        self.text = text
        self.column = column
        self.expected = expected
        self.source = source
        parts = []
        if source:
            parts.append(f"{source}: ")
        parts.append(message)
        if column is not None and text is not None:
            parts.append(f" at column {column}\n  {text}\n  {' ' * (column - 1)}^")
        super().__init__("".join(parts))


class DeclarationError(SchemaError):
    """A malformed op declaration file (unknown keys, bad YAML, a bad schema inside)."""


class GraphParseError(SrcoreError):
    """IR text that does not parse or type-check; names line, column and the offending token."""

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None,
                 token: str | None = None, filename: str | None = None, source_line: str | None = None):
        self.line = line
        self.column = column
        self.token = token
        self.filename = filename
        where = filename or "<graph>"
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        text = f"{where}: {message}"
        if token is not None:
            text += f" (at {token!r})"
        if source_line is not None and column is not None:
            text += f"\n  {source_line}\n  {' ' * (column - 1)}^"
        super().__init__(text)


class VerificationError(SrcoreError):
    """A graph that breaks an IR invariant (SSA, block arity, schema); names the node."""


class ShapeError(SrcoreError):
    """Shape/dtype propagation failed or met an op without a rule; names the node."""


class UnsupportedOpError(SrcoreError):
    """One or more nodes have no kernel on the requested backends; lists every one."""

    def __init__(self, message: str, missing: list | tuple = ()):
        self.missing = list(missing)
        super().__init__(message)


class UnknownBackendError(SrcoreError, ValueError):
    """A backend name no installed plugin provides; the message lists the installed ones."""


class PluginError(SrcoreError):
    """A plugin failed to load or registered something invalid; names plugin, version, reason."""


class RegistrationError(PluginError):
    """An invalid record from a plugin: unknown op, backend or dtype, bad kernel kind."""


class SrcoreInputError(SrcoreError, ValueError):
    """Runtime inputs that contradict the model's input specs; names the input."""


class SrcoreFormatError(SrcoreError):
    """A truncated, corrupted, tampered or unknown `.srm` file."""


class ConversionError(SrcoreError):
    """A frontend met constructs it cannot convert; lists every one."""


class PassError(SrcoreError):
    """A graph pass failed; names the pass and the node."""


class MemoryPlanError(SrcoreError):
    """A memory plan cannot hold the tensors of this run (precomputed offsets, larger input)."""


class KernelError(SrcoreError):
    """A kernel failed at run time; names the node and its source.

    ``node`` is the failing graph node once the runtime has added it (a kernel raising this
    error itself leaves it None; the runtime then re-raises with the node named).
    """

    node = None


class QuantizationError(SrcoreError, ValueError):
    """Invalid quantization parameters (a scale that is not positive and finite, a zero point
    outside its dtype's range, an axis out of range) or a quantized value where a float one
    belongs (or the reverse); names the value, node or input."""


class EngineBuildError(SrcoreError):
    """An engine builder cannot compile a segment; names the segment, the node and why.

    A builder raises it to refuse a segment: the partitioner then runs the segment's nodes
    one at a time on the next backends (automatic fallback), unless
    ``Options(require_full_compilation=True)``.
    """


class EngineOptionError(SrcoreError):
    """An engine option (``Options(engine_options=...)``, ``--engine-option``, a profile) that the
    engine builder or srcore does not know or refuses; names the option and what it accepts.
    Unlike :class:`EngineBuildError` it is not a reason to fall back: the load fails."""


class SelectionError(SrcoreError):
    """A selective-build file (``srcore select``) that is malformed, stale or names what is not installed;
    names the file, the line and the op."""


class ClusterError(SrcoreError):
    """A Ray or Dask cluster that cannot be reached, starts no worker, or loses a job; names the
    address and the cause (srcore.ray, srcore.dask, ``srcore batch``, ``srcore serve``)."""

    hint = ("is the cluster up? --address takes Ray's HOST:6379, ray://HOST:10001 or auto, or Dask's "
            "tcp://HOST:8786 (docs/scale-out.md)")


class SrcoreWarning(UserWarning):
    """Something a load or run could do only partly (an op without a shape rule, a failed plugin)."""


for _name in __all__:
    globals()[_name].__module__ = "srcore"
del _name
