"""The Triton kernel, run without a GPU: Triton's interpreter executes it on CPU tensors.

The interpreter is chosen when a kernel is defined, so TRITON_INTERPRET=1 is set just for
the import of rope_lab._triton_rope (nothing else in this process needs it). On a machine
with a GPU where the module was already imported for CUDA, the same tests run on CUDA.
Expected values come from ``backend="reference"``, the formula in plain torch ops, and for
the rotation itself from a dense rotation matrix built in float64.
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch
from dense_oracle import dense_rope  # tests/dense_oracle.py

import rope_lab as rl
from rope_lab import fast

pytest.importorskip("triton", reason="triton installs on Linux x86_64 only (make test adds it)")


def _import_interpreted():
    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        from rope_lab import _triton_rope
    finally:
        if previous is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = previous
    return _triton_rope


triton_rope = _import_interpreted()
if triton_rope.INTERPRETED:
    DEVICE = "cpu"
elif torch.cuda.is_available():
    DEVICE = "cuda"
else:
    pytest.skip("the Triton module was imported for CUDA earlier and there is no GPU",
                allow_module_level=True)

# One rounding of a value v in the output dtype moves it by up to 2^-(mantissa bits + 1)·|v|.
TOLERANCE = {torch.float64: 1e-12, torch.float32: 2e-6, torch.bfloat16: 2**-7,
             torch.float16: 2**-10}


def _randn(*shape, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype).to(DEVICE)


def _close(actual, expected, dtype):
    tolerance = TOLERANCE[dtype]
    torch.testing.assert_close(actual.double(), expected.double(), rtol=tolerance,
                               atol=tolerance)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_both_layouts_every_dtype_match_the_reference(layout, dtype):
    x = _randn(2, 3, 9, 16, dtype=dtype)
    got = rl.apply_rope(x, layout=layout, backend="triton")
    assert got.dtype == dtype and got.device == x.device
    _close(got, rl.apply_rope(x, layout=layout, backend="reference"), dtype)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_equals_a_dense_rotation_matrix_in_float64(layout):
    """Independent of the package's formula: R_m x with R_m built entry by entry."""
    x = _randn(1, 2, 6, 8, dtype=torch.float64)
    got = rl.apply_rope(x, layout=layout, backend="triton").cpu()
    expected = dense_rope(x, layout)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize(("dim", "rotary_dim"), [(16, 8), (13, 8), (6, 6), (10, 2)])
def test_partial_rotary_and_odd_widths(layout, dim, rotary_dim):
    """The tail passes through untouched; r/2 that is not a power of two is masked right."""
    x = _randn(2, 2, 5, dim)
    got = rl.apply_rope(x, layout=layout, rotary_dim=rotary_dim, backend="triton")
    _close(got, rl.apply_rope(x, layout=layout, rotary_dim=rotary_dim, backend="reference"),
           torch.float32)
    assert torch.equal(got[..., rotary_dim:], x[..., rotary_dim:])


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_in_place_writes_x_and_moves_its_version(layout):
    x = _randn(2, 3, 7, 16)
    expected = rl.apply_rope(x, layout=layout, backend="reference")
    version = x._version
    assert rl.apply_rope_(x, layout=layout, backend="triton") is x
    _close(x, expected, torch.float32)
    assert x._version > version


def test_strided_and_non_contiguous_inputs():
    base = _randn(2, 7, 3, 32)
    views = {
        "heads and seq transposed": base.transpose(1, 2),  # (batch, seq, heads, dim) memory
        "every other feature": base[..., ::2],  # feature stride 2
        "a slice of the sequence": base.transpose(1, 2)[:, :, 2:5],
        "a column of a wider tensor": base[..., 4:20],
    }
    for name, x in views.items():
        for layout in ("half", "interleaved"):
            got = rl.apply_rope(x, layout=layout, backend="triton")
            expected = rl.apply_rope(x.contiguous(), layout=layout, backend="reference")
            assert got.shape == x.shape, name
            _close(got, expected, torch.float32)


def test_a_sequence_of_one_and_per_batch_positions():
    x = _randn(3, 2, 1, 8)
    _close(rl.apply_rope(x, torch.tensor([41]), backend="triton"),
           rl.apply_rope(x, torch.tensor([41]), backend="reference"), torch.float32)
    x = _randn(3, 2, 5, 8)
    positions = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11], [100, 3, 50, 2, 9]])
    positions = positions[:, None, :].to(DEVICE)  # (batch, 1, seq)
    for layout in ("half", "interleaved"):
        _close(rl.apply_rope(x, positions, layout=layout, backend="triton"),
               rl.apply_rope(x, positions, layout=layout, backend="reference"), torch.float32)


def test_backward_is_the_rotation_the_other_way():
    x = _randn(2, 2, 5, 8, dtype=torch.float64).requires_grad_()
    torch.autograd.gradcheck(lambda t: rl.apply_rope(t, backend="triton"), (x,))
    weights = _randn(2, 2, 5, 8, seed=1)
    x32 = x.detach().float().requires_grad_()
    (rl.apply_rope(x32, backend="triton") * weights).sum().backward()
    reference = x.detach().float().requires_grad_()
    (rl.apply_rope(reference, backend="reference") * weights).sum().backward()
    _close(x32.grad, reference.grad, torch.float32)


def test_a_kernel_that_computes_wrong_numbers_fails_its_self_check(monkeypatch):
    """The first use on a GPU compares Triton with the eager path; here the kernel is made
    to drop the sine term, and the check must say so."""
    assert fast.self_check(triton_rope, torch.device(DEVICE)) is None

    def wrong(x, cos, sin, layout, out):
        triton_rope_rotate(x, cos, torch.zeros_like(sin), layout, out)

    triton_rope_rotate = triton_rope.rotate
    monkeypatch.setattr(triton_rope, "rotate", wrong)
    problem = fast.self_check(triton_rope, torch.device(DEVICE))
    assert problem is not None and "max difference" in problem

    def broken(*args):
        raise RuntimeError("PTX compile failed")

    monkeypatch.setattr(triton_rope, "rotate", broken)
    assert "PTX compile failed" in fast.self_check(triton_rope, torch.device(DEVICE))


def test_failed_self_check_warns_once_and_the_eager_path_serves(monkeypatch):
    monkeypatch.setattr(fast, "self_check", lambda module, device: "simulated mismatch")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fast._start_triton(torch.device(DEVICE)) is False
    assert len(caught) == 1 and "simulated mismatch" in str(caught[0].message)
    assert issubclass(caught[0].category, rl.FastPathWarning)


def test_switched_off_by_environment(monkeypatch):
    monkeypatch.setenv("ROPE_LAB_TRITON", "0")
    assert fast._start_triton(torch.device(DEVICE)) is False
    with pytest.raises(rl.BackendUnavailable, match="ROPE_LAB_TRITON=0"):
        rl.apply_rope(_randn(1, 4, 8), backend="triton")
