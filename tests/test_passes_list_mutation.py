"""``remove_list_mutation``: lists built and written in straight-line code become SSA values.

Random programs of list writes and reads run through the torch-based reference interpreter
(test_passes_semantics.run: Python list semantics) before and after the pass; graphs where the list
escapes must come out unchanged. The torch models (YOLO's C2f, C3, ELAN, a feature list built in a
loop, the detect head's split of a cat of views) are scripted, traced and frozen and run against
eager, with the number of trt_like engines.
"""
from __future__ import annotations

from typing import List

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_passes_semantics import run

import srcore
from srcore.ir import parse_graph, print_graph
from srcore.ir.verify import verify
from srcore.partition import ENGINE_KIND
from srcore.passes import remove_list_mutation

WRITES = {"aten::append", "aten::extend", "aten::add_", "aten::insert", "aten::_set_item"}


@st.composite
def programs(draw):
    """A list of ``Float(2, k)`` tensors made by ``ListConstruct``, ``chunk`` or ``list(chunk)``, then
    a random sequence of writes (append, extend, +=, insert, _set_item) and reads (getitem with
    negative indices too, len, cat) in any order; every read is a graph output."""
    lines = ["graph(%x : Float(2, 4), %w : Float(2, 4)):", "  %one : int = prim::Constant[value=1]()",
             "  %two : int = prim::Constant[value=2]()"]
    start = draw(st.sampled_from(["construct", "chunk", "list_chunk"]))
    if start == "construct":
        n = draw(st.integers(0, 2))
        lines.append(f"  %l : Tensor[] = prim::ListConstruct({', '.join(['%x', '%w'][:n])})")
    elif start == "chunk":
        n = 2
        lines.append("  %l : Tensor[] = aten::chunk(%x, %two, %one)")
    else:
        n = 2
        lines += ["  %c : Tensor[] = aten::chunk(%x, %two, %one)", "  %l : Tensor[] = aten::list(%c)"]
    cur, outs, vals = "%l", [], ["%x", "%w"]
    for k in range(draw(st.integers(1, 7))):
        op = draw(st.sampled_from(["append", "extend", "iadd", "insert", "set", "get", "len", "cat"]))
        v = draw(st.sampled_from(vals))
        if op == "append":
            lines.append(f"  %a{k} : Tensor[] = aten::append({cur}, {v})")
            n += 1
        elif op in ("extend", "iadd"):
            lines.append(f"  %m{k} : Tensor[] = prim::ListConstruct({v}, %x)")
            if op == "extend":
                lines.append(f"   = aten::extend({cur}, %m{k})")
            else:   # `l += [...]`: later code uses what add_ returns
                lines.append(f"  %l{k} : Tensor[] = aten::add_({cur}, %m{k})")
                cur = f"%l{k}"
            n += 2
        elif op == "insert":
            i = draw(st.integers(-4, 4))
            lines += [f"  %i{k} : int = prim::Constant[value={i}]()", f"   = aten::insert({cur}, %i{k}, {v})"]
            n += 1
        elif op == "set" and n:
            i = draw(st.integers(-n, n - 1))
            lines += [f"  %i{k} : int = prim::Constant[value={i}]()",
                      f"  %s{k} : Tensor[] = aten::_set_item({cur}, %i{k}, {v})"]
        elif op == "get" and n:
            i = draw(st.integers(-n, n - 1))
            lines += [f"  %i{k} : int = prim::Constant[value={i}]()",
                      f"  %g{k} : Tensor = aten::__getitem__({cur}, %i{k})", f"  %r{k} : Tensor = aten::neg(%g{k})"]
            vals.append(f"%r{k}")
            outs.append(f"%r{k}")
        elif op == "len":
            lines.append(f"  %n{k} : int = aten::len({cur})")
            outs.append(f"%n{k}")
        elif op == "cat" and n:
            lines.append(f"  %t{k} : Tensor = aten::cat({cur}, %one)")
            outs.append(f"%t{k}")
    if n:
        lines.append(f"  %end : Tensor = aten::cat({cur}, %one)")
        outs.append("%end")
    lines.append(f"  return ({', '.join(outs)})" if outs else "  return (%x)")
    return "\n".join(lines) + "\n"


def _same(a, b):
    assert len(a) == len(b)
    for p, q in zip(a, b):
        if isinstance(p, torch.Tensor):
            torch.testing.assert_close(p, q, rtol=0, atol=0)
        else:
            assert p == q


INPUTS = (torch.randn(2, 4, generator=torch.Generator().manual_seed(0)),
          torch.randn(2, 4, generator=torch.Generator().manual_seed(1)))


@pytest.mark.one_pass
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_list_programs_keep_their_values_and_lose_their_writes(text):
    g = parse_graph(text)
    before = run(g, *INPUTS)
    assert remove_list_mutation(g) == any(k in text for k in ("append", "extend", "add_", "insert", "_set_item",
                                                               "aten::list", "aten::chunk"))
    verify(g)
    _same(run(g, *INPUTS), before)
    assert not [n.kind for n in g.all_nodes() if n.kind in WRITES], print_graph(g)


BLOCKED = {
    "escapes into a tuple": """graph(%x : Float(2, 3)):
  %one : int = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct(%x)
  %a : Tensor[] = aten::append(%l, %x)
  %t : (Tensor[], int) = prim::TupleConstruct(%l, %one)
  %c : Tensor = aten::cat(%l, %one)
  return (%c, %t)
""",
    "written in a branch": """graph(%x : Float(2, 3), %b : bool):
  %one : int = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct(%x)
  = prim::If(%b)
    block0():
      %a : Tensor[] = aten::append(%l, %x)
      -> ()
    block1():
      -> ()
  %c : Tensor = aten::cat(%l, %one)
  return (%c)
""",
    "carried by a loop": """graph(%x : Float(2, 3)):
  %one : int = prim::Constant[value=1]()
  %t : bool = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct(%x)
  %l2 : Tensor[] = prim::Loop(%one, %t, %l)
    block0(%i : int, %m : Tensor[]):
      %a : Tensor[] = aten::append(%m, %x)
      -> (%t, %m)
  %c : Tensor = aten::cat(%l, %one)
  return (%c)
""",
    "index not a constant": """graph(%x : Float(2, 3), %i : int):
  %l : Tensor[] = prim::ListConstruct(%x)
  %a : Tensor[] = aten::append(%l, %x)
  %g : Tensor = aten::__getitem__(%l, %i)
  return (%g)
""",
    "index out of range (torch raises)": """graph(%x : Float(2, 3)):
  %i : int = prim::Constant[value=-3]()
  %l : Tensor[] = prim::ListConstruct(%x)
  %a : Tensor[] = aten::append(%l, %x)
  %g : Tensor = aten::__getitem__(%l, %i)
  return (%g)
""",
    "popped (an unknown write)": """graph(%x : Float(2, 3)):
  %one : int = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct(%x)
  %a : Tensor[] = aten::append(%l, %x)
  %p : Tensor = aten::pop(%l, %one)
  %c : Tensor = aten::cat(%l, %one)
  return (%c)
""",
    "extended by itself": """graph(%x : Float(2, 3)):
  %one : int = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct(%x)
  = aten::extend(%l, %l)
  %c : Tensor = aten::cat(%l, %one)
  return (%c)
""",
    "passed to a call": """graph(%x : Float(2, 3)):
  %one : int = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct(%x)
  %a : Tensor[] = aten::append(%l, %x)
  %r : Tensor = prim::CallFunction[name="f"](%l)
  return (%r)
""",
}


@pytest.mark.one_pass
@pytest.mark.parametrize("name", list(BLOCKED))
def test_a_list_that_may_escape_or_change_unseen_is_left_alone(name):
    g = parse_graph(BLOCKED[name])
    before = print_graph(g)
    assert not remove_list_mutation(g)
    assert print_graph(g) == before


def test_a_read_inside_a_branch_sees_the_list_as_the_branch_node_does():
    g = parse_graph("""graph(%x : Float(2, 3), %b : bool):
  %one : int = prim::Constant[value=1]()
  %l : Tensor[] = prim::ListConstruct(%x)
  %y : Tensor = aten::neg(%x)
  %a : Tensor[] = aten::append(%l, %y)
  %r : Tensor = prim::If(%b)
    block0():
      %c : Tensor = aten::cat(%l, %one)
      -> (%c)
    block1():
      %d : Tensor = aten::stack(%l, %one)
      %e : Tensor = aten::flatten(%d, %one, %one)
      -> (%e)
  %z : Tensor = aten::exp(%x)
  %a2 : Tensor[] = aten::append(%l, %z)
  %f : Tensor = aten::cat(%l, %one)
  return (%r, %f)
""")
    for b in (True, False):
        before = run(g, INPUTS[0][:, :3], b)
        h = g.copy()
        assert remove_list_mutation(h)
        _same(run(h, INPUTS[0][:, :3], b), before)
        assert not [n for n in h.all_nodes() if n.kind == "aten::append"]


# -- torch models: the list-built blocks of the YOLO family in one engine ----------------------------


def _conv(cin, cout, k=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, 1, k // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU())


class C2f(nn.Module):    # YOLOv8
    def __init__(self, c=8, n=2):
        super().__init__()
        self.cv1, self.cv2 = _conv(c, c), _conv((2 + n) * c // 2, c)
        self.m = nn.ModuleList(_conv(c // 2, c // 2, 3) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).chunk(2, 1))
        y.extend([m(y[-1]) for m in self.m])
        return self.cv2(torch.cat(y, 1))


class C3(nn.Module):     # YOLOv5: two branches, a bottleneck chain on one, cat
    def __init__(self, c=8):
        super().__init__()
        self.cv1, self.cv2, self.cv3 = _conv(c, c // 2), _conv(c, c // 2), _conv(c, c)
        self.m = nn.Sequential(_conv(c // 2, c // 2, 3), _conv(c // 2, c // 2, 3))

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class ELAN(nn.Module):   # YOLOv7: outputs gathered by append and +=, the cat picks some by negative index
    def __init__(self, c=8):
        super().__init__()
        self.cv1, self.cv2 = _conv(c, c // 2), _conv(c, c // 2)
        self.m = nn.ModuleList(_conv(c // 2, c // 2, 3) for _ in range(4))
        self.out = _conv(2 * c, c)

    def forward(self, x):
        outs = [self.cv1(x)]
        outs.append(self.cv2(x))
        for m in self.m:
            outs += [m(outs[-1])]
        return self.out(torch.cat([outs[0], outs[1], outs[-3], outs[-1]], 1))


class FeatureList(nn.Module):   # DenseNet-style: a loop of constant trip count appends to the list it cats
    def __init__(self, c=4, n=3):
        super().__init__()
        self.n = n
        self.convs = nn.ModuleList(_conv(c * (i + 1), c, 3) for i in range(n))

    def forward(self, x):
        feats = [x]
        for i, conv in enumerate(self.convs):
            feats.append(conv(torch.cat(feats, 1)))
        return torch.cat(feats, 1)


class Detect(nn.Module):   # YOLOv8's head: per-level box / class convs, a cat of views, split, DFL softmax + conv
    def __init__(self, nc=4, reg_max=4, ch=(8, 8)):
        super().__init__()
        self.nc, self.reg_max, self.no = nc, reg_max, nc + 4 * reg_max
        self.cv2 = nn.ModuleList(nn.Sequential(_conv(c, 8, 3), nn.Conv2d(8, 4 * reg_max, 1)) for c in ch)
        self.cv3 = nn.ModuleList(nn.Sequential(_conv(c, 8, 3), nn.Conv2d(8, nc, 1)) for c in ch)
        self.dfl = nn.Conv2d(reg_max, 1, 1, bias=False)
        with torch.no_grad():
            self.dfl.weight.copy_(torch.arange(reg_max, dtype=torch.float32).view(1, reg_max, 1, 1))

    def forward(self, x):
        out: List[torch.Tensor] = []
        for a, b, y in zip(self.cv2, self.cv3, (x, F.max_pool2d(x, 2))):
            out.append(torch.cat((a(y), b(y)), 1))
        n = out[0].shape[0]
        box, cls = torch.cat([o.view(n, self.no, -1) for o in out], 2).split((self.reg_max * 4, self.nc), 1)
        dfl = self.dfl(box.view(n, 4, self.reg_max, -1).transpose(2, 1).softmax(1)).view(n, 4, -1)
        return torch.cat((dfl, cls.sigmoid()), 1)


def _init(m):
    g = torch.Generator().manual_seed(3)
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.copy_(torch.randn(mod.num_features, generator=g) * 0.1)
            mod.running_var.copy_(torch.rand(mod.num_features, generator=g) + 0.5)
    return m.eval()


FULL = pytest.mark.full   # the other import paths of the same blocks: SRCORE_TESTS_FULL=1


@pytest.mark.parametrize("make, cin, path", [
    (C2f, 8, "script"), pytest.param(C2f, 8, "trace", marks=FULL), pytest.param(C2f, 8, "frozen", marks=FULL),
    pytest.param(C3, 8, "script", marks=FULL), (ELAN, 8, "frozen"), pytest.param(ELAN, 8, "script", marks=FULL),
    (FeatureList, 4, "trace"), pytest.param(FeatureList, 4, "script", marks=FULL), (Detect, 8, "script"),
], ids=lambda v: getattr(v, "__name__", str(v)))
def test_list_built_blocks_run_in_one_engine(make, cin, path):
    torch.manual_seed(0)
    m = _init(make())
    x = torch.randn(1, cin, 5, 5)
    if path == "trace":
        ts = torch.jit.trace(m, (x,), check_trace=False)
    else:
        ts = torch.jit.script(m)
        ts = torch.jit.freeze(ts) if path == "frozen" else ts
    sm = srcore.StaticModule(srcore.from_torchscript(ts, (x,)), backends=("trt_like", "cpu"))
    kinds = [n.kind for n in sm.graph.nodes if n.kind != "prim::Constant"]
    assert kinds == [ENGINE_KIND] and len(sm.partition.engines) == 1, sm.partition.format()
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(sm(x.numpy()), want, rtol=1e-4, atol=1e-4)


@pytest.mark.one_pass
def test_the_cat_of_both_halves_of_a_chunk_reads_the_chunked_tensor():
    # C2f: y = list(x.chunk(2, 1)); y.append(f(y[-1])); cat(y) -> cat(x, f(x[:, 2:]))
    g = parse_graph("""graph(%x : Float(2, 4, 3)):
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %m1 : int = prim::Constant[value=-1]()
  %c : Tensor[] = aten::chunk(%x, %two, %one)
  %y : Tensor[] = aten::list(%c)
  %h : Tensor = aten::__getitem__(%y, %m1)
  %f : Float(2, 2, 3) = aten::tanh(%h)
  %a : Tensor[] = aten::append(%y, %f)
  %r : Float(2, 6, 3) = aten::cat(%y, %one)
  return (%r)
""")
    x = torch.randn(2, 4, 3, generator=torch.Generator().manual_seed(2))
    want = torch.cat([x, torch.tanh(x[:, 2:])], 1)
    prepared = srcore.passes.prepare_for_static_runtime(g, verify=True)
    torch.testing.assert_close(run(prepared, x)[0], want)
    cat = prepared.outputs[0].node
    assert cat.inputs[0].node.inputs[0] is prepared.inputs[0], print_graph(prepared)
    assert [n.kind for n in prepared.nodes if n.kind not in ("prim::Constant",)] == \
        ["aten::slice", "aten::tanh", "prim::ListConstruct", "aten::cat"]
