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

# --- 07 linear attention ------------------------------------------------------------------


@course_style
def linear_attention_normalizers(base: float = 100.0, dim: int = 8, length: int = 256,
                                 seed: int = 0):
    """Causal denominators of linear attention per query position m, rotated or not.

    Random q, k ~ N(0, 1) of shape ``(length, dim)`` (seeded), φ = elu + 1. Lines (in order):
    unrotated Σ_n φ(q_m)ᵀφ(k_n), rotated Σ_n (R_m φ(q_m))ᵀ(R_n φ(k_n)).
    """
    import torch

    from rope_lab import linear_attention as la

    generator = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, length, dim, generator=generator, dtype=torch.float64)
    plain = la.linear_attention_normalizers(q, k, causal=True, rotated=False)
    rotated = la.linear_attention_normalizers(q, k, causal=True, rotated=True, base=base)
    bad = int((rotated <= 0).sum())
    figure, axes = new_figure(width=8.0, height=3.8)
    positions = range(length)
    axes.plot(positions, plain.numpy(), color=PALETTE[0],
              label="unrotated (what RoFormer divides by)")
    axes.plot(positions, rotated.numpy(), color=PALETTE[3], label="rotated (the tempting mistake)")
    axes.axhline(0.0, color=PALETTE[7], linewidth=1.0)
    axes.set_title(f"Causal normalizer per query, d = {dim}, base = {base:g}: "
                   f"rotated ≤ 0 at {bad} of {length} positions", y=1.01, fontsize=11)
    axes.set(xlabel="query position m (tokens)", ylabel="Σₙ φ(qₘ)·φ(kₙ)")
    axes.legend(loc="upper left")
    return figure


@course_style
def attention_cost(lengths, seconds: dict, dim: int):
    """Measured seconds per call against sequence length L, log–log.

    ``seconds`` maps a method name ("softmax", "linear") to one time per length; dashed
    grey guides show slopes ∝ L and ∝ L² through each method's last point.
    """
    figure, axes = new_figure(width=7.5, height=4.2)
    lengths = list(lengths)
    styles = {"softmax": (PALETTE[3], "softmax attention, O(L²·d)"),
              "linear": (PALETTE[0], "linear attention (prefix sums), O(L·d²)")}
    for name, times in seconds.items():
        colour, label = styles.get(name, (None, name))
        axes.loglog(lengths, [t * 1e3 for t in times], "o-", color=colour, label=label)
    # Guides through the longest length, where timings are least noisy.
    for name, power in (("linear", 1), ("softmax", 2)):
        if name in seconds:
            last = seconds[name][-1] * 1e3
            guide = [last * (length / lengths[-1]) ** power for length in lengths]
            axes.loglog(lengths, guide, "--", color="grey", linewidth=1.0)
            middle = len(lengths) // 2
            axes.annotate(f"∝ L{'²' if power == 2 else ''}", (lengths[middle], guide[middle]),
                          xytext=(0, 6), textcoords="offset points", color="grey", fontsize=10,
                          ha="right", va="bottom")
    axes.set_xticks(lengths, [str(length) for length in lengths])
    axes.set_xticks([], minor=True)
    axes.set(title=f"Causal attention, one head, d = {dim} (measured on this machine)",
             xlabel="sequence length L (tokens)", ylabel="time per call (ms)")
    axes.title.set_fontsize(11)
    axes.legend(loc="upper left")
    return figure


# --- 08 RoPE beyond 1D --------------------------------------------------------------------


def _offset_grid(radius_x: int, radius_y: int):
    """(2·ry+1, 2·rx+1, 2) offsets (Δx, Δy), Δy down the rows, and the imshow extent."""
    import torch

    dy, dx = torch.meshgrid(torch.arange(-radius_y, radius_y + 1),
                            torch.arange(-radius_x, radius_x + 1), indexing="ij")
    extent = (-radius_x - 0.5, radius_x + 0.5, radius_y + 0.5, -radius_y - 0.5)
    return torch.stack((dx, dy), dim=-1), extent


def _heatmap_row(count: int, *, panel_width: float = 3.3, height: float = 4.0):
    """``count`` heatmap axes in a row and a colorbar axis, laid out by hand.

    Constrained layout costs about a third of a redraw here, too much for a live slider.
    """
    width = panel_width * count + 1.4
    figure = Figure(figsize=(width, height), layout="none")
    axes = figure.subplots(1, count, squeeze=True)
    figure.subplots_adjust(left=0.75 / width, right=1 - 1.45 / width, bottom=0.13, top=0.80,
                           wspace=0.35)
    colorbar_axes = figure.add_axes((1 - 1.2 / width, 0.16, 0.14 / width, 0.6))
    return figure, (list(axes) if count > 1 else [axes]), colorbar_axes


def _kernel_image(axes, kernel, extent, title):
    from matplotlib.ticker import MaxNLocator

    image = axes.imshow(kernel.numpy(), extent=extent, cmap=DIVERGING_CMAP, vmin=-1, vmax=1,
                        interpolation="nearest")
    # A fixed title height skips matplotlib's search for overlapping ticks (slow per redraw).
    axes.set_title(title, y=1.01)
    axes.set(xlabel="Δx (patches)", ylabel="Δy (patches)")
    axes.grid(False)
    for axis in (axes.xaxis, axes.yaxis):
        axis.set_major_locator(MaxNLocator(5, integer=True))
    return image


@course_style
def rope_2d_kernels(size: int = 8, base: float = 100.0, dim: int = 32):
    """Relative-position kernels K(Δx, Δy) on a size × size patch grid: axial 2D RoPE vs
    flattened 1D RoPE (raster position m = y·size + x, so Δm = Δy·size + Δx).

    Images (in order): axial kernel, flattened kernel, both ``(2·size−1, 2·size−1)``.
    Circles mark (1, 0) and the row-end wrap (−(size−1), 1): both have Δm = 1.
    """
    import torch

    from rope_lab import nd
    from rope_lab.rope import inv_freq

    offsets, extent = _offset_grid(size - 1, size - 1)
    axial = nd.relative_kernel(nd.axial_freqs(dim, base, dtype=torch.float64), offsets)
    raster = offsets[..., 1:] * size + offsets[..., :1]
    flat = nd.relative_kernel(inv_freq(dim, base, dtype=torch.float64)[None, :], raster)
    figure, (left, right), colorbar_axes = _heatmap_row(2, panel_width=3.8, height=4.4)
    _kernel_image(left, axial, extent, "axial 2D RoPE")
    image = _kernel_image(right, flat, extent, "flattened 1D RoPE")
    for axes in (left, right):
        axes.plot([1, -(size - 1)], [0, 1], "o", markersize=9, markerfacecolor="none",
                  markeredgecolor=PALETTE[7], markeredgewidth=1.5)
    figure.colorbar(image, cax=colorbar_axes, label="K(Δx, Δy)", ticks=[-1, -0.5, 0, 0.5, 1])
    figure.suptitle(f"Score of a patch with a copy of itself at (Δx, Δy): "
                    f"{size}×{size} grid, d = {dim}, base = {base:g}", fontsize=12)
    return figure


@course_style
def rope_mixed_kernels(angles_degrees=(0.0, 30.0, 45.0), base: float = 10.0, dim: int = 32,
                       radius: int = 7):
    """RoPE-Mixed kernels K(Δx, Δy) for a few frequency directions (one image per angle).

    Images (in order): one ``(2·radius+1, 2·radius+1)`` kernel per angle of
    :func:`rope_lab.nd.mixed_freqs`; angle 0 is axial RoPE.
    """
    import math

    import torch

    from rope_lab import nd

    offsets, extent = _offset_grid(radius, radius)
    angles_degrees = list(angles_degrees)
    figure, axes_row, colorbar_axes = _heatmap_row(len(angles_degrees), height=3.9)
    for axes, degrees in zip(axes_row, angles_degrees, strict=True):
        freqs = nd.mixed_freqs(dim, base, math.radians(degrees), dtype=torch.float64)
        image = _kernel_image(axes, nd.relative_kernel(freqs, offsets), extent,
                              f"direction {degrees:g}°" + (" (= axial)" if degrees == 0 else ""))
    figure.colorbar(image, cax=colorbar_axes, label="K(Δx, Δy)", ticks=[-1, -0.5, 0, 0.5, 1])
    figure.suptitle(f"RoPE-Mixed kernels: d = {dim}, base = {base:g}", fontsize=12)
    return figure


@course_style
def mrope_sections(temporal_pairs: int = 16, base: float = 1e6, dim: int = 128,
                   max_offset: int = 48):
    """M-RoPE: which pairs turn with t, h, w, and the kernel along each axis.

    h and w share the pairs left after ``temporal_pairs`` (w gets the odd one).
    Left: log10 θ_i per pair, one marker series per axis (t, h, w). Right: lines K(Δ along t),
    K(Δ along h), K(Δ along w) for Δ = 0 … max_offset.
    """
    import torch

    from rope_lab import nd

    pairs = dim // 2
    height_pairs = (pairs - temporal_pairs) // 2
    section = (temporal_pairs, height_pairs, pairs - temporal_pairs - height_pairs)
    freqs = nd.mrope_freqs(dim, base, section, dtype=torch.float64)
    # Laid out by hand, like the heatmaps: constrained layout is slow for a live slider.
    figure = Figure(figsize=(9.5, 3.9), layout="none")
    left, right = figure.subplots(1, 2)
    figure.subplots_adjust(left=0.09, right=0.98, bottom=0.14, top=0.82, wspace=0.25)
    names = ("t (time)", "h (height)", "w (width)")
    offsets = torch.arange(max_offset + 1)
    for axis, (name, colour) in enumerate(zip(names, PALETTE[:3], strict=True)):
        owned = torch.nonzero(freqs[axis]).flatten()
        # log10 on a linear axis: log-scale tick placement is slow for a live slider.
        left.plot(owned.numpy(), freqs[axis, owned].log10().numpy(), "o", markersize=3.5,
                  color=colour, label=f"{name}: {section[axis]} pairs")
        along = torch.zeros(max_offset + 1, 3, dtype=torch.long)
        along[:, axis] = offsets
        right.plot(offsets.numpy(), nd.relative_kernel(freqs, along).numpy(), color=colour,
                   label=name)
    left.set_title(f"mrope_section = {list(section)}", y=1.01)
    right.set_title("kernel along one axis", y=1.01)
    left.set(xlabel="pair i",
             ylabel="log₁₀ θᵢ (rad per position)", xlim=(-1, pairs))
    left.legend(loc="lower left", fontsize=9)
    right.set(xlabel="offset Δ along the axis (positions)",
              ylabel="K", ylim=(-0.05, 1.02))
    right.legend(loc="lower left", fontsize=9)
    figure.suptitle(f"M-RoPE (Qwen2-VL style), d = {dim}, base = {base:g}", fontsize=12)
    return figure


# --- 09 performance -----------------------------------------------------------------------
