"""Figures of notebook 11 debugging RoPE in real code: how far a bug moves the output."""

from __future__ import annotations

import math

from rope_lab.i18n import N_
from rope_lab.i18n import figure_text as _
from rope_lab.plots.style import ROLE_COLOURS, course_style, log_ticks, new_figure, number

# Differences of exactly 0 cannot sit on a log axis; they are drawn at this floor, and the
# floor's tick reads "0".
FLOOR = 1e-9
# Line styles tell curves of one role apart (the palette gives one colour per meaning).
_STYLES = ("-", "--", ":", "-.")
# The words are looked for in English and in the figure's language: a translated notebook
# passes translated labels, whose translator keeps these words' translations (错误, 修复 …).
_BUG_WORDS = (N_("bug"), N_("wrong"), N_("off by"), N_("restart at 0"), N_("unconverted"),
              N_("naive"), "bf16 buffer", ".to(", N_("incremental"))
_FIX_WORDS = (N_("fix"), N_("correct"), N_("reference"))


def _colour(label: str, index: int) -> str:
    """Vermillion for a bug, black for the fix or reference, else the RoPE blue, the key's
    sky blue or the context grey by index (a correct run that is neither the bug nor the fix)."""
    text = label.lower()
    if any(word in text or _(word) in label for word in _BUG_WORDS):
        return ROLE_COLOURS["mistake"]
    if any(word in text or _(word) in label for word in _FIX_WORDS):
        return ROLE_COLOURS["reference"]
    return (ROLE_COLOURS["rope"], ROLE_COLOURS["key"], ROLE_COLOURS["context"])[index % 3]


def _floor_ticks(axes, top: float) -> None:
    """Log y ticks every k decades from :data:`FLOOR` (labelled "0": the values clipped
    there are exactly 0) up to ``top``; at most six ticks."""
    low, high = round(math.log10(FLOOR)), math.ceil(math.log10(max(top, FLOOR * 10)))
    step = max(1, math.ceil((high - low) / 5))
    ticks = [10.0 ** exponent for exponent in range(low, high + 1, step)]
    axes.set_ylim(FLOOR / 3, ticks[-1] * 3 if ticks[-1] < top * 1.5 else ticks[-1] * 1.5)
    axes.set_yticks(ticks, labels=["0"] + [number(tick) for tick in ticks[1:]])
    axes.minorticks_off()


def _spaced(x, parts: int = 9) -> list[float]:
    """The x values to write as log-axis ticks: no two closer than 1/``parts`` of the axis
    (in log10 of 1 + x), the first and the last always kept, so labels never collide."""
    where = [math.log10(1 + abs(v)) for v in x]
    step = (max(where) - min(where)) / parts
    kept = [0]
    for index in range(1, len(x)):
        if where[index] - where[kept[-1]] >= step:
            kept.append(index)
    if kept[-1] != len(x) - 1:  # the last value replaces a kept neighbour too close to it
        kept[-1 if len(kept) > 1 else len(kept):] = [len(x) - 1]
    return [x[index] for index in kept]


def _shown(data: dict, labels: dict | None) -> list[str]:
    """The text drawn for each key of ``data``: its entry in ``labels``, else the key."""
    if labels is None:
        return list(data)
    unknown = [key for key in labels if key not in data]
    if unknown:
        raise ValueError(f"labels: {unknown!r} name no entry of the data; expected keys among "
                         f"{list(data)!r}")
    return [labels.get(key, key) for key in data]


def _guides(axes, tolerance, tolerance_label, marks):
    if tolerance is not None:
        axes.axhline(tolerance, color=ROLE_COLOURS["context"], linestyle=":", linewidth=2,
                     label=f"{_(tolerance_label)} {number(tolerance)}")
    for text, x in (marks or {}).items():
        axes.axvline(x, color=ROLE_COLOURS["context"], linestyle="--", linewidth=1.5)
        axes.annotate(_(text), (x, 1), xycoords=("data", "axes fraction"), xytext=(4, -4),
                      textcoords="offset points", va="top", fontsize=12,
                      color=ROLE_COLOURS["context"])


@course_style
def error_curves(x, curves: dict, *, title: str, xlabel: str, ylabel: str,
                 tolerance: float | None = None, tolerance_label: str = N_("tolerance"),
                 marks: dict | None = None, log_x: bool = False, labels: dict | None = None):
    """One line per curve: a difference (log scale) against position, step or offset.

    Args:
        x: the shared x values.
        curves: label → values (same length as x). A label with "bug", "wrong", "off by"
            … is drawn in the mistake colour, one with "fix", "correct" or "reference" in
            black; the others in the RoPE blue, sky blue, grey (and by line style).
        labels: key of ``curves`` → the legend's text for it, when the keys are names the
            code uses (``{"fix": "hf.decode_position_ids (fix)"}``); a key it leaves out is
            its own label. The colour follows the legend's text.
        tolerance: a dotted grey line, e.g. the 1e-5 a fix must stay under, in the legend as
            ``tolerance_label`` and its value.
        marks: label → x of a dashed vertical guide (e.g. ``{"L = 32": 32}``).
        log_x: a log x axis, ticks at the x values (a 0 among them: symlog, ticks still at
            the x values).

    The legend sits under the axes, never on the data. Values of exactly 0 are drawn at
    :data:`FLOOR`, whose tick reads "0".

    Data: ``fig.axes[0].lines[i]`` is curve i (ydata clipped below at :data:`FLOOR`), then
    the tolerance line.
    """
    shown = _shown(curves, labels)
    figure, axes = new_figure(width=8.0, height=4.4)
    x = [float(v) for v in x]
    clipped, top = False, tolerance or FLOOR
    for index, (label, values) in enumerate(zip(shown, curves.values(), strict=True)):
        values = [float(v) for v in values]
        clipped |= min(values) <= FLOOR
        top = max(top, *values)
        axes.plot(x, [max(v, FLOOR) for v in values], _STYLES[index % len(_STYLES)],
                  marker="o", markersize=5, linewidth=2, color=_colour(label, index),
                  label=_(label))
    _guides(axes, tolerance, tolerance_label, marks)
    axes.set_yscale("log")
    if log_x:
        if min(x) > 0:
            axes.set_xscale("log")
        else:  # a 0 among the x values: linear up to 1, logarithmic after
            axes.set_xscale("symlog", linthresh=1)
            axes.set_xlim(left=0)
        ticks = _spaced(x)
        axes.set_xticks(ticks, labels=[number(v) for v in ticks])
        axes.minorticks_off()
    axes.set(title=_(title), xlabel=_(xlabel), ylabel=_(ylabel))
    log_ticks(axes)
    if clipped:
        _floor_ticks(axes, top)
    figure.legend(loc="outside lower center", ncols=2 if len(axes.lines) > 1 else 1,
                  frameon=False)
    return figure


@course_style
def error_bars(values: dict, *, title: str, ylabel: str, tolerance: float | None = None,
               tolerance_label: str = N_("tolerance"), labels: dict | None = None):
    """One bar per case: how far each variant's output is from the correct run (log scale).

    With a ``tolerance``, bars above it are drawn in the mistake colour, the rest in black,
    and the tolerance is a dotted grey line; a key under the axes says so (the line as
    ``tolerance_label`` and its value). ``labels``: key of ``values`` → the bar's label, as
    in :func:`error_curves`.

    Data: ``fig.axes[0].patches[i].get_height()`` is value i (clipped below at
    :data:`FLOOR`); the bar labels are the dict's keys, or their ``labels``.
    """
    labels = _shown(values, labels)
    figure, axes = new_figure(width=8.0, height=4.4)
    heights = [max(float(v), FLOOR) for v in values.values()]
    if tolerance is None:
        colours = [_colour(label, index) for index, label in enumerate(labels)]
    else:  # over the tolerance is the bug, under it a correct run
        colours = [ROLE_COLOURS["mistake"] if height > tolerance else ROLE_COLOURS["reference"]
                   for height in heights]
    bars = axes.bar(range(len(labels)), heights, color=colours)
    for bar, value in zip(bars, values.values(), strict=True):
        axes.annotate(number(float(value)), (bar.get_x() + bar.get_width() / 2,
                                             bar.get_height()),
                      xytext=(0, 3), textcoords="offset points", ha="center", fontsize=12)
    if tolerance is not None:  # the key under the axes: what the two colours and the line mean
        from matplotlib.patches import Patch

        line = axes.axhline(tolerance, color=ROLE_COLOURS["context"], linestyle=":",
                            linewidth=2, label=f"{_(tolerance_label)} {number(tolerance)}")
        figure.legend([Patch(color=ROLE_COLOURS["mistake"]), Patch(color=ROLE_COLOURS["reference"]),
                       line], [_("above: a bug"), _("within"), line.get_label()],
                      loc="outside lower center", ncols=3, frameon=False)
    axes.set_xticks(range(len(labels)), [_(label) for label in labels])
    axes.set_yscale("log")
    axes.set_ylim(top=max(heights) * 30)
    axes.set(title=_(title), ylabel=_(ylabel))
    log_ticks(axes)
    return figure
