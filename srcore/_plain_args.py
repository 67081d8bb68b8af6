"""One compiled overload per called numba kernel: :func:`plain_args` (no numba import until used).

Shared by the core's kernels (:mod:`srcore.conv._jit`) and the plugins' (``srcore.plugin.plain_args``)."""
from __future__ import annotations


def plain_args(dispatcher):
    """Make ``dispatcher`` (an ``@njit`` kernel or helper that other kernels call) compile for plain
    argument types only.

    numba types a constant argument at a call site inside compiled code as a literal
    (``Literal[int](0)``, ``True``) and compiles the callee anew for every pattern of constants its
    callers pass: the cold resnet_small build of the trt_like plugin compiled ``packed.gather`` 5
    times, ``epilogue_t`` 3 and ``gemm`` 4 (~25 s of its ~135 s of compiling). Typing the call with the
    literals widened (int64, bool) lets every caller share one compiled overload (the constants still
    fold where LLVM inlines the callee into its caller). Calls from Python are never literal."""
    from numba.core import types

    compiled = dispatcher.get_call_template

    def get_call_template(args, kws):
        return compiled([types.unliteral(a) for a in args], {k: types.unliteral(v) for k, v in kws.items()})

    dispatcher.get_call_template = get_call_template
    return dispatcher
