"""Identities of RoPE, checked in float64 on random inputs (hypothesis)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_lab as rl

settings.register_profile("rope_lab", max_examples=40, deadline=None)
settings.load_profile("rope_lab")

dims = st.integers(1, 16).map(lambda half: 2 * half)
bases = st.sampled_from([1.0, 2.0, 100.0, 10000.0, 5e5, 1e6])
offsets = st.integers(-5000, 5000)
layouts = st.sampled_from(["half", "interleaved"])
seeds = st.integers(0, 2**31 - 1)


def random_vectors(seed, *shape):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64)


def rotate_at(x, position, **kwargs):
    """RoPE of a single vector x (dim,) placed at ``position``."""
    return rl.apply_rope(x[None, :], torch.tensor([position]), **kwargs)[0]


def test_inv_freq_matches_formula():
    dim, base = 64, 10000.0
    expected = torch.tensor([base ** (-2 * i / dim) for i in range(dim // 2)])
    assert rl.inv_freq(dim, base).shape == (dim // 2,)
    torch.testing.assert_close(rl.inv_freq(dim, base, dtype=torch.float64), expected.double())
    assert rl.inv_freq(dim, base).dtype == torch.float32


def test_rope_angles_is_outer_product_in_float32_or_wider():
    freqs = rl.inv_freq(8)
    positions = torch.arange(5)
    angles = rl.rope_angles(positions, freqs)
    assert angles.shape == (5, 4) and angles.dtype == torch.float32
    torch.testing.assert_close(angles, torch.outer(positions.float(), freqs))
    wide = rl.rope_angles(positions.double(), freqs)
    assert wide.dtype == torch.float64
    batched = rl.rope_angles(torch.arange(6).reshape(2, 3), freqs)
    assert batched.shape == (2, 3, 4)


@given(dims, bases, offsets, offsets, offsets, layouts, seeds)
def test_score_depends_only_on_offset(dim, base, m, n, shift, layout, seed):
    q, k = random_vectors(seed, 2, dim)
    score = rotate_at(q, m, base=base, layout=layout) @ rotate_at(k, n, base=base, layout=layout)
    shifted = rotate_at(q, m + shift, base=base, layout=layout) @ rotate_at(
        k, n + shift, base=base, layout=layout
    )
    assert math.isclose(score.item(), shifted.item(), rel_tol=1e-9, abs_tol=1e-9)


@given(dims, bases, offsets, offsets, layouts, seeds)
def test_score_equals_q_R_offset_k(dim, base, m, n, layout, seed):
    q, k = random_vectors(seed, 2, dim)
    score = rotate_at(q, m, base=base, layout=layout) @ rotate_at(k, n, base=base, layout=layout)
    relative = rl.rope_matrix(n - m, dim, base=base, layout=layout, dtype=torch.float64)
    assert math.isclose(score.item(), (q @ relative @ k).item(), rel_tol=1e-9, abs_tol=1e-9)


@given(dims, bases, layouts, seeds)
def test_norms_preserved(dim, base, layout, seed):
    x = random_vectors(seed, 3, 17, dim)
    rotated = rl.apply_rope(x, base=base, layout=layout)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1), rtol=1e-12, atol=1e-12)


@given(dims, bases, offsets, offsets, layouts)
def test_matrix_composition(dim, base, m, n, layout):
    r_m = rl.rope_matrix(m, dim, base=base, layout=layout, dtype=torch.float64)
    r_n = rl.rope_matrix(n, dim, base=base, layout=layout, dtype=torch.float64)
    r_offset = rl.rope_matrix(n - m, dim, base=base, layout=layout, dtype=torch.float64)
    torch.testing.assert_close(r_m.T @ r_n, r_offset, rtol=0, atol=1e-9)
    torch.testing.assert_close(r_m.T @ r_m, torch.eye(dim, dtype=torch.float64), atol=1e-12,
                               rtol=0)


@given(dims, bases, layouts, seeds)
def test_apply_rope_equals_matrix(dim, base, layout, seed):
    x = random_vectors(seed, 9, dim)
    positions = torch.arange(9) * 37 - 50
    expected = torch.einsum(
        "sij,sj->si",
        rl.rope_matrix(positions, dim, base=base, layout=layout, dtype=torch.float64),
        x,
    )
    actual = rl.apply_rope(x, positions, base=base, layout=layout)
    torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-12)


@given(dims, bases, seeds)
def test_layouts_equal_up_to_permutation(dim, base, seed):
    x = random_vectors(seed, 2, 11, dim)
    interleaved = rl.apply_rope(x, base=base, layout="interleaved")
    half = rl.apply_rope(rl.interleaved_to_half(x), base=base, layout="half")
    torch.testing.assert_close(rl.interleaved_to_half(interleaved), half, rtol=0, atol=1e-12)
    torch.testing.assert_close(rl.half_to_interleaved(rl.interleaved_to_half(x)), x)


@given(dims, st.integers(1, 4), bases, seeds)
def test_permuted_weights_give_identical_scores(head_dim, n_heads, base, seed):
    hidden, seq = 12, 7
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randn(seq, hidden, generator=generator, dtype=torch.float64)
    w_q = torch.randn(n_heads * head_dim, hidden, generator=generator, dtype=torch.float64)
    w_k = torch.randn(n_heads * head_dim, hidden, generator=generator, dtype=torch.float64)

    def scores(w_q, w_k, layout):
        q = (tokens @ w_q.T).reshape(seq, n_heads, head_dim).transpose(0, 1)
        k = (tokens @ w_k.T).reshape(seq, n_heads, head_dim).transpose(0, 1)
        q, k = rl.apply_rope(q, base=base, layout=layout), rl.apply_rope(k, base=base,
                                                                         layout=layout)
        return q @ k.transpose(-1, -2)

    original = scores(w_q, w_k, "interleaved")
    converted = scores(
        rl.permute_for_half_layout(w_q, n_heads), rl.permute_for_half_layout(w_k, n_heads), "half"
    )
    torch.testing.assert_close(converted, original, rtol=1e-10, atol=1e-9)


def test_skipping_the_permutation_breaks_scores():
    tokens = torch.randn(16, 32, dtype=torch.float64)
    w_q, w_k = torch.randn(2, 64, 32, dtype=torch.float64)
    q = (tokens @ w_q.T).reshape(16, 2, 32).transpose(0, 1)
    k = (tokens @ w_k.T).reshape(16, 2, 32).transpose(0, 1)
    original = rl.apply_rope(q, layout="interleaved") @ rl.apply_rope(
        k, layout="interleaved"
    ).transpose(-1, -2)
    unpermuted = rl.apply_rope(q, layout="half") @ rl.apply_rope(k, layout="half").transpose(-1, -2)
    assert (unpermuted - original).abs().max() > 1.0


def test_permute_for_half_layout_bias_and_shape():
    bias = torch.arange(8.0)
    assert rl.permute_for_half_layout(bias, 2).tolist() == [0, 2, 1, 3, 4, 6, 5, 7]
    weight = torch.randn(8, 3)
    assert rl.permute_for_half_layout(weight, 1).shape == (8, 3)


@given(dims, st.integers(1, 8), layouts, seeds)
def test_partial_rotary_leaves_tail_untouched(rotary_half, tail, layout, seed):
    rotary_dim = rotary_half
    x = random_vectors(seed, 5, rotary_dim + 2 * tail)
    out = rl.apply_rope(x, rotary_dim=rotary_dim, layout=layout)
    assert torch.equal(out[..., rotary_dim:], x[..., rotary_dim:])
    torch.testing.assert_close(
        out[..., :rotary_dim], rl.apply_rope(x[..., :rotary_dim], layout=layout)
    )


@given(dims, layouts, seeds, st.floats(0.01, 100.0))
def test_float_positions_interpolate(dim, layout, seed, scale):
    """Position m/scale with base θ equals inv_freq scaled by 1/scale (linear interpolation)."""
    x = random_vectors(seed, 6, dim)
    positions = torch.arange(6, dtype=torch.float64) / scale
    by_positions = rl.apply_rope(x, positions, layout=layout)
    freqs = rl.inv_freq(dim, dtype=torch.float64) / scale
    by_frequencies = rl.apply_rope(x, inv_freq=freqs, layout=layout)
    torch.testing.assert_close(by_positions, by_frequencies, rtol=1e-10, atol=1e-10)


def test_default_positions_are_arange():
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(rl.apply_rope(x), rl.apply_rope(x, torch.arange(5)))
    torch.testing.assert_close(rl.apply_rope(x), rl.apply_rope(x, [0, 1, 2, 3, 4]))


def test_positions_broadcast_per_batch():
    x = torch.randn(2, 3, 4, 8, dtype=torch.float64)  # batch, heads, seq, dim
    positions = torch.tensor([[0, 1, 2, 3], [10, 11, 12, 13]])[:, None, :]  # (batch, 1, seq)
    out = rl.apply_rope(x, positions)
    torch.testing.assert_close(out[1], rl.apply_rope(x[1], torch.arange(10, 14)))


def test_output_keeps_shape_dtype_device(device):
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        x = torch.randn(2, 4, 8, dtype=dtype, device=device)
        out = rl.apply_rope(x)
        assert out.shape == x.shape and out.dtype == dtype and out.device == x.device


@pytest.mark.parametrize("dtype, tolerance", [(torch.bfloat16, 2**-8), (torch.float16, 2**-11)])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_low_precision_close_to_float32(device, dtype, tolerance, layout):
    """Angles are computed in float32, so the only error is rounding x and the result."""
    x = torch.randn(1, 4, 4096, 64, device=device).to(dtype)
    reference = rl.apply_rope(x.float(), layout=layout)
    out = rl.apply_rope(x, layout=layout).float()
    error = (out - reference).abs() / reference.abs().clamp_min(1.0)
    # One rounding of the result (half an ulp) plus float32 noise; rounding the angles to
    # bf16 instead would be off by whole radians at positions in the thousands.
    assert error.max() <= tolerance
    naive_angles = (torch.arange(4096, device=device).to(dtype)[:, None]
                    * rl.inv_freq(64, device=device).to(dtype)).float()
    exact_angles = rl.rope_angles(torch.arange(4096, device=device), rl.inv_freq(64,
                                                                                device=device))
    assert (naive_angles - exact_angles).abs().max() > 0.5  # what we avoided


def test_rope_matrix_layouts_and_batch():
    m = rl.rope_matrix(3, 4, layout="interleaved", dtype=torch.float64)
    c, s = math.cos(3.0), math.sin(3.0)
    torch.testing.assert_close(m[:2, :2], torch.tensor([[c, -s], [s, c]], dtype=torch.float64))
    assert m[0, 2] == 0 and m[2, 0] == 0
    half = rl.rope_matrix(3, 4, layout="half", dtype=torch.float64)
    assert half[0, 2] == pytest.approx(-s) and half[2, 0] == pytest.approx(s)
    assert rl.rope_matrix(torch.arange(5).reshape(5, 1), 6).shape == (5, 1, 6, 6)


def test_rope_pairs():
    first, second = rl.rope_pairs(8, "half")
    assert first.tolist() == [0, 1, 2, 3] and second.tolist() == [4, 5, 6, 7]
    first, second = rl.rope_pairs(8, "interleaved")
    assert first.tolist() == [0, 2, 4, 6] and second.tolist() == [1, 3, 5, 7]


class TestRotaryEmbedding:
    @pytest.mark.parametrize("layout", ["half", "interleaved"])
    def test_matches_apply_rope(self, device, layout):
        module = rl.RotaryEmbedding(16, base=500.0, layout=layout).to(device)
        q, k = torch.randn(2, 2, 3, 10, 16, device=device)
        q_rot, k_rot = module(q, k)
        torch.testing.assert_close(q_rot, rl.apply_rope(q, base=500.0, layout=layout))
        torch.testing.assert_close(k_rot, rl.apply_rope(k, base=500.0, layout=layout))

    def test_cache_is_float32_and_positions_past_it_are_computed(self):
        module = rl.RotaryEmbedding(8, max_seq_len=4)
        assert module.cos_cached.shape == (4, 4) and module.cos_cached.dtype == torch.float32
        q = torch.randn(1, 6, 8, dtype=torch.bfloat16)
        positions = torch.tensor([0, 2, 3, 4, 9, 100])
        q_rot, _ = module(q, q, positions)
        torch.testing.assert_close(q_rot, rl.apply_rope(q, positions))

    def test_float_and_float64_positions(self):
        module = rl.RotaryEmbedding(8)
        q = torch.randn(5, 8, dtype=torch.float64)
        positions = torch.linspace(0, 2, 5, dtype=torch.float64)
        q_rot, k_rot = module(q, q, positions)
        torch.testing.assert_close(q_rot, rl.apply_rope(q, positions), rtol=1e-13, atol=1e-13)

    def test_partial_rotary(self):
        module = rl.RotaryEmbedding(4)
        q = torch.randn(3, 10)
        q_rot, _ = module(q, q)
        torch.testing.assert_close(q_rot, rl.apply_rope(q, rotary_dim=4))

    def test_no_persistent_state_in_state_dict(self):
        assert rl.RotaryEmbedding(8, max_seq_len=16).state_dict() == {}


def test_python_float_positions_keep_double_precision():
    matrix = rl.rope_matrix(math.pi / 4, 2, dtype=torch.float64)
    assert abs(matrix[0, 0].item() - math.cos(math.pi / 4)) < 1e-15


def test_module_casts_keep_float32_frequencies_and_cache():
    module = rl.RotaryEmbedding(16, max_seq_len=64).half()
    assert module.inv_freq.dtype == torch.float32 and module.cos_cached.dtype == torch.float32
    q = torch.randn(1, 4096, 16).half()
    torch.testing.assert_close(module(q, q)[0], rl.apply_rope(q))
    with pytest.raises(TypeError, match="inv_freq must be float32 or float64"):
        rl.apply_rope(q, inv_freq=rl.inv_freq(16).half())


def test_rotary_embedding_does_not_cache_one_far_position():
    module = rl.RotaryEmbedding(8)
    q = torch.randn(1, 1, 8)
    out, _ = module(q, q, torch.tensor([1_000_000]))
    assert module.cos_cached.shape[0] < 1_000_000
    torch.testing.assert_close(out, rl.apply_rope(q, torch.tensor([1_000_000])))
    long_q = torch.randn(1, 300, 8)  # default positions: the cache grows to the length
    torch.testing.assert_close(module(long_q, long_q)[0], rl.apply_rope(long_q))
    assert module.cos_cached.shape[0] == 300


def test_rotary_embedding_follows_frequencies_set_by_hand():
    module = rl.RotaryEmbedding(8)
    q = torch.randn(1, 5, 8)
    module(q, q)
    scaled = rl.inv_freq(8) / 4  # position interpolation by 4, written into the buffer
    module.inv_freq.copy_(scaled)
    torch.testing.assert_close(module(q, q)[0], rl.apply_rope(q, inv_freq=scaled))
    module.inv_freq = rl.inv_freq(8, base=100.0)  # or replaced, as HF's dynamic update does
    torch.testing.assert_close(module(q, q)[0], rl.apply_rope(q, base=100.0))
    q64 = q.double()
    torch.testing.assert_close(module(q64, q64)[0], rl.apply_rope(q64, base=100.0))
