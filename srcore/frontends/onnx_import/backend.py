"""srcore as an ONNX backend: ``onnx.backend.base.Backend`` over ``from_onnx`` + ``StaticModule``.

    from srcore.frontends.onnx_import.backend import SrcoreBackend
    rep = SrcoreBackend.prepare(model_proto)          # convert + load, once
    outputs = rep.run([x])                            # a namedtuple of numpy arrays, by output name
    outputs = SrcoreBackend.run_model(model_proto, [x])

Only the CPU device exists. ``prepare`` raises ``srcore.ConversionError`` /
``srcore.UnsupportedOpError`` for what srcore cannot run, ``run`` raises
``srcore.SrcoreInputError`` for inputs that contradict the model.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from onnx.backend.base import Backend, BackendRep, namedtupledict

from ...errors import SrcoreInputError


class SrcoreRep(BackendRep):
    """A prepared model: one ``StaticModule`` and its runtime."""

    def __init__(self, model, static_module):
        self.model = model
        self.sm = static_module
        self.input_names = [s.name for s in model.input_specs]
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
        args = [np.asarray(a) for a in args]
        out = self.sm(*args)
        outs = out if isinstance(out, tuple) else (out,)
        return namedtupledict("Outputs", _tuple_names(self.output_names))(*outs)


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
    def prepare(cls, model, device: str = "CPU", **kwargs: Any) -> SrcoreRep:
        import srcore

        if not cls.supports_device(device):
            raise srcore.SrcoreError(f"srcore runs on the CPU, not {device!r}")
        m = srcore.from_onnx(model, base_dir=kwargs.pop("base_dir", None))
        sm = srcore.StaticModule(m, options=kwargs.pop("options", None), backends=kwargs.pop("backends", None))
        return SrcoreRep(m, sm)

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
