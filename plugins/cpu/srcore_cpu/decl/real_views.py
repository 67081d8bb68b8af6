"""Complex-aware ops on real tensors, matrix transposes, and Static Runtime's small native ops
(kernels in kernels/real_views.py)."""
from __future__ import annotations

from . import ALL, FLOATS, NUMERIC, family

_k = family("real_views")

KERNELS = (
    [_k(f"aten::{n}", "identity_view", ALL, kind="native")
     for n in ("conj", "_conj", "resolve_conj", "resolve_neg", "real", "alias", "cpu")]
    + [_k(f"aten::{n}{ov}", "matrix_transpose", ALL, kind="native")
       for n in ("mT", "mH", "matrix_H") for ov in ("", ".a")]
    + [_k("aten::positive", "positive", ALL, kind="native"), _k("aten::imag", "imag", ALL, kind="native"),
       _k("aten::_neg_view", "neg_view", NUMERIC, kind="native"),
       _k("aten::linalg_diagonal", "linalg_diagonal", ALL, kind="native"),
       _k("aten::sgn", "sgn", ALL), _k("aten::narrow_copy", "narrow_copy", ALL),
       _k("aten::IntImplicit", "int_implicit", ALL + ("uint8", "int8", "int16"), kind="native"),
       _k("aten::_add_relu.Tensor", "add_relu", NUMERIC), _k("aten::_add_relu.Scalar", "add_relu_scalar", NUMERIC),
       _k("aten::_addmm_activation", "addmm_activation", FLOATS), _k("aten::addcdiv", "addcdiv", NUMERIC),
       _k("aten::vstack", "vstack", ALL),
       _k("aten::_autocast_to_reduced_precision", "autocast_to_reduced_precision", ("*",), kind="native"),
       _k("aten::_autocast_to_full_precision", "autocast_to_full_precision", ("*",), kind="native")]
)
