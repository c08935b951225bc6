"""Figures of notebook 05 long-range decay."""

from __future__ import annotations

from rope_lab.i18n import figure_text as _
from rope_lab.plots.style import (
    course_style,
    fixed_layout_figure,
    live,
    new_figure,
    number,
    one_two_five,
    role,
)


@course_style
def base_sweep(bases=(1, 10, 100, 500, 5000, 10000, 50000), dim: int = 64,
               length: int = 2048, windows: int = 8):
    """Source post 002's experiment: s(Δ) = ⟨q, R_Δ k⟩ for q = k = all-ones, one small panel per
    base on a shared y-axis: the raw score faint, its mean over each of ``windows`` equal
    windows of Δ (the trend the notebook tests) thick.

    Data: ``figure.axes[j].lines[0]`` is (Δ, s(Δ)) for ``bases[j]`` and ``lines[1]`` the
    window means, drawn as steps over each window.
    """
    import math

    import numpy as np
    import torch

    from rope_lab import decay

    ones = torch.ones(dim, dtype=torch.float64)
    distances = torch.arange(length)
    columns = min(4, len(bases))
    rows = math.ceil(len(bases) / columns)
    figure, grid = new_figure(rows, columns, width=9.2, height=2.6 * rows + 0.9,
                              sharex=True, sharey=True)
    grid = np.asarray(grid).reshape(rows, columns)
    panels = grid.ravel()
    edges = torch.linspace(0, length, windows + 1).round().long()
    for axes, base in zip(panels, bases, strict=False):
        score = decay.score_curve(ones, ones, distances, base=float(base))
        axes.plot(distances, score, lw=0.7, alpha=0.35, color=role("rope"))
        means = torch.stack([score[a:b].mean() for a, b in zip(edges[:-1], edges[1:],
                                                               strict=True)])
        # one flat segment per window: x = (a, b, b, c, c, …), y = (m0, m0, m1, m1, …)
        axes.plot(edges.repeat_interleave(2)[1:-1].numpy(),
                  means.repeat_interleave(2).numpy(), color=role("rope"), lw=3)
        axes.axhline(0, color=role("context"), lw=1)
        axes.set_title(_("base {base}").format(base=number(base)), fontsize=14)
    for axes in panels[len(bases):]:
        axes.axis("off")
        axes.text(0.0, 0.5, _("faint: s(Δ) at each Δ\nthick: mean over each\nwindow of "
                              "{window} positions").format(window=length // windows),
                  fontsize=13,
                  transform=axes.transAxes, va="center")
    for column in range(columns):  # the lowest drawn panel of each column gets the x-axis
        drawn = [axes for axes in grid[:, column] if axes.axison]
        if drawn:
            drawn[-1].set_xlabel(_("distance Δ"))
            drawn[-1].xaxis.set_tick_params(labelbottom=True)
    for axes in grid[:, 0]:
        axes.set_ylabel(_("score s(Δ)"))
    panels[0].set(xlim=(0, length), ylim=(-1.08 * dim, 1.08 * dim))
    figure.suptitle(_("q = k = all-ones, d = {dim}: the score over distance, base by base")
                    .format(dim=dim),
                    fontsize=15)
    return figure


@course_style
def bound_counterexample(q, k, distances, *, base: float = 10000.0, marked=None):
    """Source post 000's "bound" Σ_i cos(Δθ_i) (``lines[0]``) against the real score of q, k
    (``lines[1]``); ``marked`` adds a vertical line at one distance."""
    from rope_lab import decay

    dim = q.shape[-1]
    figure, axes = new_figure(width=9.0, height=4.8)
    axes.plot(distances, decay.cos_sum(distances, dim, base=base), color=role("mistake"), lw=1.2,
              label=_("source post 000's “bound” Σ cos(Δθᵢ)"))
    axes.plot(distances, decay.score_curve(q, k, distances, base=base), color=role("rope"),
              lw=1.2, label=_("score s(Δ) of the chosen k"))
    axes.axhline(dim / 2, color=role("reference"), ls=":", lw=1,
                 label=_("largest possible: d/2 = {half}").format(half=dim // 2))
    if marked is not None:
        axes.axvline(marked, color=role("context"), ls="--", lw=1, label=f"Δ = {marked}")
    axes.set(xlabel=_("relative distance Δ (positions)"), ylabel=_("score"),
             title=_("Unit pairs, d = {dim}, base {base}: the “bound” is broken").format(
                 dim=dim, base=number(base)),
             xlim=(float(distances[0]), float(distances[-1])))
    # Under the axes: inside, it sat on the d/2 line (the bound's own start) and on Δ.
    figure.legend(loc="outside lower center", ncols=2)
    return figure


def _draw_abel(axes, dim: int, base: float, max_distance: int):
    import torch

    from rope_lab import decay

    distances = torch.arange(max_distance + 1)
    axes.plot(distances, decay.abel_curve(distances, dim, base=base), color=role("reference"),
              lw=1.2)
    axes.set(xlabel=_("relative distance Δ (positions)"), ylabel="(2/d)·Σⱼ |Sⱼ|",
             title=_("Abel bound factor, d = {dim}, base {base}").format(dim=dim,
                                                                         base=number(base)),
             xlim=(0, max_distance),
             ylim=(0, (dim / 2 + 1) / 2 * 1.05))


@course_style
def abel_curve(dim: int = 128, base: float = 10000.0, max_distance: int = 256):
    """RoFormer's relative upper bound (1/(d/2))·Σ_j |S_j| over Δ (``axes.lines[0]``)."""
    from rope_lab import _validate

    _validate.check_positive_int(max_distance, "max_distance")
    figure, axes = new_figure(width=8.0, height=3.8)
    _draw_abel(axes, dim, base, max_distance)
    return figure


def _draw_scores(axes, mode: str, dim: int, base: float, max_distance: int, samples: int,
                 seed: int, noise: float):
    """One panel: a sampled score curve, the sample mean (samples > 1), the exact mean and a
    ±1 std band; for mode "ones" only the (deterministic) curve."""
    import torch

    from rope_lab import decay

    distances = torch.arange(max_distance + 1)
    generator = torch.Generator().manual_seed(seed)
    q, k = decay.sample_qk(dim, mode=mode, noise=noise, samples=samples, generator=generator)
    scores = decay.score_curve(q, k, distances, base=base)
    mean = decay.expected_score(distances, dim, base=base, mode=mode, noise=noise)
    std = decay.score_std(distances, dim, base=base, mode=mode, noise=noise)
    if mode == "ones":  # nothing random: the curve is its own expectation
        axes.plot(distances, scores[0], color=role("rope"), lw=1.0)
        axes.set(xlabel=_("relative distance Δ (positions)"),
                 ylabel=_("score s(Δ) = ⟨q, R(Δ) k⟩"),
                 xlim=(0, max_distance))
        return
    axes.plot(distances, scores[0], color=role("context"), lw=0.8, label=_("one draw"))
    if samples > 1:
        axes.plot(distances, scores.mean(0), color=role("rope"), lw=1.2,
                  label=_("mean of {samples} draws").format(samples=samples))
    axes.plot(distances, mean, color=role("reference"), lw=1.5, ls="--",
              label=_("exact E[s(Δ)]"))
    axes.fill_between(distances, mean - std, mean + std, color=role("rope"), alpha=0.15, lw=0,
                      label=_("± 1 std"))
    axes.set(xlabel=_("relative distance Δ (positions)"),
             ylabel=_("score s(Δ) = ⟨q, R(Δ) k⟩"),
             xlim=(0, max_distance))


@course_style
def random_vs_correlated(dim: int = 128, base: float = 10000.0, max_distance: int = 512,
                         samples: int = 200, seed: int = 0, noise: float = 1.0):
    """Left: independent q, k. Right: k = q + noise. In each: ``lines[0]`` one draw,
    ``lines[1]`` the Monte Carlo mean, ``lines[2]`` the exact expectation."""
    figure, axes = new_figure(1, 2, width=9.2, height=4.4, sharey=True)
    for panel, mode, title in ((axes[0], "random", _("independent q, k")),
                               (axes[1], "correlated",
                                _("k = q + {noise:g}·noise").format(noise=noise))):
        _draw_scores(panel, mode, dim, base, max_distance, samples, seed, noise)
        panel.set_title(_("{title}, d = {dim}, base {base}").format(title=title, dim=dim,
                                                                    base=number(base)))
    axes[0].legend(loc="upper right")
    return figure


@course_style
def minimum_base_chart(found: dict, published: dict | None = None, models=()):
    """The smallest base meeting Σ_i cos(mθ_i) ≥ 0 for all m ≤ L, against L (log–log).

    Args:
        found: {L: base} computed here (``lines[0]``).
        published: {L: base} read from a paper's table (``lines[1]``); None or empty: no such
            line (notebook 05 shows only what it computes).
        models: (name, L, base) of real models, drawn as labelled points.
    """
    from matplotlib.ticker import NullLocator

    figure, axes = new_figure(width=8.0, height=4.6)
    lengths = sorted(found)
    axes.loglog(lengths, [found[n] for n in lengths], "o-", color=role("rope"),
                label=_("minimum base (this notebook)"))
    if published:
        lengths = sorted(published)
        axes.loglog(lengths, [published[n] for n in lengths], "s", mfc="none", ms=10,
                    color=role("reference"), label=_("published (Men et al. 2024)"))
    for j, (name, length, base) in enumerate(models):
        axes.loglog([length], [base], "^", ms=8, color=role("context"),
                    label=_("base real models use") if j == 0 else None)
        axes.annotate(name, (length, base), textcoords="offset points", xytext=(6, -4),
                      fontsize=12)
    axes.set(xlabel=_("context length L (tokens)"), ylabel=_("RoPE base"),
             title=_("Base needed for Σ cos(mθᵢ) ≥ 0 up to L (d = 128)"))
    # ticks where the data are (x: the lengths searched; y: 1-2-5 steps over the bases), so
    # a log axis never shows a single labelled tick
    shown = sorted({*found, *(published or {}), *(length for _, length, _ in models)})
    axes.set_xticks(shown, [number(length) for length in shown])
    bases = [*found.values(), *(published or {}).values(), *(base for *_, base in models)]
    low, high = axes.get_ylim()
    ticks = [t for t in one_two_five(min(bases), max(bases)) if low <= t <= high]
    if len(ticks) > 7:  # several decades: decades only
        ticks = [t for t in ticks if f"{t:e}".startswith("1.")]
    axes.set_yticks(ticks, [number(t) for t in ticks])
    axes.xaxis.set_minor_locator(NullLocator())
    axes.yaxis.set_minor_locator(NullLocator())
    axes.legend(loc="upper left")
    return figure


@course_style
def decay_and_abel(base: float = 10000.0, dim: int = 128, max_distance: int = 1024,
                   mode: str = "ones", noise: float = 1.0, seed: int = 0):
    """The widget's figure. Left: s(Δ) for the chosen q/k mode (``lines[0]`` one draw — the
    only line for "ones" — then the exact mean, with a ±1 std band). Right: the Abel factor
    (2/d)·Σ_j |S_j| (``axes[1].lines[0]``).

    Both y axes depend on d only (score in [−d, d], Abel factor in [0, (d/2 + 1)/2]), so
    moving the base never rescales them: a larger base visibly decays more slowly. A live
    figure: a panel updates it in place.
    """
    import numpy as np

    figure, (left, right) = fixed_layout_figure(1, 2, width=9.2, height=4.8, left=0.09,
                                                right=0.985, bottom=0.225, top=0.895,
                                                wspace=0.28)
    draw, = left.plot([], [], color=role("context"), lw=1.2, label=_("one draw"))
    mean, = left.plot([], [], color=role("reference"), lw=1.5, ls="--",
                      label=_("exact E[s(Δ)]"))
    band = left.fill_between([0, 1], [0, 0], [0, 0], color=role("rope"), alpha=0.15, lw=0,
                             label=_("± 1 std"))
    left.axhline(0.0, color=role("context"), lw=0.8)
    left.set(xlabel=_("relative distance Δ (positions)"),
             ylabel=_("score s(Δ) = ⟨q, R(Δ) k⟩"))
    # Under the axes: the curves are drawn over the static layer, and for some d and q/k
    # they fill any corner of the panel (correlated q, k run above d).
    legend = left.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=3,
                         handlelength=1.5, columnspacing=1.0, borderaxespad=0)
    abel, = right.plot([], [], color=role("reference"), lw=1.5)
    right.set(xlabel=_("relative distance Δ (positions)"), ylabel="(2/d)·Σⱼ |Sⱼ|")

    def update(base=base, dim=dim, max_distance=max_distance, mode=mode, noise=noise,
               seed=seed):
        import torch

        from rope_lab import decay

        distances = torch.arange(max_distance + 1)
        generator = torch.Generator().manual_seed(seed)
        q, k = decay.sample_qk(dim, mode=mode, noise=noise, samples=1, generator=generator)
        draw.set_data(distances.numpy(),
                      decay.score_curve(q, k, distances, base=base)[0].numpy())
        random = mode != "ones"  # "ones": nothing random, the curve is its own expectation
        draw.set_color(role("context"))
        for artist in (mean, band, legend):
            artist.set_visible(random)
        if random:
            expected = np.asarray(decay.expected_score(distances, dim, base=base, mode=mode,
                                                       noise=noise), dtype=float)
            spread = np.asarray(decay.score_std(distances, dim, base=base, mode=mode,
                                                noise=noise), dtype=float)
            x = distances.numpy()
            mean.set_data(x, expected)
            band.set_verts([np.column_stack((np.concatenate((x, x[::-1])),
                                             np.concatenate((expected - spread,
                                                             (expected + spread)[::-1]))))])
        left.set(xlim=(0, max_distance), ylim=(-1.05 * dim, 1.05 * dim))
        left.set_title(_("score, q/k: {mode}, d = {dim}, base {base}").format(
            mode=_(mode), dim=number(dim), base=number(base)))
        abel.set_data(distances.numpy(), decay.abel_curve(distances, dim, base=base).numpy())
        right.set(xlim=(0, max_distance), ylim=(0, (dim / 2 + 1) / 2 * 1.05))
        right.set_title(_("Abel factor, d = {dim}, base {base}").format(dim=number(dim),
                                                                        base=number(base)))
        return mode  # the legend shows for random q, k only

    return live(figure, update, animated=[draw, mean, band, abel, left.title, right.title])
