"""Notebook 05's figures draw the data they claim (read back from the axes)."""

import numpy as np
import pytest
import torch

import rope_lab as rl
from rope_lab import decay, plots


def test_base_sweep_draws_one_panel_per_base_with_its_window_means():
    figure = plots.base_sweep(bases=(1, 100, 10000), dim=8, length=64, windows=4)
    panels = [axes for axes in figure.axes if axes.axison]
    assert len(panels) == 3
    x, y = panels[2].lines[0].get_data()
    assert list(x) == list(range(64))
    np.testing.assert_allclose(y, 2 * decay.cos_sum(torch.arange(64), 8).numpy(), atol=1e-9)
    np.testing.assert_allclose(panels[0].lines[0].get_ydata(), 8 * np.cos(np.arange(64)),
                               atol=1e-9)
    # the thick line: the mean of 8·cos Δ over each window of 16, computed here with numpy
    means = (8 * np.cos(np.arange(64))).reshape(4, 16).mean(1)
    np.testing.assert_allclose(np.unique(panels[0].lines[1].get_ydata()), np.sort(means),
                               atol=1e-9)
    assert [axes.get_title() for axes in panels] == ["base 1", "base 100", "base 10\u2009000"]
    assert all(axes.get_ylim() == panels[0].get_ylim() for axes in panels)  # one y scale
    assert figure._suptitle is not None and figure._suptitle.get_text()  # mpl 3.7: no getter


def test_bound_counterexample_plots_the_bound_and_the_score():
    q = torch.full((16,), 2**-0.5, dtype=torch.float64)
    k = rl.apply_rope(q[None], [-40], base=100.0)[0]
    distances = torch.arange(100)
    figure = plots.bound_counterexample(q, k, distances, base=100.0, marked=40)
    bound, score = figure.axes[0].lines[:2]
    np.testing.assert_allclose(bound.get_ydata(), decay.cos_sum(distances, 16, base=100.0))
    assert score.get_ydata()[40] == pytest.approx(8.0)


def test_abel_curve_and_panel_figure_share_the_abel_data():
    expected = decay.abel_curve(torch.arange(65), 32, base=500.0).numpy()
    alone = plots.abel_curve(dim=32, base=500.0, max_distance=64)
    np.testing.assert_allclose(alone.axes[0].lines[0].get_ydata(), expected)
    panel = plots.decay_and_abel(base=500.0, dim=32, max_distance=64, mode="ones")
    np.testing.assert_allclose(panel.axes[1].lines[0].get_ydata(), expected)
    np.testing.assert_allclose(panel.axes[0].lines[0].get_ydata(),
                               2 * decay.cos_sum(torch.arange(65), 32, base=500.0).numpy(),
                               atol=1e-9)


@pytest.mark.parametrize("mode", ["random", "correlated"])
def test_decay_and_abel_draws_the_exact_mean(mode):
    figure = plots.decay_and_abel(base=100.0, dim=16, max_distance=32, mode=mode)
    mean = figure.axes[0].lines[1].get_ydata()
    np.testing.assert_allclose(
        mean, decay.expected_score(torch.arange(33), 16, base=100.0, mode=mode).numpy())


def test_random_vs_correlated_monte_carlo_mean_near_exact():
    figure = plots.random_vs_correlated(dim=16, base=100.0, max_distance=20, samples=2000)
    for axes, mode in zip(figure.axes, ("random", "correlated"), strict=True):
        # matplotlib < 3.8 keeps the tensors it was given; newer versions store arrays
        monte_carlo = np.asarray(axes.lines[1].get_ydata())
        exact = np.asarray(axes.lines[2].get_ydata())
        std = decay.score_std(torch.arange(21), 16, base=100.0, mode=mode).numpy()
        assert np.all(np.abs(monte_carlo - exact) < 5 * std / np.sqrt(2000))


def test_minimum_base_chart_plots_both_tables():
    figure = plots.minimum_base_chart({1024: 4.3e3, 4096: 2.7e4}, {1024: 4.3e3},
                                      [("LLaMA 2", 4096, 1e4)])
    ours, published = figure.axes[0].lines[:2]
    assert list(ours.get_xdata()) == [1024, 4096]
    assert list(published.get_ydata()) == [4.3e3]
    assert figure.axes[0].get_xscale() == "log"
