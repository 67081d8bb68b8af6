"""``srcore check MODEL.srm``: is this model file sound, and can this installation run it?

Checks, in order (a failed check stops the ones that need it):

``file``
    ``srcore.load(path, verify="full")``: the container structure, the header
    checksum and the SHA-256 of every parameter byte (a flipped bit in a weight
    fails here; ``srcore.load``'s default ``verify="header"`` does not look).
    IR text and TorchScript files are parsed or converted instead (they carry
    no checksums).
``plugins``
    every op the model requires is declared by srcore or an installed plugin,
    and every plugin loaded (a failed plugin is a warning unless the model needs it).
``load``
    a ``StaticModule`` with the model options (backends, executor, planner):
    shapes propagate, every node gets a kernel, the memory plan is made.
``run`` (with ``--run``)
    one run on inputs made from the recorded input specs (or ``-i``); the
    outputs match the recorded output names; non-finite float outputs are a
    warning (random inputs may legitimately produce them).

Exit code 0 when every check passed, 1 otherwise (the failures are listed, and
the first one is printed as the error with its hint).
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable

import attrs

from ..errors import SrcoreError

NAME = "check"
HELP = "verify a model file in full (checksums of every weight), its plugins, a load, and with --run a run"


@attrs.define
class Check:
    """One check's outcome (``ok`` None: not run, because an earlier check failed)."""

    name: str
    ok: bool | None = None
    detail: str = ""
    seconds: float = 0.0
    error: BaseException | None = attrs.field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "seconds": round(self.seconds, 6)}


class CheckFailed(SrcoreError):
    """``srcore check`` found a problem; the message names the failed checks."""


def configure_parser(parser) -> None:
    from ._common import add_model_arguments
    from .flags import non_negative_int
    from .output import add_format_argument

    add_model_arguments(parser)
    parser.add_argument("--run", action="store_true", help="also run the model once on inputs made from its "
                        "recorded input specs (symbolic dims 1) or given with -i")
    parser.add_argument("-i", "--input", action="append", metavar="NAME=FILE.npy", dest="inputs",
                        help="with --run: an input (repeatable); inputs not given are random")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed of the random inputs")
    add_format_argument(parser, what="the checks")


def run(args) -> int:
    from .errors import hint_for
    from .output import print_json

    state: dict[str, Any] = {"warnings": []}
    checks = [Check("file"), Check("plugins"), Check("load")] + ([Check("run")] if args.run else [])
    steps: dict[str, Callable[[Any, dict], str]] = {"file": _file, "plugins": _plugins, "load": _load, "run": _run}
    for c in checks:
        t0 = time.perf_counter()
        try:
            c.detail = steps[c.name](args, state)
            c.ok = True
        except SrcoreError as exc:
            c.ok, c.detail, c.error = False, str(exc), exc
        except OSError as exc:
            c.ok, c.detail, c.error = False, f"{exc.filename}: {exc.strerror or exc}", exc
        c.seconds = time.perf_counter() - t0
        if not c.ok:
            break
    model = state.get("model")
    failed = [c for c in checks if c.ok is False]
    if args.format == "json":
        print_json({"model": args.model, "ok": not failed,
                    "inputs": [s.to_json() for s in model.input_specs] if model is not None else None,
                    "outputs": list(model.output_names) if model is not None else None,
                    "checks": [c.to_json() for c in checks], "warnings": state["warnings"]})
    else:
        _print_text(args.model, model, checks, state["warnings"])
    if failed:
        exc = CheckFailed(f"{args.model}: check {failed[0].name!r} failed (details above)")
        exc.hint = hint_for(failed[0].error)
        raise exc
    return 0


def _print_text(path: str, model, checks: list[Check], warnings: list[str]) -> None:
    for c in checks:
        mark = {True: "ok  ", False: "FAIL", None: "-   "}[c.ok]
        detail = c.detail if c.ok is not None else "not run"
        lines = detail.splitlines() or [""]
        print(f"{mark} {c.name:8s} {lines[0]}" + (f"  ({c.seconds * 1e3:.1f} ms)" if c.ok else ""))
        for line in lines[1:]:
            print(f"              {line}")
    if model is not None:
        ins = ", ".join(f"{s.name}: {s.dtype}{list(s.shape) if s.shape is not None else '[?]'}"
                        for s in model.input_specs)
        print(f"inputs: {ins or '(none)'}; outputs: {', '.join(model.output_names) or '(unnamed)'}")
    for w in warnings:
        print(f"warning: {w}")


def _file(args, state) -> str:
    from ..format.srm import load
    from ._common import load_model

    path = args.model
    if not os.path.exists(path):
        raise SrcoreError(f"{path}: no such file")
    if os.path.splitext(path)[1].lower() in (".pt", ".pt2", ".ir", ".txt"):
        state["model"] = load_model(path)
        return "converted on the fly (no checksums to verify: only .srm files carry them)"
    state["model"] = model = load(path, verify="full")
    nbytes = sum(int(a.nbytes) for a in model.params.values())
    return (f"structure, header checksum and SHA-256 of {len(model.params)} parameters "
            f"({nbytes:,} bytes) verified")


def _plugins(args, state) -> str:
    from ..dispatch.resolve import STRUCTURAL_KINDS
    from ..plugin.manager import get_plugin_manager

    pm = get_plugin_manager()
    registry = pm.registry
    ops = state["model"].required_ops()
    declared = {s.name for s, _who in registry.declared.values()} | set(registry.declared)
    missing = [op for op in ops if op not in declared and op not in STRUCTURAL_KINDS]
    failed = [r for r in pm.reports if r.status == "failed"]
    for r in failed:
        state["warnings"].append(f"plugin {r.name} ({r.dist or '?'} {r.version or ''}) failed to load: {r.error}")
    if missing:
        from ..errors import UnsupportedOpError

        why = "".join(f"; plugin {r.name} failed to load, it may be the one ({r.error})" for r in failed)
        raise UnsupportedOpError(f"{len(missing)} op(s) the model requires are declared by no installed plugin: "
                                 f"{', '.join(missing)}{why}")
    providers = sorted({(who.dist or who.name) for q, (s, who) in registry.declared.items()
                        if s.name in ops and who is not None})
    return f"{len(ops)} op kind(s) required, all declared (by {', '.join(providers) or 'srcore'})"


def _load(args, state) -> str:
    from ._common import make_module

    import warnings

    with warnings.catch_warnings():  # what the load lost is listed below as warnings, once
        warnings.simplefilter("ignore")
        sm = state["module"] = make_module(args, state["model"])
    report = getattr(sm, "load_report", None)
    state["warnings"].extend(report.lines() if report else ())
    kinds: dict[str, int] = {}
    for b in sm.blocks:
        for pn in b.nodes:
            if pn.fn is not None:
                kinds[pn.fn.kind] = kinds.get(pn.fn.kind, 0) + 1
    counts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return (f"{sm.num_nodes} nodes on {', '.join(sm.options.backends)} ({counts}), "
            f"{sm.options.executor} executor, {sm.setup_time * 1e3:.1f} ms")


def _run(args, state) -> str:
    import numpy as np

    from ._common import parse_inputs
    from .run import flatten

    sm, model = state["module"], state["model"]
    out = sm(*parse_inputs(sm, args.inputs, args.seed))
    outs = out if isinstance(out, tuple) else (out,)
    names = list(model.output_names) or [f"output{i}" for i in range(len(outs))]
    if model.output_names and len(outs) != len(names):
        raise SrcoreError(f"the model returned {len(outs)} output(s) but records {len(names)} output names "
                          f"({', '.join(names)})")
    for name, o in zip(names, outs):
        for key, leaf in flatten(name, o):
            if isinstance(leaf, np.ndarray) and leaf.dtype.kind in "fc":
                bad = int(leaf.size - np.isfinite(leaf).sum())
                if bad:
                    state["warnings"].append(f"output {key} has {bad} non-finite value(s) of {leaf.size} "
                                             "on these inputs")
    return f"{len(outs)} output(s): " + ", ".join(
        f"{n} {o.dtype}{list(o.shape)}" if isinstance(o, np.ndarray) else f"{n} {type(o).__name__}"
        for n, o in zip(names, outs))
