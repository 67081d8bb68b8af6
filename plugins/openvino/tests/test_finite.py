"""The input bound under which a model without NaN checks provably computes only finite values
(:mod:`srcore_openvino.finite`), and the engine running that model for inputs within it, the
checked model for every other input (NaN, infinities, values that could overflow)."""
from __future__ import annotations

import numpy as np
import openvino as ov
import openvino.opset14 as o
import pytest
import torch

import srcore
from srcore.ir.parser import parse_graph
from srcore_openvino import finite

pytestmark = pytest.mark.one_pass

F32_MAX = float(np.finfo(np.float32).max)


def _c(v):
    return o.constant(np.asarray(v, np.float32)).output(0)


def _model(fn, shape=(1, 2, 4, 4), dtype=np.float32):
    p = o.parameter(list(shape), dtype)
    return ov.Model([fn(p.output(0))], [p])


def test_a_scale_by_two_to_the_100_is_bounded_by_what_keeps_the_product_finite():
    """x * 2^100 stays under finite.LIMIT (2^112) for |x| < 2^12; with the rounding margins the
    bound is a power of two a little below that (hand-derived: 2^100 * B * 1.01^3 < 2^112)."""
    b = finite.input_bound(_model(lambda x: o.multiply(x, _c(2.0 ** 100)).output(0)))
    assert finite.LIMIT == 2.0 ** 112 and b == 2.0 ** 11, b


def test_a_convolution_grows_by_its_largest_sum_of_weight_magnitudes():
    """Two output channels, |weights| summing to 6 and to 2**60 (over 2 inputs x 3 x 3): the bound
    follows the larger, 2^60 * B * margins < 2^112, and none for weights of 2^130 in total."""
    w = np.zeros((2, 2, 3, 3), np.float32)
    w[0, 0, 0, :] = [1, -2, 3]
    w[1, 1, 1, 1] = -(2.0 ** 60)
    conv = lambda w: lambda x: o.convolution(x, o.constant(w), [1, 1], [1, 1], [1, 1], [1, 1]).output(0)  # noqa: E731
    b = finite.input_bound(_model(conv(w)))
    assert 2.0 ** 60 * b * 1.0625 < finite.LIMIT and b >= 2.0 ** 49, b
    w[1, 1, 1, 1] = F32_MAX
    assert finite.input_bound(_model(conv(w))) is None


def test_a_clamp_as_selects_keeps_the_larger_of_its_operands_bounds():
    """torch's clamp(x, 0, 6) is two Selects on Less: bounded by max(|x|, 6), so the bound is that
    of x * 2^100 alone (2^11, as above)."""
    def relu6(x):
        y = o.multiply(x, _c(2.0 ** 100)).output(0)
        y = o.select(o.less(y, _c(0.0)), _c(0.0), y).output(0)
        return o.select(o.less(_c(6.0), y), _c(6.0), y).output(0)
    assert finite.input_bound(_model(relu6)) == 2.0 ** 11


def _conv1x1(x, w, groups=None):
    w = np.asarray(w, np.float32)
    if groups:
        return o.group_convolution(x, o.constant(w), [1, 1], [0, 0], [0, 0], [1, 1]).output(0)
    return o.convolution(x, o.constant(w), [1, 1], [0, 0], [0, 0], [1, 1]).output(0)


def test_a_convolution_after_a_relu_grows_by_one_sign_of_its_weights():
    """relu(x) is in [0, B]: a 1x1 convolution with weights 2^100 and -2^100 over its two channels
    gives values in [-2^100 B, 2^100 B], where the sum of |weights| would say 2^101 B. Hand-derived
    with the margins (1.01 per op, the sum's 0.0625 of its terms' magnitudes 2^101 B):
    2^100 B * 1.01^2 * (1 + 2 * 0.0625) * 1.01 < 2^112 holds for B = 2^11, not 2^12."""
    w = np.array([2.0 ** 100, -(2.0 ** 100)]).reshape(1, 2, 1, 1)
    b = finite.input_bound(_model(lambda x: _conv1x1(o.relu(x).output(0), w)))
    assert 2.0 ** 100 * 2.0 ** 11 * 1.01 ** 3 * 1.125 < finite.LIMIT < 2.0 ** 100 * 2.0 ** 12 * 1.01 ** 3 * 1.125
    assert b == 2.0 ** 11, b


def test_channels_keep_their_own_intervals_through_a_depthwise_convolution():
    """1 -> 2 channels scaled by 2^100 and 1, then a depthwise convolution scaling them by 2^-100
    and 2^100 (and a per-channel bias): each channel ends within 2^100 B, where one bound for all
    channels would multiply the two largest gains (2^200: no bound at all). With the margins
    (1.01 per op, 1.0625 per convolution): 2^100 B 1.0625^2 1.01^4 + 1 < 2^112 for B = 2^11."""
    def net(x):
        y = _conv1x1(x, np.array([2.0 ** 100, 1.0]).reshape(2, 1, 1, 1))
        y = _conv1x1(y, np.array([2.0 ** -100, 2.0 ** 100]).reshape(2, 1, 1, 1, 1), groups=2)
        return o.add(y, _c(np.array([1.0, -1.0]).reshape(1, 2, 1, 1))).output(0)
    assert finite.input_bound(_model(net, shape=(1, 1, 4, 4))) == 2.0 ** 11


def test_within_is_true_only_for_finite_values_within_the_bound():
    """The engine's per-call test against an independent numpy reference: NaN, +-inf, the bound
    and the next float32 past it, -0.0, float64 values, a non-contiguous view, an empty array."""
    rng = np.random.default_rng(0)
    b = 2.0 ** 4
    past = np.nextafter(np.float32(b), np.float32(np.inf))
    base = rng.uniform(-b, b, (3, 4096)).astype(np.float32)
    for special in (None, np.nan, np.inf, -np.inf, b, -b, past, -past, -0.0, 0.0):
        x = base.copy()
        if special is not None:
            x[1, 2345] = special
        want = bool(np.all(np.isfinite(x)) and np.all(np.abs(x) <= b))
        assert finite.within([x], b) is want, special
        assert finite.within([base, x], b) is want and finite.within([x, base], b) is want, special
    assert finite.within([base[:, ::2]], b) and not finite.within([np.where(base > 15, np.nan, base)[:, ::3]], b)
    assert finite.within([base.astype(np.float64)], b) and not finite.within([np.full(8, 1e300)], 2.0 ** 120)
    assert finite.within([np.empty((0, 3), np.float32)], b)


def test_ops_without_a_rule_and_integer_inputs_give_no_bound():
    """A division (a NaN from 0 / 0), a log (NaN from negatives), an integer parameter: unproven."""
    assert finite.input_bound(_model(lambda x: o.divide(x, x).output(0))) is None
    assert finite.input_bound(_model(lambda x: o.log(x).output(0))) is None
    assert finite.input_bound(_model(lambda x: o.relu(x).output(0), dtype=np.int64)) is None
    # exp passes finite.LIMIT (2^112) past 77.6: the argument may reach 64 (x / 1024: 2^16 with the margins; x: 64)
    assert finite.input_bound(_model(lambda x: o.exp(o.multiply(x, _c(2.0 ** -10))).output(0))) == 2.0 ** 16
    assert finite.input_bound(_model(lambda x: o.exp(x).output(0))) == 64.0
    # a constant holding inf: unproven
    assert finite.input_bound(_model(lambda x: o.add(x, _c(np.inf)).output(0))) is None


# conv (1 -> 2 channels: 2x, -2x), then conv (2 -> 1: sum), then relu: for x = 3e38 the first gives
# +inf and -inf, the second their sum, NaN, and torch's relu keeps the NaN: an overflow making a
# NaN out of finite inputs, which only the checked model gives (the unchecked Relu makes it 0)
OVERFLOW = """graph(%x : Float(1, 1, 64, 64)):
  %w1 : Float(2, 1, 1, 1) = prim::Constant[param="w1"]()
  %w2 : Float(1, 2, 1, 1) = prim::Constant[param="w2"]()
  %none : NoneType = prim::Constant()
  %s : int[] = prim::Constant[value=[1, 1]]()
  %p : int[] = prim::Constant[value=[0, 0]]()
  %g : int = prim::Constant[value=1]()
  %a : Tensor = aten::conv2d(%x, %w1, %none, %s, %p, %s, %g)
  %b : Tensor = aten::conv2d(%a, %w2, %none, %s, %p, %s, %g)
  %r : Tensor = aten::relu(%b)
  %k : int[] = prim::Constant[value=[2, 2]]()
  %z : int[] = prim::Constant[value=[0, 0]]()
  %d : int[] = prim::Constant[value=[1, 1]]()
  %c : bool = prim::Constant[value=0]()
  %y : Tensor = aten::max_pool2d(%r, %k, %k, %z, %d, %c)
  return (%y)
"""


def _overflow_module(**engine_options):
    params = {"w1": np.array([2.0, -2.0], np.float32).reshape(2, 1, 1, 1),
              "w2": np.ones((1, 2, 1, 1), np.float32)}
    opts = srcore.Options(backends=("openvino", "cpu"), engine_min_block_size=1,
                          engine_options={"timing": False, "cache_dir": None, **engine_options})
    sm = srcore.StaticModule(parse_graph(OVERFLOW, params=params), options=opts)
    (seg,) = sm.partition.segments
    assert seg.status == "engine", sm.partition.format()
    return sm, seg.engine, params


def _torch(x, params):
    t = torch.from_numpy(x)
    a = torch.nn.functional.conv2d(t, torch.from_numpy(params["w1"]))
    b = torch.nn.functional.conv2d(a, torch.from_numpy(params["w2"]))
    return torch.nn.functional.max_pool2d(torch.relu(b), 2).numpy()


def test_finite_inputs_within_the_bound_run_unchecked_and_others_the_checked_model():
    """Ordinary inputs run the model without checks (the checked one is not even compiled) and give
    torch's values; NaN, -inf and a finite input that overflows inside the model run the checked
    model and give torch's NaN (where the unchecked model's Relu would say 0)."""
    sm, eng, params = _overflow_module()
    assert eng.finite_bound is not None and 2.0 ** 10 <= eng.finite_bound < 3e38 / 4
    assert eng.fast_n_ops < eng.n_ops and "run the model without NaN checks" in sm.partition.format()
    x = np.random.default_rng(0).standard_normal((1, 1, 64, 64)).astype(np.float32)
    np.testing.assert_allclose(sm(x), _torch(x, params), rtol=1e-6, atol=0)
    assert eng._checked_compiled is None   # nothing needed it yet
    for special in (np.nan, -np.inf, np.inf, 3e38, -3e38, 2 * eng.finite_bound):
        xs = x.copy()
        xs[0, 0, 1, 2] = special
        want = _torch(xs, params)
        got = sm(xs)
        assert np.array_equal(np.isnan(got), np.isnan(want)), (special, got, want)
        np.testing.assert_array_equal(np.nan_to_num(got), np.nan_to_num(want))
    assert np.isnan(_torch(np.full_like(x, 3e38), params)).all()   # the case that needs the checks
    assert eng._checked_compiled is not None
    # the bound itself is in: it runs unchecked, and is exact (2 * bound overflows nothing)
    xb = np.full_like(x, eng.finite_bound)
    np.testing.assert_array_equal(sm(xb), _torch(xb, params))


def test_small_inputs_run_the_checked_model_without_a_test():
    """Below FINITE_MIN_VALUES input values the bound test would cost more than the checks save:
    a static small input builds only the checked model."""
    small = OVERFLOW.replace("Float(1, 1, 64, 64)", "Float(1, 1, 4, 4)")
    params = {"w1": np.array([2.0, -2.0], np.float32).reshape(2, 1, 1, 1), "w2": np.ones((1, 2, 1, 1), np.float32)}
    opts = srcore.Options(backends=("openvino", "cpu"), engine_min_block_size=1,
                          engine_options={"timing": False, "cache_dir": None})
    sm = srcore.StaticModule(parse_graph(small, params=params), options=opts)
    (seg,) = sm.partition.segments
    assert seg.engine.finite_bound is None and seg.engine.fast_n_ops is None
    x = np.full((1, 1, 4, 4), 3e38, np.float32)
    assert np.array_equal(np.isnan(sm(x)), np.isnan(_torch(x, params)))


def test_without_the_bound_the_unchecked_model_would_be_wrong_on_an_overflow():
    """What the checked model is for: the same module with nan_checks=False gives 0 where torch
    (and the default engine) give NaN."""
    sm, eng, params = _overflow_module(nan_checks=False)
    assert eng.finite_bound is None
    x = np.full((1, 1, 64, 64), 3e38, np.float32)
    assert np.isnan(_torch(x, params)).all() and not np.isnan(sm(x)).any()


RELU_POOL = """graph(%x : Float(1, 2, 32, 64)):
  %r : Tensor = aten::relu(%x)
  %k : int[] = prim::Constant[value=[1, 1]]()
  %z : int[] = prim::Constant[value=[0, 0]]()
  %c : bool = prim::Constant[value=0]()
  %y : Tensor = aten::max_pool2d(%r, %k, %k, %z, %k, %c)
  return (%y)
"""


def test_the_unchecked_model_keeps_torchs_sign_of_zero_for_a_standalone_relu():
    """torch's relu gives -0 for -0 and +0 for negatives; the model for bounded inputs keeps
    ``Maximum(0, x)`` there (OpenVINO's Relu gives +0 for -0), bit for bit."""
    opts = srcore.Options(backends=("openvino", "cpu"), engine_min_block_size=1,
                          engine_options={"timing": False, "cache_dir": None})
    sm = srcore.StaticModule(parse_graph(RELU_POOL), options=opts)
    (seg,) = sm.partition.segments
    assert seg.status == "engine" and seg.engine.finite_bound is not None, sm.partition.format()
    x = np.random.default_rng(1).standard_normal((1, 2, 32, 64)).astype(np.float32)
    x[0, 0, 0, :3] = [-0.0, 0.0, -2.5]
    got = sm(x)
    want = torch.relu(torch.from_numpy(x)).numpy()
    assert seg.engine._checked_compiled is None   # the unchecked model ran
    assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want)), (got[0, 0], want[0, 0])
