"""The partitioner's smaller parts, each against a hand-derived answer: module scopes
(``scopes``), the segment key (``keys``, against a SHA-256 computed here from its documented
recipe), the per-signature fallback runner (``fallback``) and a segment specialized to concrete
shapes (``specialize``)."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

import srcore
from srcore.errors import EngineBuildError
from srcore.ir.parser import parse_graph
from srcore.ir.printer import print_graph
from srcore.partition.fallback import SegmentFallback
from srcore.partition.keys import KEY_VERSION, segment_key
from srcore.partition.scopes import ScopeMatcher, parse_scope
from srcore.partition.specialize import specialize

pytestmark = pytest.mark.one_pass


# ---------------------------------------------------------------------------------------------
# scopes

@pytest.mark.parametrize("scope,parts", [
    ("layer1(Sequential).0(BasicBlock).conv1(Conv2d)",
     [(("layer1", "0", "conv1"), ("Sequential", "BasicBlock", "Conv2d"))]),
    ("SELF(Net).fc(torch.nn.Linear)", [(("fc",), ("Linear",))]),          # SELF: the method's own module
    ("__module.layer1/__module.layer1.0", [(("layer1", "0"), ())]),       # a traced graph's scope
    ("__module", [((), ())]),
    ("__module.layer1|head(Head)", [(("layer1",), ()), (("head",), ("Head",))]),
    ("a(A).b | | c", [(("a", "b"), ("A",)), (("c",), ())]),                # fused: parts joined by |
    ("", []),
])
def test_parse_scope(scope, parts):
    assert parse_scope(scope) == parts


@pytest.mark.parametrize("entries,scope,want", [
    (("layer1",), "layer1(Sequential).0(BasicBlock)", "layer1"),
    (("layer1.0",), "layer1(Sequential).0(BasicBlock)", "layer1.0"),
    (("layer1.1",), "layer1(Sequential).0(BasicBlock)", None),
    (("layer",), "layer1(Sequential).0(BasicBlock)", None),                 # whole components only
    (("layer1.0.conv1",), "layer1(Sequential).0(BasicBlock)", None),        # longer than the path
    (("BasicBlock",), "layer1(Sequential).0(BasicBlock)", "BasicBlock"),
    (("torchvision.models.resnet.BasicBlock",), "layer1(Sequential).0(BasicBlock)",
     "torchvision.models.resnet.BasicBlock"),
    (("Basic",), "layer1(Sequential).0(BasicBlock)", None),
    (("head", "Stem", "layer1"), "layer1(Sequential).0(BasicBlock)", "layer1"),
    (("head", "Stem"), "stem(Stem).act(ReLU)|head(Head)", "Stem"),          # the first part that matches
    (("head", "Sigmoid"), "stem(Stem).act(ReLU)|head(Head)", "head"),
    (("fc",), "__module.layer1/__module.layer1.fc", None),
    (("layer1.fc",), "__module.layer1/__module.layer1.fc", "layer1.fc"),
    (("layer1",), None, None),
    (("layer1",), "", None),
    ((), "layer1(Sequential)", None),
])
def test_scope_matcher(entries, scope, want):
    assert ScopeMatcher(entries).match(scope) == want


# ---------------------------------------------------------------------------------------------
# keys

KEYED = """graph(%x : Float(batch, 4)):
  %w : Float(4) = prim::Constant[param="w"]()
  %one : int = prim::Constant[value=1]()
  %y : Tensor = aten::add(%x, %w, %one)
  return (%y)
"""


def _keyed(w):
    g = parse_graph(KEYED)
    (c,) = [n for n in g.nodes if n.attrs.get("param") == "w"]
    c.attrs["value"] = w
    return g


def test_segment_key_is_the_documented_sha256():
    w = np.arange(4, dtype=np.float32)
    g = _keyed(w)
    want = hashlib.sha256()
    want.update(f"srcore-segment/{KEY_VERSION}/te\n".encode())
    want.update(print_graph(g).encode())
    want.update(b"<f4(4,)" + w.tobytes())
    assert KEY_VERSION == 1 and segment_key("te", g) == want.hexdigest()
    # anything that changes what the engine computes changes the key; nothing else does
    assert segment_key("te", _keyed(w.copy())) == segment_key("te", g)
    others = [segment_key("te2", g), segment_key("te", _keyed(w + 1)), segment_key("te", _keyed(w.astype(np.float64))),
              segment_key("te", _keyed(w.reshape(2, 2))), segment_key("te", _keyed(w[::-1].copy())),
              segment_key("te", parse_graph(KEYED.replace("batch", "n")))]
    assert len(set(others)) == len(others) and segment_key("te", g) not in others
    # a non-contiguous constant keys like its contiguous copy
    strided = np.arange(8, dtype=np.float32)[::2]
    assert segment_key("te", _keyed(strided)) == segment_key("te", _keyed(np.ascontiguousarray(strided)))


TWO_PARAMS = """graph(%x : Float(4)):
  %w : Float(4) = prim::Constant[param="w"]()
  %one : int = prim::Constant[value=1]()
  %a : Tensor = aten::add(%x, %w, %one)
  %s : Float() = prim::Constant[param="s"]()
  %y : Tensor = aten::mul(%a, %s)
  return (%y)
"""


def test_every_array_constant_is_keyed_wherever_it_is():
    def keyed(w, s):
        g = parse_graph(TWO_PARAMS)
        for n in g.nodes:
            if n.attrs.get("param") in ("w", "s"):
                n.attrs["value"] = {"w": w, "s": s}[n.attrs["param"]]
        return g
    w, s = np.arange(4, dtype=np.float32), np.array(2.0, np.float32)    # s: 0-d, after the first op
    want = hashlib.sha256(f"srcore-segment/{KEY_VERSION}/te\n".encode())
    want.update(print_graph(keyed(w, s)).encode())
    want.update(b"<f4(4,)" + w.tobytes())
    want.update(b"<f4(1,)" + s.tobytes())       # (np.ascontiguousarray makes it 1-d)
    assert segment_key("te", keyed(w, s)) == want.hexdigest()
    assert segment_key("te", keyed(w, np.array(3.0, np.float32))) != want.hexdigest()


# ---------------------------------------------------------------------------------------------
# fallback


class Module:
    def __init__(self, fn):
        self.fn, self.runtimes = fn, 0

    def runtime(self):
        self.runtimes += 1
        return self.fn


def test_segment_fallback_loads_once_with_plain_options_and_owns_its_results():
    loads = []
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    other = np.ones(3, np.float32)

    def load(graph, options):
        loads.append((graph, options))
        return Module(lambda a, b: (a[0], b * 2, a.T.copy(), 7))
    opts = srcore.Options(backends=("cpu",), optimize=True, manage_output_tensors=True, require_full_compilation=True)
    fb = SegmentFallback("G", opts, load)
    assert loads == [] and fb.backends == ("cpu",) and fb.graph == "G"
    assert (fb.options.optimize, fb.options.manage_output_tensors, fb.options.require_full_compilation) == (
        False, False, False)
    view, doubled, fresh, seven = fb(x, other)
    np.testing.assert_array_equal(view, x[0])
    assert not np.may_share_memory(view, x) and seven == 7
    np.testing.assert_array_equal(doubled, other * 2)
    fb(x, other)
    assert len(loads) == 1 and loads[0] == ("G", fb.options)
    # one result, sharing or not
    assert not np.may_share_memory(SegmentFallback("G", opts, lambda g, o: Module(lambda a: a[1:]))(x), x)
    same = x.copy()
    assert SegmentFallback("G", opts, lambda g, o: Module(lambda a: same))(x) is same
    assert SegmentFallback("G", opts, lambda g, o: Module(lambda a: 3.5))(x) == 3.5


def test_segment_fallback_loads_once_under_concurrent_first_calls():
    import threading
    from concurrent.futures import ThreadPoolExecutor

    loads = []
    gate = threading.Event()

    def load(graph, options):
        loads.append(1)
        gate.wait(5)
        return Module(lambda a: a + 1)
    fb = SegmentFallback("G", srcore.Options(backends=("cpu",)), load)
    with ThreadPoolExecutor(4) as ex:
        futs = [ex.submit(fb, np.full(2, i, np.float32)) for i in range(4)]
        gate.set()
        outs = [f.result() for f in futs]
    assert len(loads) == 1
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(o, np.full(2, i + 1, np.float32))


# ---------------------------------------------------------------------------------------------
# specialize

SYMBOLIC = """graph(%x : Float(batch, 4, 3)):
  %zero : int = prim::Constant[value=0]()
  %m1 : int = prim::Constant[value=-1]()
  %a : Tensor = aten::relu(%x)
  %n : int = aten::size(%a, %zero)
  %l : int[] = prim::ListConstruct(%n, %m1)
  %r : Tensor = aten::reshape(%a, %l)
  return (%r)
"""


def _kinds(g):
    return [n.kind for n in g.nodes if n.kind != "prim::Constant"]


def test_specialize_types_the_graph_and_folds_the_chain():
    g = parse_graph(SYMBOLIC)
    s = specialize(g, [(5, 4, 3)])
    assert _kinds(s) == ["aten::relu", "aten::reshape"]
    assert str(s.inputs[0].type) == "Float(5, 4, 3)" and str(s.outputs[0].type) == "Float(5, 12)"
    (shape,) = [n.inputs[1] for n in s.nodes if n.kind == "aten::reshape"]
    assert shape.node.attrs["value"] == [5, -1]
    # the original is untouched
    assert _kinds(g) == ["aten::relu", "aten::size", "prim::ListConstruct", "aten::reshape"]
    assert str(g.inputs[0].type) == "Float(batch, 4, 3)"


def test_specialize_refuses_shapes_that_do_not_fit():
    g = parse_graph(SYMBOLIC)
    with pytest.raises(EngineBuildError, match=r"^2 input shapes for a segment of 1 inputs$"):
        specialize(g, [(5, 4, 3), (1,)])
    with pytest.raises(EngineBuildError, match=r"^inputs of shapes \(5, 4, 2\) do not fit the segment: "):
        specialize(parse_graph(SYMBOLIC.replace("aten::relu(%x)", "aten::add(%x, %w, %one)").replace(
            "%m1 : int", "%one : int = prim::Constant[value=1]()\n  %w : Float(4, 3) = prim::Constant[param=\"w\"]()"
            "\n  %m1 : int")), [(5, 4, 2)])


STATIC = SYMBOLIC.replace("batch", "2")


def test_specialize_with_known_values_folds_without_propagating():
    g = parse_graph(STATIC)
    # for the graph's own static shapes, the known values are folded as they are (7 is not the
    # true batch: it shows no propagation ran)
    s = specialize(g, [(2, 4, 3)], known={"n": 7, "l": [7, -1], "nowhere": 1})
    assert _kinds(s) == ["aten::relu", "aten::reshape"]
    (shape,) = [n.inputs[1] for n in s.nodes if n.kind == "aten::reshape"]
    assert shape.node.attrs["value"] == [7, -1]
    s = specialize(g, [(2, 4, 3)], known={"n": 7})
    assert _kinds(s) == ["aten::relu", "prim::ListConstruct", "aten::reshape"]
    (n,) = [n for n in s.nodes if n.kind == "prim::ListConstruct"]
    assert n.inputs[0].node.attrs["value"] == 7
    # nothing known: the graph as it is
    assert _kinds(specialize(g, [(2, 4, 3)], known={})) == _kinds(g)
    # other shapes than the graph's: propagated, the known values ignored
    s = specialize(g, [(3, 4, 3)], known={"n": 7})
    (shape,) = [n.inputs[1] for n in s.nodes if n.kind == "aten::reshape"]
    assert shape.node.attrs["value"] == [3, -1] and str(s.outputs[0].type) == "Float(3, 12)"
    # a graph whose input has an unknown shape is never "typed for" any shapes
    s = specialize(parse_graph(SYMBOLIC.replace("Float(batch, 4, 3)", "Float(*, *, *)")), [(2, 4, 3)],
                   known={"n": 7})
    (shape,) = [n.inputs[1] for n in s.nodes if n.kind == "aten::reshape"]
    assert shape.node.attrs["value"] == [2, -1]


def test_specialize_names_every_shape_of_a_signature_that_does_not_fit():
    g = parse_graph("""graph(%x : Float(batch, 4), %y : Float(batch, 4)):
  %one : int = prim::Constant[value=1]()
  %z : Tensor = aten::add(%x, %y, %one)
  return (%z)
""")
    with pytest.raises(EngineBuildError, match=r"^inputs of shapes \(2, 4\), \(3, 5\) do not fit the segment: "):
        specialize(g, [(2, 4), (3, 5)])


def test_specialize_keeps_a_non_tensor_input_as_it_is():
    # an int read from outside the segment (a len the segment may not copy) has no shape: it
    # stays an int, and the tensors computed with it keep their dtype
    g = parse_graph("""graph(%x : Float(batch, 3), %n : int):
  %a : Tensor = aten::relu(%x)
  %y : Tensor = aten::mul(%a, %n)
  %z : Tensor = aten::sigmoid(%y)
  return (%z)
""")
    s = specialize(g, [(2, 3), ()])
    assert [str(v.type) for v in s.inputs] == ["Float(2, 3)", "int"]
    assert str(s.outputs[0].type) == "Float(2, 3)"
    # first among the inputs: the tensors after it are typed all the same
    g = parse_graph("""graph(%n : int, %x : Float(batch, 3)):
  %a : Tensor = aten::relu(%x)
  %y : Tensor = aten::mul(%a, %n)
  return (%y)
""")
    s = specialize(g, [(), (4, 3)])
    assert [str(v.type) for v in s.inputs] == ["int", "Float(4, 3)"] and str(s.outputs[0].type) == "Float(4, 3)"


def test_specialize_takes_an_untyped_input_for_a_tensor_of_the_shape():
    g = parse_graph(SYMBOLIC)
    g.inputs[0].type = None
    s = specialize(g, [(5, 4, 3)])
    assert str(s.inputs[0].type) == "Tensor(5, 4, 3)"
