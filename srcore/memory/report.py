"""Reports of memory plans: a text table and a picture of lifetimes against offsets.

The picture has node positions on the x axis and byte offsets in the slab on
the y axis; each managed tensor is a rectangle spanning its lifetime and its
bytes, so reuse shows as rectangles stacked in time at the same height. The
dashed line is the liveness lower bound. SVG needs nothing; PNG needs
matplotlib.
"""
from __future__ import annotations

from html import escape
from typing import Any, Sequence

from .planner import Plan, TensorRequest, align, lower_bound, no_reuse_bytes

_PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
            "#9c755f", "#bab0ac"]


#: the columns of :func:`summary_rows` / :func:`summary_table` (the HTML report uses the same ones)
SUMMARY_COLUMNS = ("block", "owner", "tensors", "arena", "no reuse", "lower bound", "arena/lb", "arena/sum")


def summary_table(blocks: Sequence[dict[str, Any]]) -> list[tuple]:
    """One tuple per block, in :data:`SUMMARY_COLUMNS` order: ints for bytes, floats for the ratios."""
    out = []
    for r in blocks:
        lb, arena, nr = r["lower_bound_bytes"], r["arena_bytes"], r["no_reuse_bytes"]
        out.append((r["block"], r["owner"], r["managed_tensors"], arena, nr, lb,
                    arena / lb if lb else 1.0, arena / nr if nr else 1.0))
    return out


def summary_rows(blocks: Sequence[dict[str, Any]]) -> str:
    """A text table: per block, managed tensors, arena bytes, no-reuse sum, lower bound, ratios."""
    head = f"{'block':>5} {'owner':<12} {'tensors':>7} {'arena':>12} {'no reuse':>12} {'lower bound':>12} " \
           f"{'arena/lb':>8} {'arena/sum':>9}"
    lines = [head, "-" * len(head)]
    for block, owner, n, arena, nr, lb, r_lb, r_sum in summary_table(blocks):
        lines.append(f"{block:>5} {owner:<12} {n:>7} {arena:>12,} {nr:>12,} "
                     f"{lb:>12,} {r_lb:>8.3f} {r_sum:>9.3f}")
    return "\n".join(lines)


def render_svg(requests: Sequence[TensorRequest], plan: Plan, *, title: str = "", labels: dict | None = None,
               width: int = 900, height: int = 480) -> str:
    """An SVG picture of one block's plan."""
    margin_l, margin_r, margin_t, margin_b = 80, 20, 40, 40
    if requests:
        x_max = max(r.lifetime.end for r in requests) + 1
    else:
        x_max = 1
    y_max = max(plan.total_bytes, 1)
    pw, ph = width - margin_l - margin_r, height - margin_t - margin_b

    def sx(x):
        return margin_l + pw * x / x_max

    def sy(y):
        return margin_t + ph * (1 - y / y_max)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11">',
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>']
    for i, r in enumerate(requests):
        off = plan.offsets.get(r.key)
        if off is None:
            continue
        x0, x1 = sx(r.lifetime.start), sx(r.lifetime.end + 1)
        y0, y1 = sy(off + align(r.nbytes)), sy(off)
        name = (labels or {}).get(r.key, f"%{r.key}")
        parts.append(f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{max(x1 - x0, 1):.1f}" '
                     f'height="{max(y1 - y0, 1):.1f}" fill="{_PALETTE[i % len(_PALETTE)]}" '
                     f'fill-opacity="0.8" stroke="black" stroke-width="0.5">'
                     f'<title>{escape(str(name))}: {r.nbytes} bytes at {off}, '
                     f'nodes {r.lifetime.start}-{r.lifetime.end}</title></rect>')
    lb = lower_bound(requests)
    parts.append(f'<line x1="{margin_l}" x2="{width - margin_r}" y1="{sy(lb):.1f}" y2="{sy(lb):.1f}" '
                 f'stroke="red" stroke-dasharray="6,4"/>')
    parts.append(f'<text x="{width - margin_r}" y="{sy(lb) - 4:.1f}" text-anchor="end" fill="red">'
                 f'lower bound {lb:,} B</text>')
    parts.append(f'<line x1="{margin_l}" x2="{margin_l}" y1="{margin_t}" y2="{height - margin_b}" stroke="black"/>')
    parts.append(f'<line x1="{margin_l}" x2="{width - margin_r}" y1="{height - margin_b}" '
                 f'y2="{height - margin_b}" stroke="black"/>')
    parts.append(f'<text x="{margin_l - 6}" y="{margin_t + 4}" text-anchor="end">{y_max:,} B</text>')
    parts.append(f'<text x="{margin_l - 6}" y="{height - margin_b}" text-anchor="end">0</text>')
    parts.append(f'<text x="{width / 2}" y="{height - 10}" text-anchor="middle">node position '
                 f'(arena {plan.total_bytes:,} B, no reuse {no_reuse_bytes(requests):,} B, {plan.algorithm})</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def render_png(requests: Sequence[TensorRequest], plan: Plan, path: str, *, title: str = "",
               labels: dict | None = None) -> None:
    """The same picture as PNG (needs matplotlib); ``path`` may be a binary file object."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    fig, ax = plt.subplots(figsize=(10, 5))
    for i, r in enumerate(requests):
        off = plan.offsets.get(r.key)
        if off is None:
            continue
        ax.add_patch(Rectangle((r.lifetime.start, off), r.lifetime.end + 1 - r.lifetime.start, align(r.nbytes),
                               facecolor=_PALETTE[i % len(_PALETTE)], edgecolor="black", linewidth=0.5, alpha=0.85))
        if len(requests) <= 60:
            ax.text((r.lifetime.start + r.lifetime.end + 1) / 2, off + align(r.nbytes) / 2,
                    str((labels or {}).get(r.key, f"%{r.key}")), ha="center", va="center", fontsize=8)
    lb = lower_bound(requests)
    ax.axhline(lb, color="red", linestyle="--", label=f"lower bound {lb:,} B")
    ax.set_xlim(0, max((r.lifetime.end + 1 for r in requests), default=1))
    ax.set_ylim(0, max(plan.total_bytes, 1))
    ax.set_xlabel("node position")
    ax.set_ylabel("offset in arena (bytes)")
    ax.set_title(title or f"{plan.algorithm}: arena {plan.total_bytes:,} B")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)
