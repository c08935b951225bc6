"""Bad input: one clear error naming the parameter, the value and what was expected."""

import math

import pytest
import torch

import rope_lab as rl

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
