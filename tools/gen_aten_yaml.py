"""Write ``srcore/ops/aten.yaml`` from torch's own schemas (needs torch; srcore never does at run time).

The op list is the common inference set below (with every aten op Static Runtime has a kernel
for, except backward and complex-only ops, and both names of each alias in
``srcore/ops/aliases.yaml``) plus every ``aten::`` op that
appears in the scripted and the traced graphs (frozen) of the benchmark models
in ``benchmarks/models.py`` (the public bench set). Every overload of each name is written,
``.out`` overloads included (they are ops too), and the single overloads of ``EXTRA_OVERLOADS``.

    python tools/gen_aten_yaml.py [--models PATH] [--check]

``--check`` exits 1 if the committed file differs from what would be written.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "srcore" / "ops" / "aten.yaml"
DEFAULT_MODELS = ROOT / "benchmarks" / "models.py"

COMMON = """
add sub mul div rsub neg abs exp log sqrt rsqrt pow reciprocal sign floor ceil round clamp clamp_min
clamp_max minimum maximum eq ne lt le gt ge logical_and logical_or logical_not bitwise_not where
masked_fill relu relu_ relu6 hardtanh gelu silu sigmoid tanh hardswish hardsigmoid leaky_relu elu
softplus mish erf linear addmm matmul bmm mm baddbmm dot t conv1d conv2d conv3d _convolution
convolution conv_transpose1d conv_transpose2d batch_norm layer_norm group_norm instance_norm
native_layer_norm softmax log_softmax _softmax dropout feature_dropout alpha_dropout max_pool1d
max_pool2d avg_pool1d avg_pool2d adaptive_avg_pool1d adaptive_avg_pool2d adaptive_max_pool2d
upsample_nearest2d upsample_bilinear2d __interpolate embedding sum mean amax amin max min argmax
argmin norm linalg_vector_norm cumsum topk prod std var all any gather index_select index scatter
cat stack chunk split split_with_sizes unbind view reshape flatten permute transpose contiguous
select slice unsqueeze squeeze expand expand_as repeat narrow arange zeros ones full zeros_like
ones_like full_like empty empty_like to type_as detach clone copy_ scaled_dot_product_attention
size dim numel len Int Float Bool ScalarImplicit __getitem__ __is__ __isnot__ __not__ floordiv
remainder format append item tensor floor_divide fill_ sort einsum masked_select nonzero triu tril
bitwise_and bitwise_or isnan isinf nan_to_num lerp addcmul
add_ sub_ mul_ div_ clamp_ hardtanh_ relu6_ gelu_ silu_ sigmoid_ tanh_ hardswish_ hardsigmoid_
leaky_relu_ elu_ mish_ masked_fill_ neg_ exp_ sqrt_ abs_ floor_ ceil_
pad constant_pad_nd reflection_pad1d reflection_pad2d replication_pad1d replication_pad2d _pad_circular selu celu
_log_softmax _native_batch_norm_legit_no_training _set_item addcmul_ bitwise_and_ bitwise_not_
bitwise_or_ bitwise_xor clamp_max_ clamp_min_ clear cos cos_ eq_ erf_ expm1 expm1_ extend
feature_alpha_dropout flip floor_divide_ ge_ gt_ index_put index_put_ insert le_ lerp_ list log10
log10_ log1p log1p_ log2 log2_ log_ log_sigmoid logical_and_ logical_not_ logical_or_ logical_xor
logical_xor_ logsumexp lt_ max_pool1d_with_indices max_pool2d_with_indices movedim nan_to_num_
native_batch_norm ne_ pop pow_ reciprocal_ remainder_ reshape_as reverse roll round_ rsqrt_ scatter_
sign_ sin sin_ square square_ threshold threshold_ tril_ triu_ trunc trunc_ view_as zero_
upsample_nearest1d upsample_nearest3d upsample_linear1d upsample_trilinear3d __contains__ warn
sym_size sym_numel str items keys values get popitem setdefault update Delete dict
new_zeros new_ones new_full new_empty
cumprod median one_hot upsample_bicubic2d select_scatter slice_scatter copy
lstm gru rnn_tanh rnn_relu lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell unsafe_chunk unsafe_split unsafe_split_with_sizes
argsort repeat_interleave pixel_shuffle pixel_unshuffle channel_shuffle native_channel_shuffle im2col col2im
scatter_add scatter_add_ index_add index_add_ eye fill numpy_T __and__ __or__ __xor__ rms_norm outer glu cosine_similarity unfold meshgrid fmod max_pool3d max_pool3d_with_indices avg_pool3d adaptive_avg_pool3d atan2 index_fill tensor_split
linalg_norm cdist pairwise_distance bucketize diag adaptive_max_pool1d grid_sampler grid_sampler_2d affine_grid_generator prelu rrelu softshrink hardshrink
scalar_tensor diagonal native_group_norm _cdist_forward _native_batch_norm_legit _adaptive_avg_pool2d embedding_bag
nonzero_static multi_margin_loss multilabel_margin_loss linalg_householder_product orgqr ormqr
IntImplicit __range_length _add_relu _addmm_activation _autocast_to_full_precision
_autocast_to_reduced_precision _conj _logcumsumexp _neg_view absolute absolute_ acos acos_ acosh acosh_
addbmm addcdiv addmv addr adjoint alias angle arccos arccos_ arccosh arccosh_ arcsin arcsin_ arcsinh arcsinh_
arctan arctan2 arctan2_ arctan_ arctanh arctanh_ asin asin_ asinh asinh_ atan atan2_ atan_ atanh atanh_
bitwise_left_shift bitwise_right_shift cholesky_inverse cholesky_solve clip clip_ concat concatenate conj
copysign cosh cpu cross deg2rad det diff digamma divide divide_ erfc erfinv exp2 fix fix_ fmax fmin frac gcd
ger greater greater_ greater_equal greater_equal_ heaviside histc hypot i0 igamma igammac imag index_copy
inner inverse isin isneginf isposinf kron lcm ldexp less less_ less_equal less_equal_ lgamma linalg_cond
linalg_cross linalg_det linalg_diagonal linalg_inv linalg_matmul linalg_matrix_exp linalg_matrix_power
linalg_solve linalg_solve_triangular linalg_tensorinv logaddexp logaddexp2 logcumsumexp logit mH mT matrix_H
matrix_exp matrix_power moveaxis mse_loss msort multiply multiply_ mv mvlgamma nanquantile narrow_copy
negative negative_ nextafter not_equal not_equal_ nuclear_norm polygamma positive quantile rad2deg ravel real
renorm resolve_conj resolve_neg row_stack scatter_reduce sgn signbit sinc sinh soft_margin_loss
special_digamma special_entr special_erf special_erfc special_erfcx special_erfinv special_exp2 special_expit
special_expm1 special_gammainc special_gammaincc special_gammaln special_i0 special_i0e special_i1
special_i1e special_log1p special_log_ndtr special_log_softmax special_logit special_logsumexp
special_multigammaln special_ndtr special_ndtri special_polygamma special_psi special_round special_sinc
special_softmax special_xlog1py special_xlogy special_zeta subtract subtract_ swapaxes  swapdims
 take take_along_dim tan  true_divide true_divide_ vdot vstack wait xlogy is_floating_point
fft_fft fft_ifft fft_rfft fft_irfft
""".split()


#: single overloads declared without the rest of their name's (``.out`` and the others): srcore has
#: kernels for these alone. name -> overload names ("" the unnamed one); written in torch's order.
EXTRA_OVERLOADS: dict[str, tuple[str, ...]] = {
    "searchsorted": ("Tensor", "Scalar"),
    "conv_transpose3d": ("input",),
    "_upsample_nearest_exact1d": ("", "vec"),
    "_upsample_nearest_exact2d": ("", "vec"),
    "_upsample_nearest_exact3d": ("", "vec"),
}


def model_ops(models_path: Path) -> tuple[set[str], set[str]]:
    """(aten op names, other op kinds) in the scripted/traced+frozen graphs of the bench models."""
    import torch

    if models_path.resolve() == DEFAULT_MODELS:  # the project's package (it imports its siblings)
        sys.path.insert(0, str(ROOT))
        mod = importlib.import_module("benchmarks.models")
    else:
        spec = importlib.util.spec_from_file_location("bench_models", models_path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    aten, other = set(), set()
    for name, (build, _meta) in sorted(mod.MODELS.items()):
        model, inputs = build()
        graphs = []
        for make in (lambda: torch.jit.script(model), lambda: torch.jit.trace(model, inputs)):
            try:
                frozen = torch.jit.freeze(make().eval())
            except Exception as e:  # a model that does not script is still traced
                print(f"  {name}: {type(e).__name__}: {str(e).splitlines()[0]}", file=sys.stderr)
                continue
            graphs.append(frozen.graph)
        for g in graphs:
            for kind in _kinds(g.nodes()):
                ns, _, base = kind.partition("::")
                (aten.add(base) if ns == "aten" else other.add(kind))
    return aten, other


def _kinds(nodes):
    for n in nodes:
        yield n.kind()
        for b in n.blocks():
            yield from _kinds(b.nodes())


def render(names: set[str], extra: dict[str, tuple[str, ...]] | None = None) -> tuple[str, list[str]]:
    """The YAML text of every overload of ``names`` and of the ``extra`` overloads (name -> overload
    names), and the names or overloads torch does not know."""
    import torch

    extra = EXTRA_OVERLOADS if extra is None else extra
    by_name: dict[str, list[str]] = {}
    seen = set()
    for s in torch._C._jit_get_all_schemas():
        base = s.name[6:]
        if s.name.startswith("aten::") and (base in names or s.overload_name in extra.get(base, ())):
            q = (s.name, s.overload_name)
            if q not in seen:
                seen.add(q)
                by_name.setdefault(base, []).append(str(s))
    missing = sorted(names - set(by_name))
    missing += [f"{n}.{o}" if o else n for n, ovs in sorted(extra.items()) for o in ovs
                if (f"aten::{n}", o) not in seen]
    lines = [
        "# GENERATED by tools/gen_aten_yaml.py from torch._C._jit_get_all_schemas()",
        f"# (torch {torch.__version__}); do not edit by hand: rerun the tool. Every overload of:",
        "# the common inference set + every aten:: op of the scripted/traced+frozen bench models;",
        "# and a few single overloads (EXTRA_OVERLOADS).",
        "# srcore never needs torch at run time: these declarations are all it knows of aten.",
    ]
    for name in sorted(by_name):
        lines.append("")
        for text in by_name[name]:  # torch's registration order: overload resolution ties use it
            lines.append(f"- func: {_yaml_scalar(text)}")
    return "\n".join(lines) + "\n", missing


def _yaml_scalar(text: str) -> str:
    # plain scalars cannot hold ': ', ' #', or start with quotes; quote those (YAML single quotes)
    if ": " in text or " #" in text or text[:1] in "'\"[{&*!|>%@`":
        return "'" + text.replace("'", "''") + "'"
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=DEFAULT_MODELS)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    names = set(COMMON)
    if args.models.exists():
        aten, other = model_ops(args.models)
        print(f"bench models use {len(aten)} aten ops; other kinds: {sorted(other)}", file=sys.stderr)
        names |= aten
    text, missing = render(names)
    if missing:
        print(f"names torch does not know (skipped): {missing}", file=sys.stderr)
    if args.check:
        return 0 if OUT.exists() and OUT.read_text() == text else 1
    OUT.write_text(text)
    print(f"wrote {OUT} ({text.count('- func:')} schemas)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
