"""Figures of notebooks 03 and 04: titled, labelled, and drawing the right data."""

import math

import pytest
import torch

import rope_lab as rl
from rope_lab import plots, precision


def _arrow_tips(axes):
    """Tips of the arrows drawn by plots._arrow (annotations with an arrow patch)."""
    return [text.xy for text in axes.texts if getattr(text, "arrow_patch", None)]


def test_complex_rotation_turns_one_by_a_quarter_pi():
    figure = plots.complex_rotation()
    axes = figure.axes[0]
    assert axes.get_title() and axes.get_xlabel() == "real part"
    tips = _arrow_tips(axes)
    assert tips[0] == (1.0, 0.0)
    assert tips[1] == pytest.approx((math.sqrt(0.5), math.sqrt(0.5)))
    assert plots.render_png(figure).startswith(b"\x89PNG")


@pytest.mark.parametrize("shift", [0, 7])
def test_rotation_2d_draws_rotated_vectors_and_the_score(shift):
    q, k, theta, m, n = (1.0, 0.4), (0.3, 0.9), 0.5, 2, 5
    axes = plots.rotation_2d(theta, m, n, shift, q=q, k=k).axes[0]
    tips = _arrow_tips(axes)
    # With d = 2 there is one pair and θ_0 = 1, so rope_matrix(angle, 2) is R(angle).
    expected_q = rl.rope_matrix((m + shift) * theta, 2, dtype=torch.float64) @ torch.tensor(
        q, dtype=torch.float64)
    assert tips[0] == q and tips[1] == k
    assert tips[2] == pytest.approx(tuple(expected_q.tolist()))
    expected_k = rl.rope_matrix((n + shift) * theta, 2, dtype=torch.float64) @ torch.tensor(
        k, dtype=torch.float64)
    score = float(expected_q @ expected_k)
    assert f"{score:.4f}" in axes.get_title()
    assert axes.get_xlabel() and axes.get_ylabel()


def test_rotation_2d_score_is_shift_invariant():
    titles = {plots.rotation_2d(0.7, 3, 8, s).axes[0].get_title().splitlines()[1]
              for s in (0, 4, 11)}
    assert len(titles) == 1


def test_rope_frequencies_data():
    figure = plots.rope_frequencies(dim=16, base=100.0, length=40)
    left, right = figure.axes[:2]
    wavelengths = torch.as_tensor(left.lines[0].get_ydata())
    expected = 2 * math.pi / rl.inv_freq(16, 100.0, dtype=torch.float64)
    torch.testing.assert_close(wavelengths, expected)
    image = torch.as_tensor(right.images[0].get_array())
    assert image.shape == (40, 8)
    angles = rl.rope_angles(torch.arange(40), rl.inv_freq(16, 100.0, dtype=torch.float64))
    torch.testing.assert_close(image, angles.remainder(2 * math.pi))
    for axes in (left, right):
        assert axes.get_title() and axes.get_xlabel() and axes.get_ylabel()


def test_angle_precision_data():
    figure = plots.angle_precision("float16", dim=8, base=100.0, length=4096, block=16)
    left, right = figure.axes
    speeds = rl.inv_freq(8, 100.0, dtype=torch.float64)
    phase, cos = precision.angle_errors(torch.arange(4096), speeds, "float16")
    expected = phase.reshape(-1, 16 * 4).amax(-1).clamp_min(1e-9)
    torch.testing.assert_close(torch.as_tensor(left.lines[0].get_ydata()), expected)
    expected = cos.reshape(-1, 16 * 4).amax(-1).clamp_min(1e-9)
    torch.testing.assert_close(torch.as_tensor(right.lines[0].get_ydata()), expected)
    assert left.lines[1].get_label() == "float32"
    assert left.lines[2].get_xdata()[0] == 2048  # float16's last exact integer
    assert "float16" in left.get_title()


def test_singular_values_plot():
    figure = plots.singular_values({"identity": torch.eye(4), "scaled": 2 * torch.eye(4)})
    axes = figure.axes[0]
    assert list(axes.lines[0].get_ydata()) == [1.0] * 4
    assert list(axes.lines[1].get_ydata()) == [2.0] * 4
    assert axes.get_legend() is not None and axes.get_title()


@pytest.mark.parametrize("shift", [0, 3, 20])
def test_rotation_2d_draws_the_angle_that_stays_constant(shift):
    # The angle from R_m q to R_n k, computed from the vectors with acos, not by the figure.
    q, k, theta, m, n = (1.0, 0.4), (0.3, 0.9), 0.5, 2, 5
    axes = plots.rotation_2d(theta, m, n, shift, q=q, k=k).axes[0]
    rq = rl.rope_matrix((m + shift) * theta, 2, dtype=torch.float64) @ torch.tensor(q).double()
    rk = rl.rope_matrix((n + shift) * theta, 2, dtype=torch.float64) @ torch.tensor(k).double()
    expected = math.degrees(math.acos(float(rq @ rk / (rq.norm() * rk.norm()))))
    labels = [t.get_text() for t in axes.texts if t.get_text().endswith("°")]
    assert labels == [f"{expected:.0f}°"]
    arc = axes.lines[2]
    x, y = arc.get_xdata(), arc.get_ydata()
    swept = abs(math.atan2(y[-1], x[-1]) - math.atan2(y[0], x[0]))
    assert math.degrees(min(swept, 2 * math.pi - swept)) == pytest.approx(expected, abs=1e-4)
