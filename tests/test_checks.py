"""rope_lab.checks: a claim passes only when the values themselves agree."""

import math

import numpy as np
import pytest
import torch

import rope_lab as rl

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("actual, expected, options", [
    (torch.tensor([2]), 2.5, {}),  # was cast to int 2: passed
    (torch.tensor([True]), 0.4, {}),  # was cast to True: passed
    (torch.tensor(1.0), torch.tensor(1 + 1e-9, dtype=torch.float64), {"atol": 0}),
    (torch.tensor([2], dtype=torch.int32), [2.000001], {"atol": 1e-9}),
    (torch.tensor([1 + 1e-3j]), 1.0, {}),  # complex vs real, imaginary part ≠ 0
    (1.0, torch.tensor([1.0 + 1e-3j]), {}),
    (torch.tensor([INF]), -INF, {}),
    (torch.tensor([INF]), 1e300, {}),
    (torch.tensor([1.0, NAN]), [1.0, NAN], {}),  # NaN fails unless equal_nan=True
    (torch.tensor([1.0, NAN]), [1.0, 2.0], {"equal_nan": True}),
    (np.array([0.5]), 0.25, {"atol": 0.1}),
], ids=["int vs 2.5", "bool vs 0.4", "float32 vs float64 + 1e-9", "int32 vs near-int",
        "complex vs real", "real vs complex", "+inf vs -inf", "inf vs finite", "nan",
        "nan one side with equal_nan", "numpy"])
def test_fails(actual, expected, options):
    with pytest.raises(AssertionError, match="^✘ claim — max"):
        rl.check_close("claim", actual, expected, **options)


@pytest.mark.parametrize("actual, expected, options", [
    (torch.tensor([3]), 3, {}),  # int vs int, equal
    (torch.tensor([True, False]), [1.0, 0.0], {}),
    (torch.tensor([2], dtype=torch.int64), 2.0, {"atol": 0}),
    (torch.tensor(1.0), torch.tensor(1.0, dtype=torch.float64), {"atol": 0}),
    (torch.tensor([0.1], dtype=torch.float64), 0.1, {"atol": 0}),  # Python float stays double
    (torch.tensor([1 + 0j]), 1.0, {"atol": 0}),
    (np.array([1.0, INF, -INF]), [1.0, INF, -INF], {"atol": 0}),  # equal infinities
    (torch.tensor([1.0, NAN]), [1.0, NAN], {"equal_nan": True}),
    (torch.tensor([100.0]), 101.0, {"atol": 0, "rtol": 0.01}),
    (torch.tensor([[1.0, 2.0]]), [1.0, 2.0], {}),  # broadcasting
], ids=["int vs int", "bool vs 0/1", "int vs 2.0", "float32 1 vs float64 1", "python float",
        "complex with 0 imag", "inf", "nan with equal_nan", "rtol", "broadcast"])
def test_passes(actual, expected, options, capsys):
    assert rl.check_close("claim", actual, expected, **options) == 0.0 or options.get("rtol")
    assert capsys.readouterr().out.startswith("✔ claim — max |difference| = ")


def test_float32_vs_float64_reports_the_true_gap(capsys):
    gap = rl.check_close("close enough", torch.tensor(1.0), 1 + 1e-9, atol=1e-6)
    assert math.isclose(gap, 1e-9, rel_tol=1e-6)


def test_nan_is_named_in_the_failure():
    with pytest.raises(AssertionError, match="1 NaN element"):
        rl.check_close("x", torch.tensor([1.0, NAN]), [1.0, 1.0])


def test_shapes_that_do_not_broadcast():
    with pytest.raises(ValueError, match=r"shape \(3,\) and expected of shape \(2,\) do not"):
        rl.check_close("x", torch.zeros(3), torch.zeros(2))


def test_nothing_to_compare_is_an_error():
    with pytest.raises(ValueError, match="compares empty tensors"):
        rl.check_close("x", torch.zeros(0), [])


def test_gpu_or_grad_tensors_are_fine():
    x = torch.ones(2, requires_grad=True)
    assert rl.check_close("x", x * 1, [1.0, 1.0]) == 0.0


# --- check ----------------------------------------------------------------------------------

def test_check_tensor_and_numpy(capsys):
    rl.check("all true", torch.tensor([True, True]), "2 of 2")
    rl.check("numpy", np.array([True, True]))
    assert capsys.readouterr().out == "✔ all true — 2 of 2\n✔ numpy\n"
    with pytest.raises(AssertionError, match="^✘ one false$"):
        rl.check("one false", torch.tensor([True, False]))
    with pytest.raises(AssertionError, match="^✘ numpy false$"):
        rl.check("numpy false", np.array([True, False]))


def test_check_nan_fails():
    with pytest.raises(AssertionError, match="contains NaN"):
        rl.check("x", torch.tensor([1.0, NAN]))  # bool(nan) would be True
    with pytest.raises(AssertionError, match="is NaN"):
        rl.check("x", NAN)


def test_check_empty_condition_is_an_error():
    with pytest.raises(ValueError, match=r"empty tensor of shape \(0,\)"):
        rl.check("vacuous", torch.tensor([], dtype=torch.bool))
    with pytest.raises(ValueError, match="empty tensor"):
        rl.check("vacuous", torch.zeros(3) > torch.zeros(0, 3))
