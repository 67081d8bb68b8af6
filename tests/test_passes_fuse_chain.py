"""fuse_elementwise_chains + srcore::ew_chain: random chains give the unfused torch values; the conditions hold."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from srcore.ir import parse_graph, print_graph
from srcore.passes.fuse_chain import fuse_elementwise_chains

torch = pytest.importorskip("torch")

STEP = st.one_of(
    st.tuples(st.sampled_from(["relu", "sigmoid", "tanh"])),
    st.tuples(st.sampled_from(["add", "sub", "mul", "div"]), st.just("s"),
              st.sampled_from([0.5, 1.5, -2.0, 3, 0.1])),
    st.tuples(st.sampled_from(["add", "sub", "mul"]), st.just("t"), st.sampled_from([0, 1, 2])),
)


def _torch_chain(steps, x, ops):
    y = x
    for s in steps:
        if len(s) == 1:
            y = getattr(torch, s[0])(y)
            continue
        name, kind, v = s
        other = v if kind == "s" else ops[v]
        y = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[name](y, other)
    return y


def _term_scale(steps, x, ops):
    """Per element, the chain run on magnitudes (|y| + |other| for add/sub, |y| * |other| and
    |y| / |other| for mul/div; the unary ops are contractions): rounding errors scale with it,
    not with the result, which cancellation makes arbitrarily small (torch's and numpy's float32
    tanh differ by an ulp, and (tanh + 1.5 + b - b + 1.5 + x) / 0.1 took that to 4.5e-6 of a
    result of -1.06)."""
    y = np.abs(x.astype(np.float64))
    for s in steps:
        if len(s) == 1:
            y = np.maximum(y, 1.0)   # |relu/sigmoid/tanh(v)| <= max(|v|, 1)
            continue
        name, kind, v = s
        other = np.abs(np.float64(v) if kind == "s" else ops[v].astype(np.float64))
        y = y + other if name in ("add", "sub") else (y * other if name == "mul" else y / other)
    return y


def _assert_close(got, ref, tol, scale):
    err = np.abs(np.asarray(got, np.float64) - ref)
    assert np.all(err <= tol * np.maximum(scale, 1.0)), (err.max(), (err / np.maximum(scale, 1.0)).max(), tol)


def _graph_text(steps, dtype):
    t = "Float" if dtype == "float32" else "Double"
    lines = [f"graph(%x : {t}(3, 4), %a : {t}(3, 4), %b : {t}(4)):", "  %one : int = prim::Constant[value=1]()"]
    cur, names = "%x", {0: "%x", 1: "%a", 2: "%b"}
    for i, s in enumerate(steps):
        if len(s) == 1:
            lines.append(f"  %v{i} : {t}(3, 4) = aten::{s[0]}({cur})")
        else:
            name, kind, v = s
            if kind == "s":
                ct = "float" if isinstance(v, float) else "int"
                lines.append(f"  %c{i} : {ct} = prim::Constant[value={v}]()")
                other = f"%c{i}"
            else:
                other = names[v]
            alpha = ", %one" if name in ("add", "sub") else ""
            lines.append(f"  %v{i} : {t}(3, 4) = aten::{name}({cur}, {other}{alpha})")
        cur = f"%v{i}"
    lines.append(f"  return ({cur})")
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEP, min_size=2, max_size=10), st.sampled_from(["float32", "float64"]), st.integers(0, 2**31 - 1))
def test_random_chains_fuse_and_match_torch(steps, dtype, seed):
    import srcore
    from srcore_cpu.kernels.fused_elementwise import ew_chain

    g = parse_graph(_graph_text(steps, dtype))
    assert fuse_elementwise_chains(g)
    (fused,) = [n for n in g.all_nodes() if n.kind == "srcore::ew_chain"]
    assert [n.kind for n in g.all_nodes() if n.kind != "prim::Constant"] == ["srcore::ew_chain"]
    rng = np.random.default_rng(seed)
    x, a = (rng.standard_normal((3, 4)) * 3).astype(dtype), (rng.standard_normal((3, 4)) + 2).astype(dtype)
    b = (rng.standard_normal(4) + 2).astype(dtype)
    ref = _torch_chain(steps, *[torch.from_numpy(v) for v in (x,)], [torch.from_numpy(v) for v in (x, a, b)]).numpy()
    tol = 2e-6 if dtype == "float32" else 1e-12
    scale = _term_scale(steps, x, (x, a, b))
    program = fused.inputs[1].node.attrs["value"]
    ops = [dict(zip(("x", "a", "b"), (x, a, b)))[v.name] for v in fused.inputs[2:]]
    _assert_close(ew_chain(x, program, *ops), ref, tol, scale)     # generic kernel
    sm = srcore.StaticModule(g, options=srcore.Options(optimize=False))            # the matcher's compiled one
    y = sm(x, a, b)
    y = y[0] if isinstance(y, (list, tuple)) else y
    assert y.shape == ref.shape and y.dtype == ref.dtype
    _assert_close(y, ref, tol, scale)


def test_chain_stops_at_second_use_growth_and_other_dtype():
    g = parse_graph("""graph(%x : Float(3, 4), %big : Float(2, 3, 4), %l : Long(3, 4)):
  %one : int = prim::Constant[value=1]()
  %h : float = prim::Constant[value=0.5]()
  %t : bool = prim::Constant[value=1]()
  %a : Float(3, 4) = aten::mul(%x, %h)
  %b : Float(3, 4) = aten::relu(%a)
  %c : Float(3, 4) = aten::tanh(%b)
  %d : Float(2, 3, 4) = aten::add(%c, %big, %one)
  %e : Float(3, 4) = aten::sigmoid(%c)
  %f : Float(3, 4) = aten::mul(%e, %t)
  return (%d, %f, %l)
""")
    assert fuse_elementwise_chains(g)
    text = print_graph(g)
    # mul+relu+tanh fuse; %c has two uses so the chain ends there; the add grows the shape; a bool scalar stays out
    assert text.count("srcore::ew_chain") == 1 and 'value="mul:s:0.5;relu;tanh"' in text
    assert "aten::add" in text and "aten::sigmoid" in text and "aten::mul(%e" in text
