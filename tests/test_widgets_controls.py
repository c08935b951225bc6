"""Every panel: live updates draw what a fresh figure draws, every step of every control is
a figure of its own, one move is one redraw, and titles show exactly the value picked."""

import hashlib
import io

import numpy as np
import PIL.Image
import pytest

from rope_lab import plots, widgets

STEPS_PER_SLIDER = 4  # consecutive steps checked on sliders with many values


def _steps(control) -> list:
    """The values to visit: every option of a choice, else consecutive slider steps from
    the current value (upward, or downward near the top)."""
    offered = widgets._offered(control)
    if offered is not None:
        return list(offered)
    step, value = control.step, control.value
    up = int((control.max - value) / step + 1e-9) + 1  # values from here to the top
    down = int((value - control.min) / step + 1e-9) + 1
    direction, count = (1, up) if up >= min(STEPS_PER_SLIDER, down) else (-1, down)
    values = [value + direction * i * step for i in range(min(STEPS_PER_SLIDER, count))]
    if isinstance(control.value, int):
        return [int(v) for v in values]
    return [round(v, 10) for v in values]


def _pixels(png: bytes):
    return np.asarray(PIL.Image.open(io.BytesIO(png)).convert("RGB"))


def _fresh_png(panel) -> bytes:
    """The panel's figure drawn from scratch at the panel's values (same resolution, same
    pinned axis-label positions), by the plain function that the book and notebooks call."""
    figure = panel.plot(**panel.fixed, **panel.values)
    figure.set_dpi(plots.DISPLAY_DPI * plots.PIXEL_RATIO)
    if widgets._uses_constrained_layout(figure):  # the panel keeps its first layout
        panel._freeze_layout(figure, [axes.get_position() for axes in panel.figure.axes])
    for fresh, drawn in zip(figure.axes, panel.figure.axes, strict=True):
        for fresh_axis, drawn_axis in ((fresh.xaxis, drawn.xaxis), (fresh.yaxis, drawn.yaxis)):
            if not drawn_axis._autolabelpos:
                fresh_axis.set_label_coords(*drawn_axis.label.get_position())
    figure.rope_lab_labels_frozen = True
    return plots.render_png(figure)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(widgets.PANELS))
def test_every_step_of_every_control_draws_a_new_figure_once(name):
    panel = widgets.PANELS[name]()
    for control_name, control in panel.controls.items():
        if control.disabled:
            continue
        values = _steps(control)
        pngs = set()
        for value in values:
            before, moved = len(panel.redraw_seconds), value != control.value
            control.value = value  # what the front end does for one move
            assert len(panel.redraw_seconds) == before + moved  # one move, one redraw
            pngs.add(hashlib.sha256(panel.png).hexdigest())
        assert len(pngs) == len(values), (
            f"{name}.{control_name}: {len(values)} values drew {len(pngs)} different figures")
        panel.set(**{control_name: values[0]})


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(widgets.PANELS))
def test_a_live_update_draws_what_a_fresh_figure_draws(name):
    panel = widgets.PANELS[name]()
    assert hasattr(panel.figure, "rope_lab_update"), f"{name} rebuilds its figure per move"
    figure = panel.figure
    for control_name, control in panel.controls.items():
        if control.disabled:
            continue
        for value in widgets.control_values(control, 3):
            panel.set(**{control_name: value})
            drawn, fresh = _pixels(panel.png), _pixels(_fresh_png(panel))
            assert drawn.shape == fresh.shape
            differing = (np.abs(drawn.astype(int) - fresh).max(-1) > 0).mean()
            # Identical but for anti-aliasing at sub-pixel positions (a few dozen pixels on
            # some numpy/matplotlib versions); a missed update changes far more (see below).
            assert differing < 1e-4, (f"{name}: {control_name}={value!r} updated in place "
                                    f"differs from a fresh figure in {differing:.3%} of pixels")
    assert panel.figure is figure  # built once, updated ever since
    # Nothing stays hidden or "animated": saved with savefig, the figure shows everything.
    assert not any(artist.get_animated() for artist in figure.rope_lab_animated)


def test_a_live_update_that_misses_an_artist_is_caught():
    # The comparison above can fail: a panel whose update forgets the title differs.
    panel = widgets.PANELS["decay_panel"]()
    update = panel.figure.rope_lab_update

    def forgetful(**values):
        title = panel.figure.axes[0].get_title()
        result = update(**values)
        panel.figure.axes[0].set_title(title)
        return result

    panel.figure.rope_lab_update = forgetful
    panel.set(base=100.0)
    drawn, fresh = _pixels(panel.png), _pixels(_fresh_png(panel))
    assert (np.abs(drawn.astype(int) - fresh).max(-1) > 0).mean() > 1e-3


@pytest.mark.parametrize("name, values, title", [
    ("scaling_panel", {"factor": 16.0}, (0, "s = 16")),
    ("decay_panel", {"base": 5e5}, (1, "base 500\u2009000")),
    ("rope_frequencies_panel", {"base": 500.0}, (0, "500^")),
    ("linear_attention_normalizer_panel", {"base": 1e4}, (0, "base = 10\u2009000")),
])
def test_titles_show_the_value_picked(name, values, title):
    panel = widgets.PANELS[name]()
    panel.set(**values)
    axes, text = title
    assert text in panel.figure.axes[axes].get_title()


@pytest.mark.parametrize("name, control", [
    ("sinusoidal_panel", "base"), ("rope_frequencies_panel", "base"), ("decay_panel", "base"),
    ("linear_attention_normalizer_panel", "base"), ("rope_2d_panel", "base"),
    ("rope_mixed_panel", "base"), ("mrope_panel", "base"), ("angle_precision_panel", "base"),
])
def test_base_sliders_stop_on_round_bases(name, control):
    offered = widgets._offered(widgets.PANELS[name]().controls[control])
    assert set(offered) <= {1, 10, 100, 500, 1000, 1e4, 5e5, 1e6} and len(offered) >= 6


def test_scale_factor_stops_on_powers_of_two_and_betas_grey_out():
    panel = widgets.scaling_panel()
    assert widgets._offered(panel.controls["factor"]) == (1, 2, 4, 8, 16, 32)
    assert not panel.controls["beta_fast"].disabled
    panel.set(method="linear")
    assert panel.controls["beta_fast"].disabled and panel.controls["beta_slow"].disabled


def test_a_choice_refuses_values_it_does_not_offer():
    with pytest.raises(ValueError, match=r"^s must be one of 1, 2, 4 \(the values its slider "
                                         r"takes\), got 3$"):
        widgets.choice("s", (1, 2, 4), 3, name="s")
    with pytest.raises(TypeError, match=r"^s must be a number, got '2' of type str$"):
        widgets.choice("s", (1, 2, 4), "2", name="s")
    panel = widgets.scaling_panel()
    with pytest.raises(ValueError, match=r"^factor must be one of 1, 2, 4, 8, 16, 32 \(the "
                                         r"values its control offers\), got 7.94$"):
        panel.set(factor=7.94)
    assert panel.values["factor"] == 8.0  # nothing moved
