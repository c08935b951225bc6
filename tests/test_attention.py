"""attention(): matches torch's SDPA; order-blind without position information."""

import math

import pytest
import torch
import torch.nn.functional as F

import rope_lab as rl


def test_matches_torch_sdpa():
    q, k, v = torch.randn(3, 2, 4, 9, 16, dtype=torch.float64)
    torch.testing.assert_close(rl.attention(q, k, v), F.scaled_dot_product_attention(q, k, v))
    causal = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(rl.attention(q, k, v, mask="causal"), causal)
    mask = torch.rand(9, 9) > 0.3
    mask.fill_diagonal_(True)
    torch.testing.assert_close(
        rl.attention(q, k, v, mask=mask), F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    )


def test_weights_rows_sum_to_one_and_causal_is_lower_triangular():
    q, k, v = torch.randn(3, 6, 8)
    _, weights = rl.attention(q, k, v, mask="causal", return_weights=True)
    torch.testing.assert_close(weights.sum(-1), torch.ones(6))
    assert torch.equal(weights.triu(1), torch.zeros(6, 6))


def test_permutation_equivariance_without_positions():
    q, k, v = torch.randn(3, 7, 8, dtype=torch.float64)
    perm = torch.randperm(7)
    out = rl.attention(q, k, v)
    torch.testing.assert_close(rl.attention(q[perm], k, v), out[perm])  # equivariant in q
    torch.testing.assert_close(rl.attention(q, k[perm], v[perm]), out)  # invariant in (k, v)


def test_causal_mask_with_cache_offset():
    assert rl.causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]


def test_masks_that_would_give_nan_are_refused():
    q = torch.randn(4, 8)
    blocked_row = torch.zeros(4, 4)
    blocked_row[3] = -math.inf
    with pytest.raises(ValueError, match="mask blocks every key for some query"):
        rl.attention(q, q, q, mask=blocked_row)
    with pytest.raises(ValueError, match="mask contains NaN"):
        rl.attention(q, q, q, mask=torch.full((4, 4), float("nan")))
    with pytest.raises(TypeError, match="seq_q must be an int, got 3.5"):
        rl.causal_mask(3.5)
    with pytest.raises(ValueError, match="seq_k must be a positive integer, got -1"):
        rl.causal_mask(3, -1)
