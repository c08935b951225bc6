"""Figures of notebooks 01 and 02: each returns a Figure holding the data it claims to draw."""

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

import rope_lab as rl
from rope_lab import absolute, plots


def _titled(figure):
    assert isinstance(figure, Figure)
    for ax in figure.axes:
        if ax.get_label() == "<colorbar>":
            continue
        assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()


def test_attention_weights_draws_each_matrix_with_its_tokens():
    first = torch.softmax(torch.randn(3, 3), dim=-1)
    second = first[[2, 1, 0]][:, [2, 1, 0]]
    figure = plots.attention_weights([first, second], [["a", "b", "c"], ["c", "b", "a"]],
                                     ["abc", "cba"])
    _titled(figure)
    axes = [ax for ax in figure.axes if ax.get_label() != "<colorbar>"]
    assert len(axes) == 2
    np.testing.assert_allclose(axes[1].images[0].get_array(), second.numpy(), rtol=1e-6)
    assert [t.get_text() for t in axes[1].get_xticklabels()] == ["c", "b", "a"]
    assert len(axes[0].texts) == 9  # every weight written in its cell
    with pytest.raises(ValueError):
        plots.attention_weights([first], [["a", "b", "c"], ["x"]], ["one"])


def test_attention_weights_draws_masked_cells_apart_from_real_weights():
    scores = torch.randn(4, 4).masked_fill(torch.ones(4, 4).triu(1).bool(), float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # causal weights, made here without rope_lab
    figure = plots.attention_weights([weights], [list("abcd")], ["causal"], causal=True)
    axes = figure.axes[0]
    assert len(axes.texts) == 10  # a number in each of the 4·5/2 visible cells only
    hatched = [p for p in axes.patches if p.get_hatch()]
    assert sorted((round(p.get_x() + 0.5), round(p.get_y() + 0.5)) for p in hatched) == sorted(
        (col, row) for row in range(4) for col in range(row + 1, 4))
    assert axes.images[0].get_array().mask.sum() == 6
    with pytest.raises(ValueError, match="causal"):  # weights that were never masked
        plots.attention_weights([torch.full((3, 3), 1 / 3)], [list("abc")], ["x"], causal=True)


def test_encoding_sizes_draws_the_rms_of_each_encoding():
    figure = plots.encoding_sizes(length=32, dim=8)
    _titled(figure)
    lines = {line.get_label(): line.get_ydata() for line in figure.axes[0].lines}
    np.testing.assert_allclose(lines["integer"], np.arange(1, 32), rtol=1e-6)
    np.testing.assert_allclose(lines["sinusoidal"], np.full(31, 0.5**0.5), rtol=1e-5)
    np.testing.assert_allclose(lines["normalized integer (L = 32)"], np.arange(1, 32) / 32,
                               rtol=1e-6)
    assert figure.axes[0].get_yscale() == "log"


@pytest.mark.parametrize("dim", [2, 5])
def test_binary_figure_draws_the_bits_and_the_jumps(dim):
    figure = plots.binary_pe_figure(dim)
    _titled(figure)
    bits = figure.axes[0].images[0].get_array()
    np.testing.assert_array_equal(bits, rl.binary_pe(2**dim, dim).T.numpy())
    jumps = figure.axes[1].lines[0].get_ydata()
    assert len(jumps) == 2**dim - 1
    assert jumps.max() == pytest.approx(dim**0.5)  # 2^(d−1) − 1 → 2^(d−1) flips every bit


def test_sinusoidal_figure_draws_the_table_and_a_curve_that_ignores_p():
    figure = plots.sinusoidal_pe_figure(length=64, dim=16, base=100.0)
    _titled(figure)
    np.testing.assert_allclose(figure.axes[0].images[0].get_array(),
                               rl.sinusoidal_pe(64, 16, 100.0).numpy())
    from_zero, from_later = (line.get_ydata() for line in figure.axes[1].lines[:2])
    assert from_zero[0] == pytest.approx(8.0, rel=1e-5)  # ‖PE(p)‖² = dim / 2
    np.testing.assert_allclose(from_later, from_zero[: len(from_later)], atol=1e-4)


def test_position_similarity_is_the_cosine_matrix():
    table = absolute.learned_pe(200, 16)
    figure = plots.position_similarity(table, positions=50, title="t")
    _titled(figure)
    similarity = figure.axes[0].images[0].get_array()
    assert similarity.shape == (50, 50)
    np.testing.assert_allclose(np.diag(similarity), 1.0, rtol=1e-5)
    unit = torch.nn.functional.normalize(table[:50].double(), dim=-1)
    np.testing.assert_allclose(similarity, (unit @ unit.T).numpy(), atol=1e-6)


def test_position_similarity_zooms_on_the_first_rows_of_a_long_table():
    table = absolute.learned_pe(300, 16)
    figure = plots.position_similarity(table, positions=300, title="t", zoom=64)
    whole, zoom = figure.axes[0].images[0].get_array(), figure.axes[1].images[0].get_array()
    assert whole.shape == (300, 300) and zoom.shape == (64, 64)
    unit = torch.nn.functional.normalize(table[:64].double(), dim=-1)
    np.testing.assert_allclose(zoom, (unit @ unit.T).numpy(), atol=1e-6)
    # the big matrix is resampled with antialiasing, not nearest-neighbour (which aliases)
    assert figure.axes[0].images[0].get_interpolation() == "antialiased"
    outline = [p for p in figure.axes[0].patches if not p.get_fill()]
    assert [(p.get_width(), p.get_height()) for p in outline] == [(64, 64)]
