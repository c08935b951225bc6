"""Notebook 06's figures, panel and exercise checkers: drawn data follows the inputs."""

import math

import pytest
import torch

from rope_lab import exercises, inv_freq, plots, scaling, widgets
from rope_lab.experiments import extrapolation


def test_frequency_overlay_draws_each_method_ratio():
    figure = plots.frequency_overlay(dim=32, factor=4.0, original_length=1024, method="ntk")
    lines = figure.axes[0].lines
    theta = inv_freq(32, dtype=torch.float64)
    for line, method in zip(lines, scaling.METHODS, strict=False):
        freqs, _ = scaling.scaled_inv_freq(method, 32, factor=4.0, original_max_position=1024,
                                           seq_len=4096, dtype=torch.float64)
        assert list(line.get_ydata()) == pytest.approx((freqs / theta).tolist())
    assert lines[scaling.METHODS.index("ntk")].get_linewidth() > lines[0].get_linewidth()


def test_wavelength_chart_bars_are_wavelengths_and_title_counts_full_turns():
    figure = plots.wavelength_chart(dim=16, base=10000.0, original_length=64)
    heights = [bar.get_height() for bar in figure.axes[0].patches]
    expected = (2 * math.pi / inv_freq(16, dtype=torch.float64)).tolist()
    assert heights == pytest.approx(expected)
    turning = sum(h <= 64 for h in expected)
    assert figure.axes[0].get_title() == f"{turning} of 8 pairs turn fully within L"


def test_interpolation_figure_plots_the_fit():
    coefficients = scaling.fit_random_scores(dim=16, length=64, seed=1)
    figure = plots.interpolation_vs_extrapolation(coefficients, dim=16, length=64, zoom=4.0)
    line = figure.axes[0].lines[0]
    expected = scaling.rope_basis(torch.arange(128), 16) @ coefficients
    assert list(line.get_ydata()) == pytest.approx(expected.tolist())


def test_experiment_figures_plot_the_stored_losses():
    results = extrapolation.load_results()
    figure = plots.extrapolation_losses(results, variants=["rope", "alibi"])
    rope = [results["loss"]["rope"][str(k)] for k in results["config"]["multiples"]]
    assert list(figure.axes[0].lines[0].get_ydata()) == pytest.approx(rope)
    figure = plots.extrapolation_by_position(results, variants=["alibi"])
    assert list(figure.axes[0].lines[0].get_ydata()) == pytest.approx(
        results["loss_by_position"]["alibi"])


def test_alibi_figure_draws_every_head_on_one_scale():
    # 4 heads: slopes 2^(−8h/4) = 1/4, 1/16, 1/64, 1/256 (Press et al.), written out here
    figure = plots.alibi_heatmap(seq_len=6, n_heads=4, heads=(0, 3))
    axes = figure.axes
    assert len(axes) == 1  # one Axes, one y scale: a 64× slope ratio is visible as such
    for line, slope in zip(axes[0].lines, (2.0**-2, 2.0**-8), strict=True):
        distance, bias = line.get_data()
        assert list(distance) == [5, 4, 3, 2, 1, 0]
        assert list(bias) == pytest.approx([-slope * d for d in distance])
    assert axes[0].get_ylim()[0] <= -5 * 2.0**-2


def test_scaling_panel_redraws_for_every_control():
    panel = widgets.PANELS["scaling_panel"]()
    for method in scaling.METHODS:
        panel.set(method=method)
    panel.set(factor=2.0, beta_fast=16.0, beta_slow=0.5, original_length=512)
    assert panel.figure.axes[0].get_title() == "Rotation speed, s = 2 (llama3 thick)"
    assert len(panel.redraw_seconds) == 1 + len(scaling.METHODS) + 1  # one per set() call


@pytest.mark.parametrize(("checker", "right", "wrong"), [
    (exercises.check_position_interpolation,
     lambda d, b, s: inv_freq(d, b, dtype=torch.float64) / s,
     lambda d, b, s: inv_freq(d, b, dtype=torch.float64) * s),
    (exercises.check_ntk_base, lambda b, d, s: b * s ** (d / (d - 2)), lambda b, d, s: b * s),
    (exercises.check_full_turn_pairs,
     lambda d, b, L: int((2 * math.pi / inv_freq(d, b, dtype=torch.float64) <= L).sum()),
     lambda d, b, L: d // 2),
])
def test_checkers_pass_right_answers_and_explain_wrong_ones(checker, right, wrong, capsys):
    assert checker(right).passed is True
    assert checker(wrong).passed is False
    assert checker(lambda *args: (_ for _ in ()).throw(NotImplementedError())).passed is False
    assert "not attempted yet" in capsys.readouterr().out
