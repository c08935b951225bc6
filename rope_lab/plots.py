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


# --- 01 attention without position ----------------------------------------------------------


@course_style
def attention_weights(weights, labels, titles, *, suptitle: str = "Attention weights"):
    """Heatmaps of attention weights side by side, one per sentence, values written in.

    Args:
        weights: list of ``(seq, seq)`` tensors (row = query, column = key).
        labels: list of token lists, one per heatmap (Latin script: the course fonts have
            no CJK glyphs, so Chinese examples pass pinyin).
        titles: one title per heatmap.

    Data: ``fig.axes[i].images[0].get_array()`` is ``weights[i]``.
    """
    count = len(weights)
    figure, axes = new_figure(1, count, width=3.6 * count + 0.8, height=3.6)
    axes = [axes] if count == 1 else list(axes)
    for ax, matrix, tokens, title in zip(axes, weights, labels, titles, strict=True):
        matrix = matrix.detach().cpu().float()
        image = ax.imshow(matrix.numpy(), cmap=SEQUENTIAL_CMAP, vmin=0.0, vmax=1.0)
        for (row, col), value in _cells(matrix):
            ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=10,
                    color="white" if value < 0.6 else "black")
        ticks = range(len(tokens))
        ax.set_xticks(ticks, tokens)
        ax.set_yticks(ticks, tokens)
        ax.grid(False)
        ax.set(title=title, xlabel="key", ylabel="query")
    figure.colorbar(image, ax=axes, shrink=0.8, label="weight")
    figure.suptitle(suptitle)
    return figure


def _cells(matrix):
    rows, cols = matrix.shape
    return (((r, c), float(matrix[r, c])) for r in range(rows) for c in range(cols))


# --- 02 absolute position encodings -------------------------------------------------------


def _fixed_layout_figure(nrows, ncols, *, width, height, left=0.07, right=0.97, bottom=0.12,
                         top=0.86, wspace=0.2, hspace=0.2, **subplot_kw):
    """:func:`new_figure` with fixed margins instead of constrained layout: a widget redraw
    then costs one draw pass (constrained layout measures every tick label first)."""
    with matplotlib.rc_context({"figure.constrained_layout.use": False}):
        figure, axes = new_figure(nrows, ncols, width=width, height=height, **subplot_kw)
    figure.subplots_adjust(left=left, right=right, bottom=bottom, top=top, wspace=wspace,
                           hspace=hspace)
    return figure, axes


def _rms(table):
    return table.double().pow(2).mean(dim=-1).sqrt()


@course_style
def encoding_sizes(length: int = 64, dim: int = 16, *, embedding_rms: float = 1.0):
    """RMS of PE(p) against p = 1 … length−1 for four encodings, next to the token's RMS.

    A LayerNorm output has RMS 1 over its features; an encoding much larger than that
    drowns the token (low signal-to-noise). Log-scaled y axis.

    Data: one line per encoding, label = encoding name, ydata = RMS(PE(p)) for p ≥ 1.
    """
    from rope_lab import absolute

    figure, ax = new_figure(width=8.0, height=4.2)
    # From p = 1: three of the codes are the zero vector at p = 0, which a log axis cannot show.
    positions = range(1, length)
    tables = {
        "integer": absolute.integer_pe(length, dim),
        f"normalized integer (L = {length})": absolute.normalized_integer_pe(length, dim),
        "binary": absolute.binary_pe(length, dim),
        "sinusoidal": absolute.sinusoidal_pe(length, dim),
    }
    for name, table in tables.items():
        ax.plot(positions, _rms(table[1:]).numpy(), label=name, linewidth=2)
    ax.axhline(embedding_rms, color=PALETTE[7], linestyle="--", linewidth=1.5,
               label="token embedding (LayerNorm output)")
    ax.set_yscale("log")
    ax.set(title=f"How big is PE(p) next to the token? (dim = {dim})", xlabel="position p",
           ylabel="RMS of the vector")
    ax.legend(loc="lower right")
    return figure


@course_style
def binary_pe_figure(dim: int = 5):
    """Binary PE for positions 0 … 2^dim − 1: the bits (top) and the jump between neighbours.

    Data: ``fig.axes[0].images[0].get_array()`` is the ``(dim, 2^dim)`` bit matrix (row j =
    bit j, LSB on top); ``fig.axes[1].lines[0].get_ydata()`` is ‖PE(p+1) − PE(p)‖.
    """
    from rope_lab import absolute

    length = 2**dim
    bits = absolute.binary_pe(length, dim)
    figure, (top, bottom) = _fixed_layout_figure(2, 1, width=8.0, height=5.2, left=0.11,
                                                 hspace=0.6, bottom=0.1, top=0.93,
                                                 gridspec_kw={"height_ratios": [1.2, 1]})
    top.imshow(bits.T.numpy(), aspect="auto", cmap="Greys", vmin=0, vmax=1,
               interpolation="nearest")
    top.set_yticks(range(dim), [f"bit {j}" for j in range(dim)])
    top.grid(False)
    top.set(title=f"Binary position encoding, d = {dim} bits: positions 0 … {length - 1}",
            xlabel="position p", ylabel="feature")
    jumps = (bits[1:] - bits[:-1]).norm(dim=-1)
    bottom.plot(range(length - 1), jumps.numpy(), marker="o", markersize=3,
                color=PALETTE[3], label="binary")
    bottom.set(title="Distance between neighbours ‖PE(p+1) − PE(p)‖", xlabel="position p",
               ylabel="distance", ylim=(0, (dim + 0.5) ** 0.5))
    bottom.legend(loc="upper left")
    return figure


@course_style
def sinusoidal_pe_figure(length: int = 128, dim: int = 64, base: float = 10000.0):
    """Sinusoidal PE as a heatmap (left) and PE(p)·PE(p+k) against k (right).

    The right panel draws the dot product from p = 0 and from p = length/4: the curves
    coincide, because the product is Σ_i cos(k·ω_i), a function of k alone.

    Data: ``fig.axes[0].images[0].get_array()`` is the ``(length, dim)`` table;
    ``fig.axes[1].lines[0]`` is PE(0)·PE(k), ``lines[1]`` PE(length/4)·PE(length/4 + k).
    """
    from rope_lab import absolute

    pe = absolute.sinusoidal_pe(length, dim, base)
    figure, (left, right) = _fixed_layout_figure(1, 2, width=10.0, height=4.2, wspace=0.3,
                                                 gridspec_kw={"width_ratios": [1, 1.3]})
    image = left.imshow(pe.numpy(), aspect="auto", cmap=DIVERGING_CMAP, vmin=-1, vmax=1,
                        interpolation="nearest")
    left.grid(False)
    left.set(title="PE(p)", xlabel="feature (even: sin, odd: cos)", ylabel="position p")
    figure.colorbar(image, ax=left, shrink=0.85, ticks=[-1, 0, 1])
    start = length // 4
    right.plot(range(length), (pe[0] @ pe.T).numpy(), linewidth=2, label="from p = 0")
    right.plot(range(length - start), (pe[start] @ pe[start:].T).numpy(), linewidth=2,
               linestyle="--", label=f"from p = {start}")
    right.axhline(0, color=PALETTE[7], linewidth=0.8)
    right.set(title="PE(p) · PE(p + k) depends on k only", xlabel="offset k",
              ylabel="dot product")
    right.legend(loc="upper right")
    figure.suptitle(f"Sinusoidal encoding: dim = {dim}, base = {base:g}, length = {length}")
    return figure


@course_style
def position_similarity(table, *, positions: int = 128, title: str = "Learned position table"):
    """Cosine similarity between the rows of a position table, first ``positions`` rows.

    Data: ``fig.axes[0].images[0].get_array()`` is the ``(positions, positions)`` matrix.
    """
    rows = table[:positions].detach().cpu().double()
    unit = rows / rows.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    similarity = (unit @ unit.T).float()
    figure, ax = new_figure(width=5.6, height=4.6)
    image = ax.imshow(similarity.numpy(), cmap=DIVERGING_CMAP, vmin=-1, vmax=1,
                      interpolation="nearest")
    ax.grid(False)
    ax.set(title=title, xlabel="position q", ylabel="position p")
    figure.colorbar(image, ax=ax, shrink=0.85, label="cos(PE(p), PE(q))")
    return figure

# --- 03 RoPE in 2D ------------------------------------------------------------------------

# --- 04 RoPE in d dimensions --------------------------------------------------------------

# --- 05 long-range decay ------------------------------------------------------------------

# --- 06 length extrapolation --------------------------------------------------------------

# --- 07 linear attention ------------------------------------------------------------------

# --- 08 RoPE beyond 1D --------------------------------------------------------------------

# --- 09 performance -----------------------------------------------------------------------
