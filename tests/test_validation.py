"""Bad input: one clear error naming the parameter, the value and what was expected."""

import math
import re

import pytest
import torch

import rope_lab as rl
from rope_lab import absolute, alibi, nd, scaling
from rope_lab.attention import causal_mask

X = torch.randn(2, 5, 8)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: rl.inv_freq(7), ValueError, r"dim must be a positive even integer .* got 7"),
        (lambda: rl.inv_freq(0), ValueError, r"dim must be a positive even integer .* got 0"),
        (lambda: rl.inv_freq(8.0), TypeError, r"dim must be an int, got 8.0"),
        (lambda: rl.inv_freq(True), TypeError, r"dim must be an int, got True"),
        (lambda: rl.inv_freq(8, 0), ValueError,
         r"base must be a finite number greater than 0, got 0"),
        (lambda: rl.inv_freq(8, -3.0), ValueError, r"base .* got -3.0"),
        (lambda: rl.inv_freq(8, math.inf), ValueError, r"base .* got inf"),
        (lambda: rl.inv_freq(8, math.nan), ValueError, r"base .* got nan"),
        (lambda: rl.inv_freq(8, "1e4"), TypeError, r"base must be a number, got '1e4'"),
        (lambda: rl.inv_freq(8, dtype=torch.bfloat16), ValueError,
         r"dtype must be torch.float32 or torch.float64 .* got torch.bfloat16"),
        (lambda: rl.apply_rope(X, layout="neox"), ValueError,
         r"layout must be one of 'half', 'interleaved', got 'neox'"),
        (lambda: rl.apply_rope(X, rotary_dim=3), ValueError,
         r"rotary_dim must be an even integer between 2 and the feature size 8, got 3"),
        (lambda: rl.apply_rope(X, rotary_dim=10), ValueError, r"rotary_dim .* got 10"),
        (lambda: rl.apply_rope(X, rotary_dim=0), ValueError, r"rotary_dim .* got 0"),
        (lambda: rl.apply_rope(torch.randn(2, 5, 7)), ValueError,
         r"x.shape\[-1\] must be a positive even integer .* got 7"),
        (lambda: rl.apply_rope(X, torch.arange(4)), ValueError,
         r"positions of shape \(4,\) give 4 positions for 5 tokens; expected one position per "
         r"token: shape \(5,\) or one that broadcasts to x.shape\[:-1\] = \(2, 5\)"),
        (lambda: rl.apply_rope(X, 3), ValueError,
         r"positions of shape \(\) give a single position for 5 tokens"),
        (lambda: rl.apply_rope(X, torch.zeros(2, 1)), ValueError,
         r"positions of shape \(2, 1\) give 1 positions for 5 tokens"),
        (lambda: rl.apply_rope(torch.randn(3, 3, 5, 8), torch.zeros(3, 5)), ValueError,
         r"positions of shape \(3, 5\) are ambiguous for x.shape\[:-1\] = \(3, 3, 5\): "
         r"give them 3 dimensions \(for \(batch, seq\) positions and \(batch, heads, seq, dim\) "
         r"x use positions\[:, None, :\]\)"),
        (lambda: rl.apply_rope(X, torch.zeros(3, 2, 5)), ValueError,
         r"positions of shape \(3, 2, 5\) do not broadcast"),
        (lambda: rl.apply_rope(torch.ones(2, 4, dtype=torch.int64)), TypeError,
         r"x must be a floating-point tensor .* got dtype torch.int64"),
        (lambda: rl.apply_rope([[1.0, 2.0]]), TypeError, r"x must be a torch.Tensor, got list"),
        (lambda: rl.apply_rope(torch.ones(4)), ValueError,
         r"x must have shape \(..., seq, dim\) .* got shape \(4,\)"),
        (lambda: rl.apply_rope(X, torch.tensor([0.0, 1.0, math.nan, 3.0, 4.0])), ValueError,
         r"positions must all be finite, found nan"),
        (lambda: rl.apply_rope(X, torch.tensor([0.0, 1.0, math.inf, 3.0, 4.0])), ValueError,
         r"positions must all be finite, found inf"),
        (lambda: rl.apply_rope(X, torch.ones(5, dtype=torch.bool)), TypeError,
         r"positions must be integer or real, got dtype torch.bool"),
        (lambda: rl.apply_rope(X, "01234"), TypeError, r"positions must be numbers"),
        (lambda: rl.apply_rope(X, inv_freq=torch.ones(3)), ValueError,
         r"inv_freq must have shape \(4,\) .* got shape \(3,\)"),
        (lambda: rl.apply_rope(X, base=500.0, inv_freq=torch.ones(4)), ValueError,
         r"pass either base or inv_freq, not both"),
        (lambda: rl.apply_rope(X, base=-1.0), ValueError, r"base .* got -1.0"),
        (lambda: rl.rope_angles(torch.arange(3), torch.ones(2, 2)), ValueError,
         r"inv_freq must be a 1-D tensor"),
        (lambda: rl.rope_matrix(1, 5), ValueError, r"dim must be a positive even integer"),
        (lambda: rl.rope_matrix(1, 4, layout="zigzag"), ValueError, r"layout must be one of"),
        (lambda: rl.interleaved_to_half(torch.ones(3)), ValueError, r"x.shape\[-1\] .* got 3"),
        (lambda: rl.permute_for_half_layout(torch.ones(12, 4), 5), ValueError,
         r"weight.shape\[0\] = 12 must split into n_heads = 5 heads of even size"),
        (lambda: rl.permute_for_half_layout(torch.ones(12, 4), 0), ValueError,
         r"n_heads must be a positive integer, got 0"),
        (lambda: rl.RotaryEmbedding(9), ValueError, r"dim must be a positive even integer"),
        (lambda: rl.RotaryEmbedding(8, layout="x"), ValueError, r"layout must be one of"),
        (lambda: rl.RotaryEmbedding(8, base=0.0), ValueError, r"base .* got 0.0"),
        (lambda: rl.RotaryEmbedding(8)(torch.randn(3, 4), torch.randn(3, 4)), ValueError,
         r"q.shape\[-1\] = 4 is smaller than the rotary dim = 8"),
        (lambda: rl.RotaryEmbedding(8)(torch.randn(3, 8), torch.randn(2, 8)), ValueError,
         r"q has 3 positions and k has 2"),
        (lambda: rl.sinusoidal_pe(10, 5), ValueError, r"dim must be a positive even integer"),
        (lambda: rl.binary_pe(9, 3), ValueError, r"at most 2\*\*3 = 8 positions, got length = 9"),
        (lambda: rl.integer_pe(0, 4), ValueError, r"length must be a positive integer, got 0"),
        (lambda: rl.attention(X, X, X, mask="diagonal"), ValueError,
         r"mask must be None, 'causal' or a tensor, got 'diagonal'"),
        (lambda: rl.attention(X, torch.randn(2, 5, 6), X), ValueError,
         r"q and k must have the same feature size"),
    ],
)
def test_bad_input_raises_one_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_learned_table_refuses_positions_past_its_end():
    table = rl.LearnedPositionalEmbedding(512, 16)
    assert table(512).shape == (512, 16)
    with pytest.raises(IndexError, match=r"position 600 is outside the learned table, .* 0 … 511"):
        table(torch.tensor([3, 600]))
    with pytest.raises(TypeError, match="positions must be integers"):
        table(torch.tensor([0.5]))


# --- issue 35: vague errors, and tables past MAX_TABLE_BYTES ------------------------------------

def test_unsigned_positions_rotate_like_int64_and_uint64_is_named():
    """uint16 positions (NumPy's, or torch's) failed with '"abs_cpu" not implemented for
    UInt16'; they are exact in int64. uint64 cannot be computed with: a clear refusal."""
    import numpy as np

    x = torch.randn(2, 5, 8, dtype=torch.float64)
    expected = rl.apply_rope(x, torch.arange(5) * 300)
    for positions in (np.arange(5, dtype=np.uint16) * 300,
                      *(torch.arange(5).to(dtype) * 300 for dtype in
                        (getattr(torch, name, None) for name in ("uint16", "uint32")) if dtype)):
        assert torch.equal(rl.apply_rope(x, positions), expected)
    with pytest.raises(TypeError, match=r"positions have dtype torch.uint64, which torch cannot "
                                        r"compute with; expected int64 positions"):
        rl.apply_rope(x, np.arange(5, dtype=np.uint64))


def test_a_numpy_base_is_a_number_and_a_huge_int_is_named():
    import numpy as np

    assert torch.equal(rl.inv_freq(16, np.float32(5e5)), rl.inv_freq(16, 500000.0))
    assert torch.equal(rl.inv_freq(16, np.int64(10000)), rl.inv_freq(16, 10000))
    with pytest.raises(ValueError, match=r"base must be a finite number greater than 0 and "
                                         r"below 1.8e\+308 \(float64's largest\), got an int of "
                                         r"401 digits"):
        rl.inv_freq(16, 10**400)  # OverflowError: int too large to convert to float
    with pytest.raises(TypeError, match=r"base must be a number, got (np\.)?True"):
        rl.inv_freq(16, np.True_)


@pytest.mark.parametrize(("build", "expected"), [
    (lambda: rl.sinusoidal_pe(10**8, 128), "sinusoidal_pe: length=100000000 × dim=128 needs"),
    (lambda: absolute.binary_pe(10**8, 64), "binary_pe: length=100000000 × dim=64 needs"),
    (lambda: absolute.integer_pe(10**9, 8), "integer_pe: length=1000000000 × dim=8 needs"),
    (lambda: absolute.sin_only_pe(10**8, 64), "sin_only_pe: length=100000000"),
    (lambda: absolute.LearnedPositionalEmbedding(10**9, 768),
     "LearnedPositionalEmbedding: max_len=1000000000 × dim=768"),
    (lambda: nd.grid_positions(10**5, 10**5), "grid_positions: height=100000 × width=100000"),
    (lambda: nd.mrope_positions(0, (10**4, 10**3, 10**3)),
     "mrope_positions: text_before=0 + grid_thw=(10000, 1000, 1000) + text_after=0 = "
     "10000000000 tokens needs"),
    (lambda: alibi.alibi_bias(10**5, 8), "alibi_bias: n_heads=8 × seq_len²=100000²"),
    (lambda: alibi.alibi_slopes(10**9), "alibi_slopes: n_heads=1000000000"),
    (lambda: causal_mask(10**6), "causal_mask: seq_q=1000000 × seq_k=1000000"),
    (lambda: scaling.fit_random_scores(128, length=10**8), "fit_random_scores: length="),
])
def test_every_table_builder_honours_max_table_bytes(build, expected):
    """Issue 35: sinusoidal_pe(10**8, 128) tried 51 GB; MAX_TABLE_BYTES was skipped in
    sinusoidal_pe, binary_pe, grid_positions, mrope_positions (and the others here)."""
    with pytest.raises(ValueError, match=re.escape(expected) + r".* \(limit 1 GiB, "
                                         r"rope_lab\._validate\.MAX_TABLE_BYTES\)"):
        build()
