"""Slider panels wired to :mod:`rope_lab.plots`.

A :class:`Panel` owns a plot function and a set of ipywidgets controls. Moving a control
calls the plot function with the current values, renders the figure to PNG once and swaps
it into a fixed-height output area (no flicker, no layout jump). Sliders use
``continuous_update=False`` so a redraw happens when the student lets go.

Works with ipywidgets 7.7 (Colab) and 8 (JupyterLab 4, Notebook 7, VS Code): only widgets
and traits present in both are used.

Every panel has a programmatic handle for tests and benchmarks::

    panel = decay_panel()
    panel.set(base=500.0)        # same path as moving the slider
    panel.figure, panel.png      # what was drawn
    panel.redraw_seconds         # compute + draw time of each redraw
"""

from __future__ import annotations

import time

import ipywidgets as widgets
from IPython.display import Image, display

from rope_lab import plots


class Panel:
    """A plot function plus controls; redraws on every change.

    Args:
        plot: function taking the controls' values (and ``fixed``) as keyword arguments
            and returning a matplotlib Figure.
        controls: name → ipywidgets control; the name is the plot function's keyword.
        fixed: keyword arguments passed to ``plot`` unchanged.
        height: height of the output area in CSS units (keeps the page from jumping).
    """

    def __init__(self, plot, controls: dict, *, fixed: dict | None = None,
                 height: str = "420px"):
        self.plot = plot
        self.controls = dict(controls)
        self.fixed = dict(fixed or {})
        self.output = widgets.Output(layout=widgets.Layout(height=height, overflow="hidden"))
        self.figure = None
        self.png = b""
        # Constrained-layout positions found once per setting of the non-slider controls
        # (a dropdown can change labels and so margins; a slider seldom does).
        self._layouts: dict = {}
        self._holding = False
        self.redraw_seconds: list[float] = []
        for control in self.controls.values():
            if hasattr(control, "continuous_update"):
                control.continuous_update = False
            control.observe(self._on_change, names="value")
        self.box = widgets.VBox(
            [widgets.HBox(list(self.controls.values()),
                          layout=widgets.Layout(flex_flow="row wrap")), self.output]
        )
        self.redraw()

    @property
    def values(self) -> dict:
        return {name: control.value for name, control in self.controls.items()}

    def set(self, **values):
        """Set controls by name, as a student would, and return the redrawn figure."""
        unknown = set(values) - set(self.controls)
        if unknown:
            raise ValueError(
                f"unknown control(s) {sorted(unknown)}; this panel has {sorted(self.controls)}"
            )
        self._holding = True  # one redraw for all the values, not one per control
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._holding = False
        self.redraw()
        return self.figure

    def redraw(self):
        start = time.perf_counter()
        self.figure = self.plot(**self.fixed, **self.values)
        layout_key = self._layout_key()
        frozen = self._layouts.get(layout_key)
        laid_out = _uses_constrained_layout(self.figure)
        if laid_out and frozen is not None and len(frozen) == len(self.figure.axes):
            # Constrained layout measures every label on every draw, about a third of a
            # redraw. A slider rarely moves the margins, so reuse the positions it found.
            self.figure.set_layout_engine("none")
            for axes, position in zip(self.figure.axes, frozen, strict=True):
                axes.set_position(position)
        self.png = plots.render_png(self.figure)
        if laid_out and frozen is None:
            self._layouts[layout_key] = [axes.get_position() for axes in self.figure.axes]
        self.redraw_seconds.append(time.perf_counter() - start)
        with self.output:
            self.output.clear_output(wait=True)
            display(Image(data=self.png, format="png"))
        return self.figure

    def _layout_key(self) -> tuple:
        return tuple(
            (name, control.value)
            for name, control in self.controls.items()
            if not isinstance(control.value, (int, float)) or isinstance(control.value, bool)
        )

    def _on_change(self, change):
        if not self._holding:
            self.redraw()

    def _ipython_display_(self):
        display(self.box)


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


def slider(kind: str, description: str, value, minimum, maximum, step=None, **kwargs):
    """A slider with the course's defaults: wide label, release-to-update.

    kind: "int", "float" or "log" (``minimum``/``maximum`` are then exponents of 10).
    """
    style = {"description_width": "initial"}
    layout = widgets.Layout(width="320px")
    common = dict(description=description, value=value, min=minimum, max=maximum,
                  continuous_update=False, style=style, layout=layout, **kwargs)
    if kind == "int":
        return widgets.IntSlider(step=step or 1, **common)
    if kind == "float":
        return widgets.FloatSlider(step=step or (maximum - minimum) / 100, **common)
    if kind == "log":
        return widgets.FloatLogSlider(base=10, step=step or 0.05, **common)
    raise ValueError(f"kind must be one of 'int', 'float', 'log', got {kind!r}")


def dropdown(description: str, options, value=None):
    return widgets.Dropdown(description=description, options=options,
                            value=value if value is not None else list(options)[0],
                            style={"description_width": "initial"})


# --- 02 absolute position encodings -------------------------------------------------------


@register
def sinusoidal_panel(dim: int = 64, base: float = 10000.0, length: int = 128) -> Panel:
    """Sinusoidal PE heatmap and PE(p)·PE(p+k) against k; sliders for dim, base and length."""
    return Panel(plots.sinusoidal_pe_figure, {
        "dim": slider("int", "dim d", dim, 8, 256, step=8),
        "base": slider("log", "base", base, 1, 6, step=0.25),
        "length": slider("int", "length L", length, 16, 512, step=16),
    }, height="400px")


@register
def binary_panel(dim: int = 5) -> Panel:
    """Binary PE bits for positions 0 … 2^d − 1 and the jump between neighbours; slider d."""
    return Panel(plots.binary_pe_figure, {
        "dim": slider("int", "bits d", dim, 2, 8),
    }, height="490px")

# --- 03 RoPE in 2D ------------------------------------------------------------------------

@register
def rotation_2d_panel():
    """Turn θ, the positions m and n, and shift both: the score depends on n − m only."""
    return Panel(plots.rotation_2d, {
        "theta": slider("float", "θ (rad per position)", 0.5, 0.0, 3.14, 0.01),
        "m": slider("int", "m (query position)", 2, 0, 12),
        "n": slider("int", "n (key position)", 5, 0, 12),
        "shift": slider("int", "shift both by", 0, 0, 20),
    }, height="500px")


# --- 04 RoPE in d dimensions --------------------------------------------------------------

@register
def rope_frequencies_panel():
    """Head dimension and base → per-pair wavelengths and the (position × pair) angles."""
    return Panel(plots.rope_frequencies, {
        "dim": slider("int", "head dim d", 64, 8, 256, 8),
        "base": slider("log", "base", 10000.0, 1, 6, 0.1),
    }, height="400px")


@register
def angle_precision_panel():
    """Pick the dtype the angles m·θ_i are computed in; see phase and cos errors grow."""
    return Panel(plots.angle_precision, {
        "dtype": dropdown("angles computed in", ["bfloat16", "float16", "float32"]),
        "base": slider("log", "base", 10000.0, 2, 6, 0.1),
    }, height="400px")


# --- 05 long-range decay ------------------------------------------------------------------

@register
def decay_panel():
    """Base, head dim, max distance and q/k mode → the score curve and the Abel factor."""
    return Panel(plots.decay_and_abel, {
        "base": slider("log", "base", 10000.0, 0, 6, 0.05),
        "dim": slider("int", "head dim d", 128, 8, 256, 8),
        "max_distance": slider("int", "max distance Δ", 1024, 64, 4096, 64),
        "mode": dropdown("q, k", ["ones", "random", "correlated"]),
    }, height="400px")


# --- 06 length extrapolation --------------------------------------------------------------

@register
def scaling_panel():
    """Scale factor, method, YaRN's betas and the trained length → frequency overlay and
    wavelength chart (the betas matter for "yarn" only)."""
    return Panel(plots.scaling_explorer, {
        "factor": slider("log", "scale factor s", 8.0, 0.0, 1.5, step=0.05),
        "method": dropdown("method", ["default", "linear", "ntk", "dynamic", "yarn", "llama3"],
                           value="yarn"),
        "beta_fast": slider("float", "YaRN beta_fast", 32.0, 4.0, 128.0, step=1.0),
        "beta_slow": slider("float", "YaRN beta_slow", 1.0, 0.25, 2.0, step=0.25),
        "original_length": dropdown("original length L", [256, 512, 1024, 2048, 4096, 8192],
                                    value=2048),
    }, fixed={"dim": 64, "base": 10000.0}, height="440px")


# --- 07 linear attention ------------------------------------------------------------------


@register
def linear_attention_normalizer_panel():
    """Rotated vs unrotated denominators of causal linear attention: base, d, L."""
    return Panel(plots.linear_attention_normalizers, {
        "base": slider("log", "base", 100.0, 0, 5),
        "dim": slider("int", "head dim d", 8, 2, 64, step=2),
        "length": slider("int", "length L", 256, 16, 512, step=16),
    }, height="360px")


# --- 08 RoPE beyond 1D --------------------------------------------------------------------

@register
def rope_2d_panel():
    """Axial 2D vs flattened 1D RoPE kernels: grid size and base."""
    return Panel(plots.rope_2d_kernels, {
        "size": slider("int", "grid size (patches per side)", 8, 3, 16),
        "base": slider("log", "base", 100.0, 0, 4),
    }, height="420px")


def _axial_and_mixed(angle_degrees: float, base: float):
    """RoPE-Mixed at one direction, next to axial RoPE (direction 0°) for reference."""
    return plots.rope_mixed_kernels((0.0, angle_degrees), base=base)


@register
def rope_mixed_panel():
    """RoPE-Mixed kernel: frequency direction angle and base."""
    return Panel(_axial_and_mixed, {
        "angle_degrees": slider("float", "direction angle (°)", 30.0, 0.0, 90.0, step=5.0),
        "base": slider("log", "base", 10.0, 0, 4),
    }, height="380px")


@register
def mrope_panel():
    """M-RoPE section split: pairs for time (h and w share the rest), and base."""
    return Panel(plots.mrope_sections, {
        "temporal_pairs": slider("int", "pairs for t (h, w share the rest)", 16, 0, 64),
        "base": slider("log", "base", 1e6, 2, 7),
    }, height="380px")


# --- 09 performance -----------------------------------------------------------------------


@register
def roofline_panel():
    """Move the machine's bandwidth and peak: where do RoPE and a matmul land?"""
    from rope_lab import bench

    def draw(bandwidth_gb_s, peak_gflops, seq, bytes_per_element):
        rope = bench.rope_traffic(1, 32, seq, 128, bytes_per_element=bytes_per_element)
        # A (seq × 128) @ (128 × seq) score matmul per head: 2·L²·d FLOPs over 2·L·d + L²
        # elements moved.
        matmul = 2 * seq * seq * 128 / ((2 * seq * 128 + seq * seq) * bytes_per_element)
        points = {
            "RoPE": (rope["intensity"], bench.attainable_gflops(
                rope["intensity"], peak_gflops, bandwidth_gb_s)),
            "scores q kᵀ": (matmul, bench.attainable_gflops(matmul, peak_gflops,
                                                           bandwidth_gb_s)),
        }
        return plots.roofline(peak_gflops, bandwidth_gb_s, points)

    return Panel(draw, {
        "bandwidth_gb_s": slider("log", "bandwidth (GB/s)", 50.0, 1, 3.5),
        "peak_gflops": slider("log", "peak (GFLOP/s)", 1000.0, 2, 6),
        "seq": slider("int", "sequence length L", 2048, 128, 8192, step=128),
        "bytes_per_element": dropdown("bytes per element", [("float32", 4), ("bfloat16", 2)],
                                      value=4),
    }, height="420px")
