"""Figures of notebook 07 RoPE and linear attention."""

from __future__ import annotations

from rope_lab.i18n import figure_text as _
from rope_lab.plots.style import (
    course_style,
    fixed_layout_figure,
    live,
    new_figure,
    nice_limit,
    number,
    role,
)


@course_style
def linear_attention_normalizers(base: float = 100.0, dim: int = 8, length: int = 256,
                                 seed: int = 0):
    """Causal denominators of linear attention per query position m, rotated or not.

    Random q, k ~ N(0, 1) of shape ``(length, dim)`` (seeded), φ = elu + 1. Top axes: the
    unrotated Σ_n φ(q_m)ᵀφ(k_n) (``axes[0].lines[0]``); bottom axes, on its own scale so its
    sign shows: the rotated Σ_n (R_m φ(q_m))ᵀ(R_n φ(k_n)) (``axes[1].lines[0]``), with the
    positions where it is ≤ 0 marked (``axes[1].lines[1]``). A live figure: a panel updates
    it in place.
    """
    figure, (top, bottom) = fixed_layout_figure(2, 1, width=8.5, height=5.4, left=0.12,
                                                right=0.97, bottom=0.11, top=0.88,
                                                hspace=0.15, sharex=True)
    plain_line, = top.plot([], [], color=role("reference"), linewidth=1.8)
    rotated_line, = bottom.plot([], [], color=role("mistake"), linewidth=1.8)
    negative, = bottom.plot([], [], "v", color=role("reference"), markersize=4,
                            label=_("≤ 0: a division by zero or a sign flip"))
    bottom.axhline(0.0, color=role("reference"), linewidth=1.0)
    top.set_ylabel(_("unrotated"))
    bottom.set(xlabel=_("query position m (tokens)"), ylabel=_("rotated"))
    top.text(0.01, 0.95, _("unrotated Σₙ φ(qₘ)·φ(kₙ): what RoFormer divides by"),
             transform=top.transAxes, va="top", color=role("reference"))
    bottom.text(0.01, 0.95, _("rotated Σₙ (Rₘφ(qₘ))·(Rₙφ(kₙ)): the tempting mistake"),
                transform=bottom.transAxes, va="top", color=role("mistake"))
    bottom.legend(loc="lower right")

    def update(base=base, dim=dim, length=length, seed=seed):
        import torch

        from rope_lab import linear_attention as la

        generator = torch.Generator().manual_seed(seed)
        q, k = torch.randn(2, length, dim, generator=generator, dtype=torch.float64)
        plain = la.linear_attention_normalizers(q, k, causal=True, rotated=False).numpy()
        rotated = la.linear_attention_normalizers(q, k, causal=True, rotated=True,
                                                  base=base).numpy()
        positions = range(length)
        plain_line.set_data(positions, plain)
        rotated_line.set_data(positions, rotated)
        bad = rotated <= 0
        negative.set_data([m for m in positions if bad[m]], rotated[bad])
        top.set_xlim(0, length - 1)
        # Round limits: they stay put while a slider moves the curves a little.
        top.set_ylim(0, nice_limit(1.05 * plain.max()))
        # One scale for every base of the panel (zero in the middle: the sign is the point),
        # so moving the base shows the rotated sum change, not its axis.
        reach = max(abs(rotated).max(), *(
            abs(la.linear_attention_normalizers(q, k, causal=True, rotated=True,
                                                base=other)).max()
            for other in (1.0, 10.0, 100.0, 1e3, 1e4)))
        bottom.set_ylim(-nice_limit(1.05 * float(reach)), nice_limit(1.05 * float(reach)))
        top.set_title(_("Causal normalizers, d = {dim}, base = {base}: rotated ≤ 0 at {count} "
                        "of {length} positions").format(
                            dim=number(dim), base=number(base), count=number(int(bad.sum())),
                            length=number(length)))
        return None  # the static layer depends on the limits only

    return live(figure, update, animated=[plain_line, rotated_line, negative, top.title])


@course_style
def attention_cost(lengths, seconds: dict, dim: int):
    """Measured seconds per call against sequence length L, log–log.

    ``seconds`` maps a method name ("softmax", "linear") to one time per length; dashed
    grey guides show slopes ∝ L and ∝ L² through each method's last point.
    """
    figure, axes = new_figure(width=7.5, height=4.2)
    lengths = list(lengths)
    styles = {"softmax": (role("reference"), _("softmax attention, O(L²·d)")),
              "linear": (role("rope"), _("linear attention (prefix sums), O(L·d²)"))}
    for name, times in seconds.items():
        colour, label = styles.get(name, (None, name))
        axes.loglog(lengths, [t * 1e3 for t in times], "o-", color=colour, label=label)
    # Guides through the longest length, where timings are least noisy.
    guides = {}
    for name, power in (("linear", 1), ("softmax", 2)):
        if name in seconds:
            last = seconds[name][-1] * 1e3
            guides[power] = [last * (length / lengths[-1]) ** power for length in lengths]
            axes.loglog(lengths, guides[power], "--", color=role("context"), linewidth=1.0)
    if len(lengths) > 1:
        _label_guides(axes, lengths, guides,
                      [[t * 1e3 for t in times] for times in seconds.values()])
    axes.set_xticks(lengths, [str(length) for length in lengths])
    axes.set_xticks([], minor=True)
    axes.set(title=_("Causal attention, one head, d = {dim}\n(measured on this machine)")
             .format(dim=dim), xlabel=_("sequence length L (tokens)"),
             ylabel=_("time per call (ms)"))
    axes.legend(loc="upper left")
    return figure


def _label_guides(axes, lengths, guides: dict, measured: list) -> None:
    """Write "∝ L" / "∝ L²" on each guide halfway (in log) between two measured lengths,
    where no marker sits, on the side of the guide away from the nearest other curve: a
    label at a measured point landed on its marker whenever the timings followed the
    guide."""
    import math

    middle = len(lengths) // 2
    x = math.sqrt(lengths[middle - 1] * lengths[middle])

    def height(values):  # a straight segment in log–log, at its log-midpoint
        return (math.log(values[middle - 1]) + math.log(values[middle])) / 2

    for power, guide in guides.items():
        here = height(guide)
        others = [height(curve) for curve in [*measured, *guides.values()] if curve is not guide]
        room_above = min((o - here for o in others if o > here), default=math.inf)
        room_below = min((here - o for o in others if o < here), default=math.inf)
        below = room_below > room_above
        # below a rising line the text runs right, above it left: away from the line
        axes.annotate(f"∝ L{'²' if power == 2 else ''}", (x, math.exp(here)),
                      xytext=(4, -6) if below else (-4, 6), textcoords="offset points",
                      color=role("context"), fontsize=12, ha="left" if below else "right",
                      va="top" if below else "bottom")
