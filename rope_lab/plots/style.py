"""The course's visual language, shared by every figure module of :mod:`rope_lab.plots`.

Palette and colour maps, the rc settings (fonts and sizes for a projector), the figure
factories with fixed or constrained layout, the log-tick style, and the PNG renderer that
widgets, the book and the tests use.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

from rope_lab.i18n import N_

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

# One meaning per colour, in every figure of the course (notebook 00 shows this key). A
# figure never uses a role's colour for anything else; yellow is never used for a line
# (it vanishes on white). Several items of one role in one Axes (two scaling methods, two
# dtypes) are told apart by line style and a direct label, or drawn as small multiples.
ROLE_COLOURS = {
    "rope": PALETTE[0],       # blue: RoPE, the rotation, the rotated query
    "key": PALETTE[5],        # sky blue: the second vector of a pair (the key next to q)
    "absolute": PALETTE[1],   # orange: position vectors added to tokens (integer → learned)
    "scaled": PALETTE[2],     # green: RoPE stretched for longer inputs (PI, NTK, YaRN, Llama 3)
    "bias": PALETTE[4],       # reddish purple: a distance penalty added to scores (ALiBi)
    "mistake": PALETTE[3],    # vermillion: a seed's mistake, a bug, the tempting wrong choice
    "reference": PALETTE[7],  # black: exact value, ground truth, published number, the floor
    "context": "#666666",     # dark grey: guides, thresholds, unit circles, no position at all
}
ROLE_MEANINGS = {
    # in English; plots.start_here shows them in the course's language
    "rope": N_("RoPE: the rotation and what it turns"),
    "key": N_("the key: second vector of a pair (k next to q)"),
    "absolute": N_("position vectors added to tokens"),
    "scaled": N_("RoPE stretched for long inputs (PI, NTK, YaRN)"),
    "bias": N_("a distance penalty on scores (ALiBi)"),
    "mistake": N_("a mistake: a seed's error, a bug"),
    "reference": N_("exact, reference or published value"),
    "context": N_("context: guides, limits, no position"),
}
# An ordered quantity inside one role (heads by slope, dtypes by width) is a lightness ramp
# of that role's colour, not new hues: darker = first. Lightness survives every
# colour-vision deficiency, and the hue still says what kind of thing it is.


def role(name: str) -> str:
    """The colour of a role in :data:`ROLE_COLOURS` (``KeyError`` names the valid ones)."""
    try:
        return ROLE_COLOURS[name]
    except KeyError:
        raise KeyError(f"role={name!r}: expected one of {sorted(ROLE_COLOURS)}") from None


def shades(name: str, count: int) -> list[tuple[float, float, float]]:
    """``count`` shades of role ``name``'s colour, from darker (mixed with black) to lighter
    (mixed with white), for ordered items of one role in one figure."""
    from matplotlib.colors import to_rgb

    base = to_rgb(role(name))
    if count == 1:
        return [base]
    mixes = [-0.6 + 1.05 * j / (count - 1) for j in range(count)]  # −0.6 … +0.45
    return [tuple(c * (1 + m) if m < 0 else c + (1 - c) * m for c in base) for m in mixes]


# Chinese in a figure (a title, a label of the 简体中文 edition) is drawn from the font the
# course ships (a subset of Noto Sans CJK SC: rope_lab/book_assets, scripts/cjk_font.py),
# registered with matplotlib and listed after the usual sans-serif font: matplotlib takes a
# character from the first font of the list that has it, so English text keeps its look and
# Chinese needs no system font (without one matplotlib warns "Glyph ... missing").
CJK_FONT = Path(__file__).resolve().parents[1] / "book_assets" / "cjk-subset.otf"


def register_cjk_font() -> str:
    """Add :data:`CJK_FONT` to matplotlib's font list (once); return its family name.

    The font has one weight. It is listed under every weight, 100 to 900, so that a bold
    title finds it too: its Chinese is then drawn at the regular weight, where matplotlib
    would otherwise log "findfont: Failed to find font weight bold for Noto Sans CJK SC"
    for every bold text, Chinese or not (a line on stderr in a notebook).
    """
    import dataclasses

    from matplotlib import font_manager

    fonts = font_manager.fontManager.ttflist
    if not any(entry.fname == str(CJK_FONT) for entry in fonts):
        font_manager.fontManager.addfont(CJK_FONT)
        regular = next(entry for entry in fonts if entry.fname == str(CJK_FONT))
        fonts += [dataclasses.replace(regular, weight=weight)
                  for weight in range(100, 1000, 100) if weight != regular.weight]
    return font_manager.FontProperties(fname=CJK_FONT).get_name()


CJK_FAMILY = register_cjk_font()

# CSS px per inch a figure is shown at (so a point of text is 1.25 px), and how many device
# pixels a panel's PNG has per CSS px: rendered at twice the density, a slider's figure stays
# crisp on a high-density screen or zoomed in.
DISPLAY_DPI = 90
PIXEL_RATIO = 2

# Sized for a projector: large enough text.
COURSE_STYLE = {
    "figure.dpi": DISPLAY_DPI,
    "savefig.dpi": DISPLAY_DPI,
    "font.family": ["sans-serif", CJK_FAMILY],  # Chinese from the course's font
    "font.size": 12,
    "axes.titlesize": 13,
    "axes.labelsize": 12,
    "legend.fontsize": 11.5,  # no text under 14 px: 11.2 pt at DISPLAY_DPI = 90
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
    "figure.constrained_layout.use": True,
    # Titles at a fixed height above the axes: matplotlib's search for overlapping top
    # ticks measures every tick label on every draw (no course figure has ticks on top).
    "axes.titley": 1.0,
}


def course_style(plot):
    """Decorator: build the figure under the course's rc settings, without touching globals."""

    @functools.wraps(plot)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(COURSE_STYLE):
            figure = plot(*args, **kwargs)
        if isinstance(figure, Figure):
            house_ticks(figure)
        return figure

    return wrapper


def house_ticks(figure: Figure) -> Figure:
    """Write every tick label of ``figure`` the course's way: :func:`number` on linear
    axes that kept matplotlib's default formatter, :func:`log_ticks` on log axes that did.
    (Axes with their own formatter, categorical or fixed labels are left alone.)"""
    from matplotlib.ticker import FuncFormatter, LogFormatterSciNotation, ScalarFormatter

    for axes in figure.axes:
        for axis in (axes.xaxis, axes.yaxis):
            formatter = type(axis.get_major_formatter())
            if formatter is ScalarFormatter and axis.get_scale() == "linear":
                axis.set_major_formatter(FuncFormatter(lambda value, _: number(value)))
            elif formatter is LogFormatterSciNotation and axis.get_scale() == "log":
                log_ticks(axes)
    return figure


def new_figure(nrows: int = 1, ncols: int = 1, *, width: float = 8.0, height: float = 4.0,
               **subplot_kw):
    """A fresh ``Figure`` and its axes (a single Axes when nrows = ncols = 1)."""
    figure = Figure(figsize=(width, height))
    axes = figure.subplots(nrows, ncols, squeeze=True, **subplot_kw)
    return figure, axes


def render_png(figure: Figure) -> bytes:
    """The PNG bytes of ``figure`` at its own dpi (used by widgets, the book and tests):
    :func:`encode_png` of :func:`render_rgba`."""
    return encode_png(render_rgba(figure))


def render_rgba(figure: Figure):
    """Draw ``figure`` with Agg at its own dpi; its pixels as a ``(height, width, 4)`` uint8
    array (a view of the canvas' buffer, valid until the next draw).

    One Agg draw. ``savefig`` would draw twice whenever the figure has a
    layout engine (once to lay out, once to render); a slider redraw cannot afford that.
    The figure keeps its Agg canvas. A :func:`live` figure is drawn in two layers: the
    static part (axes, ticks, labels, legends) once, kept as a background, and its animated
    artists on top; while the static part stays the same, a redraw only restores the
    background and draws the animated artists ("blitting").
    """
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = figure.canvas
    if not isinstance(canvas, FigureCanvasAgg):
        canvas = FigureCanvasAgg(figure)
    animated = getattr(figure, "rope_lab_animated", None)
    # Unhinted glyphs: hinting snaps every glyph to the pixel grid, about a tenth of a redraw,
    # and at this size the text reads the same. (One draw: a constrained layout, if any,
    # runs inside it.)
    with matplotlib.rc_context({"text.hinting": "no_hinting"}):
        if not animated:
            canvas.draw()
        else:
            key = _static_key(figure)
            # One background per static key; a panel switches between two resolutions
            # (preview and sharp), so keep the last two.
            saved = getattr(figure, "rope_lab_backgrounds", None)
            if saved is None:
                saved = figure.rope_lab_backgrounds = {}
            if key in saved:
                canvas.restore_region(saved[key])
            else:
                # Hidden, not just "animated", while the static layer is drawn: matplotlib
                # before 3.10.1 draws animated images anyway, into the background.
                shown = [artist.get_visible() for artist in animated]
                for artist in animated:
                    artist.set_visible(False)
                try:
                    canvas.draw()
                    if not getattr(figure, "rope_lab_labels_frozen", False):
                        _freeze_axis_labels(figure, canvas.get_renderer())
                        canvas.draw()  # once per figure: the labels where they now stay
                finally:
                    for artist, visible in zip(animated, shown, strict=True):
                        artist.set_visible(visible)
                saved[_static_key(figure)] = canvas.copy_from_bbox(figure.bbox)
                while len(saved) > 2:
                    del saved[next(iter(saved))]
            renderer = canvas.get_renderer()
            for artist in sorted(animated, key=lambda artist: artist.get_zorder()):
                if artist.get_visible():
                    artist.draw(renderer)
    return np.asarray(canvas.buffer_rgba())


def _freeze_axis_labels(figure, renderer) -> None:
    """Pin every axis label of a live figure where its first draw put it, the y labels
    moved out to the edge of the free space on their left (so wider tick labels after a
    move still fit). Matplotlib otherwise measures every tick label of the figure on each
    draw to place the labels: about a fifth of a full redraw."""
    from matplotlib.transforms import Bbox

    figure.rope_lab_labels_frozen = True
    boxes = {axes: Bbox.union([axes.get_window_extent(renderer),
                               *(label.get_window_extent(renderer)
                                 for label in axes.get_yticklabels() if label.get_text())])
             for axes in figure.axes}
    for axes in figure.axes:
        inverse = axes.transAxes.inverted()
        label = axes.yaxis.label
        if label.get_visible() and label.get_text() and axes.yaxis.get_label_position() == "left":
            extent = label.get_window_extent(renderer)
            here = axes.get_window_extent(renderer)
            free = max([0.0, *(box.x1 for other, box in boxes.items() if other is not axes
                               and box.x1 <= here.x0 + 1 and box.y1 > here.y0
                               and box.y0 < here.y1)])
            # Out by up to about two digits of tick label, never into the next axes.
            reach = 1.2 * label.get_fontsize() * figure.dpi / 72
            shift = min(0.0, max(free + 2.0 - extent.x0, -reach))
            # the anchor in display px (a label placed with set_label_coords has it in
            # axes units)
            x, y = label.get_transform().transform(label.get_position())
            axes.yaxis.set_label_coords(*inverse.transform((x + shift, y))[:1], 0.5)
        label = axes.xaxis.label
        if label.get_visible() and label.get_text():
            anchor = label.get_transform().transform(label.get_position())
            axes.xaxis.set_label_coords(0.5, inverse.transform(anchor)[1])


def _static_key(figure) -> tuple:
    """What the static layer of a live figure depends on: its size and resolution, every
    axes' position, limits and scales (which fix the ticks), and the key its update
    returned for everything else (legends, fixed tick labels, static texts)."""
    axes_state = tuple((tuple(axes.get_position().bounds), axes.get_xlim(), axes.get_ylim(),
                        axes.get_xscale(), axes.get_yscale()) for axes in figure.axes)
    return (figure.dpi, tuple(figure.get_size_inches()), axes_state,
            getattr(figure, "rope_lab_key", None))


def encode_png(rgba) -> bytes:
    """A ``(height, width, 4)`` uint8 RGBA array as an RGBA PNG, each row stored as its
    difference from the row above ("Up" filter) and deflated at level 1: about twice as fast
    as Pillow's encoder. The alpha channel is kept: dropping it costs a strided copy of every
    pixel, slower than deflating the extra bytes (an opaque figure's alpha row differences
    are all zero, so the PNG grows by about a tenth)."""
    import struct
    import zlib

    import numpy as np

    height, width, _ = rgba.shape
    pixels = np.asarray(rgba, np.uint8).reshape(height, 4 * width)
    rows = np.empty((height, 1 + 4 * width), np.uint8)
    rows[:, 0] = 2  # filter type Up
    rows[0, 1:] = pixels[0]
    np.subtract(pixels[1:], pixels[:-1], out=rows[1:, 1:])  # uint8: wraps modulo 256

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data)))

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(rows, 1)) + chunk(b"IEND", b""))


def live(figure: Figure, update, animated=()) -> Figure:
    """Make ``figure`` updatable in place: call ``update()`` once and return the figure.

    ``update(**values)`` takes the keyword arguments of the function that built the figure
    (the build's values are its defaults), moves the figure's artists to those values and
    returns a key: any hashable that changes whenever something outside ``animated`` must
    change (a legend label, fixed ticks); axes limits and scales are followed without it.
    It returns False when it cannot update (say, a dropdown changed what the figure is made
    of). A slider panel (:class:`rope_lab.widgets.Panel`) keeps one live figure for its
    whole life, and :func:`render_png` redraws only the ``animated`` artists (the list can
    be changed by ``update``: ``figure.rope_lab_animated``) while the key, the limits and
    the scales stay the same.
    """

    def in_style(**values) -> bool:
        with matplotlib.rc_context(COURSE_STYLE):
            key = update(**values)
        if key is False:
            return False
        figure.rope_lab_key = key
        return True

    from matplotlib.ticker import AutoLocator, MaxNLocator

    for axes in figure.axes:  # fewer, rounder ticks: cheaper to draw, easier to read
        for axis in (axes.xaxis, axes.yaxis):
            if type(axis.get_major_locator()) is AutoLocator:
                axis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
    figure.rope_lab_update = in_style
    figure.rope_lab_animated = list(animated)
    in_style()
    return figure


def nice_limit(value: float) -> float:
    """The smallest of 1, 2, 5 × 10^k at least ``value`` (> 0): an axis limit that stays put
    while a slider moves the data a little."""
    if value <= 0:
        return 1.0
    decade = 10.0 ** math.floor(math.log10(value))
    return next(step * decade for step in (1, 2, 5, 10) if step * decade >= value * (1 - 1e-12))


_SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def number(value) -> str:
    """The course's one way of writing a number in a title, label, legend or tick.

    Whole numbers in plain digits, grouped by thin spaces from 10 000 up ("500", "1000",
    "10 000", "500 000"); other numbers to 3 significant digits ("0.25", "31.6"); below
    0.001, powers of ten ("10⁻⁸", "2×10⁻⁸"). Plain text, no mathtext: cheap to draw.
    """
    value = float(value)
    if not math.isfinite(value):
        return {math.inf: "∞", -math.inf: "−∞"}.get(value, "nan")
    sign = "−" if value < 0 else ""
    size = abs(value)
    if size == 0:
        return "0"
    if size < 1e-3:
        exponent = math.floor(math.log10(size))
        mantissa = float(f"{size / 10.0**exponent:.2g}")
        if mantissa >= 10:  # rounding carried into the next power
            mantissa, exponent = mantissa / 10, exponent + 1
        power = "10" + str(exponent).translate(_SUPERSCRIPTS)
        return sign + (power if mantissa == 1 else f"{mantissa:g}×{power}")
    if size >= 1000 and size != round(size):
        size = float(f"{size:.3g}")  # 123 456.7 → 123 000, written as a whole number
    if size == round(size) and size < 1e15:
        digits = str(round(size))
        if len(digits) > 4:
            groups = [digits[max(0, end - 3):end] for end in range(len(digits), 0, -3)]
            digits = "\u2009".join(reversed(groups))
        return sign + digits
    return sign + f"{size:.3g}"


def log_ticks(axes, y_ticks=None):
    """The course's log-axis style: major ticks only, labelled with :func:`number` in plain
    text (1, 10, 100, 10 000; mathtext tick labels dominate a redraw). ``y_ticks`` also
    fixes where the y ticks go."""
    from matplotlib.ticker import FuncFormatter, NullLocator

    if y_ticks is not None:
        axes.set_yticks(y_ticks, labels=[number(tick) for tick in y_ticks])
    for axis in (axes.xaxis, axes.yaxis):
        if axis.get_scale() == "log":
            axis.set_major_formatter(FuncFormatter(lambda value, _: number(value)))
            axis.set_minor_locator(NullLocator())


def one_two_five(low: float, high: float) -> list[float]:
    """Ticks 1, 2, 5, 10, 20 … covering [low, high]: a log axis with several labels."""
    ticks = []
    decade = 10.0 ** math.floor(math.log10(low))
    while decade <= high:
        ticks += [step * decade for step in (1, 2, 5) if low <= step * decade <= high]
        decade *= 10
    return ticks


def fixed_layout_figure(nrows, ncols, *, width, height, left=0.07, right=0.97, bottom=0.12,
                        top=0.86, wspace=0.2, hspace=0.2, **subplot_kw):
    """:func:`new_figure` with fixed margins instead of constrained layout: a widget redraw
    then costs one draw pass (constrained layout measures every tick label first)."""
    with matplotlib.rc_context({"figure.constrained_layout.use": False}):
        figure, axes = new_figure(nrows, ncols, width=width, height=height, **subplot_kw)
    figure.subplots_adjust(left=left, right=right, bottom=bottom, top=top, wspace=wspace,
                           hspace=hspace)
    return figure, axes


def fixed_layout(figure, rectangles):
    """Place the axes by hand ([left, bottom, width, height] in figure fractions).

    Constrained layout measures every label on each draw — about a third of a redraw for
    these two-panel figures — so the figures that sliders redraw use fixed positions.
    """
    figure.set_layout_engine("none")
    for axes, rectangle in zip(figure.axes, rectangles, strict=True):
        axes.set_position(rectangle)



def readable(colour, contrast: float = 4.5) -> tuple[float, float, float]:
    """``colour`` darkened (mixed with black, hue kept) until its contrast with the white
    page is at least ``contrast`` (WCAG 2: 4.5:1 for text); unchanged if it already is.

    For text in a series' colour: a light tint (sky blue, a light shade, orange) is fine as
    a thick line but faint as 15 px letters on a projector.
    """
    from matplotlib.colors import to_rgb

    def ratio(rgb):
        linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
        return 1.05 / (luminance + 0.05)

    rgb = to_rgb(colour)
    for step in range(21):
        darker = tuple(c * (1 - step / 20) for c in rgb)
        if ratio(darker) >= contrast:
            return darker
    return (0.0, 0.0, 0.0)
