"""Figures of notebook 09 performance."""

from __future__ import annotations

import math

from rope_lab.i18n import N_
from rope_lab.i18n import figure_text as _
from rope_lab.plots.style import (
    course_style,
    fixed_layout_figure,
    live,
    log_ticks,
    new_figure,
    number,
    one_two_five,
    role,
)

# Rows and cases of the GPU record (scripts/gpu_check.py writes them as data), marked for the
# catalog: the figures show them translated, code reads them in English. The rows named by
# rope_lab.bench are marked there.
GPU_RECORD_WORDS = (
    N_("apply_rope_ in place + ids"), N_("without Triton (default)"),
    N_("without Triton + ids"), N_("HF eager (rotary + apply) / 2"),
    N_("HF apply_rotary_pos_emb only / 2"), N_("torch.compile(HF step) / 2"),
    N_("Liger (tables given) / 2"),
    N_("train"), N_("prefill"), N_("decode"), N_("small"),  # a case's first word
)
LAYOUT_WORDS = (N_("half"), N_("interleaved"))
_DEFAULT_MARK = " (default)"


def _row_name(name: str) -> str:
    """An implementation's name as a figure shows it: from the catalog, else (a name that a
    notebook builds, ``backend='c' (default)``) with its " (default)" mark translated."""
    shown = _(name)
    if shown == name and name.endswith(_DEFAULT_MARK):
        return _("{name} (default)").format(name=name.removesuffix(_DEFAULT_MARK))
    return shown


def _case_name(case: str) -> str:
    """``train (8, 32, 4096, 128)`` with its first word translated."""
    word, space, shape = case.partition(" ")
    return _(word) + space + shape


@course_style
def roofline(peak_gflops: float, bandwidth_gb_s: float, points: dict | None = None):
    """The roofline: attainable GFLOP/s = min(peak, intensity × bandwidth), log–log.

    ``points``: label → (arithmetic intensity in FLOP/byte, achieved or attainable GFLOP/s),
    drawn as markers (e.g. RoPE, a matmul). The axes span every roof the notebook 09 panel
    can set (x 0.01 … 1000 FLOP/byte, y 0.1 … 5·10⁶ GFLOP/s), so moving a roof never
    rescales them. A live figure: a panel updates it in place (same point labels).
    """
    import numpy as np

    # Fixed margins: constrained layout leaves out the animated title and would cut it off.
    figure, axes = fixed_layout_figure(1, 1, width=8.6, height=4.6, left=0.14, right=0.97,
                                       bottom=0.13, top=0.9)
    intensity = np.logspace(-2, 3, 200)
    roof_line, = axes.loglog(intensity, intensity, color=role("reference"), linewidth=2,
                             label=_("roofline"))
    ridge_line = axes.axvline(1.0, color=role("reference"), linestyle=":", linewidth=1)
    # Labels as offsets from their xy, so that moving xy moves the text (an annotation with
    # no offset stays where it was made). The ridge label sits at the foot of the ridge line
    # (x in data, y in axes units), where neither roof passes; the memory label above the
    # slope's start; the legend top left, above the slope.
    ridge_text = axes.annotate(" ", (1.0, 0.03), xycoords=("data", "axes fraction"),
                               xytext=(4, 0), textcoords="offset points", va="bottom")
    # 8 pt above the flat roof: clear of a marker sitting on it (radius 5.5 pt)
    peak_text = axes.annotate(" ", (intensity[-1], 1.0), xytext=(0, 8),
                              textcoords="offset points", ha="right")
    memory_text = axes.annotate(" ", (0.02, 1.0), xytext=(0, 56), textcoords="offset points",
                                va="bottom")
    markers = iter("s^Dv")
    dots = {}
    for label in (points or {}):  # RoPE blue; anything else grey, each its own marker
        rope = "RoPE" in label
        dots[label], = axes.loglog([], [], "o" if rope else next(markers, "s"), markersize=10,
                                   label=_(label), color=role("rope") if rope else role("context"))
    high = max(5e6, 5 * peak_gflops)  # room for the peak label above the roof
    axes.set(xlim=(0.01, 1000), ylim=(0.1, high),
             xlabel=_("arithmetic intensity (FLOP per byte moved)"),
             ylabel=_("attainable GFLOP/s"))
    log_ticks(axes)
    axes.legend(loc="upper left")

    def update(peak_gflops=peak_gflops, bandwidth_gb_s=bandwidth_gb_s, points=points):
        from rope_lab import _validate

        for name, value in (("peak_gflops", peak_gflops), ("bandwidth_gb_s", bandwidth_gb_s)):
            if _validate.check_finite_number(value, name) <= 0:
                raise ValueError(f"{name} must be greater than 0, got {value}")
        if set(points or {}) != set(dots):
            return False
        roof_line.set_ydata(np.minimum(peak_gflops, intensity * bandwidth_gb_s))
        ridge = peak_gflops / bandwidth_gb_s
        ridge_line.set_xdata([ridge, ridge])
        # right of the line while there is room before x = 1000, else left of it; a ridge
        # past the axis is named at its right edge, with an arrow pointing out
        right, beyond = ridge < 30, ridge > intensity[-1]
        ridge_text.xy = (min(ridge, intensity[-1]), 0.03)
        ridge_text.set_horizontalalignment("left" if right else "right")
        ridge_text.xyann = (4, 0) if right else (-4, 0)
        ridge_text.set_text(_("ridge {ridge} FLOP/byte").format(ridge=number(ridge))
                            + (" →" if beyond else ""))
        peak_text.xy = (intensity[-1], peak_gflops)
        peak_text.set_text(_("peak {peak} GFLOP/s").format(peak=number(peak_gflops)))
        memory_text.xy = (0.02, 0.02 * bandwidth_gb_s)
        memory_text.set_text(_("memory {bandwidth} GB/s").format(
            bandwidth=number(bandwidth_gb_s)))
        for label, (x, y) in (points or {}).items():
            dots[label].set_data([x], [y])
        # The title says where RoPE landed with these roofs (live measurements in notebook 09).
        title = _("Roofline")
        if "RoPE" in (points or {}):
            title = (_("Roofline: RoPE sits on the memory slope") if points["RoPE"][0] < ridge
                     else _("Roofline: RoPE sits on the compute roof"))
        axes.set_title(title)
        if peak_gflops > high:
            axes.set_ylim(0.1, 5 * peak_gflops)
        return None

    update()  # validates the roofs before anything is returned
    return live(figure, update, animated=[roof_line, ridge_line, ridge_text, peak_text,
                                          memory_text, *dots.values(), axes.title])


@course_style
def implementation_bars(results: list, *, layout: str = "half", log: bool = True):
    """Time of each implementation as a multiple of ``x.clone()``.

    ``results``: dicts (or :class:`rope_lab.bench.Result`) with name, layout, times_clone.
    With ``log`` (ratios from about 1 to a few hundred), a bar's length on a log axis would
    mean nothing, so each implementation is a dot on a stem that starts at the copy (1×):
    the stem is how many times slower (right) or faster (left) than a copy it is
    (``axes.lines[j]`` is row j's stem, x = (1, ratio)). Without ``log``, plain bars from 0
    (``axes.patches``). Yardsticks black, the package's defaults blue, the others grey.
    """
    from matplotlib.ticker import MaxNLocator, NullLocator

    rows = [r if isinstance(r, dict) else vars(r) for r in results]
    rows = sorted((r for r in rows if r["layout"] == layout), key=lambda r: r["times_clone"])
    figure, axes = new_figure(width=8.6, height=0.5 * len(rows) + 1.6)
    names = [r["name"] for r in rows]
    values = [r["times_clone"] for r in rows]
    yardsticks = ("clone", "copy_ into a buffer")
    colours = [role("reference") if n in yardsticks else role("rope")
               if "default" in n or "in place" in n else role("context") for n in names]
    if log:
        for y, (value, colour) in enumerate(zip(values, colours, strict=True)):
            axes.plot([1.0, value], [y, y], "-", color=colour, lw=3, solid_capstyle="butt")
            axes.plot([value], [y], "o", color=colour, markersize=9)
        axes.set_yticks(range(len(names)), [_row_name(n) for n in names])
        axes.set_xscale("log")
        low, high = min(values + [1.0]), max(values + [1.0])
        # room right of the top dot for its number: three digits ("108×") need more
        axes.set_xlim(low / 1.25, high * (3.2 if high >= 99.5 else 2.2))
        ticks = one_two_five(*axes.get_xlim())
        if len(ticks) < 3:  # a short range: evenly spaced round ticks, never a single tick
            ticks = [t for t in MaxNLocator(nbins=5).tick_values(*axes.get_xlim())
                     if axes.get_xlim()[0] <= t <= axes.get_xlim()[1]]
        axes.set_xticks(ticks, [number(t) for t in ticks])
        axes.xaxis.set_minor_locator(NullLocator())
    else:
        axes.barh(range(len(names)), values, color=colours)
        axes.set_yticks(range(len(names)), [_row_name(n) for n in names])
        axes.set_xlim(0, 1.2 * max(values))
    axes.axvline(1.0, color=role("reference"), linestyle="--", label=_("copy (clone) = 1"))
    for y, value in enumerate(values):  # the number beside the dot, away from the 1× line
        label = f"{value:,.0f}×" if value >= 100 else f"{value:.3g}×"
        left = log and value < 1.0
        axes.annotate(label, (value, y), xytext=(-9 if left else 9, 0), fontsize=12,
                      textcoords="offset points", va="center", ha="right" if left else "left")
    if log:
        # room left of the lowest dot for its number ("0.127×"), clear of the row names
        axes.set_xlim(min(axes.get_xlim()[0], min(values) / 4), axes.get_xlim()[1])
    axes.invert_yaxis()
    axes.set(title=_("RoPE time relative to a copy ({layout} layout)").format(
                 layout=_(layout)),
             xlabel=_("time ÷ time of x.clone() (lower is better)"))
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
    for key, name, colour, style in (
            ("reference_ms", _("reference formula (eager)"), role("context"), "s--"),
            ("apply_rope_ms", _("apply_rope (default)"), role("rope"), "o-"),
            ("clone_ms", "x.clone()", role("reference"), "^-")):
        axes.plot(sizes, [row[key] for row in rows], style, color=colour, label=name)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    # The title states what these timings show: the slope of log time against log size for
    # apply_rope between the two largest sizes (1 = linear, 0 = a fixed cost per call).
    symbol = {"seq": "L", "head_dim": "d"}.get(parameter, parameter)
    title = _("RoPE time versus {symbol}").format(symbol=symbol)
    if len(rows) >= 2 and sizes[-1] != sizes[-2]:
        slope = math.log(rows[-1]["apply_rope_ms"] / rows[-2]["apply_rope_ms"]) / math.log(
            sizes[-1] / sizes[-2])
        title = _("apply_rope: time ∝ {symbol}^{slope:.2f} between the two largest "
                  "sizes").format(symbol=symbol, slope=slope)
    axes.set(title=title, xlabel=_(label) if label else parameter,
             ylabel=_("time per call (ms)"))
    times = [row[key] for row in rows for key in ("reference_ms", "apply_rope_ms", "clone_ms")]
    log_ticks(axes, y_ticks=one_two_five(min(times), max(times)))
    axes.legend()
    return figure


@course_style
def layer_shares(costs: dict, *, unit: str = "ms",
                 title: str = N_("Where a layer's time goes")):
    """Horizontal bars of each part of a transformer layer, labelled with its share."""
    figure, axes = new_figure(width=7.5, height=3.6)
    names = list(costs)
    values = [costs[n] for n in names]
    total = sum(values)
    colours = [role("rope") if "RoPE" in n else role("context") for n in names]
    axes.barh([_(name) for name in names], values, color=colours)
    for y, value in enumerate(values):
        axes.annotate(f"{100 * value / total:.2g} %", (value, y), xytext=(4, 0),
                      textcoords="offset points", va="center", fontsize=12)
    axes.invert_yaxis()
    # A linear axis: bar lengths are shares, so a part too small to see is the point.
    axes.set(title=_(title), xlabel=unit)
    axes.set_xlim(0, 1.18 * max(values))
    return figure


@course_style
def gpu_speed(record: dict, *, dtype: str = "bfloat16"):
    """Time per tensor on a GPU as a multiple of ``x.clone()``, one panel per shape.

    ``record``: the JSON that ``scripts/gpu_check.py`` writes; its ``speed`` rows of
    ``dtype`` ({"case", "dtype", "us_per_tensor": {label: µs}}) are drawn, one panel
    (``figure.axes[k]`` for the k-th such row) per case, with every label on the same row
    of every panel. For each label a stem from the copy (1×) to its ratio µs ÷ clone's µs
    and a dot there, on a log axis shared by the panels (``axes.lines[2j + 1]`` is label j's
    dot, x = the ratio). rope_lab's rows blue, the copy black, other libraries grey. Each
    panel's title gives clone's µs, so the ratios can be turned back into time.
    """
    import numpy as np
    from matplotlib.ticker import NullLocator

    rows = [row for row in record.get("speed", [])
            if row.get("dtype") == dtype and row.get("us_per_tensor", {}).get("clone")]
    if not rows:
        raise ValueError(f"record has no speed rows for dtype {dtype!r} with a clone time")
    labels = []
    for row in rows:
        labels += [label for label in row["us_per_tensor"] if label not in labels]
    ratios = [{label: us / row["us_per_tensor"]["clone"]
               for label, us in row["us_per_tensor"].items()} for row in rows]
    values = [value for ratio in ratios for value in ratio.values()]
    low, high = min(values + [1.0]) / 1.6, max(values + [1.0]) * 3.5  # room for the numbers
    columns = 2 if len(rows) > 1 else 1
    figure, axes = new_figure(math.ceil(len(rows) / columns), columns, width=8.6,
                              height=0.32 * len(labels) * math.ceil(len(rows) / columns) + 1.6,
                              sharex=True, sharey=True)
    axes = np.atleast_1d(axes).flatten()
    for panel, row, ratio in zip(axes, rows, ratios, strict=False):
        for y, label in enumerate(labels):
            colour = (role("reference") if label == "clone" else role("rope")
                      if label.startswith(("apply_rope", "without Triton", "RotaryEmbedding"))
                      else role("context"))
            value = ratio.get(label, math.nan)
            panel.plot([1.0, value], [y, y], "-", color=colour, lw=2.5, solid_capstyle="butt")
            panel.plot([value], [y], "o" if colour != role("context") else "s",
                       color=colour, markersize=7)
            if label != "clone" and math.isfinite(value):  # the ratio, to read it exactly
                panel.text(value * 1.18, y, f"{value:.2f}" if value < 10 else f"{value:.0f}",
                           va="center", ha="left", fontsize=11.5, color=colour)
        panel.axvline(1.0, color=role("reference"), linestyle="--", linewidth=1)
        panel.set_xscale("log")
        panel.set_xlim(low, high)
        ticks = one_two_five(low, high)
        panel.set_xticks(ticks, [number(t) for t in ticks])
        panel.xaxis.set_minor_locator(NullLocator())
        panel.set_title(_("{case}\nclone {microseconds} µs").format(
            case=_case_name(row["case"]), microseconds=number(row["us_per_tensor"]["clone"])),
            fontsize=12)
    for panel in axes[len(rows):]:
        panel.set_visible(False)
    axes[0].set_yticks(range(len(labels)), [_row_name(label) for label in labels])
    axes[0].invert_yaxis()
    environment = record.get("environment", {})
    gpu = environment.get("gpu") or environment.get("device", "GPU")
    versions = " · ".join(f"{name} {environment[key]}" for name, key in (
        ("torch", "torch"), ("CUDA", "cuda"), ("Triton", "triton")) if environment.get(key))
    figure.suptitle(_("{gpu}, {dtype}: time per tensor ÷ time of x.clone() (lower is "
                      "better)").format(gpu=gpu, dtype=dtype)
                    + (f"\n{versions}" if versions else ""), fontsize=13)
    for panel in axes[len(rows) - columns:len(rows)]:
        panel.set_xlabel(_("× clone"))
    return figure
