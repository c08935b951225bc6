"""rope_lab.precision: 16-bit angles, their errors, and the float64 rotation helpers."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_lab as rl
from rope_lab import precision


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_largest_exact_integer_is_the_last_of_a_run_of_exact_integers(dtype):
    limit = precision.largest_exact_integer(dtype)
    below = torch.arange(limit - 1000 if limit > 1000 else 0, limit + 1, dtype=torch.float64)
    assert torch.equal(below.to(dtype).to(torch.float64), below)
    after = torch.tensor(float(limit + 1), dtype=torch.float64)
    assert after.to(dtype).to(torch.float64) != after


def test_largest_exact_integer_values_and_names():
    assert precision.largest_exact_integer("bfloat16") == 2**8
    assert precision.largest_exact_integer("float16") == 2**11
    assert precision.largest_exact_integer(torch.float32) == 2**24


def test_check_dtype_rejects_non_float():
    with pytest.raises(ValueError, match=r"dtype must be a floating-point torch.dtype.*int32"):
        precision.check_dtype(torch.int32)
    with pytest.raises(ValueError, match=r"got 'half'"):
        precision.check_dtype("half")


def test_angles_in_float64_are_exact_and_match_rope_angles():
    speeds = rl.inv_freq(16, dtype=torch.float64)
    positions = torch.arange(100)
    assert torch.equal(precision.angles_in_dtype(positions, speeds, torch.float64),
                       precision.exact_angles(positions, speeds))
    assert torch.equal(precision.exact_angles(positions, speeds),
                       rl.rope_angles(positions.double(), speeds))


def test_bfloat16_rounds_the_position_itself():
    # 257 is not a bfloat16: with θ_0 = 1 the angle is 256 or 258, off by a whole radian.
    speeds = torch.tensor([1.0], dtype=torch.float64)
    angle = precision.angles_in_dtype([257], speeds, torch.bfloat16)
    assert float(angle[0, 0]) in (256.0, 258.0)
    assert float(precision.phase_error([257], speeds, torch.bfloat16)[0, 0]) == pytest.approx(1.0)
    assert float(precision.phase_error([257], speeds, torch.float32)[0, 0]) == 0.0


@settings(max_examples=30, deadline=None)
@given(st.floats(-1e4, 1e4, allow_nan=False))
def test_wrap_angle_lands_in_range_and_keeps_the_rotation(angle):
    wrapped = precision.wrap_angle(torch.tensor(angle, dtype=torch.float64))
    assert -math.pi <= float(wrapped) < math.pi + 1e-12
    assert math.cos(float(wrapped)) == pytest.approx(math.cos(angle), abs=1e-9)
    assert math.sin(float(wrapped)) == pytest.approx(math.sin(angle), abs=1e-9)


def test_errors_grow_with_position_and_shrink_with_precision():
    speeds = rl.inv_freq(64, dtype=torch.float64)
    positions = torch.arange(4096)
    worst = {}
    for name in ("bfloat16", "float16", "float32"):
        phase, cos = precision.angle_errors(positions, speeds, name)
        assert phase.shape == cos.shape == (4096, 32)
        assert bool((phase <= math.pi).all()) and bool((cos <= 2).all())
        assert torch.equal(phase, precision.phase_error(positions, speeds, name))
        assert torch.equal(cos, precision.cos_error(positions, speeds, name))
        worst[name] = (float(phase[:256].max()), float(phase[2048:].max()))
        assert worst[name][0] < worst[name][1]
    assert worst["float32"][1] < 1e-3 < worst["float16"][1] < worst["bfloat16"][1]


def test_cos_error_is_bounded_by_phase_error():
    speeds = rl.inv_freq(32, dtype=torch.float64)
    phase, cos = precision.angle_errors(torch.arange(3000), speeds, torch.float16)
    assert bool((cos <= phase + 1e-12).all())  # cos is 1-Lipschitz


@pytest.mark.parametrize("dim", [2, 8, 64])
def test_rotate_by_exact_angles_is_apply_rope_half(dim):
    x = torch.randn(3, 10, dim, dtype=torch.float64)
    angles = precision.exact_angles(torch.arange(10), rl.inv_freq(dim, dtype=torch.float64))
    torch.testing.assert_close(precision.rotate_by_angles(x, angles), rl.apply_rope(x))


def test_rope_scores_match_attention_logits_and_depend_on_offset_only():
    q, k = torch.randn(12, 16, dtype=torch.float64), torch.randn(12, 16, dtype=torch.float64)
    speeds = rl.inv_freq(16, dtype=torch.float64)
    scores = precision.rope_scores(q, k, precision.exact_angles(torch.arange(12), speeds))
    expected = rl.apply_rope(q) @ rl.apply_rope(k).T / 4.0
    torch.testing.assert_close(scores, expected)
    shifted = precision.rope_scores(q, k, precision.exact_angles(torch.arange(12) + 50, speeds))
    torch.testing.assert_close(shifted, scores)


def test_rotation_helpers_validate_shapes():
    with pytest.raises(ValueError, match=r"angles must have 4 columns.*\(5, 3\)"):
        precision.rotate_by_angles(torch.randn(5, 8), torch.zeros(5, 3))
    with pytest.raises(ValueError, match=r"q and k must have the same shape"):
        precision.rope_scores(torch.randn(5, 8), torch.randn(4, 8), torch.zeros(5, 4))
    with pytest.raises(ValueError, match=r"inv_freq must be a 1-D tensor.*\(2, 2\)"):
        precision.exact_angles([1, 2], torch.ones(2, 2))
    with pytest.raises(TypeError, match=r"inv_freq must be a floating-point tensor"):
        precision.angles_in_dtype([1, 2], torch.ones(2, dtype=torch.int64), "float16")


def test_results_follow_the_device_of_inv_freq(device):
    speeds = rl.inv_freq(16, dtype=torch.float64, device=device)
    phase, cos = precision.angle_errors(torch.arange(600), speeds, torch.bfloat16)
    assert phase.device.type == cos.device.type == device.type
    cpu_phase, _ = precision.angle_errors(torch.arange(600), speeds.cpu(), torch.bfloat16)
    torch.testing.assert_close(phase.cpu(), cpu_phase)
