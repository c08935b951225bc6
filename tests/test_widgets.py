"""The Panel machinery: a control change redraws, and the drawn data follows the value."""

import base64
import io

import ipywidgets
import PIL.Image
import pytest
from IPython.core.formatters import DisplayFormatter

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


@pytest.mark.parametrize("arguments, message", [
    (("int", "n", 100, 0, 10), r"^the value of slider 'n' must be an integer from 0 to 10 \("),
    (("int", "d", 12, 8, 64, 8), r"^the value of slider 'd' must be .* in steps of 8 .*got 12$"),
    (("float", "s", 2.5, -2.0, 2.0), r"^the value of slider 's' must be a number from -2 to 2"),
    (("log", "base", 1e7, 0, 6), r"^the value of slider 'base' .* 1 to 1e\+06 .*10000000.0$"),
])
def test_slider_refuses_a_value_it_would_clamp(arguments, message):
    with pytest.raises(ValueError, match=message):
        widgets.slider(*arguments)
    with pytest.raises(ValueError, match=r"^dim must be"):
        widgets.slider(*arguments[:2], -100, *arguments[3:], name="dim")


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


def _line_panel():
    return widgets.Panel(_line, {
        "slope": widgets.slider("float", "slope", 1.0, -2.0, 2.0),
        "points": widgets.dropdown("points", [5, 3]),
    })


def test_the_figure_is_an_image_widget_in_css_px():
    panel = _line_panel()
    assert isinstance(panel.image, ipywidgets.Image) and panel.image.format == "png"
    assert panel.box.children[-1] is panel.image
    assert bytes(panel.image.value) == panel.png
    # Shown 8 in × 90 CSS px per inch wide, from a PNG with twice the pixels (crisp zoomed).
    assert panel.image.width == str(panel.css_width) == "720"
    assert PIL.Image.open(io.BytesIO(panel.png)).size == (1440, 720)
    panel.set(slope=-1.0)
    assert bytes(panel.image.value) == panel.png


@pytest.mark.parametrize("name", sorted(widgets.PANELS))
def test_no_panel_draws_into_an_output_widget(name):
    # An Output widget made nbclient stall: panels show their PNG in an Image.
    panel = widgets.PANELS[name]()
    found = []

    def walk(widget):
        found.append(widget)
        for child in getattr(widget, "children", ()):
            walk(child)

    walk(panel.box)
    assert not any(isinstance(widget, ipywidgets.Output) for widget in found)
    assert bytes(panel.image.value) == panel.png and panel.png.startswith(b"\x89PNG")


def test_moving_a_control_redraws_once():
    panel = _line_panel()
    before, first_png = len(panel.redraw_seconds), panel.png
    panel.controls["slope"].value = 2.0  # what the front end does when the slider moves
    assert len(panel.redraw_seconds) == before + 1
    assert bytes(panel.image.value) == panel.png != first_png
    panel.controls["points"].value = 3
    assert len(panel.redraw_seconds) == before + 2
    assert list(panel.figure.axes[0].lines[0].get_ydata()) == [0.0, 2.0, 4.0]


def test_a_panel_displays_as_the_widget_with_a_png_and_text_fallback():
    panel = _line_panel()
    data, metadata = DisplayFormatter().format(panel)  # what `display(panel)` sends
    assert data[widgets.WIDGET_VIEW]["model_id"] == panel.box.model_id
    assert base64.b64decode(data["image/png"]) == panel.png
    assert metadata["image/png"] == {"width": 720}
    assert data["text/plain"].startswith("<rope_lab panel _line(slope=1.0, points=5)")
