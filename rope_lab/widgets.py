"""Slider panels wired to :mod:`rope_lab.plots`.

A :class:`Panel` owns a plot function and a set of ipywidgets controls. The first draw
builds the figure; every course figure is a *live* figure (:func:`rope_lab.plots.live`),
so moving a control then only moves its artists and redraws them over the cached static
layer (axes, ticks, labels: "blitting"), renders one PNG at twice the CSS resolution and
puts the bytes into an ``ipywidgets.Image`` (the picture is swapped in place: no flicker,
no layout jump). One move, one redraw. Sliders use ``continuous_update=False`` so a redraw
happens when the student lets go, and sliders over orders of magnitude stop on round
values only (:func:`choice`, :data:`BASES`, :data:`SCALE_FACTORS`).

Why an Image and not an Output widget: a figure displayed into an ``Output`` makes
nbclient (behind nbconvert --execute, papermill, nbval and ``make book``) echo the captured
output back to the kernel while it waits for the cell to finish; now and then that wait
then lasts until the cell timeout (``scripts/stall_check.py`` measures it). An
Image is plain widget state: nothing is captured, nothing is echoed.

Works with ipywidgets 7.7 (Colab) and 8 (JupyterLab 4, Notebook 7, VS Code): only widgets
and traits present in both are used. Where no widget can be shown (a terminal, a notebook
converted to HTML without its widget state) a panel shows its figure as a plain PNG.

Every panel has a programmatic handle for tests and benchmarks::

    panel = decay_panel()
    panel.set(base=500.0)        # same path as moving the slider
    panel.figure, panel.png      # what was drawn
    panel.redraw_seconds         # compute + draw time of each redraw
    panel.redraw_log             # … split into update, draw, encode and send
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import statistics
import time

import ipywidgets as widgets

from rope_lab import plots
from rope_lab.i18n import N_, _

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# A move in the front end is answered at once with a preview drawn at one device pixel per
# CSS px, and, once the student pauses this long, with the sharp figure (PIXEL_RATIO device
# pixels per CSS px). The preview has a quarter of the pixels: a quarter of the Agg fill,
# the PNG encoding, the browser's decoding and painting, the four costs that grow with
# pixels and made a key press take 100–200 ms on a loaded 2-core laptop.
PREVIEW_RATIO = 1
SHARPEN_AFTER_S = 0.4


class Panel:
    """A plot function plus controls; redraws on every change.

    Args:
        plot: function taking the controls' values (and ``fixed``) as keyword arguments
            and returning a matplotlib Figure.
        controls: name → ipywidgets control; the name is the plot function's keyword.
        fixed: keyword arguments passed to ``plot`` unchanged.
    """

    def __init__(self, plot, controls: dict, *, fixed: dict | None = None):
        self.plot = plot
        self.controls = dict(controls)
        self.fixed = dict(fixed or {})
        self.image = widgets.Image(format="png")
        self.figure = None
        self.png = b""
        # Constrained-layout positions found once per setting of the non-slider controls
        # (a dropdown can change labels and so margins; a slider seldom does).
        self._layouts: dict = {}
        self._holding = False
        self._sharpen = None  # the pending sharp redraw after a preview (asyncio handle)
        self.sharp = False  # whether the figure shown was drawn at PIXEL_RATIO
        self.redraw_seconds: list[float] = []
        # Per redraw: "started" (wall clock, s since the epoch, to line up with a browser's
        # clock), whether it was a "preview", whether the figure was "rebuilt", the
        # "png_bytes", and the ms spent on
        # the "update" (moving artists, or building the figure), the Agg "draw", the PNG
        # "encode" and handing the message to the kernel ("send").
        self.redraw_log: list[dict] = []
        for control in self.controls.values():
            if hasattr(control, "continuous_update"):
                control.continuous_update = False
            control.observe(self._on_change, names="value")
        self.box = widgets.VBox(
            [widgets.HBox(list(self.controls.values()),
                          layout=widgets.Layout(flex_flow="row wrap")), self.image]
        )
        self.redraw()

    @property
    def values(self) -> dict:
        return {name: control.value for name, control in self.controls.items()}

    def set(self, **values):
        """Set controls by name, as a student would, and return the redrawn figure (drawn
        sharp at once: no preview).

        A value its control cannot take is refused with a ValueError (TypeError for the
        wrong type) naming the control, the value and what it offers, before anything is
        set: ipywidgets would clamp ``dim=1000`` to the slider's end and draw a figure
        nobody asked for.
        """
        unknown = set(values) - set(self.controls)
        if unknown:
            raise ValueError(
                f"unknown control(s) {sorted(unknown)}; this panel has {sorted(self.controls)}"
            )
        for name, value in values.items():
            _check_control_value(name, self.controls[name], value)
        self._apply(values)
        self.redraw()
        return self.figure

    def _apply(self, values: dict) -> None:
        """Set the controls without redrawing."""
        self._holding = True  # one redraw for all the values, not one per control
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._holding = False

    def redraw(self, *, preview: bool = False):
        """Draw the figure for the controls' values and show it; return the figure.

        A figure marked :func:`rope_lab.plots.live` is built once and then updated in
        place (its artists move, nothing is rebuilt); any other figure is built anew.
        Either way: one Agg draw, one PNG, one message to the front end. ``preview``
        draws at one device pixel per CSS px (:data:`PREVIEW_RATIO`) instead of
        :data:`~rope_lab.plots.PIXEL_RATIO`: a quarter of the pixels to draw, encode,
        send, decode and paint. Each redraw appends its phases to :attr:`redraw_log`.
        """
        start = time.perf_counter()
        wall = time.time()
        values = {**self.fixed, **self.values}
        ratio = PREVIEW_RATIO if preview else plots.PIXEL_RATIO
        if self.figure is not None and self.figure.dpi != plots.DISPLAY_DPI * ratio:
            self.figure.set_dpi(plots.DISPLAY_DPI * ratio)
        update = getattr(self.figure, "rope_lab_update", None)
        with _one_torch_thread():
            rebuilt = update is None or not update(**values)
            if rebuilt:
                self._build(values, ratio)
            updated = time.perf_counter()
            pixels = plots.render_rgba(self.figure)
            drawn = time.perf_counter()
            self.png = plots.encode_png(pixels)
        encoded = time.perf_counter()
        self.sharp = not preview
        if _uses_constrained_layout(self.figure):
            # Constrained layout measures every label on every draw, about a third of a
            # redraw. A slider rarely moves the margins, so keep the positions it found.
            self._layouts[self._layout_key()] = [axes.get_position()
                                                 for axes in self.figure.axes]
            self._freeze_layout(self.figure, self._layouts[self._layout_key()])
        self.redraw_seconds.append(time.perf_counter() - start)
        # Shown at the figure's size in CSS px (inches × DISPLAY_DPI), whatever resolution
        # the PNG has: rendered at PIXEL_RATIO times that, it stays crisp when zoomed. The
        # front end's CSS caps it at the output's width, keeping the aspect.
        with self.image.hold_sync():  # one message to the front end
            self.image.width = str(self.css_width)
            self.image.value = self.png
        self.redraw_log.append({
            "started": wall, "preview": preview, "rebuilt": rebuilt,
            "png_bytes": len(self.png),
            "update_ms": 1e3 * (updated - start), "draw_ms": 1e3 * (drawn - updated),
            "encode_ms": 1e3 * (encoded - drawn),
            "send_ms": 1e3 * (time.perf_counter() - encoded)})
        return self.figure

    def _build(self, values: dict, ratio: float):
        figure = self.plot(**values)
        figure.set_dpi(plots.DISPLAY_DPI * ratio)
        frozen = self._layouts.get(self._layout_key())
        if (_uses_constrained_layout(figure) and frozen is not None
                and len(frozen) == len(figure.axes)):
            self._freeze_layout(figure, frozen)
        self.figure = figure

    @staticmethod
    def _freeze_layout(figure, positions):
        figure.set_layout_engine("none")
        for axes, position in zip(figure.axes, positions, strict=True):
            axes.set_position(position)

    @property
    def css_width(self) -> int:
        """Width the figure is shown at, in CSS px."""
        return round(self.figure.get_figwidth() * plots.DISPLAY_DPI)

    def _layout_key(self) -> tuple:
        return tuple(
            (name, control.value)
            for name, control in self.controls.items()
            if not isinstance(control.value, (int, float)) or isinstance(control.value, bool)
        )

    def _on_change(self, change):
        """A control moved in the front end: show a preview now, the sharp figure once the
        student has paused (:data:`SHARPEN_AFTER_S` without a move). Outside a running
        event loop (a script, a test) there is no "later": draw it sharp at once."""
        if self._holding:
            return
        if self._sharpen is not None:
            self._sharpen.cancel()
            self._sharpen = None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.redraw()
            return
        self.redraw(preview=True)
        self._sharpen = loop.call_later(SHARPEN_AFTER_S, self._draw_sharp)

    def _draw_sharp(self):
        self._sharpen = None
        if not self.sharp:
            self.redraw()

    def _repr_mimebundle_(self, **kwargs):
        """The widget for front ends that show widgets, the figure as a PNG for the rest.

        JupyterLab, Notebook, VS Code and Colab pick the widget view; nbconvert without
        widget state, GitHub and the like show the PNG; a terminal prints the text.
        """
        settings = ", ".join(f"{name}={value!r}" for name, value in self.values.items())
        text = _("<rope_lab panel {plot}({settings}); run it in JupyterLab, VS Code or Colab to "
                 "move the controls>").format(plot=getattr(self.plot, "__name__", "plot"),
                                              settings=settings)
        data = {
            WIDGET_VIEW: self.box.get_view_spec(),  # what displaying the VBox itself sends
            "image/png": base64.b64encode(self.png).decode("ascii"),
            "text/plain": text,
        }
        return data, {"image/png": {"width": self.css_width}}


@contextlib.contextmanager
def _one_torch_thread():
    """Compute a redraw's small tensors on one thread: a second intra-op thread only waits
    for a core, and on a busy 2-core laptop that wait can cost more than the whole redraw
    (measured: 79 ms → 17 ms for notebook 05's curves under load)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _uses_constrained_layout(figure) -> bool:
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    return isinstance(figure.get_layout_engine(), ConstrainedLayoutEngine)


# Every panel factory of the course, by name: the widget benchmark
# (``python -m rope_lab.bench widgets``) and the tests time and exercise each one.
PANELS: dict = {}


def register(factory):
    """Decorator for panel factories (functions returning a :class:`Panel` with defaults)."""
    PANELS[factory.__name__] = factory
    return factory


def slider(kind: str, description: str, value, minimum, maximum, step=None, *,
           name: str | None = None, **kwargs):
    """A slider with the course's defaults: wide label, release-to-update.

    description: the label, in English; shown in the course's language (:mod:`rope_lab.i18n`).
    kind: "int", "float" or "log" (``minimum``/``maximum`` are then exponents of 10).
    name: the parameter ``value`` came from (a panel factory's argument), for the error.

    ``value`` must be one the slider can show: ipywidgets would silently clamp a value out
    of range, and the figure would not be the one asked for. So a value outside the range,
    or off an int slider's steps, is refused with a ValueError naming ``name`` (a value of
    the wrong type with a TypeError).
    """
    if kind not in ("int", "float", "log"):
        raise ValueError(f"kind must be one of 'int', 'float', 'log', got {kind!r}")
    _check_on_slider(name or f"the value of slider {description!r}", value, kind,
                     minimum, maximum, step)
    style = {"description_width": "initial"}
    layout = widgets.Layout(width="320px")
    common = dict(description=_(description), value=value, min=minimum, max=maximum,
                  continuous_update=False, style=style, layout=layout, **kwargs)
    if kind == "int":
        return widgets.IntSlider(step=step or 1, **common)
    if kind == "float":
        return widgets.FloatSlider(step=step or (maximum - minimum) / 100, **common)
    return widgets.FloatLogSlider(base=10, step=step or 0.05, **common)


def _check_on_slider(name: str, value, kind: str, minimum, maximum, step) -> None:
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r} of type "
                            f"{type(value).__name__}")
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r} of type "
                        f"{type(value).__name__}")
    low, high = (10.0**minimum, 10.0**maximum) if kind == "log" else (minimum, maximum)
    steps = f" in steps of {step}" if kind == "int" and step and step != 1 else ""
    # `not low <= value <= high` also refuses NaN.
    if not low <= value <= high or (kind == "int" and (value - minimum) % (step or 1)):
        what = "an integer" if kind == "int" else "a number"
        raise ValueError(f"{name} must be {what} from {low:g} to {high:g}{steps} (the values "
                         f"its slider takes), got {value!r}")


def dropdown(description: str, options, value=None, *, labels: dict | None = None):
    """A dropdown labelled ``description`` (shown in the course's language).

    ``labels``: option → the words shown for it, for options that are words rather than
    names ("random" → 随机 in Chinese); the control's value stays the option itself.
    """
    options = list(options)
    if value is None:
        value = options[0]
    for index, option in enumerate(options):
        # an option shown in other words becomes a (label, value) pair; the English edition
        # keeps its plain options
        if isinstance(option, str) and option in (labels or {}) and _(labels[option]) != option:
            options[index] = (_(labels[option]), option)
    return widgets.Dropdown(description=_(description), options=options, value=value,
                            style={"description_width": "initial"})


# Round values for the sliders that span orders of magnitude: every stop is a value worth
# looking at (and a figure of its own), and the title shows exactly the value picked.
BASES = (1.0, 10.0, 100.0, 500.0, 1e3, 1e4, 5e5, 1e6)
SCALE_FACTORS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)


def choice(description: str, values, value, *, name: str | None = None):
    """A slider that stops on ``values`` only (an ipywidgets ``SelectionSlider``), each
    labelled with :func:`rope_lab.plots.number`, release-to-update.

    ``value`` must be one of ``values``: anything else is refused with a ValueError naming
    ``name`` (the panel factory's argument) and the values offered.
    """
    values = tuple(values)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name or f'the value of slider {description!r}'} must be a number, "
                        f"got {value!r} of type {type(value).__name__}")
    picked = next((v for v in values if _same(value, v)), None)
    if picked is None:
        raise ValueError(f"{name or f'the value of slider {description!r}'} must be one of "
                         f"{_listing(values)} (the values its slider takes), got {value!r}")
    return widgets.SelectionSlider(
        description=_(description), options=[(plots.number(v), v) for v in values],
        value=picked, continuous_update=False, style={"description_width": "initial"},
        layout=widgets.Layout(width="320px"))


def _check_control_value(name: str, control, value) -> None:
    """Refuse a value ``control`` cannot take (it would clamp or round it in silence)."""
    offered = _offered(control)
    if offered is not None:
        if not any(_same(value, option) for option in offered):
            raise ValueError(f"{name} must be one of {_listing(offered)} (the values its "
                             f"control offers), got {value!r}")
        return
    if isinstance(control, widgets.FloatLogSlider):
        _check_on_slider(name, value, "log", control.min, control.max, None)
    elif isinstance(control, widgets.IntSlider):
        _check_on_slider(name, value, "int", control.min, control.max, control.step)
    elif isinstance(control, widgets.FloatSlider):
        _check_on_slider(name, value, "float", control.min, control.max, None)


def _offered(control):
    """The values a choice control (selection slider, dropdown) offers, else None."""
    options = getattr(control, "_options_values", None)
    return None if options is None else tuple(options)


def _same(value, option) -> bool:
    if isinstance(value, bool) != isinstance(option, bool):
        return False
    try:
        return value == option
    except Exception:  # noqa: BLE001 - an exotic value is simply not an option
        return False


def _listing(values) -> str:
    return ", ".join(plots.number(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
                     else repr(v) for v in values)


# --- 02 absolute position encodings -------------------------------------------------------


@register
def sinusoidal_panel(dim: int = 64, base: float = 10000.0, length: int = 128) -> Panel:
    """Sinusoidal PE heatmap and PE(p)·PE(p+k) against k; sliders for dim, base and length."""
    return Panel(plots.sinusoidal_pe_figure, {
        "dim": slider("int", N_("dim d"), dim, 8, 256, step=8, name="dim"),
        "base": choice(N_("base"), BASES, base, name="base"),
        "length": slider("int", N_("length L"), length, 16, 512, step=16, name="length"),
    })


@register
def binary_panel(dim: int = 5) -> Panel:
    """Binary PE bits for positions 0 … 2^d − 1 and the jump between neighbours; slider d."""
    return Panel(plots.binary_pe_figure, {
        "dim": slider("int", N_("bits d"), dim, 2, 8, name="dim"),
    })

# --- 03 RoPE in 2D ------------------------------------------------------------------------

@register
def rotation_2d_panel():
    """Turn θ, the positions m and n, and shift both: the score depends on n − m only."""
    return Panel(plots.rotation_2d, {
        "theta": slider("float", N_("θ (rad per position)"), 0.5, 0.0, 3.14, 0.01),
        "m": slider("int", N_("m (query position)"), 2, 0, 12),
        "n": slider("int", N_("n (key position)"), 5, 0, 12),
        "shift": slider("int", N_("shift both by"), 0, 0, 20),
    })


# --- 04 RoPE in d dimensions --------------------------------------------------------------

@register
def rope_frequencies_panel():
    """Head dimension and base → per-pair wavelengths and the (position × pair) angles."""
    return Panel(plots.rope_frequencies, {
        "dim": slider("int", N_("head dim d"), 64, 8, 256, 8),
        "base": choice(N_("base"), BASES, 10000.0),
    })


@register
def angle_precision_panel():
    """Pick the dtype the angles m·θ_i are computed in; see phase and cos errors grow."""
    return Panel(plots.angle_precision, {
        "dtype": dropdown(N_("angles computed in"), ["bfloat16", "float16", "float32"]),
        "base": choice(N_("base"), BASES[2:], 10000.0),
    })


# --- 05 long-range decay ------------------------------------------------------------------

@register
def decay_panel():
    """Base, head dim, max distance and q/k mode → the score curve and the Abel factor."""
    return Panel(plots.decay_and_abel, {
        "base": choice(N_("base"), BASES, 10000.0),
        "dim": slider("int", N_("head dim d"), 128, 8, 256, 8),
        "max_distance": slider("int", N_("max distance Δ"), 1024, 64, 4096, 64),
        "mode": dropdown(N_("q, k"), ["ones", "random", "correlated"],
                         labels={"ones": N_("ones"), "random": N_("random"),
                                 "correlated": N_("correlated")}),
    })


# --- 06 length extrapolation --------------------------------------------------------------

@register
def scaling_panel():
    """Scale factor, method, YaRN's betas and the trained length → frequency overlay and
    wavelength chart (the betas matter for "yarn" only)."""
    panel = Panel(plots.scaling_explorer, {
        "factor": choice(N_("scale factor s"), SCALE_FACTORS, 8.0),
        "method": dropdown(N_("method"),
                           ["default", "linear", "ntk", "dynamic", "yarn", "llama3"],
                           value="yarn",
                           labels={method: plots.length_extrapolation.scaling_label(method)
                                   for method in plots.length_extrapolation.SCALING_LABELS}),
        # Powers of two: every stop moves YaRN's ramp to other pairs (a step of 1 mostly
        # did not: 125 values drew 13 different figures).
        "beta_fast": choice(N_("YaRN beta_fast"), (4.0, 8.0, 16.0, 32.0, 64.0, 128.0), 32.0),
        "beta_slow": choice(N_("YaRN beta_slow"), (0.25, 0.5, 1.0, 2.0), 1.0),
        "original_length": dropdown(N_("original length L"), [256, 512, 1024, 2048, 4096, 8192],
                                    value=2048),
    }, fixed={"dim": 64, "base": 10000.0})
    # The betas shape YaRN only: greyed out for the other methods, where a step of theirs
    # would change nothing.
    betas = [panel.controls["beta_fast"], panel.controls["beta_slow"]]

    def only_for_yarn(change=None):
        for control in betas:
            control.disabled = panel.controls["method"].value != "yarn"

    panel.controls["method"].observe(only_for_yarn, names="value")
    only_for_yarn()
    return panel


# --- 07 linear attention ------------------------------------------------------------------


@register
def linear_attention_normalizer_panel():
    """Rotated vs unrotated denominators of causal linear attention: base, d, L."""
    return Panel(plots.linear_attention_normalizers, {
        "base": choice(N_("base"), BASES[:6], 100.0),
        "dim": slider("int", N_("head dim d"), 8, 2, 64, step=2),
        "length": slider("int", N_("length L"), 256, 16, 512, step=16),
    })


# --- 08 RoPE beyond 1D --------------------------------------------------------------------

@register
def rope_2d_panel():
    """Axial 2D vs flattened 1D RoPE kernels: grid size and base."""
    return Panel(plots.rope_2d_kernels, {
        "size": slider("int", N_("grid size (patches per side)"), 8, 3, 16),
        "base": choice(N_("base"), BASES[:6], 100.0),
    })


def _axial_and_mixed(angle_degrees: float, base: float):
    """RoPE-Mixed at one direction, next to axial RoPE (direction 0°) for reference."""
    figure = plots.rope_mixed_kernels((0.0, angle_degrees), base=base)
    update = figure.rope_lab_update
    figure.rope_lab_update = lambda angle_degrees, base: update(
        angles_degrees=(0.0, angle_degrees), base=base)
    return figure


@register
def rope_mixed_panel():
    """RoPE-Mixed kernel: frequency direction angle and base."""
    return Panel(_axial_and_mixed, {
        "angle_degrees": slider("float", N_("direction angle (°)"), 30.0, 0.0, 90.0, step=5.0),
        "base": choice(N_("base"), BASES[:6], 10.0),
    })


@register
def mrope_panel():
    """M-RoPE section split: pairs for time (h and w share the rest), and base."""
    return Panel(plots.mrope_sections, {
        "temporal_pairs": slider("int", N_("pairs for t (h, w share the rest)"), 16, 0, 64),
        "base": choice(N_("base"), BASES[2:], 1e6),
    })


# --- 09 performance -----------------------------------------------------------------------


@register
def roofline_panel():
    """Move the machine's bandwidth and peak: where do RoPE and a matmul land?"""
    from rope_lab import cost

    def points(bandwidth_gb_s, peak_gflops, seq, bytes_per_element):
        rope = cost.rope_traffic(1, 32, seq, 128, bytes_per_element=bytes_per_element)
        # A (seq × 128) @ (128 × seq) score matmul per head: 2·L²·d FLOPs over 2·L·d + L²
        # elements moved.
        matmul = 2 * seq * seq * 128 / ((2 * seq * 128 + seq * seq) * bytes_per_element)
        points = {
            "RoPE": (rope["intensity"], cost.attainable_gflops(
                rope["intensity"], peak_gflops, bandwidth_gb_s)),
            N_("scores q kᵀ"): (matmul, cost.attainable_gflops(matmul, peak_gflops,
                                                           bandwidth_gb_s)),
        }
        return {"peak_gflops": peak_gflops, "bandwidth_gb_s": bandwidth_gb_s, "points": points}

    def draw(**values):
        figure = plots.roofline(**points(**values))
        update = figure.rope_lab_update
        figure.rope_lab_update = lambda **values: update(**points(**values))
        return figure

    return Panel(draw, {
        "bandwidth_gb_s": choice(N_("bandwidth (GB/s)"), plots.one_two_five(10, 2000), 50.0),
        "peak_gflops": choice(N_("peak (GFLOP/s)"), plots.one_two_five(100, 1e6), 1000.0),
        "seq": choice(N_("sequence length L"), [2**e for e in range(7, 14)], 2048),
        "bytes_per_element": dropdown(N_("bytes per element"),
                                      [("float32", 4), ("bfloat16", 2)],
                                      value=4),
    })


# --- redraw timing (python -m rope_lab.bench widgets) ----------------------------------------

def control_values(control, count: int = 3) -> list:
    """A few values a student might set on ``control``: ends and middle, or options."""
    options = getattr(control, "_options_values", None)
    if options is None:
        options = getattr(control, "options", None)
    if options is not None:
        options = list(options)
        picks = [options[0], options[len(options) // 2], options[-1]]
    elif isinstance(control.value, bool):
        picks = [not control.value, control.value]
    elif hasattr(control, "min") and hasattr(control, "max"):
        low, high = control.min, control.max
        if hasattr(control, "base"):  # FloatLogSlider: min/max are exponents
            low, high = control.base**low, control.base**high
            middle = (low * high) ** 0.5
        else:
            middle = (low + high) / 2
            step = getattr(control, "step", None)
            if step:  # a slider only offers min + k·step; so must the benchmark
                middle = low + round((middle - low) / step) * step
            if isinstance(control.value, int):
                middle = int(middle)
        picks = [low, middle, high]
    else:
        return []
    unique = []
    for value in picks:
        if value not in unique:
            unique.append(value)
    return unique[:count]


def redraw_times(panels: dict | None = None, *, values_per_control: int = 3) -> dict:
    """Build every registered panel, turn each control, and report the redraws' times.

    Each move is drawn as in the front end: the preview (what a key press waits for), then
    the sharp figure (what the student sees after a pause). Returns name → {"redraws": n
    (both kinds), "median_ms" and "max_ms" of the previews, "sharp_median_ms"} (the redraw
    the panel does when it is built is left out: it includes one-off start-up work).
    """
    panels = PANELS if panels is None else panels
    report = {}
    for name, factory in panels.items():
        # Outside a notebook, a panel's output area prints what it displays: keep it quiet.
        with contextlib.redirect_stdout(io.StringIO()):
            panel = factory()
            defaults = panel.values
            for control_name, control in panel.controls.items():
                for value in [*control_values(control, values_per_control),
                              defaults[control_name]]:
                    panel._apply({control_name: value})
                    panel.redraw(preview=True)
                    panel.redraw()
        timed = list(zip(panel.redraw_log, panel.redraw_seconds, strict=True))[1:]
        previews = [seconds for entry, seconds in timed if entry["preview"]] or [
            panel.redraw_seconds[0]]
        sharp = [seconds for entry, seconds in timed if not entry["preview"]] or previews
        report[name] = {"redraws": len(timed),
                        "median_ms": statistics.median(previews) * 1e3,
                        "max_ms": max(previews) * 1e3,
                        "sharp_median_ms": statistics.median(sharp) * 1e3}
    return report


# Key press to new pixels within 100 ms in the browser (tests/browser measures it); the
# kernel's share, the preview redraw this benchmark times, must stay within 60 ms of that.
PYTHON_REDRAW_TARGET_MS = 60.0


def format_redraw_table(report: dict, target_ms: float = PYTHON_REDRAW_TARGET_MS) -> str:
    lines = [f"{'panel':34} {'redraws':>7} {'preview median ms':>17} {'max ms':>7} "
             f"{'sharp median ms':>15}  preview ≤ {target_ms:g} ms"]
    for name, row in report.items():
        verdict = "yes" if row["median_ms"] <= target_ms else "NO"
        lines.append(f"{name:34} {row['redraws']:7d} {row['median_ms']:17.1f} "
                     f"{row['max_ms']:7.1f} {row['sharp_median_ms']:15.1f}  {verdict}")
    if not report:
        lines.append("(no panels registered)")
    return "\n".join(lines)
