"""default_device, seed_everything, show_source and the one-line checks."""

import pytest
import torch

import rope_lab as rl


def test_default_device_is_a_device():
    device = rl.default_device()
    assert isinstance(device, torch.device)
    assert device.type == ("cuda" if torch.cuda.is_available() else device.type)


def test_seed_everything_repeats():
    rl.seed_everything(3)
    first = torch.randn(4)
    rl.seed_everything(3)
    assert torch.equal(first, torch.randn(4))


def test_show_source_prints_the_real_code(capsys):
    rl.show_source(rl.rotate_half)
    out = capsys.readouterr().out
    assert "def rotate_half" in out and "rope_lab/implementations.py" in out
    with pytest.raises(TypeError, match="show_source needs a function"):
        rl.show_source(3)


def test_check_prints_verdict_and_raises(capsys):
    rl.check("two is even", 2 % 2 == 0, "checked")
    assert capsys.readouterr().out == "✔ two is even — checked\n"
    with pytest.raises(AssertionError, match="✘ three is even"):
        rl.check("three is even", 3 % 2 == 0)


def test_check_close_reports_gap(capsys):
    gap = rl.check_close("same", torch.tensor([1.0, 2.0]), [1.0, 2.0 + 1e-9], atol=1e-6)
    assert gap < 1e-6 and capsys.readouterr().out.startswith("✔ same — max |difference| =")
    with pytest.raises(AssertionError, match="✘ different — max \\|difference\\| = 1.00e-01"):
        rl.check_close("different", torch.tensor([1.0]), [1.1], atol=1e-3)
    with pytest.raises(AssertionError):
        rl.check_close("nan is never close", torch.tensor([float("nan")]), [0.0])
