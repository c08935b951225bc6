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
        changed = False
        for name, value in values.items():
            if self.controls[name].value != value:
                self.controls[name].value = value  # fires _on_change → redraw
                changed = True
        if not changed:
            self.redraw()
        return self.figure

    def redraw(self):
        start = time.perf_counter()
        self.figure = self.plot(**self.fixed, **self.values)
        self.png = plots.render_png(self.figure)
        self.redraw_seconds.append(time.perf_counter() - start)
        with self.output:
            self.output.clear_output(wait=True)
            display(Image(data=self.png, format="png"))
        return self.figure

    def _on_change(self, change):
        self.redraw()

    def _ipython_display_(self):
        display(self.box)


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

# --- 03 RoPE in 2D ------------------------------------------------------------------------

# --- 04 RoPE in d dimensions --------------------------------------------------------------

# --- 05 long-range decay ------------------------------------------------------------------

# --- 06 length extrapolation --------------------------------------------------------------

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
