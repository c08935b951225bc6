"""Notebook 02's panels: registered, and moving a slider changes what is drawn."""

import numpy as np
import pytest

import rope_lab as rl
from rope_lab import widgets


def test_panels_are_registered():
    assert {"sinusoidal_panel", "binary_panel"} <= set(widgets.PANELS)


def test_sinusoidal_panel_follows_dim_base_and_length():
    panel = widgets.sinusoidal_panel()
    assert panel.figure.axes[0].images[0].get_array().shape == (128, 64)
    panel.set(dim=16)
    np.testing.assert_allclose(panel.figure.axes[0].images[0].get_array(),
                               rl.sinusoidal_pe(128, 16).numpy())
    panel.set(base=100.0)
    np.testing.assert_allclose(panel.figure.axes[0].images[0].get_array(),
                               rl.sinusoidal_pe(128, 16, 100.0).numpy(), rtol=1e-5, atol=1e-6)
    panel.set(length=256)
    assert len(panel.figure.axes[1].lines[0].get_ydata()) == 256
    assert panel.figure.axes[1].lines[0].get_ydata()[0] == pytest.approx(8.0, rel=1e-5)
    assert len(panel.redraw_seconds) == 4


def test_binary_panel_follows_d():
    panel = widgets.binary_panel()
    panel.set(dim=3)
    bits = panel.figure.axes[0].images[0].get_array()
    np.testing.assert_array_equal(bits, rl.binary_pe(8, 3).T.numpy())
    panel.set(dim=7)
    assert panel.figure.axes[0].images[0].get_array().shape == (7, 128)


@pytest.mark.parametrize("factory, arguments, message", [
    ("sinusoidal_panel", {"dim": 63},
     r"^dim must be an integer from 8 to 256 in steps of 8 \(.*\), got 63$"),
    ("sinusoidal_panel", {"base": -1},
     r"^base must be one of 1, 10, 100, 500, 1000, 10\u2009000, 500\u2009000, 1\u2009000\u2009000 "
     r"\(the values its slider takes\), got -1$"),
    ("sinusoidal_panel", {"base": 5000.0}, r"^base must be one of .*, got 5000.0$"),
    ("sinusoidal_panel", {"base": float("nan")}, r"^base must be one of .*, got nan$"),
    ("sinusoidal_panel", {"length": 1000}, r"^length must be an integer from 16 to 512 .*1000$"),
    ("binary_panel", {"dim": 9}, r"^dim must be an integer from 2 to 8 \(.*\), got 9$"),
    ("binary_panel", {"dim": 0}, r"^dim must be an integer from 2 to 8 \(.*\), got 0$"),
])
def test_factories_refuse_values_their_sliders_cannot_show(factory, arguments, message):
    # ipywidgets would clamp them silently and draw a figure nobody asked for.
    with pytest.raises(ValueError, match=message):
        widgets.PANELS[factory](**arguments)


def test_factories_refuse_values_of_the_wrong_type():
    with pytest.raises(TypeError, match=r"^dim must be an int, got '64' of type str$"):
        widgets.sinusoidal_panel(dim="64")
    with pytest.raises(TypeError, match=r"^base must be a number, got True of type bool$"):
        widgets.sinusoidal_panel(base=True)


def test_factories_accept_the_ends_of_their_sliders():
    panel = widgets.sinusoidal_panel(dim=8, base=1e6, length=512)
    assert panel.values == {"dim": 8, "base": 1e6, "length": 512}
    assert widgets.binary_panel(dim=8).values == {"dim": 8}
