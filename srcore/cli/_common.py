"""Helpers shared by the subcommands that take a model: loading it, making inputs, options."""
from __future__ import annotations

import argparse
import os
from typing import Any

from ..errors import SrcoreError, SrcoreInputError


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="a .srm file (also: .pt TorchScript, .pt2 torch.export, .ir text)")
    parser.add_argument("--backend", "--backends", action="extend", type=_backend_list, metavar="B[,B...]",
                        dest="backends", help="backend priority list, highest first (repeatable or "
                        "comma-separated, e.g. --backend trt_like,cpu; default: quantized_cpu,cpu)")
    parser.add_argument("--executor", choices=("codegen", "interpreter"),
                        help="executor (default: codegen, or $SRCORE_EXECUTOR)")
    parser.add_argument("--planner", choices=("standard_resizing", "precomputed_offsets"),
                        help="memory planner algorithm (default: standard_resizing, or $SRCORE_MEMORY_PLANNER)")
    parser.add_argument("--no-optimize", action="store_true", help="skip the default pass pipeline")
    parser.add_argument("--no-fallback", action="store_true",
                        help="fail the load if a node needs a fallback kernel (Options(allow_fallback=False))")
    add_engine_arguments(parser)


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """The engine backends' options (docs/partitioning.md, docs/trt-like.md)."""
    from .flags import positive_int

    g = parser.add_argument_group("engine backends (e.g. --backend trt_like,cpu)")
    g.add_argument("--engine-option", action="append", default=[], type=engine_option, metavar="KEY=VALUE",
                   dest="engine_options", help="an engine builder option (repeatable); VALUE is JSON (true, 3, "
                   "[\"numpy\"]) or a plain string, e.g. --engine-option timing=false")
    g.add_argument("--min-block-size", type=positive_int, metavar="N",
                   help="segments with fewer nodes stay node by node (default 3)")
    g.add_argument("--require-full-compilation", action="store_true",
                   help="fail unless every node goes into an engine")
    g.add_argument("--fallback-op", action="append", default=[], metavar="OP", dest="fallback_ops",
                   help="keep an op out of engines (repeatable; aten::softmax names every overload)")
    g.add_argument("--fallback-module", action="append", default=[], metavar="MODULE", dest="fallback_modules",
                   help="keep a module's nodes out of engines: a path (layer1.0) or a class name (BasicBlock)")
    g.add_argument("--profile", action="append", default=[], type=profile_item, metavar="NAME=SHAPE[:SHAPE:SHAPE]",
                   dest="profiles", help="build engine plans for these input shapes at load (repeatable; "
                   "several inputs separated by spaces; min:opt:max for a range), e.g. --profile x=8x3x64x64")


def engine_option(text: str) -> tuple[str, Any]:
    """``--engine-option KEY=VALUE``: VALUE as JSON when it parses (``true``, ``3``, ``["a"]``), else the
    string (an argparse type: a missing ``=`` is a usage error)."""
    import json

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE, e.g. timing=false")
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = value
    return key.strip(), parsed


def profile_item(text: str) -> dict[str, Any]:
    """``--profile "x=1x3x64x64 y=4"``: input -> shape, or ``min:opt:max`` shapes for a range."""
    from ..errors import EngineOptionError
    from ..runtime.engines import parse_shape

    out: dict[str, Any] = {}
    for item in text.split():
        name, sep, shapes = item.partition("=")
        if not sep or not name or not shapes:
            raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=SHAPE, e.g. x=8x3x64x64")
        parts = shapes.split(":")
        try:
            dims = [parse_shape(s, f"--profile {name}") for s in parts]
        except EngineOptionError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if len(parts) == 1:
            out[name] = dims[0]
        elif len(parts) == 3:
            out[name] = dict(zip(("min", "opt", "max"), dims))
        else:
            raise argparse.ArgumentTypeError(f"{item!r}: one shape, or three (min:opt:max)")
    return out


def _backend_list(text: str) -> list[str]:
    names = [b.strip() for b in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"empty backend name in {text!r}")
    return names


def load_model(path: str):
    """A srcore.Model from a .srm, .pt, .pt2 or IR text file."""
    if not os.path.exists(path):
        raise SrcoreError(f"{path}: no such file")
    if os.path.isdir(path):
        raise SrcoreError(f"{path}: is a directory, not a model file")
    ext = os.path.splitext(path)[1].lower()
    if ext in (".pt", ".pt2"):
        from ..progress import bar

        with bar(1, f"convert {os.path.basename(path)}") as b:  # conversion can take seconds: show it's alive
            if ext == ".pt":
                from ..frontends.torchscript import from_torchscript

                model = from_torchscript(path)
            else:
                from ..frontends.torch_export import from_torch

                model = from_torch(path)
            b.update()
        return model
    if ext in (".ir", ".txt"):
        from ..ir.parser import parse_graph
        from ..model import Model

        with open(path, encoding="utf-8") as f:
            return Model.from_graph(parse_graph(f.read(), filename=path))
    from ..format.srm import load

    return load(path)


def make_options(args, **overrides):
    """The ``srcore.Options`` the model options ask for (backends included)."""
    from ..runtime.options import Options

    opts = dict(optimize=not args.no_optimize, allow_fallback=not getattr(args, "no_fallback", False))
    if args.executor:
        opts["executor"] = args.executor
    if args.planner:
        opts["memory_planner_algorithm"] = args.planner
    if args.backends:   # else Options' default
        opts["backends"] = tuple(args.backends)
    opts.update(engine_settings(args))
    opts.update(overrides)
    return Options(**opts)


def make_module(args, model, **overrides):
    from ..runtime.static_module import StaticModule

    return StaticModule(model, options=make_options(args, **overrides))


def engine_settings(args) -> dict[str, Any]:
    """The ``Options`` fields the engine flags set (only those given)."""
    out: dict[str, Any] = {}
    engine_options = dict(getattr(args, "engine_options", None) or ())
    profiles = list(getattr(args, "profiles", None) or ())
    if profiles:
        engine_options["profiles"] = profiles
    if engine_options:
        out["engine_options"] = engine_options
    if getattr(args, "min_block_size", None):
        out["engine_min_block_size"] = args.min_block_size
    if getattr(args, "require_full_compilation", False):
        out["require_full_compilation"] = True
    if getattr(args, "fallback_ops", None):
        out["engine_fallback_ops"] = tuple(args.fallback_ops)
    if getattr(args, "fallback_modules", None):
        out["engine_fallback_modules"] = tuple(args.fallback_modules)
    return out


def random_inputs(module, seed: int = 0, dims: dict[str, int] | None = None,
                  skip: frozenset[str] | set[str] = frozenset()) -> list[Any]:
    """Inputs that fit the module's input specs (symbolic dims take ``dims`` or 1); None for the
    names in ``skip`` (given by the user)."""
    import numpy as np

    from ..runtime.inputs import ScalarSpec

    rng = np.random.default_rng(seed)
    out = []
    for s in module.input_specs:
        if s.name in skip:
            out.append(None)
            continue
        if isinstance(s, ScalarSpec):
            raise SrcoreInputError(f"input {s.name!r} is a scalar ({s.type}); give it with -i {s.name}=VALUE")
        shape = tuple(d if isinstance(d, int) else (dims or {}).get(str(d), 1) for d in (s.shape or ()))
        dtype = s.dtype or "float32"
        if dtype in ("quint8", "qint8", "qint32"):   # integers in range, unit scale, mid zero point
            from ..ir.quant import QDTYPES, QParams
            from ..qarray import QuantizedArray

            q = QDTYPES[dtype]
            lo, hi = max(q.qmin, -128), min(q.qmax, 255)
            out.append(QuantizedArray(rng.integers(lo, hi + 1, shape), dtype, QParams(1.0, (lo + hi + 1) // 2)))
        elif dtype.startswith("float"):
            out.append(rng.standard_normal(shape).astype(dtype))
        elif dtype == "bool":
            out.append(rng.integers(0, 2, shape).astype(bool))
        else:
            out.append(rng.integers(0, 10, shape).astype(dtype))
    return out


def parse_inputs(module, items: list[str] | None, seed: int = 0) -> list[Any]:
    """``-i NAME=FILE.npy`` (or a Python literal for scalar inputs); the rest random."""
    import ast

    given: dict[str, Any] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SrcoreInputError(f"-i {item!r}: expected NAME=FILE.npy")
        if value.endswith(".npy"):
            if not os.path.exists(value):
                raise SrcoreInputError(f"-i {name}: {value}: no such file")
            given[name] = _load_npy(name, value)
        elif value.endswith(".npz"):   # a quantized input: as `srcore run -o` writes one
            if not os.path.exists(value):
                raise SrcoreInputError(f"-i {name}: {value}: no such file")
            import numpy as np

            from ..qarray import from_npz

            with np.load(value, allow_pickle=False) as entries:
                if name not in entries:
                    raise SrcoreInputError(f"-i {name}: {value} has no entry {name!r} (it has "
                                           f"{', '.join(sorted(entries.files))})")
                try:
                    given[name] = from_npz(entries, name)
                except SrcoreError as exc:
                    raise SrcoreInputError(f"-i {name}: {value}: {exc}") from None
        else:
            try:
                given[name] = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                raise SrcoreInputError(f"-i {name}={value}: not a .npy file nor a Python literal") from None
    unknown = set(given) - set(module.input_names)
    if unknown:
        raise SrcoreInputError(f"unknown input(s) {', '.join(sorted(unknown))}; the model takes "
                               f"{', '.join(module.input_names)}")
    if len(given) == len(module.input_names):
        return [given[n] for n in module.input_names]
    rand = random_inputs(module, seed, skip=set(given))
    return [given.get(n, r) for n, r in zip(module.input_names, rand)]


def _load_npy(name: str, path: str):
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except OSError as exc:
        raise SrcoreInputError(f"-i {name}={path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:  # not a .npy file, a pickled object array, a truncated file
        raise SrcoreInputError(f"-i {name}={path}: not a readable .npy array file ({exc})") from None
