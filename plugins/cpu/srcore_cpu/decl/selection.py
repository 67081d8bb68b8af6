"""Gathers, differences, quantiles, membership, histograms, losses (kernels in kernels/selection.py)."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import ALL, FLOATS, NUMERIC, family

_k = family("selection")

KERNELS = [
    _k("aten::take", "take", ALL), _k("aten::take_along_dim", "take_along_dim", ALL),
    _k("aten::ravel", "ravel", ALL, kind="native"), _k("aten::diff", "diff", ALL),
    _k("aten::quantile", "quantile", FLOATS + ("int64",)), _k("aten::quantile.scalar", "quantile", FLOATS),
    _k("aten::nanquantile", "nanquantile", FLOATS + ("int64",)), _k("aten::nanquantile.scalar", "nanquantile", FLOATS),
    _k("aten::msort", "msort", ALL), _k("aten::histc", "histc", FLOATS),
    # the compiled one (kernels/jit_binning.py) first; its matcher declines what it does not take
    Kernel("aten::histc", "cpu", "out", FLOATS, "srcore_cpu.kernels.selection:histc",
           matcher="srcore_cpu.kernels.selection:histc_matcher", priority=2),
    _k("aten::renorm", "renorm", FLOATS),
    _k("aten::mse_loss", "mse_loss", FLOATS), _k("aten::soft_margin_loss", "soft_margin_loss", FLOATS),
    _k("aten::isin.Tensor_Tensor", "isin", ALL), _k("aten::isin.Tensor_Scalar", "isin", ALL),
    _k("aten::isin.Scalar_Tensor", "isin", ALL), _k("aten::index_copy", "index_copy", ALL),
    _k("aten::logcumsumexp", "logcumsumexp", NUMERIC), _k("aten::_logcumsumexp", "logcumsumexp", NUMERIC),
    _k("aten::scatter_reduce.two", "scatter_reduce", NUMERIC), _k("aten::nonzero_static", "nonzero_static", ALL),
    _k("aten::multi_margin_loss", "multi_margin_loss", FLOATS + ("int64",)),
    _k("aten::multilabel_margin_loss", "multilabel_margin_loss", FLOATS + ("int64",)),
]
