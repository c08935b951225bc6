"""The Panel machinery: a control change redraws, and the drawn data follows the value."""

import pytest

from rope_lab import plots, widgets


@plots.course_style
def _line(slope: float = 1.0, points: int = 5):
    figure, axes = plots.new_figure()
    axes.plot(range(points), [slope * i for i in range(points)])
    axes.set(title="test line", xlabel="i", ylabel="slope · i")
    return figure


def test_panel_redraws_on_set_and_reports_time():
    panel = widgets.Panel(_line, {
        "slope": widgets.slider("float", "slope", 1.0, -2.0, 2.0),
        "points": widgets.slider("int", "points", 5, 2, 9),
    })
    first_png = panel.png
    panel.set(slope=2.0)
    assert list(panel.figure.axes[0].lines[0].get_ydata()) == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert panel.png != first_png and panel.png.startswith(b"\x89PNG")
    panel.set(points=3)
    assert len(panel.figure.axes[0].lines[0].get_ydata()) == 3
    assert len(panel.redraw_seconds) == 3
    assert all(c.continuous_update is False for c in panel.controls.values())
    with pytest.raises(ValueError, match=r"unknown control\(s\) \['slop'\]"):
        panel.set(slop=1.0)


def test_slider_kinds():
    assert widgets.slider("log", "base", 1e4, 0, 6).value == pytest.approx(1e4)
    with pytest.raises(ValueError, match="kind must be one of"):
        widgets.slider("exp", "x", 1, 0, 2)


def test_panel_reuses_the_constrained_layout_of_its_first_draw():
    panel = widgets.Panel(_line, {"slope": widgets.slider("float", "slope", 1.0, -2.0, 2.0)})
    first = panel.figure.axes[0].get_position().bounds
    panel.set(slope=-1.5)
    assert not widgets._uses_constrained_layout(panel.figure)
    assert panel.figure.axes[0].get_position().bounds == pytest.approx(first)
    assert list(panel.figure.axes[0].lines[0].get_ydata())[-1] == -6.0


def test_setting_several_controls_redraws_once():
    panel = widgets.Panel(_line, {
        "slope": widgets.slider("float", "slope", 1.0, -2.0, 2.0),
        "points": widgets.slider("int", "points", 5, 2, 9),
    })
    before = len(panel.redraw_seconds)
    panel.set(slope=2.0, points=3)
    assert len(panel.redraw_seconds) == before + 1
    assert list(panel.figure.axes[0].lines[0].get_ydata()) == [0.0, 2.0, 4.0]
