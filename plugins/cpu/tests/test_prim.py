"""Structural natives (lists, tuples, metadata, exceptions) vs Python/torch semantics, and a check
that every op torch.jit.script emits for typical size/loop/list code has a cpu kernel."""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore_cpu.kernels import prim as P  # noqa: E402


def test_lists_and_tuples():
    a = np.zeros(2)
    lst = P.list_construct(1, a, None)
    assert lst == [1, a, None] or (lst[0] == 1 and lst[1] is a and lst[2] is None)
    assert P.list_unpack([1, 2, 3]) == (1, 2, 3)
    assert P.tuple_construct(1, "x") == (1, "x") and P.tuple_unpack((4, 5)) == (4, 5)
    assert P.tuple_index((4, 5, 6), -1) == 6
    assert P.getitem([1, 2, 3], -1) == 3
    with pytest.raises(KernelError, match="out of range"):
        P.getitem([1], 3)
    assert P.list_slice([0, 1, 2, 3, 4], 1, None, 2) == [1, 3]
    assert P.list_slice([0, 1, 2], None, -1) == [0, 1]
    l0 = [1]
    assert P.append(l0, 2) is l0 and l0 == [1, 2]
    assert P.set_item(l0, 0, 9) is l0 and l0 == [9, 2]
    c = P.list_copy(l0)
    assert c == l0 and c is not l0
    P.insert(l0, 0, 5)
    assert P.pop(l0) == 2 and l0 == [5, 9]
    P.extend(l0, [1])
    assert P.list_iadd(l0, []) is l0   # aten::add_.t (`l += other`) returns its list
    P.reverse(l0)
    assert l0 == [1, 9, 5]
    P.clear(l0)
    assert l0 == []
    assert P.list_add([1], [2]) == [1, 2] and P.list_mul([1, 2], 2) == [1, 2, 1, 2] and P.list_rmul(2, [3]) == [3, 3]
    assert P.contains([1, 2], 2) and not P.contains([1.0], 2.0 + 1)
    assert P.list_index([4, 5], 5) == 1
    with pytest.raises(KernelError, match="not in list"):
        P.list_index([4], 5)


def test_metadata():
    x = np.zeros((2, 3, 4), np.float32)
    assert P.size(x) == [2, 3, 4] and P.size(x, -1) == 4 and P.size(x, 0) == 2
    with pytest.raises(KernelError, match="Dimension out of range"):
        P.size(x, 3)
    with pytest.raises(KernelError, match="no dimensions"):
        P.size(np.zeros(()), 0)
    assert P.size(np.zeros(())) == []
    assert P.dim(x) == 3 and P.numel(x) == 24 and P.len_(x) == 2 and P.len_([1, 2]) == 2 and P.len_("abc") == 3
    with pytest.raises(KernelError, match="0-d"):
        P.len_(np.zeros(()))
    for dt, tdt in [(np.float32, torch.float32), (np.int64, torch.int64), (np.bool_, torch.bool),
                    (np.float64, torch.float64), (np.uint8, torch.uint8)]:
        code = P.dtype(np.zeros(1, dt))
        assert code == torch.ops.prim.dtype(torch.zeros(1, dtype=tdt))
    assert P.device(x) == "cpu"


def test_exceptions_and_identity():
    with pytest.raises(KernelError, match="builtins.ValueError: bad size"):
        P.raise_exception("bad size", "builtins.ValueError")
    with pytest.raises(KernelError, match="^oops$"):
        P.raise_exception("oops")
    assert P.uninitialized() is None
    o = object()
    assert P.identity(o) is o


def test_format():
    assert P.format("{} x {} = {}", 2, 3.5, True) == "{} x {} = {}".format(2, 3.5, True)
    assert P.format("shape {}", [1, 2]) == "shape [1, 2]"


def _fn_sizes(x: torch.Tensor, n: int):
    s = x.size(0) // 2
    sizes = [x.size(0), s + 1]
    for i in range(n):
        x = x + float(i) * 2
        sizes.append(i)
    if x.dim() > 1 and len(sizes) > 2:
        x = x.view(sizes[0], -1)
    a, b = x.shape[0], x.shape[1]
    for j in range(1, 7, 2):
        a = a + j
    if a is not None:
        a = a * 2
    t = (a, b)
    m = max(sizes)
    y = torch.zeros(sizes[:1]) + torch.tensor([1.0, 2.0]).sum()
    if m < 0:
        raise ValueError("negative {}".format(m))
    return x * s, m, y, t[0], int(x.sum()), x.shape[0] / 2, x.numel(), float(b) ** 2, -b, x.dtype


def _fn_optional(x: torch.Tensor, k: Optional[int], pair: Tuple[int, int]):
    a, b = x.chunk(2)
    u, v = pair
    if k is not None:
        x = x[k:] * u
    r = torch.cat([a, b], 0)
    h = r.shape[-1] == v and bool(r.any())
    return x, r, h, len(r), not h, x.device, x.item() if x.numel() == 1 else 0.0


def _ops_of(block, acc):
    for node in block.nodes():
        schema = node.schema()  # "aten::add.Tensor(Tensor self, ...)", or "(no schema)" for prim nodes
        acc.add(schema.split("(")[0] if schema.startswith(node.kind()) else node.kind())
        for b in node.blocks():
            _ops_of(b, acc)
    return acc


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_scripted_ops_have_kernels():
    from srcore_cpu.decl import prim as DP, scalar as DS, creation as DC, elementwise as DE, shape as DSh
    from srcore_cpu.decl import convert as DV, reduce as DR

    declared = {k.op for m in (DP, DS, DC, DE, DSh, DV, DR) for k in m.KERNELS}
    ops = _ops_of(torch.jit.script(_fn_sizes).graph, set())
    ops = _ops_of(torch.jit.script(_fn_optional).graph, ops)
    runtime = {"prim::Constant", "prim::Loop", "prim::If"}  # control flow: the runtime's, not kernels
    missing = sorted(op for op in ops - runtime if op not in declared)
    assert not missing, missing
    assert {"aten::floordiv.int", "aten::__derive_index", "aten::append.t", "prim::max.self_int",
            "aten::Int.Tensor", "prim::RaiseException", "aten::__isnot__", "prim::unchecked_cast",
            "prim::ListUnpack", "prim::TupleUnpack", "aten::slice.Tensor"} <= ops


def test_dicts_flags_and_list_sort():
    d = P.dict_construct("a", 1, "b", 2)
    assert d == {"a": 1, "b": 2} and P.contains(d, "b") and not P.contains(d, "c")
    x = np.zeros((2, 5), np.float32)
    t = torch.zeros(2, 5)
    assert P.shape(x) == list(t.shape)
    assert P.layout(x) == 0  # torch.strided's code in TorchScript graphs
    assert P.false(x) is False and P.false() is False and P.device_type("cpu:0") == "cpu"
    lst = [3, 1, 2]
    assert P.list_sort(lst) is None and lst == [1, 2, 3]
    P.list_sort(lst, True)
    assert lst == [3, 2, 1]
    assert P.list_imul(lst, 2) is lst and lst == [3, 2, 1, 3, 2, 1]
    assert P.list_imul(lst, 0) == []
    a, b = [np.arange(3), np.ones(2)], [np.arange(3), np.ones(2)]
    assert P.tensor_list_eq(a, b) and not P.tensor_list_ne(a, b)
    assert not P.tensor_list_eq(a, b[:1]) and not P.tensor_list_eq(a, [np.arange(3), np.zeros(2)])


class _Sizes(torch.nn.Module):
    def forward(self, x: torch.Tensor, idx: torch.Tensor):
        sizes: List[int] = []
        for i in range(x.dim()):
            sizes.append(x.size(i))
        h = x.clone()
        h.add_(1.0)
        h.mul_(2)
        h = h.masked_fill(h > 2.0, -1.0)
        g = torch.gather(x, 1, idx)
        sel = x[idx[:, 0]]
        z = torch.zeros(sizes[0], 3, dtype=torch.int64)
        u = x.unsqueeze(0).expand(2, -1, -1).contiguous().view(2, -1)
        a, b = x.chunk(2, 1)[0], x.split([1, 4], 1)[1]
        n = int(x.sum() > 0)
        return h, g, sel, z, u, a, b, n, float(sizes[1]) ** 2, torch.relu(x) + x * 2.0, x.argmax(), x.std()


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated", "ignore:`torch.jit.freeze` is deprecated")
def test_scripted_model_runs_on_cpu_backend():
    """The kernels through the real runtime: a scripted module with loops, lists, in-place ops, views."""
    import srcore

    m = torch.jit.script(_Sizes().eval())
    x, idx = torch.randn(4, 5), torch.randint(0, 4, (4, 2))
    sm = srcore.StaticModule(srcore.from_torchscript(m, example_inputs=(x, idx)))
    for _ in range(2):  # the second run reuses the planned memory
        out = sm(x.numpy(), idx.numpy())
    ref = m(x, idx)
    assert len(out) == len(ref)
    for o, r in zip(out, ref):
        if isinstance(r, torch.Tensor):
            assert o.dtype == r.numpy().dtype
            np.testing.assert_allclose(o, r.numpy(), rtol=1e-5, atol=1e-6)
        else:
            assert o == r and type(o) is type(r)


def test_dict_getitem_len_set_item():
    """``Dict[str, Tensor]`` inputs (an FPN's feature dict): ``d[k]``, ``len(d)``, ``d[k] = v``."""
    d = {"a": np.ones(2), "b": np.zeros(3)}
    assert P.dict_getitem(d, "b") is d["b"] and P.len_(d) == 2
    assert P.set_item(d, "c", np.ones(1)) is d and list(d) == ["a", "b", "c"]
    with pytest.raises(KernelError, match="KeyError: 'z'"):
        P.dict_getitem(d, "z")


def test_warn_is_a_user_warning():
    """``aten::warn`` had no kernel: a scripted ``warnings.warn`` left in an untaken-at-load branch
    (``F.affine_grid`` has one) made the model fail to load."""
    with pytest.warns(UserWarning, match="big batch"):
        assert P.warn("big batch", 2) is None
