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

# --- 06 length extrapolation --------------------------------------------------------------

# Scaling methods in the order the figures list them, with a colour each.
SCALING_COLOURS = {"default": PALETTE[7], "linear": PALETTE[0], "ntk": PALETTE[1],
                   "dynamic": PALETTE[2], "yarn": PALETTE[3], "llama3": PALETTE[4]}


def _scaled(method, dim, base, factor, original_length, beta_fast, beta_slow):
    """inv_freq (float64) of ``method``; dynamic at the length s·L, yarn with the betas."""
    import torch

    from rope_lab import scaling

    options = {"beta_fast": beta_fast, "beta_slow": beta_slow} if method == "yarn" else {}
    freqs, _ = scaling.scaled_inv_freq(
        method, dim, base=base, factor=factor, original_max_position=original_length,
        seq_len=round(factor * original_length), dtype=torch.float64, **options)
    return freqs


def _fast_log_axis(axis):
    """Log scale with plain tick labels ("1000", not mathtext 10³) and no minor ticks: text
    layout is most of a redraw, and the panel must redraw in ~0.1 s."""
    axis.axes.set_yscale("log")
    axis.set_minor_locator(matplotlib.ticker.NullLocator())
    axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}"))


def _draw_frequency_overlay(axes, dim, base, factor, original_length, method, beta_fast,
                            beta_slow):
    from rope_lab import scaling

    theta = _scaled("default", dim, base, 1.0, original_length, beta_fast, beta_slow)
    pairs = range(dim // 2)
    for name in scaling.METHODS:
        ratio = _scaled(name, dim, base, factor, original_length, beta_fast, beta_slow) / theta
        chosen = name == method
        label = "dynamic (at ℓ = sL)" if name == "dynamic" else name
        axes.plot(pairs, ratio.numpy(), color=SCALING_COLOURS[name], label=label,
                  linewidth=3.2 if chosen else 1.4, alpha=1.0 if chosen else 0.55,
                  zorder=3 if chosen else 2)
    axes.axhline(1 / factor, color="0.4", linestyle=":", linewidth=1)
    _fast_log_axis(axes.yaxis)
    axes.set(title=f"Rotation speed after scaling, s = {factor:g}",
             xlabel="pair i (0 = fastest)", ylabel="θ′ᵢ / θᵢ  (1 = unchanged, 1/s = PI)")
    axes.legend(loc="lower left", ncol=2, fontsize=9)


def _draw_wavelength_chart(axes, dim, base, factor, original_length, method, beta_fast,
                           beta_slow):
    from rope_lab import scaling

    theta = _scaled("default", dim, base, 1.0, original_length, beta_fast, beta_slow)
    wavelength = scaling.wavelengths(theta).numpy()
    turns = wavelength <= original_length
    pairs = list(range(dim // 2))
    colours = [PALETTE[2] if full else PALETTE[3] for full in turns]
    axes.bar(pairs, wavelength, color=colours, width=0.8)
    if method != "default":
        scaled = scaling.wavelengths(
            _scaled(method, dim, base, factor, original_length, beta_fast, beta_slow))
        axes.plot(pairs, scaled.numpy(), "o", color=SCALING_COLOURS[method], markersize=4,
                  label=f"{method}, s = {factor:g}")
    axes.axhline(original_length, color="0.2", linestyle="--", linewidth=1.2,
                 label=f"trained length L = {original_length}")
    if factor > 1:
        axes.axhline(factor * original_length, color="0.5", linestyle=":", linewidth=1.2,
                     label=f"target length sL = {round(factor * original_length)}")
    _fast_log_axis(axes.yaxis)
    axes.set(title=f"{int(turns.sum())} of {dim // 2} pairs turn fully within L",
             xlabel="pair i (green: λᵢ ≤ L, vermillion: never a full turn)",
             ylabel="wavelength λᵢ = 2π/θᵢ (positions)")
    axes.legend(loc="upper left", fontsize=9)


@course_style
def frequency_overlay(dim: int = 64, base: float = 10000.0, factor: float = 8.0,
                      original_length: int = 2048, method: str = "yarn",
                      beta_fast: float = 32.0, beta_slow: float = 1.0):
    """θ′ᵢ/θᵢ per pair for every scaling method (one line each, ``method`` highlighted).

    Dynamic NTK is drawn at the input length s·L. Data: ``axes[0].lines[k]`` is method k of
    ``rope_lab.scaling.METHODS``.
    """
    figure, axes = new_figure(width=7.5, height=4.2)
    _draw_frequency_overlay(axes, dim, base, factor, original_length, method, beta_fast,
                            beta_slow)
    return figure


@course_style
def wavelength_chart(dim: int = 64, base: float = 10000.0, original_length: int = 2048,
                     method: str = "default", factor: float = 1.0, beta_fast: float = 32.0,
                     beta_slow: float = 1.0):
    """Bars: wavelength λᵢ = 2π/θᵢ of each pair against the trained length L (log scale);
    dots: the wavelengths after scaling with ``method``. Data: the bar heights."""
    figure, axes = new_figure(width=7.5, height=4.2)
    _draw_wavelength_chart(axes, dim, base, factor, original_length, method, beta_fast,
                           beta_slow)
    return figure


@course_style
def scaling_explorer(dim: int = 64, base: float = 10000.0, factor: float = 8.0,
                     original_length: int = 2048, method: str = "yarn",
                     beta_fast: float = 32.0, beta_slow: float = 1.0):
    """The frequency overlay (left) and the wavelength chart (right) side by side."""
    figure, (left, right) = new_figure(1, 2, width=12.0, height=4.4)
    _draw_frequency_overlay(left, dim, base, factor, original_length, method, beta_fast,
                            beta_slow)
    _draw_wavelength_chart(right, dim, base, factor, original_length, method, beta_fast,
                           beta_slow)
    # Fixed axes boxes instead of constrained layout: a quarter of the redraw time saved.
    figure.set_layout_engine("none")
    left.set_position([0.075, 0.13, 0.4, 0.78])
    right.set_position([0.575, 0.13, 0.405, 0.78])
    return figure


@course_style
def interpolation_vs_extrapolation(coefficients, dim: int = 128, base: float = 10000.0,
                                   length: int = 2048, zoom: float = 20.0):
    """The PI paper's Figure 2 idea: a score fitted on [0, L) evaluated past L (left,
    symmetric-log y) and at fractional offsets between the integers (right)."""
    import torch

    from rope_lab import scaling

    figure, (left, right) = new_figure(1, 2, width=12.0, height=4.2)
    offsets = torch.arange(0, 2 * length, dtype=torch.float64)
    scores = scaling.rope_basis(offsets, dim, base) @ coefficients
    left.plot(offsets.numpy(), scores.numpy(), color=PALETTE[3], linewidth=1)
    left.axvline(length, color="0.2", linestyle="--", label=f"L = {length}")
    left.set_yscale("symlog", linthresh=1.0)
    left.set(title="Extrapolation: integer offsets in [0, 2L)", xlabel="offset m (positions)",
             ylabel="fitted score (symlog)")
    left.legend(loc="upper left")
    fine = torch.arange(0, zoom + 1e-9, 0.05, dtype=torch.float64)
    integers = torch.arange(0, int(zoom) + 1, dtype=torch.float64)
    right.plot(fine.numpy(), (scaling.rope_basis(fine, dim, base) @ coefficients).numpy(),
               color=PALETTE[0], linewidth=1.5, label="fractional offsets (interpolation)")
    right.plot(integers.numpy(), (scaling.rope_basis(integers, dim, base) @ coefficients).numpy(),
               "o", color=PALETTE[3], markersize=5, label="integer offsets (trained)")
    right.set(title=f"Interpolation: offsets in [0, {zoom:g}] in steps of 0.05",
              xlabel="offset m (positions)", ylabel="fitted score")
    right.legend(loc="lower left", fontsize=9)
    return figure


# variant in the experiment JSON → (label, colour, line style)
EXPERIMENT_STYLE = {
    "none": ("no position (NoPE)", PALETTE[7], "-"),
    "learned": ("learned", PALETTE[4], "-"),
    "sinusoidal": ("sinusoidal", PALETTE[5], "-."),
    "alibi": ("ALiBi", PALETTE[2], "-"),
    "rope": ("RoPE", PALETTE[0], "-"),
    "rope+linear": ("RoPE + PI (zero-shot)", PALETTE[0], ":"),
    "rope+ntk": ("RoPE + NTK", PALETTE[1], "--"),
    "rope+dynamic": ("RoPE + dynamic NTK", PALETTE[1], ":"),
    "rope+yarn": ("RoPE + YaRN", PALETTE[3], "--"),
}


@course_style
def extrapolation_losses(results: dict, variants=None):
    """Test loss against the test length (multiples of the training length), one line per
    encoding or RoPE scaling, from ``rope_lab.experiments.extrapolation`` results."""
    figure, axes = new_figure(width=8.0, height=4.6)
    multiples = results["config"]["multiples"]
    for variant in variants or results["loss"]:
        label, colour, style = EXPERIMENT_STYLE.get(variant, (variant, PALETTE[6], "-"))
        losses = [results["loss"][variant][str(k)] for k in multiples]
        axes.plot(multiples, losses, style, marker="o", color=colour, label=label, linewidth=2)
    axes.axhline(results["guess_loss"], color="0.5", linewidth=1,
                 label="uniform guess, ln(vocab)")
    axes.set_xscale("log", base=2)
    axes.set_xticks(multiples, [f"{k}×" for k in multiples])
    length = results["config"]["train_length"]
    axes.set(title=f"Loss on the determined tokens, trained at L = {length}",
             xlabel="test length (multiple of L)", ylabel="cross-entropy (nats)")
    axes.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=9)
    return figure


@course_style
def extrapolation_by_position(results: dict, variants=None):
    """Loss per position bin on the longest test inputs, with the training length marked."""
    figure, axes = new_figure(width=8.0, height=4.6)
    curves = results["loss_by_position"]
    centres = [start + curves["bin_width"] / 2 for start in curves["bin_starts"]]
    for variant in variants or results["loss"]:
        label, colour, style = EXPERIMENT_STYLE.get(variant, (variant, PALETTE[6], "-"))
        axes.plot(centres, curves[variant], style, color=colour, label=label, linewidth=2)
    length = results["config"]["train_length"]
    axes.axvline(length, color="0.2", linestyle="--", linewidth=1.2)
    axes.annotate("training length", (length, 0.97), xycoords=("data", "axes fraction"),
                  xytext=(4, 0), textcoords="offset points", va="top", fontsize=10)
    longest = curves["length"]
    axes.set(title=f"Loss along inputs of length {longest} ({longest // length}L)",
             xlabel="position t (tokens)", ylabel="cross-entropy (nats)")
    axes.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=9)
    return figure


@course_style
def alibi_heatmap(seq_len: int = 16, n_heads: int = 8, heads=(0, 3, 7)):
    """ALiBi bias −slope_h·(m − n) for a few heads, future keys blanked (causal); each head
    has its own colour scale (the slopes differ by up to 128×)."""
    import torch

    from rope_lab.alibi import alibi_bias, alibi_slopes

    bias = alibi_bias(seq_len, n_heads)
    slopes = alibi_slopes(n_heads)
    future = torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool), diagonal=1)
    figure, axes = new_figure(1, len(heads), width=4.2 * len(heads), height=3.9)
    axes = [axes] if len(heads) == 1 else list(axes)
    for ax, head in zip(axes, heads, strict=True):
        image = ax.imshow(bias[head].masked_fill(future, float("nan")).numpy(),
                          cmap=SEQUENTIAL_CMAP, vmin=float(bias[head].min()), vmax=0.0)
        ax.set(title=f"head {head}, slope 1/{1 / float(slopes[head]):g}",
               xlabel="key position n", ylabel="query position m")
        ax.grid(False)
        figure.colorbar(image, ax=ax, shrink=0.8, label="bias added to the score")
    return figure


# --- 07 linear attention ------------------------------------------------------------------

# --- 08 RoPE beyond 1D --------------------------------------------------------------------

# --- 09 performance -----------------------------------------------------------------------
