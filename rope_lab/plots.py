"""Figures for the course: pure functions, parameters in, a matplotlib ``Figure`` out.

No pyplot state: every function builds its own ``Figure`` (so nothing is drawn twice and
nothing leaks between cells), uses the colour-blind-safe Okabe–Ito palette, and sets a
title and labelled axes. Notebooks display the returned figure; widgets redraw it.

Sections follow the notebooks; each function's docstring names the data it plots so tests
can read it back from ``fig.axes``.
"""

from __future__ import annotations

import functools
import io

import matplotlib
from matplotlib.figure import Figure

# Okabe & Ito (2008), distinguishable under the common colour-vision deficiencies.
PALETTE = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)
SEQUENTIAL_CMAP = "viridis"
DIVERGING_CMAP = "RdBu_r"

# Sized for a projector: large enough text, modest resolution so redraws stay fast.
COURSE_STYLE = {
    "figure.dpi": 90,
    "savefig.dpi": 90,
    "font.size": 12,
    "axes.titlesize": 13,
    "axes.labelsize": 12,
    "legend.fontsize": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
    "figure.constrained_layout.use": True,
}


def course_style(plot):
    """Decorator: build the figure under the course's rc settings, without touching globals."""

    @functools.wraps(plot)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(COURSE_STYLE):
            return plot(*args, **kwargs)

    return wrapper


def new_figure(nrows: int = 1, ncols: int = 1, *, width: float = 8.0, height: float = 4.0,
               **subplot_kw):
    """A fresh ``Figure`` and its axes (a single Axes when nrows = ncols = 1)."""
    figure = Figure(figsize=(width, height))
    axes = figure.subplots(nrows, ncols, squeeze=True, **subplot_kw)
    return figure, axes


def render_png(figure: Figure) -> bytes:
    """The PNG bytes a notebook would show for ``figure`` (used by widgets and tests)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


# --- 02 absolute position encodings -------------------------------------------------------

# --- 03 RoPE in 2D ------------------------------------------------------------------------

# --- 04 RoPE in d dimensions --------------------------------------------------------------

# --- 05 long-range decay ------------------------------------------------------------------

# Seven distinguishable colours: the palette without yellow, which vanishes on white.
_DECAY_COLOURS = tuple(c for c in PALETTE if c != "#F0E442")


@course_style
def base_sweep(bases=(1, 10, 100, 500, 5000, 10000, 50000), dim: int = 64,
               length: int = 2048):
    """Seed 002's experiment: s(Δ) = ⟨q, R_Δ k⟩ for q = k = all-ones, one line per base.

    Data: ``axes.lines[j]`` is (Δ, s(Δ)) for ``bases[j]``.
    """
    import torch

    from rope_lab import decay

    ones = torch.ones(dim, dtype=torch.float64)
    distances = torch.arange(length)
    figure, axes = new_figure(width=10.0, height=4.6)
    for j, base in enumerate(bases):
        score = decay.score_curve(ones, ones, distances, base=float(base))
        # base 1 swings over the full ±d range; drawn faint so the others stay visible.
        faint = base == 1
        axes.plot(distances, score, lw=0.6 if faint else 1.0, alpha=0.35 if faint else 0.95,
                  label=f"base {base:g}", color=_DECAY_COLOURS[j % len(_DECAY_COLOURS)])
    axes.set(xlabel="relative distance Δ (positions)", ylabel="score s(Δ) = ⟨q, R(Δ) k⟩",
             title=f"q = k = all-ones, d = {dim}: the score over distance for {len(bases)} bases",
             xlim=(0, length))
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return figure


@course_style
def bound_counterexample(q, k, distances, *, base: float = 10000.0, marked=None):
    """Seed 000's "bound" Σ_i cos(Δθ_i) (``lines[0]``) against the real score of q, k
    (``lines[1]``); ``marked`` adds a vertical line at one distance."""
    from rope_lab import decay

    dim = q.shape[-1]
    figure, axes = new_figure(width=9.0, height=4.2)
    axes.plot(distances, decay.cos_sum(distances, dim, base=base), color=PALETTE[0], lw=1.2,
              label="seed 000's “bound” Σ cos(Δθᵢ)")
    axes.plot(distances, decay.score_curve(q, k, distances, base=base), color=PALETTE[3],
              lw=1.2, label="score s(Δ) of the chosen k")
    axes.axhline(dim / 2, color=PALETTE[7], ls=":", lw=1,
                 label=f"largest possible: d/2 = {dim // 2}")
    if marked is not None:
        axes.axvline(marked, color=PALETTE[1], ls="--", lw=1, label=f"Δ = {marked}")
    axes.set(xlabel="relative distance Δ (positions)", ylabel="score",
             title=f"Unit pairs, d = {dim}, base {base:g}: the “bound” is broken",
             xlim=(float(distances[0]), float(distances[-1])))
    axes.legend(loc="upper right")
    return figure


def _draw_abel(axes, dim: int, base: float, max_distance: int):
    import torch

    from rope_lab import decay

    distances = torch.arange(max_distance + 1)
    axes.plot(distances, decay.abel_curve(distances, dim, base=base), color=PALETTE[2], lw=1.2)
    axes.set(xlabel="relative distance Δ (positions)", ylabel="(2/d)·Σⱼ |Sⱼ|",
             title=f"Abel bound factor, d = {dim}, base {base:g}", xlim=(0, max_distance),
             ylim=(0, (dim / 2 + 1) / 2 * 1.05))


@course_style
def abel_curve(dim: int = 128, base: float = 10000.0, max_distance: int = 256):
    """RoFormer's relative upper bound (1/(d/2))·Σ_j |S_j| over Δ (``axes.lines[0]``)."""
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
        axes.plot(distances, scores[0], color=PALETTE[0], lw=1.0)
        axes.set(xlabel="relative distance Δ (positions)", ylabel="score s(Δ) = ⟨q, R(Δ) k⟩",
                 xlim=(0, max_distance))
        return
    axes.plot(distances, scores[0], color=PALETTE[5], lw=0.8, label="one draw")
    if samples > 1:
        axes.plot(distances, scores.mean(0), color=PALETTE[1], lw=1.2,
                  label=f"mean of {samples} draws")
    axes.plot(distances, mean, color=PALETTE[7], lw=1.5, ls="--", label="exact E[s(Δ)]")
    axes.fill_between(distances, mean - std, mean + std, color=PALETTE[0], alpha=0.15, lw=0,
                      label="± 1 std")
    axes.set(xlabel="relative distance Δ (positions)", ylabel="score s(Δ) = ⟨q, R(Δ) k⟩",
             xlim=(0, max_distance))


@course_style
def random_vs_correlated(dim: int = 128, base: float = 10000.0, max_distance: int = 512,
                         samples: int = 200, seed: int = 0, noise: float = 1.0):
    """Left: independent q, k. Right: k = q + noise. In each: ``lines[0]`` one draw,
    ``lines[1]`` the Monte Carlo mean, ``lines[2]`` the exact expectation."""
    figure, axes = new_figure(1, 2, width=11.0, height=4.2, sharey=True)
    for panel, mode, title in ((axes[0], "random", "independent q, k"),
                               (axes[1], "correlated", f"k = q + {noise:g}·noise")):
        _draw_scores(panel, mode, dim, base, max_distance, samples, seed, noise)
        panel.set_title(f"{title}, d = {dim}, base {base:g}")
    axes[0].legend(loc="upper right")
    return figure


@course_style
def minimum_base_chart(found: dict, published: dict, models=()):
    """The smallest base meeting Σ_i cos(mθ_i) ≥ 0 for all m ≤ L, against L (log–log).

    Args:
        found: {L: base} computed here (``lines[0]``).
        published: {L: base} from the paper (``lines[1]``).
        models: (name, L, base) of real models, drawn as labelled points.
    """
    figure, axes = new_figure(width=8.0, height=4.6)
    lengths = sorted(found)
    axes.loglog(lengths, [found[n] for n in lengths], "o-", color=PALETTE[0],
                label="minimum base (this notebook)")
    lengths = sorted(published)
    axes.loglog(lengths, [published[n] for n in lengths], "s", mfc="none", ms=10,
                color=PALETTE[3], label="published (Men et al. 2024)")
    for j, (name, length, base) in enumerate(models):
        axes.loglog([length], [base], "^", ms=8, color=PALETTE[2],
                    label="base real models use" if j == 0 else None)
        axes.annotate(name, (length, base), textcoords="offset points", xytext=(6, -4),
                      fontsize=9)
    axes.set(xlabel="context length L (tokens)", ylabel="RoPE base",
             title="Base needed for Σ cos(mθᵢ) ≥ 0 up to L (d = 128)")
    axes.legend(loc="upper left")
    return figure


@course_style
def decay_and_abel(base: float = 10000.0, dim: int = 128, max_distance: int = 1024,
                   mode: str = "ones", noise: float = 1.0, seed: int = 0):
    """The widget's figure. Left: s(Δ) for the chosen q/k mode (``lines[0]`` one draw — the
    only line for "ones" — then the exact mean). Right: the Abel factor (2/d)·Σ_j |S_j|
    (``axes[1].lines[0]``)."""
    figure, (left, right) = new_figure(1, 2, width=10.0, height=4.0)
    _draw_scores(left, mode, dim, base, max_distance, 1, seed, noise)
    left.set_title(f"score, q/k: {mode}, d = {dim}, base {base:.3g}")
    if mode != "ones":
        left.legend(loc="upper right")
    _draw_abel(right, dim, base, max_distance)
    right.set_title(f"Abel factor, d = {dim}, base {base:.3g}")
    return figure


# --- 06 length extrapolation --------------------------------------------------------------

# --- 07 linear attention ------------------------------------------------------------------

# --- 08 RoPE beyond 1D --------------------------------------------------------------------

# --- 09 performance -----------------------------------------------------------------------
