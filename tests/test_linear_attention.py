"""Linear attention: the O(L) forms equal the explicit O(L²) form; RoPE sits in the numerator."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_lab as rl
from rope_lab import linear_attention as la

settings.register_profile("rope_lab", max_examples=40, deadline=None)
settings.load_profile("rope_lab")

seeds = st.integers(0, 2**31 - 1)
lengths = st.integers(1, 12)
dims = st.integers(1, 6).map(lambda half: 2 * half)
bases = st.sampled_from([1.0, 10.0, 100.0, 10000.0])


def random_qkv(seed, length, dim, value_dim=3, batch=()):
    generator = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, *batch, length, dim, generator=generator, dtype=torch.float64)
    v = torch.randn(*batch, length, value_dim, generator=generator, dtype=torch.float64)
    return q, k, v


def naive(q, k, v, *, causal, rope, base=10000.0):
    """Straight from the formula, one query at a time (float64)."""
    phi_q, phi_k = la.elu_feature_map(q), la.elu_feature_map(k)
    rot_q = rl.apply_rope(phi_q, base=base) if rope else phi_q
    rot_k = rl.apply_rope(phi_k, base=base) if rope else phi_k
    outputs = []
    for m in range(q.shape[-2]):
        keys = range(m + 1) if causal else range(k.shape[-2])
        numerator = sum((rot_q[m] @ rot_k[n]) * v[n] for n in keys)
        denominator = sum(phi_q[m] @ phi_k[n] for n in keys)
        outputs.append(numerator / denominator)
    return torch.stack(outputs)


def test_feature_map_is_elu_plus_one_and_positive():
    x = torch.linspace(-20, 20, 401, dtype=torch.float64)
    phi = la.elu_feature_map(x)
    assert (phi > 0).all()
    torch.testing.assert_close(phi[x > 0], x[x > 0] + 1)
    torch.testing.assert_close(phi[x <= 0], x[x <= 0].exp())


@given(seeds, lengths, dims, st.booleans(), st.booleans(), bases)
def test_linear_form_matches_formula_and_explicit_weights(seed, length, dim, causal, rope, base):
    q, k, v = random_qkv(seed, length, dim)
    fast = la.linear_attention(q, k, v, causal=causal, rope=rope, base=base)
    explicit = la.linear_attention_weights(q, k, causal=causal, rope=rope, base=base) @ v
    torch.testing.assert_close(fast, explicit, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(fast, naive(q, k, v, causal=causal, rope=rope, base=base),
                               rtol=1e-10, atol=1e-10)


def test_causal_output_ignores_the_future():
    q, k, v = random_qkv(1, 10, 4)
    full = la.linear_attention(q, k, v, causal=True, rope=True)
    prefix = la.linear_attention(q[:6], k[:6], v[:6], causal=True, rope=True)
    torch.testing.assert_close(full[:6], prefix, rtol=1e-12, atol=1e-12)


@given(seeds, st.integers(-10_000, 10_000), st.booleans())
def test_rope_output_depends_only_on_relative_positions(seed, shift, causal):
    q, k, v = random_qkv(seed, 7, 6)
    positions = torch.arange(7)
    plain = la.linear_attention(q, k, v, causal=causal, rope=True, positions=positions)
    shifted = la.linear_attention(q, k, v, causal=causal, rope=True, positions=positions + shift)
    torch.testing.assert_close(plain, shifted, rtol=1e-9, atol=1e-9)


def test_rope_changes_the_output():
    q, k, v = random_qkv(2, 8, 4)
    with_rope = la.linear_attention(q, k, v, causal=True, rope=True)
    without = la.linear_attention(q, k, v, causal=True, rope=False)
    assert (with_rope - without).abs().max() > 1e-3


def test_batched_inputs_match_one_by_one():
    q, k, v = random_qkv(3, 5, 4, batch=(2, 3))
    batched = la.linear_attention(q, k, v, causal=True, rope=True)
    for b in range(2):
        for h in range(3):
            single = la.linear_attention(q[b, h], k[b, h], v[b, h], causal=True, rope=True)
            torch.testing.assert_close(batched[b, h], single, rtol=1e-12, atol=1e-12)


def test_rotated_normalizer_goes_negative_in_the_smallest_case():
    zeros = torch.zeros(5, 2, dtype=torch.float64)
    rotated = la.linear_attention_normalizers(zeros, zeros, causal=True, rotated=True)
    expected = [2 * sum(math.cos(j) for j in range(m + 1)) for m in range(5)]
    torch.testing.assert_close(rotated, torch.tensor(expected, dtype=torch.float64))
    assert rotated[-1] < 0
    plain = la.linear_attention_normalizers(zeros, zeros, causal=True, rotated=False)
    torch.testing.assert_close(plain, 2.0 * torch.arange(1, 6, dtype=torch.float64))


@given(seeds, lengths, dims, st.booleans())
def test_unrotated_normalizer_is_positive_and_is_the_denominator(seed, length, dim, causal):
    q, k, _ = random_qkv(seed, length, dim)
    plain = la.linear_attention_normalizers(q, k, causal=causal)
    assert (plain > 0).all()
    phi_q, phi_k = la.elu_feature_map(q), la.elu_feature_map(k)
    scores = phi_q @ phi_k.T
    if causal:
        scores = scores.tril()
    torch.testing.assert_close(plain, scores.sum(-1))


def test_rotated_denominator_weights_sum_to_one():
    q, k, _ = random_qkv(4, 6, 4)
    weights = la.linear_attention_weights(q, k, causal=True, rope=True, rotate_denominator=True)
    torch.testing.assert_close(weights.sum(-1), torch.ones(6, dtype=torch.float64))
    assert (weights.triu(1) == 0).all()


def test_custom_feature_map_is_used():
    q, k, v = random_qkv(5, 4, 4)
    square = lambda x: x.square() + 1e-3
    out = la.linear_attention(q, k, v, feature_map=square)
    scores = square(q) @ square(k).T
    torch.testing.assert_close(out, (scores / scores.sum(-1, keepdim=True)) @ v)


def test_dtype_and_device_follow_input(device):
    q, k, v = (t.float().to(device) for t in random_qkv(6, 5, 4))
    out = la.linear_attention(q, k, v, causal=True, rope=True)
    assert out.dtype == torch.float32 and out.device == q.device


def test_measure_seconds_returns_one_positive_time_per_length():
    threads = torch.get_num_threads()
    seconds = la.measure_seconds([8, 16], dim=4, repeats=1)
    assert set(seconds) == {"softmax", "linear"}
    assert all(len(times) == 2 and all(t > 0 for t in times) for times in seconds.values())
    assert torch.get_num_threads() == threads


X = torch.randn(6, 4)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: la.linear_attention(X, torch.randn(6, 2), X), ValueError,
         r"q and k must have the same feature size, got q.shape\[-1\] = 4 and k.shape\[-1\] = 2"),
        (lambda: la.linear_attention(X, X, torch.randn(5, 4)), ValueError,
         r"k and v must have the same number of positions, got k.shape\[-2\] = 6 and "
         r"v.shape\[-2\] = 5"),
        (lambda: la.linear_attention(torch.randn(5, 4), X, X), ValueError,
         r"q, k and v must have the same number of positions .* got 5, 6 and 6"),
        (lambda: la.linear_attention(X.long(), X, X), TypeError,
         r"q must be a floating-point tensor"),
        (lambda: la.linear_attention(torch.ones(4), X, X), ValueError,
         r"q must have shape \(..., seq, dim\)"),
        (lambda: la.linear_attention(X, X, X, feature_map="elu"), TypeError,
         r"feature_map must be a function, got str"),
        (lambda: la.linear_attention(torch.randn(6, 3), torch.randn(6, 3), X, rope=True),
         ValueError, r"x.shape\[-1\] must be a positive even integer .* got 3"),
        (lambda: la.linear_attention(X, X, X, rope=True, positions=torch.arange(5)), ValueError,
         r"positions of shape \(5,\) give 5 positions for"),
        (lambda: la.linear_attention_weights(X, torch.randn(5, 4)), ValueError,
         r"same number of positions"),
        (lambda: la.measure_seconds([0]), ValueError, r"length must be a positive integer, got 0"),
        (lambda: la.measure_seconds([8], dim=3), ValueError, r"dim must be a positive even"),
        (lambda: la.measure_seconds([8], repeats=0), ValueError, r"repeats must be a positive"),
    ],
)
def test_bad_input_raises_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


@given(seeds, lengths, dims, st.booleans(), bases)
def test_rotated_normalizer_is_the_sum_of_rotated_scores(seed, length, dim, causal, base):
    q, k, _ = random_qkv(seed, length, dim)
    rot_q = rl.apply_rope(la.elu_feature_map(q), base=base)
    rot_k = rl.apply_rope(la.elu_feature_map(k), base=base)
    scores = rot_q @ rot_k.T
    if causal:
        scores = scores.tril()
    rotated = la.linear_attention_normalizers(q, k, causal=causal, rotated=True, base=base)
    torch.testing.assert_close(rotated, scores.sum(-1), rtol=1e-10, atol=1e-10)


def test_float16_sums_do_not_overflow():
    ones = torch.ones(4000, 8, dtype=torch.float16)
    out = la.linear_attention(ones, ones, torch.ones(4000, 3, dtype=torch.float16), causal=True)
    assert out.dtype == torch.float16
    torch.testing.assert_close(out, torch.ones(4000, 3, dtype=torch.float16))


def test_flags_must_be_bools():
    x = torch.randn(5, 4)
    with pytest.raises(TypeError, match="causal must be True or False, got 'no'"):
        la.linear_attention(x, x, x, causal="no")
