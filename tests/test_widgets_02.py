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
