"""Figures of notebook 11 (rope_lab.plots.debugging_rope): the data drawn is the data given."""

from __future__ import annotations

import matplotlib.colors as mcolors
import pytest

from rope_lab.plots import debugging_rope as figures
from rope_lab.plots.style import ROLE_COLOURS


def test_error_curves_draw_each_curve_clipped_at_the_floor():
    figure = figures.error_curves([0, 1, 2], {"bug": [1.0, 0.5, 0.0], "fix": [1e-7, 0, 2e-7]},
                                  title="t", xlabel="x", ylabel="y", tolerance=1e-5)
    axes = figure.axes[0]
    bug, fix, tolerance = axes.lines
    assert list(bug.get_ydata()) == [1.0, 0.5, figures.FLOOR]
    assert list(fix.get_ydata()) == pytest.approx([1e-7, figures.FLOOR, 2e-7])
    assert mcolors.same_color(bug.get_color(), ROLE_COLOURS["mistake"])
    assert mcolors.same_color(fix.get_color(), ROLE_COLOURS["reference"])
    assert list(tolerance.get_ydata()) == [1e-5, 1e-5]
    assert axes.get_yscale() == "log" and axes.get_title() == "t"


@pytest.mark.parametrize(("x", "scale"), [([1, 10, 100], "log"), ([0, 10, 100], "symlog")])
def test_log_x_starts_at_the_first_value(x, scale):
    figure = figures.error_curves(x, {"a": [1, 2, 3]}, title="t", xlabel="x", ylabel="y",
                                  log_x=True)
    axes = figure.axes[0]
    assert axes.get_xscale() == scale
    assert axes.get_xlim()[0] >= 0


def test_error_bars_colour_by_the_tolerance():
    figure = figures.error_bars({"a": 2.0, "b": 1e-6, "c": 0.0}, title="t", ylabel="y",
                                tolerance=1e-5)
    bars = figure.axes[0].patches
    assert [bar.get_height() for bar in bars] == pytest.approx([2.0, 1e-6, figures.FLOOR])
    assert mcolors.same_color(bars[0].get_facecolor(), ROLE_COLOURS["mistake"])
    assert mcolors.same_color(bars[1].get_facecolor(), ROLE_COLOURS["reference"])
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == ["a", "b", "c"]



def test_labels_name_the_keys_and_the_colour_follows_the_label():
    """Keys the code uses (``decoded["fix"]``) and the text a figure writes, kept apart."""
    figure = figures.error_curves([0, 1], {"p1": [1.0, 1.0], "ok": [1e-7, 1e-7]}, title="t",
                                  xlabel="x", ylabel="y",
                                  labels={"p1": "position P + 1 (bug)", "ok": "the fix"})
    bug, fix = figure.axes[0].lines
    assert [bug.get_label(), fix.get_label()] == ["position P + 1 (bug)", "the fix"]
    assert mcolors.same_color(bug.get_color(), ROLE_COLOURS["mistake"])
    assert mcolors.same_color(fix.get_color(), ROLE_COLOURS["reference"])
    figure = figures.error_bars({"a": 2.0, "b": 1e-6}, title="t", ylabel="y",
                                labels={"a": "GPT-2 (learned)"})  # "b" keeps its key
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == ["GPT-2 (learned)", "b"]


@pytest.mark.parametrize("draw", [
    lambda labels: figures.error_curves([0], {"a": [1.0]}, title="t", xlabel="x", ylabel="y",
                                        labels=labels),
    lambda labels: figures.error_bars({"a": 1.0}, title="t", ylabel="y", labels=labels)])
def test_a_label_for_no_key_is_refused(draw):
    with pytest.raises(ValueError, match=r"labels: \['typo'\] name no entry.*\['a'\]"):
        draw({"typo": "a label"})

# --- readable in class: colour-blind safe, inside the output area, legends off the data -------

# The curves and bars notebook 11 draws, with its labels (the colours follow the labels).
NOTEBOOK_CURVES = {
    "offsets": ([0, 16, 64, 256, 1024, 4096, 16384],
                {"float32 model: offset vs offset 0": [0, 1e-6, 2e-6, 2e-6, 2e-5, 3e-5, 1e-4],
                 "bf16 model: offset vs offset 0": [0, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03]},
                {"tolerance": 0.03, "tolerance_label": "bf16 vs float32 at offset 0:",
                 "log_x": True}),
    "precision": ([1, 4, 16, 64, 256, 1024, 4096, 16384, 32000],
                  {"float32 model": [1e-8] * 9, "float32 under bf16 autocast": [1e-8] * 9,
                   "bf16 weights, float32 inv_freq": [1e-3] * 9,
                   "bf16 buffer from .to(bfloat16) (bug)": [1e-3 * 2 ** i for i in range(9)]},
                  {"log_x": True}),
    "decoding": (range(16, 25),
                 {"position P + 1 (bug)": [0] + [1.0] * 8,
                  "position 0 (restart at 0)": [0] + [2.0] * 8,
                  "hf.decode_position_ids (fix)": [0] + [1e-6] * 8},
                 {"tolerance": 1e-5, "marks": {"L = 32": 20}}),
}


def _curves(name):
    x, curves, options = NOTEBOOK_CURVES[name]
    return figures.error_curves(x, curves, title="t", xlabel="x", ylabel="y", **options)


def _bars():
    return figures.error_bars({"Llama (RoPE)": 1.4e-6, "GPT-2 (learned)": 3.4,
                               "Llama, dynamic NTK": 0.18}, title="t", ylabel="y",
                              tolerance=1e-5)


@pytest.mark.parametrize("name", [*NOTEBOOK_CURVES, "bars"])
def test_figures_pass_the_course_checks(name):
    """The deuteranopia check of tests/test_style.py, 848 px at display size (tight bbox, as
    the notebook shows it), no text under 14 px, and the legend under the axes, off the data."""
    import io
    import struct

    from matplotlib.text import Text
    from test_style import confusable_pairs

    from rope_lab.plots.style import DISPLAY_DPI

    figure = _bars() if name == "bars" else _curves(name)
    assert confusable_pairs(figure) == []
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DISPLAY_DPI, bbox_inches="tight")
    assert struct.unpack(">II", buffer.getvalue()[16:24])[0] <= 848
    small = [text.get_text() for text in figure.findobj(Text)
             if text.get_visible() and text.get_text().strip()
             and text.get_fontsize() * DISPLAY_DPI / 72 < 14]
    assert not small
    assert _legends_under_the_axes(figure)


def _legends_under_the_axes(figure) -> bool:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    axes = figure.axes[0]
    legends = [*figure.legends, *([axes.get_legend()] if axes.get_legend() else [])]
    return all(legend.get_window_extent(renderer).y1 <= axes.get_window_extent(renderer).y0
               for legend in legends)


def test_the_checks_fail_on_a_legend_inside_and_on_confusable_colours():
    """The checks above can fail: matplotlib's default red and green, and a legend on the data."""
    from test_style import confusable_pairs

    figure = _curves("decoding")
    figure.axes[0].lines[0].set_color("tab:red")
    figure.axes[0].lines[2].set_color("tab:green")
    assert confusable_pairs(figure)
    figure.axes[0].legend(loc="upper left")  # matplotlib's habit: on the data
    assert not _legends_under_the_axes(figure)


def test_exact_zeros_sit_on_a_tick_labelled_0_and_guides_say_their_value():
    figure = _curves("decoding")
    axes = figure.axes[0]
    labels = {tick.get_text(): value for tick, value in
              zip(axes.get_yticklabels(), axes.get_yticks(), strict=True)}
    assert labels["0"] == figures.FLOOR
    assert "10⁻⁵" in labels  # the tolerance is on a tick of its own
    assert [t.get_text() for t in figure.legends[0].get_texts()][-1] == "tolerance 10⁻⁵"
    assert "L = 32" in [text.get_text() for text in axes.texts]
    # no zero among the values: no "0" tick
    precision = _curves("precision").axes[0]
    assert "0" not in [tick.get_text() for tick in precision.get_yticklabels()]


def test_log_x_ticks_are_the_x_values_without_collisions():
    axes = _curves("precision").axes[0]
    ticks = list(axes.get_xticks())
    assert ticks[0] == 1 and ticks[-1] == 32000 and 16384 not in ticks  # too close to 32000
    assert set(ticks) <= set(NOTEBOOK_CURVES["precision"][0])
    # a thin space groups the digits, as plots.style.number writes them
    assert [t.get_text() for t in axes.get_xticklabels()][-1] == "32\u2009000"
