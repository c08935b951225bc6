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

# --- 08 RoPE beyond 1D --------------------------------------------------------------------

# --- 09 performance -----------------------------------------------------------------------


@course_style
def roofline(peak_gflops: float, bandwidth_gb_s: float, points: dict | None = None):
    """The roofline: attainable GFLOP/s = min(peak, intensity × bandwidth), log–log.

    ``points``: label → (arithmetic intensity in FLOP/byte, achieved or attainable GFLOP/s),
    drawn as markers (e.g. RoPE, a matmul).
    """
    import numpy as np

    figure, axes = new_figure(width=7.5, height=4.2)
    intensity = np.logspace(-2, 3, 200)
    roof = np.minimum(peak_gflops, intensity * bandwidth_gb_s)
    axes.loglog(intensity, roof, color=PALETTE[7], linewidth=2, label="roofline")
    ridge = peak_gflops / bandwidth_gb_s
    axes.axvline(ridge, color=PALETTE[7], linestyle=":", linewidth=1)
    axes.annotate(f"ridge {ridge:.3g} FLOP/byte", (ridge, peak_gflops / 30), rotation=90,
                  ha="right", va="bottom", fontsize=10)
    axes.annotate(f"peak {peak_gflops:.3g} GFLOP/s", (intensity[-1], peak_gflops),
                  xytext=(0, 4), textcoords="offset points", ha="right", fontsize=10)
    axes.annotate(f"memory {bandwidth_gb_s:.3g} GB/s", (0.02, 0.02 * bandwidth_gb_s),
                  xytext=(0, 6), textcoords="offset points", fontsize=10)
    for colour, (label, (x, y)) in zip(PALETTE, (points or {}).items(), strict=False):
        axes.loglog([x], [y], "o", markersize=9, color=colour, label=label)
    axes.set(title="Roofline: RoPE sits on the memory slope",
             xlabel="arithmetic intensity (FLOP per byte moved)",
             ylabel="attainable GFLOP/s")
    _plain_log_ticks(axes)
    axes.legend(loc="lower right")
    return figure


def _plain_log_ticks(axes):
    """Label log axes 0.01, 1, 100 … in plain text, no minor ticks: both keep redraws fast."""
    from matplotlib.ticker import FuncFormatter, NullLocator

    for axis in (axes.xaxis, axes.yaxis):
        if axis.get_scale() == "log":
            axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
            axis.set_minor_locator(NullLocator())


@course_style
def implementation_bars(results: list, *, layout: str = "half", log: bool = True):
    """Time of each implementation as a multiple of ``x.clone()``, one bar each.

    ``results``: dicts (or :class:`rope_lab.bench.Result`) with name, layout, times_clone.
    """
    rows = [r if isinstance(r, dict) else vars(r) for r in results]
    rows = sorted((r for r in rows if r["layout"] == layout), key=lambda r: r["times_clone"])
    figure, axes = new_figure(width=8.0, height=0.45 * len(rows) + 1.4)
    names = [r["name"] for r in rows]
    values = [r["times_clone"] for r in rows]
    yardsticks = ("clone", "copy_ into a buffer")
    colours = [PALETTE[7] if n in yardsticks else PALETTE[2] if "default" in n or "in place" in n
               else PALETTE[0] for n in names]
    axes.barh(names, values, color=colours)
    axes.axvline(1.0, color=PALETTE[3], linestyle="--", label="copy (clone) = 1")
    for y, value in enumerate(values):
        label = f"{value:,.0f}×" if value >= 100 else f"{value:.3g}×"
        axes.annotate(label, (value, y), xytext=(4, 0), textcoords="offset points",
                      va="center", fontsize=10)
    if log:
        axes.set_xscale("log")
    axes.invert_yaxis()
    axes.set(title=f"RoPE time relative to a copy ({layout} layout)",
             xlabel="time ÷ time of x.clone() (lower is better)")
    _plain_log_ticks(axes)
    axes.legend(loc="upper right")
    return figure


@course_style
def cost_versus_size(rows: list, parameter: str, *, label: str | None = None):
    """Milliseconds of clone, default apply_rope and the reference versus ``parameter``.

    ``rows``: from :func:`rope_lab.bench.sweep` (keys parameter, clone_ms, apply_rope_ms,
    reference_ms).
    """
    figure, axes = new_figure(width=7.0, height=4.0)
    sizes = [row[parameter] for row in rows]
    for key, name, colour in (("reference_ms", "reference formula (eager)", PALETTE[0]),
                              ("apply_rope_ms", "apply_rope (default)", PALETTE[2]),
                              ("clone_ms", "x.clone()", PALETTE[7])):
        axes.plot(sizes, [row[key] for row in rows], "o-", color=colour, label=name)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set(title=f"Cost grows linearly with {label or parameter}",
             xlabel=label or parameter, ylabel="time per call (ms)")
    _plain_log_ticks(axes)
    axes.legend()
    return figure


@course_style
def layer_shares(costs: dict, *, unit: str = "ms", title: str = "Where a layer's time goes"):
    """Horizontal bars of each part of a transformer layer, labelled with its share."""
    figure, axes = new_figure(width=7.5, height=3.6)
    names = list(costs)
    values = [costs[n] for n in names]
    total = sum(values)
    colours = [PALETTE[3] if "RoPE" in n else PALETTE[0] for n in names]
    axes.barh(names, values, color=colours)
    for y, value in enumerate(values):
        axes.annotate(f"{100 * value / total:.2g} %", (value, y), xytext=(4, 0),
                      textcoords="offset points", va="center", fontsize=10)
    axes.invert_yaxis()
    axes.set_xscale("log")
    axes.set(title=title, xlabel=f"{unit} (log scale)")
    _plain_log_ticks(axes)
    return figure
