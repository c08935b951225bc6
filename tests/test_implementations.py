"""The four textbook implementations equal apply_rope."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import rope_lab as rl

dims = st.integers(1, 16).map(lambda half: 2 * half)
bases = st.sampled_from([1.0, 10.0, 10000.0, 1e6])


@given(dims, bases, st.integers(0, 2**31 - 1))
def test_all_implementations_equal_apply_rope_float64(dim, base, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, 13, dim, generator=generator, dtype=torch.float64)
    positions = torch.randint(-3000, 3000, (13,), generator=generator)
    interleaved = rl.apply_rope(x, positions, base=base, layout="interleaved")
    half = rl.apply_rope(x, positions, base=base, layout="half")
    checks = {
        "dense interleaved": (rl.apply_rope_dense(x, positions, base=base), interleaved),
        "dense half": (rl.apply_rope_dense(x, positions, base=base, layout="half"), half),
        "interleaved": (rl.apply_rope_interleaved(x, positions, base=base), interleaved),
        "complex": (rl.apply_rope_complex(x, positions, base=base), interleaved),
        "rotate_half": (rl.apply_rope_rotate_half(x, positions, base=base), half),
    }
    for name, (actual, expected) in checks.items():
        torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-12, msg=name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_all_implementations_keep_dtype_and_agree(device, dtype):
    x = torch.randn(4, 32, 16, device=device).to(dtype)
    reference = rl.apply_rope(x.float(), layout="interleaved")
    for implementation in (rl.apply_rope_dense, rl.apply_rope_interleaved, rl.apply_rope_complex):
        out = implementation(x)
        assert out.dtype == dtype and out.shape == x.shape
        torch.testing.assert_close(out.float(), reference, rtol=1e-2, atol=1e-2)
    out = rl.apply_rope_rotate_half(x)
    torch.testing.assert_close(out.float(), rl.apply_rope(x.float()), rtol=1e-2, atol=1e-2)


def test_rotate_half():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert rl.rotate_half(x).tolist() == [-3.0, -4.0, 1.0, 2.0]


def test_references_validate_their_input():
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        rl.apply_rope_complex(torch.ones(2, 4, dtype=torch.int64))
    with pytest.raises(ValueError, match="x.shape\\[-1\\] must be a positive even integer"):
        rl.apply_rope_rotate_half(torch.ones(2, 5))
    with pytest.raises(ValueError, match="expected one position per token"):
        rl.apply_rope_dense(torch.ones(3, 4), torch.arange(4))
