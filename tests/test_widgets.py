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


@pytest.mark.parametrize("values, error, message", [
    # The cases: each was clamped or rounded in silence to 256, 8 and 16.
    ({"dim": 1000}, ValueError,
     r"^dim must be an integer from 8 to 256 in steps of 8 \(the values its slider takes\), "
     r"got 1000$"),
    ({"dim": 7}, ValueError, r"^dim must be an integer from 8 to 256 in steps of 8 .*got 7$"),
    ({"length": -5}, ValueError,
     r"^length must be an integer from 16 to 512 in steps of 16 .*got -5$"),
    ({"dim": 64.0}, TypeError, r"^dim must be an int, got 64.0 of type float$"),
    ({"base": 12345.0}, ValueError, r"^base must be one of 1, 10, 100, .* got 12345.0$"),
])
def test_set_refuses_what_the_factory_refuses(values, error, message):
    panel = widgets.sinusoidal_panel()
    before = (panel.values, len(panel.redraw_seconds))
    with pytest.raises(error, match=message):
        panel.set(**values)
    assert (panel.values, len(panel.redraw_seconds)) == before  # nothing set, nothing drawn
    with pytest.raises(ValueError, match=r"^dim must be"):  # the factory says the same
        widgets.sinusoidal_panel(**{"dim": 1000})


def test_set_refuses_a_float_off_its_slider_and_takes_its_ends():
    panel = widgets.rotation_2d_panel()
    with pytest.raises(ValueError, match=r"^theta must be a number from 0 to 3.14 .*got 4.0$"):
        panel.set(theta=4.0)
    with pytest.raises(ValueError, match=r"^theta must be .*got nan$"):
        panel.set(theta=float("nan"))
    panel.set(theta=3.14, m=12, shift=0)
    assert panel.values["theta"] == 3.14 and panel.values["m"] == 12


@pytest.mark.slow
def test_a_move_in_the_front_end_shows_a_preview_then_the_sharp_figure():
    """Inside a running event loop (a kernel), a moved control is answered with a 1× preview
    at once and the 2× figure after SHARPEN_AFTER_S without another move; a move before
    then postpones it. Panel.set and moves outside a loop draw sharp at once."""
    import asyncio

    panel = _line_panel()

    def size():
        return PIL.Image.open(io.BytesIO(panel.png)).size

    async def student():
        panel.controls["slope"].value = 2.0
        assert size() == (720, 360) and not panel.sharp  # the preview, same CSS width
        assert panel.image.width == "720"
        await asyncio.sleep(widgets.SHARPEN_AFTER_S / 2)
        panel.controls["slope"].value = -2.0  # a second move before the pause ends
        await asyncio.sleep(widgets.SHARPEN_AFTER_S / 2 + 0.05)
        assert size() == (720, 360)  # still the preview: the pause started again
        await asyncio.sleep(widgets.SHARPEN_AFTER_S)
        assert size() == (1440, 720) and panel.sharp

    before = len(panel.redraw_log)
    asyncio.run(student())
    assert [entry["preview"] for entry in panel.redraw_log[before:]] == [True, True, False]
    assert list(panel.figure.axes[0].lines[0].get_ydata())[-1] == -8.0
    panel.set(slope=1.0)
    assert size() == (1440, 720)


def test_preview_and_sharp_figures_show_the_same_picture():
    """The preview is the sharp figure at half the resolution (each redraws only the moved
    artists over the cached static layer of its own resolution)."""
    import numpy as np

    panel = widgets.decay_panel()
    panel._apply({"base": 500.0})
    panel.redraw(preview=True)
    preview = np.asarray(PIL.Image.open(io.BytesIO(panel.png)).convert("L"), float)
    panel.redraw()
    sharp = PIL.Image.open(io.BytesIO(panel.png)).convert("L")
    halved = np.asarray(sharp.resize(preview.shape[::-1], PIL.Image.BOX), float)
    assert preview.shape == (sharp.size[1] // 2, sharp.size[0] // 2)
    assert np.mean(np.abs(preview - halved)) < 6  # antialiasing differs, nothing else
    panel.redraw(preview=True)  # and back: the cached 1× background is still right
    again = np.asarray(PIL.Image.open(io.BytesIO(panel.png)).convert("L"), float)
    assert np.array_equal(again, preview)
