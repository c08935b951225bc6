"""Panels of notebooks 03 and 04: registered, and redrawing what the controls say."""

import pytest

from rope_lab import widgets


@pytest.mark.parametrize("name", ["rotation_2d_panel", "rope_frequencies_panel",
                                  "angle_precision_panel"])
def test_panels_are_registered(name):
    assert name in widgets.PANELS


def test_rotation_panel_follows_sliders():
    panel = widgets.PANELS["rotation_2d_panel"]()
    panel.set(theta=0.25, m=1, n=4)
    title = panel.figure.axes[0].get_title()
    assert "m = 1, n = 4" in title
    score = title.splitlines()[1]
    panel.set(shift=9)
    assert "m = 10, n = 13" in panel.figure.axes[0].get_title()
    assert panel.figure.axes[0].get_title().splitlines()[1] == score
    assert len(panel.redraw_seconds) >= 3


def test_frequency_panel_follows_dim():
    panel = widgets.PANELS["rope_frequencies_panel"]()
    panel.set(dim=32)
    assert len(panel.figure.axes[0].lines[0].get_ydata()) == 16


def test_precision_panel_dtype_dropdown():
    panel = widgets.PANELS["angle_precision_panel"]()
    panel.set(dtype="float16")
    assert "float16" in panel.figure.axes[0].get_title()
    assert panel.png.startswith(b"\x89PNG")
