"""Figures of notebook 10 (rope_lab.plots.real_models): the data they draw, read back."""

import math

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from rope_lab import plots  # noqa: E402
from rope_lab.hf import report  # noqa: E402


def test_base_over_years_draws_one_point_per_row():
    rows = [("a", 2021, 1e4), ("b", 2024, 5e5), ("c", 2024, 1e6)]
    figure = plots.base_over_years(rows)
    offsets = figure.axes[0].collections[0].get_offsets()
    assert [tuple(map(float, point)) for point in offsets] == [(2021, 1e4), (2024, 5e5),
                                                               (2024, 1e6)]
    assert figure.axes[0].get_yscale() == "log" and figure.axes[0].get_title()


def test_rotary_fraction_bars_are_the_shares():
    figure = plots.rotary_fraction([("GPT-J", 64, 256), ("Phi-2", 32, 80), ("Llama", 128, 128)])
    widths = [patch.get_width() for patch in figure.axes[0].patches]
    assert widths == pytest.approx([0.25, 0.4, 1.0])


def test_turned_pairs_counts_turns_within_the_context():
    entry = report.describe(report.load_fixture("llama_2_7b"))[None]
    figure = plots.turned_pairs(entry, 4096, title="Llama 2")
    heights = torch.tensor([patch.get_height() for patch in figure.axes[0].patches])
    theta = 1e4 ** (-torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    assert torch.allclose(heights.double(), 4096 * theta / (2 * math.pi), rtol=1e-6)
    assert "46 of 64 pairs turned" in figure.axes[0].get_title()


def test_atlas_turned_pairs_names_the_families():
    assert "Gemma 4 (defaults) global" in plots.real_models.atlas_entries()
    with pytest.raises(ValueError, match="family must be one of"):
        plots.atlas_turned_pairs("GPT-5", 4096)


def test_atlas_families_name_the_layer_type_in_the_readers_language(chinese):
    """The widget's list in the Chinese edition: 全局层/局部层, as notebook 10's figures say,
    and the same entries as in English (one per fixture and layer type)."""
    from rope_lab import i18n

    entries = plots.real_models.atlas_entries()
    with i18n.using_language("en"):
        english = plots.real_models.atlas_entries()
    assert "Gemma 4 (defaults) 全局层" in entries and "Gemma 4 (defaults) global" not in entries
    assert any(name.endswith(" 局部层") for name in entries)
    assert not any(name.endswith((" global", " local")) for name in entries)
    back = [name.replace(" 全局层", " global").replace(" 局部层", " local") for name in entries]
    assert back == list(english)
    assert plots.atlas_turned_pairs("Gemma 4 (defaults) 全局层", 4096).axes[0].get_title()


def test_longrope_switch_steps_at_the_original_context():
    figure = plots.longrope_switch(report.load_fixture("phi_3_5_mini"))
    lengths, slowest = figure.axes[1].lines[0].get_data()
    before = [s for n, s in zip(lengths, slowest, strict=True) if n <= 4096]
    after = [s for n, s in zip(lengths, slowest, strict=True) if n > 4096]
    assert len(set(before)) == 1 and len(set(after)) == 1 and after[0] < before[0]


def test_family_spectra_one_panel_per_row():
    rows = [(label, entry) for label, entry in list(plots.real_models.atlas_entries().items())[:4]]
    figure = plots.family_spectra(rows)
    visible = [axes for axes in figure.axes if axes.get_visible()]
    assert len(visible) == 4
    pairs, waves = visible[0].lines[0].get_data()
    assert torch.allclose(torch.as_tensor(waves, dtype=torch.float64), rows[0][1].wavelengths)
