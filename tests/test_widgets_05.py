"""Notebook 05's panel: moving the base slider redraws a different figure."""

import numpy as np

from rope_lab import widgets


def test_decay_panel_is_registered_and_follows_the_base():
    assert "decay_panel" in widgets.PANELS
    panel = widgets.decay_panel()
    before_png = panel.png
    before = np.array(panel.figure.axes[0].lines[0].get_ydata())  # a copy
    panel.set(base=100.0)
    after = np.asarray(panel.figure.axes[0].lines[0].get_ydata())
    assert panel.png != before_png
    assert not np.allclose(before, after)
    assert "100" in panel.figure.axes[1].get_title()


def test_decay_panel_controls():
    panel = widgets.decay_panel()
    assert set(panel.controls) == {"base", "dim", "max_distance", "mode"}
    panel.set(mode="random", dim=64, max_distance=256)
    assert len(panel.figure.axes[0].lines[0].get_ydata()) == 257
    assert panel.figure.axes[0].get_title().startswith("score, q/k: random, d = 64")
