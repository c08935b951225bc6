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
import math

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
    """The PNG bytes of ``figure`` at its own dpi (used by widgets, the book and tests).

    One Agg draw, then PNG encoding. ``savefig`` would draw twice whenever the figure has a
    layout engine (once to lay out, once to render); a slider redraw cannot afford that.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    canvas = FigureCanvasAgg(figure)
    # Unhinted glyphs: hinting snaps every glyph to the pixel grid, about a tenth of a redraw,
    # and at this size the text reads the same. (One draw: a constrained layout, if any,
    # runs inside it.)
    with matplotlib.rc_context({"text.hinting": "no_hinting"}):
        canvas.draw()
    image = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba())
    buffer = io.BytesIO()
    image.save(buffer, format="png", compress_level=1)  # fast; widgets swap it right away
    return buffer.getvalue()


def _plain_log_ticks(axes, y_ticks=None):
    """Label log axes 0.01, 1, 100 … in plain text, no minor ticks: mathtext tick labels
    dominate a redraw. ``y_ticks`` also fixes where the y ticks go."""
    from matplotlib.ticker import FuncFormatter, NullLocator

    if y_ticks is not None:
        axes.set_yticks(y_ticks, labels=[f"{tick:g}" for tick in y_ticks])
    for axis in (axes.xaxis, axes.yaxis):
        if axis.get_scale() == "log":
            axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
            axis.set_minor_locator(NullLocator())


def _one_two_five(low: float, high: float) -> list[float]:
    """Ticks 1, 2, 5, 10, 20 … covering [low, high]: a log axis with several labels."""
    ticks = []
    decade = 10.0 ** math.floor(math.log10(low))
    while decade <= high:
        ticks += [step * decade for step in (1, 2, 5) if low <= step * decade <= high]
        decade *= 10
    return ticks


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


def _arrow(axes, tip, colour, label, *, dashed=False):
    """One arrow from the origin to ``tip``, labelled at its head (axes.texts keeps it)."""
    style = dict(arrowstyle="-|>", color=colour, lw=2.5, mutation_scale=18,
                 linestyle="--" if dashed else "-", alpha=0.55 if dashed else 1.0)
    axes.annotate("", xy=tip, xytext=(0.0, 0.0), arrowprops=style)
    axes.annotate(label, xy=tip, xytext=(6, 6), textcoords="offset points", color=colour,
                  fontsize=13, fontweight="bold")


def _rotate_2d(vector, angle):
    import math

    c, s = math.cos(angle), math.sin(angle)
    return (c * vector[0] - s * vector[1], s * vector[0] + c * vector[1])


@course_style
def complex_rotation(z=(1.0, 0.0), angle: float | None = None):
    """z and z·e^{i·angle} on the complex plane, with the unit circle and the angle's arc.

    ``angle`` defaults to π/4. Data: the arrows are ``axes.texts`` annotations (``.xy`` is
    the tip); ``axes.lines[1]`` is the rotated point.
    """
    from rope_lab import _validate

    if angle is not None:
        _validate.check_finite_number(angle, "angle")
    import math

    import torch

    angle = math.pi / 4 if angle is None else angle
    figure, axes = new_figure(width=5.5, height=5.5)
    turned = _rotate_2d(z, angle)
    t = torch.linspace(0, 2 * math.pi, 200)
    axes.plot(t.cos(), t.sin(), color="0.6", lw=1, label="unit circle |z| = 1")
    axes.plot([turned[0]], [turned[1]], "o", color=PALETTE[3], ms=7)
    start = math.atan2(z[1], z[0])
    arc = torch.linspace(start, start + angle, 50)
    axes.plot(0.3 * arc.cos(), 0.3 * arc.sin(), color=PALETTE[7], lw=1.5)
    _arrow(axes, z, PALETTE[0], "z")
    _arrow(axes, turned, PALETTE[3], r"$z\,e^{i\varphi}$")
    axes.text(-1.25, -1.2, f"z = {z[0]:.3f} + {z[1]:.3f}i\n"
              f"φ = {angle:.4f} rad\nz·e^(iφ) = {turned[0]:.3f} + {turned[1]:.3f}i",
              fontsize=11, va="bottom")
    axes.set(xlim=(-1.3, 1.3), ylim=(-1.3, 1.3), aspect="equal", xlabel="real part",
             ylabel="imaginary part", title="Multiplying by e^(iφ) rotates by φ")
    return figure


@course_style
def rotation_2d(theta: float = 0.5, m: int = 2, n: int = 5, shift: int = 0,
                q=(1.0, 0.4), k=(0.3, 0.9)):
    """q, k (dashed) and R_{m+s} q, R_{n+s} k (solid) as arrows; the title shows the score.

    The score ⟨R_{m+s} q, R_{n+s} k⟩ = qᵀ R_{(n−m)θ} k does not depend on the shift s.
    Data: the arrows are ``axes.texts`` annotations (``.xy`` is the arrow's tip).
    """
    from rope_lab import _validate

    _validate.check_finite_number(theta, "theta")
    for name, value in (("m", m), ("n", n), ("shift", shift)):
        _validate.check_int(value, name)
    import math

    import torch

    figure, axes = new_figure(width=6.0, height=5.4)
    pos_q, pos_k = m + shift, n + shift
    rotated_q, rotated_k = _rotate_2d(q, pos_q * theta), _rotate_2d(k, pos_k * theta)
    score = rotated_q[0] * rotated_k[0] + rotated_q[1] * rotated_k[1]
    radius = max(math.hypot(*q), math.hypot(*k))
    t = torch.linspace(0, 2 * math.pi, 120)
    axes.plot(math.hypot(*q) * t.cos(), math.hypot(*q) * t.sin(), color="0.75", lw=1)
    axes.plot(math.hypot(*k) * t.cos(), math.hypot(*k) * t.sin(), color="0.75", lw=1)
    _arrow(axes, q, PALETTE[0], "q", dashed=True)
    _arrow(axes, k, PALETTE[1], "k", dashed=True)
    _arrow(axes, rotated_q, PALETTE[0], f"$R_{{{pos_q}}}q$")
    _arrow(axes, rotated_k, PALETTE[1], f"$R_{{{pos_k}}}k$")
    limit = 1.35 * radius
    axes.set(xlim=(-limit, limit), ylim=(-limit, limit), aspect="equal",
             xlabel="feature 1", ylabel="feature 2")
    axes.set_title(f"θ = {theta:.2f} rad, m = {pos_q}, n = {pos_k}, n − m = {pos_k - pos_q}\n"
                   f"score ⟨R_m q, R_n k⟩ = {score:.4f}")
    return figure

# --- 04 RoPE in d dimensions --------------------------------------------------------------


def _fixed_layout(figure, rectangles):
    """Place the axes by hand ([left, bottom, width, height] in figure fractions).

    Constrained layout measures every label on each draw — about a third of a redraw for
    these two-panel figures — so the figures that sliders redraw use fixed positions.
    """
    figure.set_layout_engine("none")
    for axes, rectangle in zip(figure.axes, rectangles, strict=True):
        axes.set_position(rectangle)


@course_style
def rope_frequencies(dim: int = 64, base: float = 10000.0, length: int = 256):
    """Left: wavelength 2π/θ_i of every pair i (log scale). Right: heatmap of m·θ_i mod 2π.

    Data: ``axes[0].lines[0]`` is (i, 2π/θ_i); ``axes[1].images[0]`` is the
    ``(length, dim/2)`` array of angles mod 2π.
    """
    from rope_lab import _validate

    _validate.check_positive_int(length, "length")
    import math

    import torch

    from rope_lab import rope

    speeds = rope.inv_freq(dim, base, dtype=torch.float64)
    pairs = torch.arange(dim // 2)
    figure, (left, right) = new_figure(1, 2, width=10.0, height=4.2)
    left.semilogy(pairs, 2 * math.pi / speeds, "o-", ms=3, color=PALETTE[0],
                  label="wavelength 2π/θ_i")
    left.axhline(length, color=PALETTE[3], ls="--", label=f"positions shown ({length})")
    decades = range(0, math.ceil(math.log10(float(2 * math.pi / speeds[-1]))) + 1)
    _plain_log_ticks(left, [10.0**e for e in decades])
    left.set(xlabel="pair i", ylabel="wavelength (positions per turn)",
             title=f"θ_i = {base:g}^(−2i/{dim})")
    left.legend(loc="upper left")
    angles = rope.rope_angles(torch.arange(length), speeds).remainder(2 * math.pi)
    image = right.imshow(angles.numpy(), aspect="auto", origin="lower", cmap="twilight",
                         vmin=0, vmax=2 * math.pi, interpolation="nearest")
    right.grid(False)
    right.set(xlabel="pair i", ylabel="position m", title="angle m·θ_i mod 2π")
    colorbar = figure.colorbar(image, ax=right, label="angle (rad)")
    colorbar.set_ticks([0, math.pi, 2 * math.pi], labels=["0", "π", "2π"])
    _fixed_layout(figure, ([0.08, 0.13, 0.37, 0.78], [0.545, 0.13, 0.33, 0.78],
                           [0.89, 0.13, 0.02, 0.78]))
    return figure


@functools.lru_cache(maxsize=64)
def _worst_angle_errors(dtype: str, dim: int, base: float, length: int, block: int):
    """(block starts, worst phase error, worst cos error) per block of positions, cached:
    moving one slider back and forth, or switching dtype, reuses the curves already made."""
    import torch

    from rope_lab import precision, rope

    speeds = rope.inv_freq(dim, base, dtype=torch.float64)
    positions = torch.arange(length - length % block)
    worst = [error.reshape(-1, block * (dim // 2)).amax(-1).clamp_min(1e-9).numpy()
             for error in precision.angle_errors(positions, speeds, dtype)]
    curves = (positions[::block].numpy(), *worst)
    for curve in curves:
        curve.setflags(write=False)  # shared by every figure drawn from the cache
    return curves


@course_style
def angle_precision(dtype: str = "bfloat16", dim: int = 64, base: float = 10000.0,
                    length: int = 4096, block: int = 16):
    """Phase error and cos error of m·θ_i computed in ``dtype`` versus position m.

    Each point is the worst pair over a block of ``block`` positions; float32 is drawn as
    the reference, and errors are floored at 1e-9 for the log scale. Data:
    ``axes[0].lines[0]`` is the chosen dtype's phase error, ``axes[0].lines[1]`` float32's;
    ``axes[1]`` holds the cos errors the same way.
    """
    from matplotlib.ticker import MaxNLocator

    from rope_lab import precision

    figure, (left, right) = new_figure(1, 2, width=10.0, height=4.2)
    for name, colour in ((dtype, PALETTE[3]), ("float32", PALETTE[0])):
        starts, *errors = _worst_angle_errors(name, dim, base, length, block)
        for axes, worst in zip((left, right), errors, strict=True):
            axes.semilogy(starts, worst, color=colour, lw=1.5, label=name,
                          drawstyle="steps-post")
    exact = precision.largest_exact_integer(dtype)
    for axes, what in ((left, "phase error (rad)"), (right, "|cos error|")):
        if exact < length:
            axes.axvline(exact, color=PALETTE[7], ls=":",
                         label=f"{dtype}: integers exact up to {exact}")
        axes.set(xlabel="position m", ylabel=f"{what}, worst pair", ylim=(1e-9, 10))
        _plain_log_ticks(axes, [1e-8, 1e-6, 1e-4, 1e-2, 1.0])
        axes.xaxis.set_major_locator(MaxNLocator(5))
        axes.legend(loc="lower right")
    left.set_title(f"Angle m·θ_i computed in {dtype}")
    right.set_title(f"cos(m·θ_i) from the {dtype} angle")
    _fixed_layout(figure, ([0.105, 0.13, 0.37, 0.78], [0.615, 0.13, 0.37, 0.78]))
    return figure


@course_style
def singular_values(maps: dict):
    """Singular values of each named ``(d, d)`` linear map, sorted, one line per map.

    An orthogonal map (a true rotation) has every singular value equal to 1.
    Data: ``axes.lines[j]`` holds map j's singular values.
    """
    import torch

    figure, axes = new_figure(width=7.0, height=4.0)
    for (name, matrix), marker in zip(maps.items(), "os^v", strict=False):
        values = torch.linalg.svdvals(matrix.to(torch.float64))
        axes.plot(values, marker, ms=4, label=name)
    axes.axhline(1.0, color=PALETTE[7], lw=1, ls=":")
    axes.set(xlabel="index (largest first)", ylabel="singular value",
             title="Singular values: a rotation has them all equal to 1")
    axes.legend()
    return figure

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
    axes.set_yscale("log")
    _plain_log_ticks(axes)
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
    axes.set_yscale("log")
    _plain_log_ticks(axes)
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
    from rope_lab import scaling

    if method not in scaling.METHODS:
        raise ValueError(f"method must be one of {scaling.METHODS}, got {method!r}")
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
    from rope_lab import _validate

    _validate.check_indices(heads, n_heads, "heads", "n_heads")
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
    from rope_lab import _validate

    _validate.check_positive_int(size, "size")
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


@course_style
def roofline(peak_gflops: float, bandwidth_gb_s: float, points: dict | None = None):
    """The roofline: attainable GFLOP/s = min(peak, intensity × bandwidth), log–log.

    ``points``: label → (arithmetic intensity in FLOP/byte, achieved or attainable GFLOP/s),
    drawn as markers (e.g. RoPE, a matmul).
    """
    from rope_lab import _validate

    for name, value in (("peak_gflops", peak_gflops), ("bandwidth_gb_s", bandwidth_gb_s)):
        if _validate.check_finite_number(value, name) <= 0:
            raise ValueError(f"{name} must be greater than 0, got {value}")
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
    # The title says where RoPE landed with these roofs (live measurements in notebook 09).
    title = "Roofline"
    if "RoPE" in (points or {}):
        side = "memory slope" if points["RoPE"][0] < ridge else "compute roof"
        title = f"Roofline: RoPE sits on the {side}"
    axes.set(title=title, xlabel="arithmetic intensity (FLOP per byte moved)",
             ylabel="attainable GFLOP/s")
    _plain_log_ticks(axes)
    axes.legend(loc="lower right")
    return figure


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
    # The title states what these timings show: the slope of log time against log size for
    # apply_rope between the two largest sizes (1 = linear, 0 = a fixed cost per call).
    symbol = {"seq": "L", "head_dim": "d"}.get(parameter, parameter)
    title = f"RoPE time versus {symbol}"
    if len(rows) >= 2 and sizes[-1] != sizes[-2]:
        slope = math.log(rows[-1]["apply_rope_ms"] / rows[-2]["apply_rope_ms"]) / math.log(
            sizes[-1] / sizes[-2])
        title = f"apply_rope: time ∝ {symbol}^{slope:.2f} between the two largest sizes"
    axes.set(title=title, xlabel=label or parameter, ylabel="time per call (ms)")
    times = [row[key] for row in rows for key in ("reference_ms", "apply_rope_ms", "clone_ms")]
    _plain_log_ticks(axes, y_ticks=_one_two_five(min(times), max(times)))
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
    # A linear axis: bar lengths are shares, so a part too small to see is the point.
    axes.set(title=title, xlabel=unit)
    axes.set_xlim(0, 1.18 * max(values))
    return figure
