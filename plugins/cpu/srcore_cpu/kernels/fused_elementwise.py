"""srcore:: fused linear + elementwise ops (declared in ``srcore/ops/srcore.yaml``): the activation runs in
place on ``out``."""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError
from srcore.plugin import NodeInfo, Specialized

from . import linalg as _linalg
from .fused import _linear_act_matcher


def _tanh_(out):
    return np.tanh(out, out=out)


def _sigmoid_(out):
    from scipy.special import expit  # what aten::sigmoid uses: the fused op gives the same values

    return expit(out, out=out)


def linear_tanh(input, weight, bias=None, out=None):
    """``srcore::linear_tanh``."""
    return _tanh_(_linalg.linear(input, weight, bias, out=out))


def linear_sigmoid(input, weight, bias=None, out=None):
    """``srcore::linear_sigmoid``."""
    return _sigmoid_(_linalg.linear(input, weight, bias, out=out))


linear_tanh_matcher = _linear_act_matcher(np.tanh, linear_tanh)


def linear_sigmoid_matcher(node: NodeInfo):
    """Constant weights: the flat linear with scipy's ``expit`` ufunc in place (imported only here)."""
    from scipy.special import expit

    return _linear_act_matcher(expit, linear_sigmoid)(node)


# -- srcore::ew_chain ----------------------------------------------------------------------------------
_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide}


def _unary(name):
    if name == "relu":
        return lambda x, out: np.maximum(x, x.dtype.type(0), out=out)
    if name == "sigmoid":
        from scipy.special import expit  # as aten::sigmoid

        return lambda x, out: expit(x, out=out)
    if name == "tanh":
        return lambda x, out: np.tanh(x, out=out)
    raise KernelError(f"srcore::ew_chain: unknown op {name!r}")


def _number(text: str):
    return int(text) if text.lstrip("-").isdigit() else float(text)


def compile_chain(program: str, dtype):
    """``program`` -> a list of ``(fn, operand)`` steps: ``fn(x, operand_value, out)``; operand is a
    numpy scalar of ``dtype`` (the same cast as the aten kernels' fast path), an operand index, or None."""
    steps = []
    for part in program.split(";"):
        name, *rest = part.split(":")
        if name in _BINARY:
            if len(rest) != 2 or rest[0] not in ("s", "t"):
                raise KernelError(f"srcore::ew_chain: bad step {part!r}")
            operand = np.dtype(dtype).type(_number(rest[1])) if rest[0] == "s" else int(rest[1])
            steps.append((_BINARY[name], operand))
        else:
            fn = _unary(name)
            steps.append((lambda x, _o, out, fn=fn: fn(x, out), None))
    return steps


def _run(steps, self, operands, out):
    if out is None:
        out = np.empty_like(self)
    cur = self
    for fn, operand in steps:
        if isinstance(operand, int):
            fn(cur, operands[operand], out=out)
        elif operand is None:
            fn(cur, None, out=out)
        else:
            fn(cur, operand, out=out)
        cur = out
    return out


def ew_chain(self, program, a=None, b=None, c=None, d=None, out=None):
    """``srcore::ew_chain``: the steps of ``program`` in order, the first from ``self`` into ``out``, the
    others in place on ``out`` (one buffer for the whole chain)."""
    return _run(compile_chain(program, self.dtype), self, (self, a, b, c, d), out)


def ew_chain_matcher(node: NodeInfo):
    """A constant program: compiled once at load into straight-line ufunc calls (generated source, no
    interpretation per call); otherwise the generic kernel."""
    if not node.is_const("program"):
        return ew_chain
    dtype = getattr(node.args[0].type, "dtype", None)
    if dtype not in ("float32", "float64"):
        return ew_chain
    fn, used = build_chain(node.const("program"), dtype)
    return Specialized(fn, args=(0,) + tuple(k + 1 for k in used))


def build_chain(program: str, dtype):
    """``program`` -> (function(self, *used operands, out=None), used operand indices): straight-line code."""
    from scipy.special import expit

    env = {"_empty_like": np.empty_like, "_max": np.maximum, "_tanh": np.tanh, "_expit": expit,
           "_zero": np.dtype(dtype).type(0)}
    ufuncs = {"add": "_add", "sub": "_sub", "mul": "_mul", "div": "_div"}
    env.update({"_add": np.add, "_sub": np.subtract, "_mul": np.multiply, "_div": np.true_divide})
    used: list[int] = []
    lines = []
    cur = "self"
    for i, part in enumerate(program.split(";")):
        name, *rest = part.split(":")
        if name in ufuncs:
            if len(rest) != 2 or rest[0] not in ("s", "t"):
                raise KernelError(f"srcore::ew_chain: bad step {part!r}")
            if rest[0] == "s":
                env[f"_s{i}"] = np.dtype(dtype).type(_number(rest[1]))  # the aten fast path's cast
                operand = f"_s{i}"
            else:
                k = int(rest[1])
                if k and k not in used:
                    used.append(k)
                operand = "self" if k == 0 else f"a{k}"
            lines.append(f"    {ufuncs[name]}({cur}, {operand}, out=out)")
        elif name == "relu":
            lines.append(f"    _max({cur}, _zero, out=out)")
        elif name == "tanh":
            lines.append(f"    _tanh({cur}, out=out)")
        elif name == "sigmoid":
            lines.append(f"    _expit({cur}, out=out)")
        else:
            raise KernelError(f"srcore::ew_chain: unknown op {name!r}")
        cur = "out"
    used.sort()
    params = "".join(f", a{k}" for k in used)
    src = (f"def ew_chain_const(self{params}, out=None):\n    if out is None:\n        out = _empty_like(self)\n"
           + "\n".join(lines) + "\n    return out\n")
    exec(compile(src, f"<srcore::ew_chain {program}>", "exec"), env)
    return env["ew_chain_const"], used
