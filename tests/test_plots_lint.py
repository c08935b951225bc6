"""Every figure the package draws, checked for layout defects (tests/figure_lint.py): no
legend over the data, no text past the canvas, into a neighbouring panel or cut by its clip
box, legend entries that look like what they name, no colliding labels, labels on markers or
crossing leader lines, no faint text.

The figures: every figure function of notebooks 00–10 with the arguments of
``tests/test_style.py``'s ``FIGURES`` (which fails when a new function is missing), notebook
11's and 12's figures as their notebooks draw them, the ``python -m rope_lab.hf --plot``
figure of every fixture, and every slider panel's figure after a move, at the 2× resolution
the panel shows it (and its 1× preview). The first tests show that each kind of check fails
on a figure made with the defect.
"""

from __future__ import annotations

import functools

import matplotlib
import pytest
from figure_lint import contrast, problems
from test_style import FIGURES

from rope_lab import i18n, plots, widgets
from rope_lab.plots.style import COURSE_STYLE, PALETTE, new_figure

# --- the checks fail on the defects they are for ----------------------------------------------


def _figure(**kwargs):
    with matplotlib.rc_context(COURSE_STYLE):
        return new_figure(**kwargs)


def test_a_legend_on_a_line_is_found():
    figure, axes = _figure(width=5, height=3)
    axes.plot([0, 10], [1, 1], label="flat line")
    axes.plot([0, 10], [0, 2], label="rising")
    axes.legend(loc="center")
    found = problems(figure)
    assert any(p.startswith("legend over data") and "'flat line'" in p for p in found), found


def test_a_legend_beside_the_data_passes():
    figure, axes = _figure(width=5, height=3)
    axes.plot([0, 10], [0, 1], label="rising")
    axes.set_ylim(0, 3)
    axes.legend(loc="upper left")
    assert problems(figure) == []


def test_a_text_past_the_canvas_and_a_cut_axes_are_found():
    with matplotlib.rc_context({**COURSE_STYLE, "figure.constrained_layout.use": False}):
        figure, axes = new_figure(width=4, height=3)
    figure.subplots_adjust(right=1.02)
    figure.suptitle("a suptitle much wider than this four-inch figure can hold")
    found = problems(figure)
    assert any("clipped: text 'a suptitle" in p for p in found), found
    assert any(p.startswith("clipped: axes 0") for p in found), found


def test_a_legend_colour_copied_before_the_artist_changed_is_found():
    """06's panel: the legend was made while the dots were still blue."""
    figure, axes = _figure(width=5, height=3)
    dots, = axes.plot([0, 1, 2], [0, 1, 2], "o", label="after scaling")
    axes.set_ylim(0, 8)
    axes.legend(loc="upper left")
    dots.set_color(PALETTE[2])
    found = problems(figure)
    assert any(p.startswith("legend mismatch: entry 'after scaling'") for p in found), found


def test_overlapping_labels_crossing_leaders_and_faint_text_are_found():
    figure, axes = _figure(width=5, height=3)
    axes.set(xlim=(0, 10), ylim=(0, 10))
    axes.text(5, 5, "learned")
    axes.text(5.3, 5.2, "sinusoidal")
    arrow = {"arrowstyle": "-"}
    axes.annotate("first", (1, 1), xytext=(4, 9), arrowprops=arrow)
    axes.annotate("second", (4, 1), xytext=(1, 9), arrowprops=arrow)
    axes.annotate("third", (9, 1), xytext=(8, 3), arrowprops=arrow)
    axes.text(8.2, 2, "in the way")
    axes.text(1, 3, "light blue", color="#9ccbe9")
    found = problems(figure)
    assert any("texts 'learned' and 'sinusoidal' overlap" in p for p in found), found
    assert any("leader lines of 'first' and 'second' cross" in p for p in found), found
    assert any("leader line of 'third' runs through text 'in the way'" in p for p in found)
    assert any(p.startswith("faint: text 'light blue'") for p in found), found


def test_a_label_run_into_the_next_panel_is_found():
    """10's family_spectra, its rows packed too tight: a row's "pair i" and tick labels run
    into the frame of the panel below, which paints over them."""
    with matplotlib.rc_context({**COURSE_STYLE, "figure.constrained_layout.use": False}):
        figure, (top, bottom) = new_figure(2, 1, width=5, height=4)
    figure.subplots_adjust(hspace=0.02, top=0.95, bottom=0.15)
    for axes in (top, bottom):
        axes.plot([0, 60], [1, 1e5], "o-", ms=3)
        axes.set(yscale="log", xlabel="pair i", ylabel="λ")
    found = problems(figure)
    assert any(p.startswith("clipped: text 'pair i' of axes 0 runs into axes 1")
               for p in found), found
    figure.subplots_adjust(hspace=0.6)  # the rows apart: nothing runs into anything
    assert not [p for p in problems(figure) if "runs into" in p]


def test_a_twin_axes_is_not_a_neighbour():
    figure, axes = _figure(width=5, height=3)
    axes.plot([0, 10], [0, 1])
    twin = axes.twinx()
    twin.plot([0, 10], [5, 3], color=PALETTE[1])
    axes.text(5, 0.05, "a note inside both frames")
    axes.set(xlabel="x", ylabel="left")
    twin.set_ylabel("right")
    assert not [p for p in problems(figure) if "runs into" in p]


def test_a_text_cut_by_its_clip_box_is_found():
    figure, axes = _figure(width=5, height=3)
    axes.set(xlim=(0, 10), ylim=(0, 10))
    axes.text(9.5, 5, "cut at the frame", clip_on=True)
    found = problems(figure)
    assert any(p == "clipped: text 'cut at the frame' is cut by its clip box" for p in found)


def test_a_label_on_a_marker_is_found():
    """10's base_over_years: "GPT-NeoX 20B", written right of its 2022 dot, ran into the
    2023 dot. The same label two years from the next dot passes."""
    figure, axes = _figure(width=4, height=3)
    years, bases = [2021, 2022, 2023], [1e4, 1e4, 1e4]
    axes.scatter(years, bases, s=60, color=PALETTE[0], label="releases")
    axes.set(xlim=(2020.5, 2023.5), yscale="log")
    axes.annotate("GPT-NeoX 20B", (2022, 1e4), xytext=(8, 0), textcoords="offset points",
                  va="center")
    found = problems(figure)
    assert any(p == "collision: text 'GPT-NeoX 20B' lies on a marker of points 'releases'"
               for p in found), found
    axes.collections[0].set_offsets([[2021, 1e4], [2022, 1e4], [2025, 1e4]])
    axes.set_xlim(2020.5, 2025.5)
    assert problems(figure) == []


def test_a_label_on_a_line_marker_is_found_but_not_beside_it():
    figure, axes = _figure(width=6, height=3)
    axes.plot([1, 2, 3], [1, 2, 3], "o-", ms=8, label="measured")
    axes.set(xlim=(0, 4), ylim=(0, 4))
    axes.annotate("∝ L²", (2, 2), xytext=(-2, -2), textcoords="offset points", ha="left")
    found = problems(figure)
    assert any(p == "collision: text '∝ L²' lies on a marker of line 'measured'"
               for p in found), found
    axes.texts[0].xyann = (10, -10)  # clear of the dot (radius 4 pt)
    assert problems(figure) == []


def test_the_old_base_over_years_labels_are_found():
    """The labels as 10's base_over_years placed them before the fix (23eb123): right of
    each dot, split up/down only next to a dot of the same year. The marker check finds
    "GPT-NeoX 20B" on the 2023 dot; the figure as drawn now passes (see below)."""
    import math

    from rope_lab.hf import report
    from rope_lab.plots.real_models import base_over_years

    short = {"sliding_attention": "local", "full_attention": "global"}
    rows = [((label + (f" {short.get(kind, kind)}" if kind else "")).replace(" + YaRN", ""),
             year, entry.spec.base)  # notebook 10's rows
            for _, label, year, config in report.atlas()
            for kind, entry in report.describe(config).items() if entry is not None and year]
    figure = base_over_years(rows)
    axes = figure.axes[0]
    for text in list(axes.texts):
        text.remove()
    groups: dict = {}
    for label, year, base in rows:
        groups.setdefault((year, base), []).append(label)
    for (year, base), labels in groups.items():
        near = [b for (y, b) in groups if y == year and b != base
                and abs(math.log10(b / base)) < 0.5]
        above, below = any(b < base for b in near), any(b > base for b in near)
        va, dy = ("bottom", 4) if above else ("top", -4) if below else ("center", 0)
        with matplotlib.rc_context(COURSE_STYLE):  # the course's font size, as drawn then
            axes.annotate("\n".join(labels), (year, base), xytext=(8, dy),
                          textcoords="offset points", va=va)
    found = problems(figure)
    assert any(p.startswith("collision: text 'GPT-NeoX 20B' lies on a marker")
               for p in found), found


def test_contrast_is_wcag_s():
    assert contrast("black", (1, 1, 1)) == pytest.approx(21.0)
    assert contrast("white", (1, 1, 1)) == pytest.approx(1.0)
    assert contrast("#767676", (1, 1, 1)) == pytest.approx(4.54, abs=0.01)  # WCAG's example


# --- every figure of the course ---------------------------------------------------------------


def _real_model_spectra():
    from rope_lab.hf import report

    return [plots.config_spectrum(config, title=f"{name}.json")
            for name, _, _, config in report.atlas()
            if any(entry is not None for entry in report.describe(config).values())]


def _notebook_11():
    from test_plots_11 import NOTEBOOK_CURVES, _bars, _curves

    return [_curves(name) for name in NOTEBOOK_CURVES] + [_bars()]


def _notebook_12():
    from rope_lab.experiments import position_schemes
    from rope_lab.plots import what_changed

    results = position_schemes.load_results()
    return [what_changed.scheme_curves(results, "copy"),
            what_changed.scheme_curves(results, "retrieval"),
            what_changed.depth_heatmaps(results), what_changed.ablations(results)]


# Defects found in a figure and not mended yet: each is reported as an expected failure
# until its figure is mended (strict: a mended figure makes its entry fail, so the entry is
# removed with the fix). Empty: every figure passes.
KNOWN: dict[str, str] = {}


def _known(name):
    return pytest.param(name, marks=pytest.mark.xfail(
        reason=f"known, not yet mended: {KNOWN[name]}", strict=True)) if name in KNOWN else name


ALL_FIGURES = {**FIGURES, "hf --plot": _real_model_spectra, "notebook 11": _notebook_11,
               "notebook 12": _notebook_12}


# Both editions: Chinese labels have other widths than English ones (a legend that fits in
# English can cover data in Chinese), so every figure is checked in each language.
LANGUAGES = ("en", "zh")


@pytest.fixture(params=LANGUAGES)
def language(request, monkeypatch):
    monkeypatch.delenv(i18n.ENVIRONMENT_VARIABLE, raising=False)
    i18n.set_language(request.param)
    yield request.param
    i18n._chosen = None


@functools.cache
def _drawn(name: str, language: str) -> tuple:
    drawn = ALL_FIGURES[name]()
    return tuple(drawn) if isinstance(drawn, list) else (drawn,)


@pytest.mark.slow
@pytest.mark.parametrize("name", [_known(name) for name in sorted(ALL_FIGURES)])
def test_figure_has_no_layout_defects(name, language):
    found = [f"figure {index}: {problem}" for index, figure in enumerate(_drawn(name, language))
             for problem in problems(figure)]
    assert not found, f"{name} ({language}):\n" + "\n".join(found)


@pytest.mark.slow
@pytest.mark.parametrize("name", [_known(name) for name in sorted(widgets.PANELS)])
def test_panel_figure_has_no_layout_defects(name, language):
    """A panel's figure as the widget shows it: after a move of each control (a live figure
    changes its artists, and its legend must follow), sharp and as a preview."""
    panel = widgets.PANELS[name]()
    found = []
    for control_name, control in panel.controls.items():
        if control.disabled:
            continue
        for value in widgets.control_values(control, 3)[1:]:
            panel.set(**{control_name: value})
            found += [f"{control_name}={value!r}: {p}" for p in problems(panel.figure)]
        panel.set(**{control_name: widgets.control_values(control, 3)[0]})
    panel.redraw(preview=True)
    found += [f"preview: {p}" for p in problems(panel.figure)]
    assert not found, f"{name}:\n" + "\n".join(dict.fromkeys(found))


def test_readable_darkens_faint_colours_only():
    from matplotlib.colors import rgb_to_hsv, to_rgb

    from rope_lab.plots.style import ROLE_COLOURS, readable

    for name in ("key", "absolute", "bias"):  # sky blue, orange, purple: faint as text
        colour = ROLE_COLOURS[name]
        assert contrast(colour, (1, 1, 1)) < 4.5 <= contrast(readable(colour), (1, 1, 1))
        assert rgb_to_hsv(readable(colour))[0] == pytest.approx(rgb_to_hsv(to_rgb(colour))[0])
    assert readable(ROLE_COLOURS["rope"]) == to_rgb(ROLE_COLOURS["rope"])  # 5.1:1 already
