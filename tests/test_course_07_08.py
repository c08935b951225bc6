"""Figures, panels and exercise checkers of notebooks 07 and 08: data follow the knobs, and a
checker passes a right answer, fails a wrong one with a specific hint, and never raises."""

import math

import pytest
import torch

import rope_lab as rl
from rope_lab import exercises, nd, plots, widgets
from rope_lab import linear_attention as la

# --- figures ------------------------------------------------------------------------------


def test_normalizer_figure_draws_both_denominators():
    figure = plots.linear_attention_normalizers(base=100.0, dim=8, length=64, seed=3)
    # the unrotated sum on the top axes, the rotated one on its own axes below
    plain, rotated = figure.axes[0].lines[0].get_ydata(), figure.axes[1].lines[0].get_ydata()
    generator = torch.Generator().manual_seed(3)
    q, k = torch.randn(2, 64, 8, generator=generator, dtype=torch.float64)
    expected = la.linear_attention_normalizers(q, k, rotated=True, base=100.0)
    assert (plain > 0).all()
    torch.testing.assert_close(torch.as_tensor(rotated), expected)
    assert f"at {int((expected <= 0).sum())} of 64" in figure.axes[0].get_title()


def test_cost_figure_plots_milliseconds():
    figure = plots.attention_cost([8, 16], {"softmax": [1e-3, 4e-3], "linear": [1e-3, 2e-3]}, 8)
    lines = figure.axes[0].lines
    assert list(lines[0].get_ydata()) == [1.0, 4.0] and list(lines[1].get_ydata()) == [1.0, 2.0]


def test_2d_kernel_figure_shows_axial_and_flattened_kernels():
    size, base, dim = 4, 100.0, 8
    figure = plots.rope_2d_kernels(size=size, base=base, dim=dim)
    axial, flat = (axes.images[0].get_array() for axes in figure.axes[:2])
    assert axial.shape == flat.shape == (2 * size - 1, 2 * size - 1)
    centre = size - 1
    assert axial[centre, centre] == pytest.approx(1.0)
    assert flat[centre, centre] == pytest.approx(1.0)
    # row-end wrap (Δx, Δy) = (−(size − 1), 1) looks like the right-hand neighbour (1, 0) in 1D
    assert flat[centre + 1, 0] == pytest.approx(flat[centre, centre + 1])
    assert axial[centre + 1, 0] != pytest.approx(axial[centre, centre + 1])


def test_mixed_kernel_figure_one_image_per_angle():
    figure = plots.rope_mixed_kernels((0.0, 45.0), base=10.0, dim=8, radius=3)
    kernels = [axes.images[0].get_array() for axes in figure.axes[:2]]
    offsets = torch.stack(torch.meshgrid(torch.arange(-3, 4), torch.arange(-3, 4),
                                         indexing="xy"), dim=-1)
    expected = nd.relative_kernel(nd.mixed_freqs(8, 10.0, math.pi / 4, dtype=torch.float64),
                                  offsets)
    torch.testing.assert_close(torch.as_tensor(kernels[1].data), expected)


def test_mrope_figure_follows_the_section_split():
    figure = plots.mrope_sections(temporal_pairs=10, base=1e4, dim=64)
    counts = [len(line.get_xdata()) for line in figure.axes[0].lines]
    assert counts == [10, 11, 11]
    assert "[10, 11, 11]" in figure.axes[0].get_title()


# --- panels -------------------------------------------------------------------------------


@pytest.mark.parametrize("factory, values", [
    ("linear_attention_normalizer_panel", {"base": 1000.0, "dim": 16, "length": 64}),
    ("rope_2d_panel", {"size": 5, "base": 10.0}),
    ("rope_mixed_panel", {"angle_degrees": 45.0, "base": 100.0}),
    ("mrope_panel", {"temporal_pairs": 8, "base": 1e4}),
])
def test_panels_are_registered_and_redraw(factory, values):
    panel = widgets.PANELS[factory]()
    first = panel.png
    panel.set(**values)
    assert panel.png != first and panel.png.startswith(b"\x89PNG")
    assert len(panel.redraw_seconds) == 2  # built once, one redraw for all the values


def test_mixed_panel_draws_axial_next_to_the_chosen_angle():
    panel = widgets.rope_mixed_panel()
    panel.set(angle_degrees=60.0)
    titles = [axes.get_title() for axes in panel.figure.axes[:2]]
    assert titles == ["direction 0° (= axial)", "direction 60°"]


# --- exercise checkers --------------------------------------------------------------------


def recurrent(q, k, v, rope, *, rotate_denominator=False, causal=True):
    phi_q, phi_k = la.elu_feature_map(q), la.elu_feature_map(k)
    rot_q, rot_k = (rl.apply_rope(phi_q), rl.apply_rope(phi_k)) if rope else (phi_q, phi_k)
    den_q, den_k = (rot_q, rot_k) if rotate_denominator else (phi_q, phi_k)
    outputs = []
    for m in range(q.shape[0]):
        keys = slice(0, m + 1) if causal else slice(None)
        numerator = (rot_q[m] @ rot_k[keys].T) @ v[keys]
        outputs.append(numerator / (den_q[m] @ den_k[keys].T).sum())
    return torch.stack(outputs)


def not_attempted(*args):
    raise NotImplementedError("your code here")


def test_check_recurrent_linear_attention(capsys):
    assert exercises.check_recurrent_linear_attention(recurrent)
    assert not exercises.check_recurrent_linear_attention(
        lambda q, k, v, rope: recurrent(q, k, v, rope, rotate_denominator=True))
    assert "rotates the denominator" in capsys.readouterr().out
    assert not exercises.check_recurrent_linear_attention(
        lambda q, k, v, rope: recurrent(q, k, v, rope, causal=False))
    assert "includes future tokens" in capsys.readouterr().out
    assert not exercises.check_recurrent_linear_attention(not_attempted)
    assert "not attempted yet" in capsys.readouterr().out


def test_check_non_positive_normalizer(capsys):
    def answer():
        q = torch.zeros(5, 4, dtype=torch.float64)
        q[:, 1] = q[:, 3] = -30.0
        return q, q.clone()

    assert exercises.check_non_positive_normalizer(answer)
    assert not exercises.check_non_positive_normalizer(lambda: (torch.zeros(5, 4),) * 2)
    assert "> 0" in capsys.readouterr().out
    assert not exercises.check_non_positive_normalizer(lambda: (torch.zeros(9, 4),) * 2)
    assert not exercises.check_non_positive_normalizer(lambda: None)
    assert "return a pair" in capsys.readouterr().out


def test_check_axial_rope(capsys):
    def answer(x, positions, base):
        return nd.apply_rope_nd(x, positions, nd.axial_freqs(x.shape[-1], base,
                                                             dtype=torch.float64))

    assert exercises.check_axial_rope(answer)
    assert not exercises.check_axial_rope(lambda x, p, base: answer(x, p.flip(-1), base))
    assert "swapped" in capsys.readouterr().out
    assert not exercises.check_axial_rope(lambda x, p, base: x)
    assert not exercises.check_axial_rope(not_attempted)


def test_check_mrope_positions():
    assert exercises.check_mrope_positions(nd.mrope_positions)
    # resuming text right after the last vision token (not one past the largest position)
    # is the classic mistake
    def off_by_length(before, grid_thw, after):
        positions = nd.mrope_positions(before, grid_thw, 0)
        start = len(positions)
        tail = torch.arange(start, start + after)[:, None].expand(-1, 3)
        return torch.cat((positions, tail))

    assert not exercises.check_mrope_positions(off_by_length)
    assert not exercises.check_mrope_positions(not_attempted)
