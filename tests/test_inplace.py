"""apply_rope_ behaves like PyTorch's own in-place ops: autograd sees the write (the version
counter moves on every path, the C kernel's raw-pointer write included), and tensors PyTorch
would not let you write into, or whose elements share memory, are refused."""

import pytest
import torch

import rope_lab as rl
from rope_lab import _angles, _ckernel, fast, rope

DTYPES = [torch.float32, torch.float64]


def eager_blocks(monkeypatch):
    return _ckernel.disabled()


def reference_only(monkeypatch):
    monkeypatch.setattr(fast, "can_use_fast_path", lambda x, cos: False)
    return torch.enable_grad()  # any context manager: the patch does the work


def default(monkeypatch):
    return torch.enable_grad()


PATHS = {"default": default, "eager blocks": eager_blocks, "reference": reference_only}


def contiguous(shape, dtype):
    return torch.randn(shape, dtype=dtype)


def odd_offset(shape, dtype):
    """A tensor whose pairs cannot be viewed as complex numbers (storage offset 1)."""
    return torch.randn(shape[0], shape[1] + 1, dtype=dtype)[:, 1:]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("rotary_dim", [None, 4])
@pytest.mark.parametrize("make", [contiguous, odd_offset])
def test_saved_tensor_rotated_in_place_makes_backward_fail(dtype, layout, path, rotary_dim,
                                                           make, monkeypatch):
    # the reproducer: autograd saved x for w * x; rotating x must not go unnoticed
    w = torch.randn(4, 8, dtype=dtype, requires_grad=True)
    x = make((4, 8), dtype)
    expected = rope.rotate_reference(
        x, *_angles.cached_cos_sin(4, rotary_dim or 8, rope.DEFAULT_BASE, x.device, dtype),
        layout)
    loss = (w * x).sum()
    version = x._version
    with PATHS[path](monkeypatch):
        assert rl.apply_rope_(x, layout=layout, rotary_dim=rotary_dim) is x
    assert x._version > version
    torch.testing.assert_close(x, expected)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.skipif(not _ckernel.available(), reason="no compiled kernel here")
def test_the_c_kernel_path_is_the_one_taken_and_bumps_the_version():
    x = torch.randn(2, 8, 16)
    cos, sin = _angles.cached_cos_sin(8, 16, rope.DEFAULT_BASE, x.device, torch.float32)
    version = x._version
    assert _ckernel.rotate(x, cos, sin, x, "half")  # the raw write itself moves nothing …
    assert x._version == version
    fast.rotate(x, cos, sin, "half", out=x)  # … so the dispatcher tells autograd
    assert x._version == version + 1


def test_apply_rope_still_differentiable_and_unaffected():
    x = torch.randn(2, 6, 8, requires_grad=True)
    rl.apply_rope(x).square().sum().backward()
    torch.testing.assert_close(x.grad, 2 * x.detach())  # rotations keep norms: d|Rx|²/dx = 2x


def test_inference_tensor_refused_outside_inference_mode_and_fine_inside():
    with torch.inference_mode():
        x = torch.randn(3, 8)
    with pytest.raises(ValueError, match=r"x is an inference tensor .*torch\.inference_mode"):
        rl.apply_rope_(x)
    expected = rl.apply_rope(x)
    with torch.inference_mode():
        rl.apply_rope_(x)
    torch.testing.assert_close(x, expected)


def test_ordinary_tensor_inside_inference_mode():
    x = torch.randn(3, 8)
    expected = rl.apply_rope(x)
    with torch.inference_mode():
        rl.apply_rope_(x)
    torch.testing.assert_close(x, expected)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("make", [
    lambda: torch.randn(1, 8).expand(3, 8),  # PyTorch itself knows this one overlaps
    lambda: torch.randn(40).as_strided((4, 8), (4, 1)),  # rows overlap by half
    lambda: torch.randn(40).as_strided((2, 4, 8), (8, 8, 1)),  # two dims on the same rows
], ids=["expand", "as_strided rows", "as_strided dims"])
def test_overlapping_memory_refused(layout, make):
    x = make()
    before = x.clone()
    with pytest.raises(ValueError, match="elements of x share memory"):
        rl.apply_rope_(x, layout=layout)
    assert torch.equal(x, before)  # refused before anything was written
    torch.testing.assert_close(rl.apply_rope(x, layout=layout),
                               rl.apply_rope(x.contiguous(), layout=layout))


def test_non_overlapping_as_strided_views_are_accepted():
    base = torch.randn(64)
    x = base.as_strided((4, 8), (16, 2))  # every other element of every other row
    expected = rl.apply_rope(x)
    rl.apply_rope_(x)
    torch.testing.assert_close(x, expected)
