"""ALiBi slopes (against the paper's worked values and BLOOM's code in transformers) and bias."""

import pytest
import torch

from rope_lab import alibi

pytest.importorskip("transformers")
from hf_compat import bloom_alibi_slopes  # noqa: E402


def test_eight_heads_are_the_papers_one_half_to_one_256th():
    expected = torch.tensor([2.0 ** -h for h in range(1, 9)])
    torch.testing.assert_close(alibi.alibi_slopes(8), expected, rtol=0, atol=0)


@pytest.mark.parametrize("n_heads", [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 40, 71, 112])
def test_slopes_match_bloom_including_non_powers_of_two(n_heads):
    theirs = bloom_alibi_slopes(n_heads)
    torch.testing.assert_close(alibi.alibi_slopes(n_heads), theirs, rtol=1e-6, atol=0)


def test_non_power_of_two_interleaves_the_next_power():
    """12 heads: the 8 slopes of 8 heads, then slopes 1, 3, 5, 7 (0-based 0, 2, 4, 6) of 16."""
    twelve, eight, sixteen = (alibi.alibi_slopes(n) for n in (12, 8, 16))
    torch.testing.assert_close(twelve, torch.cat((eight, sixteen[0:8:2])), rtol=0, atol=0)
    assert len(set(twelve.tolist())) == 12 and bool((twelve > 0).all() & (twelve < 1).all())


def test_bias_is_minus_slope_times_distance(device):
    bias = alibi.alibi_bias(6, 4, device=device)
    slopes = alibi.alibi_slopes(4, device=device)
    assert bias.shape == (4, 6, 6) and bias.device.type == device.type
    for m in range(6):
        for n in range(m + 1):
            torch.testing.assert_close(bias[:, m, n], -slopes * (m - n))
    torch.testing.assert_close(bias, bias.transpose(-1, -2))


def test_bias_is_translation_invariant_so_it_extends_to_any_length():
    short, long = alibi.alibi_bias(5, 3), alibi.alibi_bias(50, 3)
    torch.testing.assert_close(long[:, 40:45, 40:45], short)


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: alibi.alibi_slopes(0), ValueError, "n_heads must be a positive integer, got 0"),
    (lambda: alibi.alibi_slopes(2.0), TypeError, "n_heads must be an int"),
    (lambda: alibi.alibi_bias(0, 4), ValueError, "seq_len must be a positive integer, got 0"),
])
def test_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_integer_or_bool_dtypes_are_refused():
    with pytest.raises(TypeError, match="dtype must be a floating-point torch.dtype"):
        alibi.alibi_slopes(8, dtype=torch.int64)
    with pytest.raises(TypeError, match="dtype must be a floating-point torch.dtype"):
        alibi.alibi_bias(3, 2, dtype=torch.bool)
