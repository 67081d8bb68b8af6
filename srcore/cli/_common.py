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
                        "comma-separated, e.g. --backend trt_like,cpu; default: cpu)")
    parser.add_argument("--executor", choices=("codegen", "interpreter"),
                        help="executor (default: codegen, or $SRCORE_EXECUTOR)")
    parser.add_argument("--planner", choices=("standard_resizing", "precomputed_offsets"),
                        help="memory planner algorithm (default: standard_resizing, or $SRCORE_MEMORY_PLANNER)")
    parser.add_argument("--no-optimize", action="store_true", help="skip the default pass pipeline")


def _backend_list(text: str) -> list[str]:
    names = [b.strip() for b in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"empty backend name in {text!r}")
    return names


def load_model(path: str):
    """A srcore.Model from a .srm, .pt, .pt2 or IR text file."""
    if not os.path.exists(path):
        raise SrcoreError(f"{path}: no such file")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".pt":
        from ..frontends.torchscript import from_torchscript

        return from_torchscript(path)
    if ext == ".pt2":
        from ..frontends.torch_export import from_torch

        return from_torch(path)
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

    opts = dict(optimize=not args.no_optimize)
    if args.executor:
        opts["executor"] = args.executor
    if args.planner:
        opts["memory_planner_algorithm"] = args.planner
    opts["backends"] = tuple(args.backends) if args.backends else ("cpu",)
    opts.update(overrides)
    return Options(**opts)


def make_module(args, model, **overrides):
    from ..runtime.static_module import StaticModule

    return StaticModule(model, options=make_options(args, **overrides))


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
        if dtype.startswith("float"):
            out.append(rng.standard_normal(shape).astype(dtype))
        elif dtype == "bool":
            out.append(rng.integers(0, 2, shape).astype(bool))
        else:
            out.append(rng.integers(0, 10, shape).astype(dtype))
    return out


def parse_inputs(module, items: list[str] | None, seed: int = 0) -> list[Any]:
    """``-i NAME=FILE.npy`` (or a Python literal for scalar inputs); the rest random."""
    import ast

    import numpy as np

    given: dict[str, Any] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep:
            raise SrcoreInputError(f"-i {item!r}: expected NAME=FILE.npy")
        if value.endswith(".npy"):
            if not os.path.exists(value):
                raise SrcoreInputError(f"-i {name}: {value}: no such file")
            given[name] = np.load(value, allow_pickle=False)
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
