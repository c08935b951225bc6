"""Every panel's text stays on its canvas, before and after a move.

A panel figure is laid out once and then updated in place; text it changes later (an animated
title, an annotation that follows a line) is not seen by constrained layout, and an
annotation without an offset does not follow its ``xy``. Both bugs drew fine in a static
figure and were cut off or misplaced in the panel: the roofline's ridge label stayed at x = 1
while the ridge moved to 20, and two-line titles were drawn above the canvas.
"""

from __future__ import annotations

import pytest

from rope_lab import widgets
from rope_lab.widgets import control_values


def _texts(figure):
    for axes in figure.axes:
        yield from (axes.title, axes._left_title, axes._right_title, axes.xaxis.label,
                    axes.yaxis.label, *axes.texts)
    yield from figure.texts


def _outside(figure) -> list[str]:
    renderer = figure.canvas.get_renderer()
    width, height = figure.bbox.width, figure.bbox.height
    bad = []
    for text in _texts(figure):
        if not text.get_visible() or not text.get_text().strip():
            continue
        x0, y0, x1, y1 = text.get_window_extent(renderer).extents
        if x0 < -1 or y0 < -1 or x1 > width + 1 or y1 > height + 1:
            bad.append(f"{text.get_text()[:40]!r} at {[round(v) for v in (x0, y0, x1, y1)]} "
                       f"on a {round(width)}×{round(height)} canvas")
    return bad


@pytest.mark.parametrize("name", sorted(widgets.PANELS))
def test_panel_text_stays_on_the_canvas(name):
    panel = widgets.PANELS[name]()
    assert not _outside(panel.figure), _outside(panel.figure)
    for control_name, control in panel.controls.items():
        values = control_values(control)
        if len(values) < 2:
            continue
        panel.set(**{control_name: values[-1]})
        assert not _outside(panel.figure), (control_name, values[-1], _outside(panel.figure))


def test_roofline_ridge_label_follows_the_ridge():
    panel = widgets.PANELS["roofline_panel"]()
    axes = panel.figure.axes[0]
    renderer = panel.figure.canvas.get_renderer()
    for peak in control_values(panel.controls["peak_gflops"]):
        panel.set(peak_gflops=peak)
        ridge = peak / panel.values["bandwidth_gb_s"]
        if not axes.get_xlim()[0] < ridge < axes.get_xlim()[1]:
            continue  # off the axes: nothing to follow
        label = next(t for t in axes.texts if t.get_text().startswith("ridge"))
        line_x = axes.transData.transform((ridge, 1.0))[0]
        box = label.get_window_extent(renderer)
        # the text starts just right of the dotted ridge line, or ends just left of it
        assert line_x <= box.x0 < line_x + 20 or line_x - 20 < box.x1 <= line_x, (
            peak, line_x, box.extents)
