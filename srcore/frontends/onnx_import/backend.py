"""srcore as an ONNX backend: ``onnx.backend.base.Backend`` over ``from_onnx`` + ``StaticModule``.

    from srcore.frontends.onnx_import.backend import SrcoreBackend
    rep = SrcoreBackend.prepare(model_proto)          # convert + load, once
    outputs = rep.run([x])                            # a namedtuple of numpy arrays, by output name
    outputs = SrcoreBackend.run_model(model_proto, [x])

Only the CPU device exists. ``prepare`` raises ``srcore.ConversionError`` /
``srcore.UnsupportedOpError`` for what srcore cannot run, ``run`` raises
``srcore.SrcoreInputError`` for inputs that contradict the model.

A model that needs graph inputs' values at conversion (Unsqueeze's axes, Slice's starts, Pad's
pads, Resize's scales fed as graph inputs; ``from_onnx`` raises
:class:`~srcore.frontends.onnx_import.NeedsConstantInputs`) is prepared lazily: each run converts
and loads it specialized on those inputs' values (``from_onnx(..., constant_inputs=...)``), and
reuses that for later runs with the same values; other values make another specialization (the
last :data:`SPECIALIZATIONS` are kept). A conversion that fails even with the values raises its
``ConversionError`` from ``run``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from onnx.backend.base import Backend, BackendRep, namedtupledict

from ...errors import SrcoreInputError

#: how many specializations (distinct values of the inputs needed at conversion) a rep keeps
SPECIALIZATIONS = 4


class SrcoreRep(BackendRep):
    """A prepared model: one ``StaticModule`` and its runtime."""

    def __init__(self, model, static_module):
        self.model = model
        self.sm = static_module
        self.input_names = [v.name for v in model.graph.inputs]   # sequence inputs have no InputSpec
        self.output_names = list(model.output_names)

    def run(self, inputs: Any, **kwargs: Any) -> tuple:
        """``inputs``: a sequence in the model's input order, a dict by name, or one array."""
        if isinstance(inputs, dict):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise SrcoreInputError(f"missing inputs {missing} (the model takes {self.input_names})")
            args = [inputs[n] for n in self.input_names]
        elif isinstance(inputs, np.ndarray):
            args = [inputs]
        else:
            args = list(inputs)
        args = [_as_input(a) for a in args]
        out = self.sm(*args)
        outs = out if isinstance(out, tuple) else (out,)
        return namedtupledict("Outputs", _tuple_names(self.output_names))(*outs)


class SpecializingRep(BackendRep):
    """A model converted per value of the inputs it needs at conversion (see the module docstring)."""

    def __init__(self, model, constant_inputs: Sequence[str], input_names: Sequence[str], prepare):
        self.model = model
        self.constant_inputs = tuple(constant_inputs)
        self.input_names = list(input_names)
        self._prepare = prepare            # {name: array} -> SrcoreRep
        self._reps: dict[tuple, SrcoreRep] = {}

    def run(self, inputs: Any, **kwargs: Any) -> tuple:
        if isinstance(inputs, dict):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise SrcoreInputError(f"missing inputs {missing} (the model takes {self.input_names})")
            by_name = {n: _as_input(inputs[n]) for n in self.input_names}
        else:
            args = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            if len(args) != len(self.input_names):
                raise SrcoreInputError(f"{len(args)} inputs given, the model takes {len(self.input_names)} "
                                       f"({self.input_names})")
            by_name = {n: _as_input(a) for n, a in zip(self.input_names, args)}
        from . import NeedsConstantInputs

        while True:
            consts = {n: by_name[n] for n in self.constant_inputs}
            key = tuple((n, a.dtype.str, a.shape, a.tobytes()) for n, a in consts.items())
            rep = self._reps.pop(key, None)
            if rep is not None:
                break
            try:
                rep = self._prepare(consts)
                break
            except NeedsConstantInputs as exc:   # with these values, a node wants more (Dropout's ratio
                more = [n for n in exc.inputs if n not in consts]   # once training_mode is known)
                if not more:
                    raise
                self.constant_inputs += tuple(more)
                self._reps.clear()
        self._reps[key] = rep                  # most recently used last
        while len(self._reps) > SPECIALIZATIONS:
            self._reps.pop(next(iter(self._reps)))
        return rep.run({n: a for n, a in by_name.items() if n not in consts})


def _as_input(a):
    """An input as the runtime takes it: an array, or a list of arrays for a sequence input."""
    return [np.asarray(x) for x in a] if isinstance(a, (list, tuple)) else np.asarray(a)


def _tuple_names(names: Sequence[str]) -> list[str]:
    """Output names usable as namedtuple fields (ONNX names may hold any character)."""
    out = []
    for i, n in enumerate(names):
        field = "".join(c if c.isalnum() or c == "_" else "_" for c in n)
        if not field or field[0].isdigit() or field[0] == "_" or field in out or not field.isidentifier():
            field = f"output_{i}"
        out.append(field)
    return out


class SrcoreBackend(Backend):
    """``onnx.backend.base.Backend``: ``prepare`` converts with ``srcore.from_onnx`` and loads a
    ``StaticModule`` (keyword arguments ``backends=`` and ``options=`` are passed to it)."""

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs: Any) -> SrcoreRep | SpecializingRep:
        """A rep that runs ``model``: a :class:`SrcoreRep`, or a :class:`SpecializingRep` when the
        model needs graph inputs' values at conversion."""
        import srcore

        from . import NeedsConstantInputs

        if not cls.supports_device(device):
            raise srcore.SrcoreError(f"srcore runs on the CPU, not {device!r}")
        base_dir, options, backends = kwargs.pop("base_dir", None), kwargs.pop("options", None), \
            kwargs.pop("backends", None)

        def load(constant_inputs=None) -> SrcoreRep:
            m = srcore.from_onnx(model, base_dir=base_dir, constant_inputs=constant_inputs)
            return SrcoreRep(m, srcore.StaticModule(m, options=options, backends=backends))

        try:
            return load()
        except NeedsConstantInputs as exc:
            return SpecializingRep(model, exc.inputs, exc.model_inputs, load)

    @classmethod
    def run_model(cls, model, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs: Any, device: str = "CPU", outputs_info=None, **kwargs: Any):
        """Run one NodeProto on ``inputs`` (its graph built around it from the arrays' types)."""
        from onnx import defs, helper

        arrays = [np.asarray(a) for a in (inputs.values() if isinstance(inputs, dict) else inputs)]
        present = [n for n in node.input if n]
        ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
               for n, a in zip(present, arrays)]
        outs = [helper.make_tensor_value_info(n, 0, None) for n in node.output if n]
        graph = helper.make_graph([node], "node", ins, outs)
        opset = kwargs.pop("opset_version", None) or defs.onnx_opset_version()
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return cls.run_model(model, arrays, device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper().startswith("CPU")


prepare = SrcoreBackend.prepare
run_model = SrcoreBackend.run_model
run_node = SrcoreBackend.run_node
supports_device = SrcoreBackend.supports_device
