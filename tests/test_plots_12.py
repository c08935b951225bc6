"""Figures of notebook 12 (rope_lab.plots.what_changed), drawn from the committed grid: they
keep the course's colour meanings, stay readable for a deuteranope (the check of
tests/test_style.py), fit the projector as the notebook shows them, and their direct labels
and seed ranges show the data given."""

from __future__ import annotations

import io
import itertools
import struct

import matplotlib.colors as mcolors
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Annotation, Text
from test_style import confusable_pairs

from rope_lab.experiments import position_schemes as ps
from rope_lab.plots import what_changed as figures
from rope_lab.plots.style import DISPLAY_DPI, PALETTE, ROLE_COLOURS, new_figure, readable


@pytest.fixture(scope="module")
def results():
    return ps.load_results()


@pytest.fixture(scope="module")
def drawn(results):
    return {"copy": figures.scheme_curves(results, "copy"),
            "retrieval": figures.scheme_curves(results, "retrieval"),
            "heatmaps": figures.depth_heatmaps(results),
            "ablations": figures.ablations(results)}


def test_the_first_versions_pale_seed_bands_fail_the_check():
    """The check is able to fail on this figure's kind of colour: the min–max bands the
    first version drew (alpha 0.2 of two palette colours) merge for a deuteranope."""
    figure, axes = new_figure()
    for colour, base in ((PALETTE[0], 0), (PALETTE[2], 1)):  # blue RoPE, green ALiBi
        axes.plot([1, 8], [base + 0.5] * 2, color=colour)
        axes.fill_between([1, 8], [base] * 2, [base + 1] * 2, color=colour, alpha=0.2)
    assert any("band" in problem for problem in confusable_pairs(figure))


@pytest.mark.parametrize("name", ["copy", "retrieval", "heatmaps", "ablations"])
def test_figure_is_readable_with_deuteranopia(drawn, name):
    assert confusable_pairs(drawn[name]) == []


@pytest.mark.parametrize("name", ["copy", "retrieval", "heatmaps", "ablations"])
def test_figure_fits_the_output_area_as_the_notebook_shows_it(drawn, name):
    """The inline backend saves with a tight bounding box (its padding included): the PNG a
    notebook shows is at most 848 px wide at DISPLAY_DPI."""
    buffer = io.BytesIO()
    drawn[name].savefig(buffer, format="png", dpi=DISPLAY_DPI, bbox_inches="tight")
    width, _ = struct.unpack(">II", buffer.getvalue()[16:24])
    assert width <= 848


@pytest.mark.parametrize("task", ["copy", "retrieval"])
def test_lines_keep_the_colour_meanings(drawn, task):
    roles = {"rope": "rope", "learned": "absolute", "sinusoidal": "absolute", "alibi": "bias",
             "none": "context", "rope+linear": "scaled", "rope+ntk": "scaled",
             "rope+dynamic": "scaled", "rope+yarn": "scaled"}
    figure = drawn[task]
    for axes, variants in zip(figure.axes, figures.PANELS.values(), strict=False):
        for line, variant in zip(axes.lines, variants, strict=False):
            if variant in roles:
                assert mcolors.same_color(line.get_color(), ROLE_COLOURS[roles[variant]]), variant
            assert not mcolors.same_color(line.get_color(), ROLE_COLOURS["mistake"])


@pytest.mark.parametrize("task", ["copy", "retrieval"])
def test_range_bars_span_the_seeds_in_the_lines_colour(results, drawn, task):
    metric = "loss" if task == "copy" else "accuracy"
    figure = drawn[task]
    for axes, variants in zip(figure.axes, figures.PANELS.values(), strict=False):
        bars = [c for c in axes.collections if c.get_segments()]
        assert len(bars) == len(variants)
        for line, collection, variant in zip(axes.lines, bars, variants, strict=False):
            seeds = np.array([ps.seed_values(results, variant, task, metric, k)
                              for k in results["config"]["multiples"]])
            segments = np.array(collection.get_segments())  # (multiples, 2 ends, xy)
            np.testing.assert_allclose(segments[:, 0, 1], seeds.min(1), rtol=1e-12)
            np.testing.assert_allclose(segments[:, 1, 1], seeds.max(1), rtol=1e-12)
            assert mcolors.same_color(collection.get_edgecolor()[0], line.get_color())


@pytest.mark.parametrize("task", ["copy", "retrieval"])
def test_every_line_has_a_direct_label_and_labels_do_not_overlap(drawn, task):
    figure = drawn[task]
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    for axes, variants in zip(figure.axes, figures.PANELS.values(), strict=True):
        labels = [a for a in axes.texts if isinstance(a, Annotation)
                  and a.get_text() != "uniform guess"]
        assert sorted(a.get_text() for a in labels) == sorted(figures.STYLE[v][0]
                                                               for v in variants)
        for a, b in itertools.combinations(labels, 2):
            # the text's own box (an Annotation's extent includes its connector)
            box_a, box_b = (Text.get_window_extent(t, renderer) for t in (a, b))
            assert not box_a.overlaps(box_b), (axes.get_title(), a.get_text(), b.get_text())
        for label in labels:  # in the line's colour, darkened where it would be faint
            variant = next(v for v in variants if figures.STYLE[v][0] == label.get_text())
            assert mcolors.same_color(label.get_color(), readable(figures.STYLE[variant][1]))


def test_ablation_bars_are_the_seed_means_and_ablations_are_hatched(results, drawn):
    bars = drawn["ablations"].axes[0].patches
    variants = [v for _, _, group in figures.ABLATION_GROUPS for v in group]
    longest = str(max(results["config"]["multiples"]))
    assert len(bars) == len(variants)
    for bar, variant in zip(bars, variants, strict=True):
        assert bar.get_height() == pytest.approx(
            np.mean(ps.seed_values(results, variant, "copy", "loss", longest)))
        assert bool(bar.get_hatch()) == ("+" in variant)
