"""Identities of RoPE, checked in float64 on random inputs (hypothesis)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_lab as rl
from rope_lab import _angles, _ckernel, rope

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


@pytest.mark.parametrize("dtype, half_ulp", [(torch.bfloat16, 2**-8), (torch.float16, 2**-11)])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_low_precision_close_to_float32(device, dtype, half_ulp, layout):
    """Angles are computed in float32, so the only error is rounding the result once.

    The bound, per output element v = a·c − b·s (or a·s + b·c) of a pair (a, b):
    |out − ref| ≤ half_ulp·|ref| + 2^-21·(|a| + |b|). The first term is the one rounding to
    the 16-bit dtype (half an ulp is at most 2^-8 of the value in bfloat16, 2^-11 in
    float16). The second is the float32 computation itself, which need not be the same for
    the float32 reference and the 16-bit call: each rounds a·c, b·s and their difference
    (≤ 1.5·2^-24·(|a| + |b|) with |c|, |s| ≤ 1), or contracts one product into an FMA (one
    rounding fewer, as Triton does on a GPU). So the two float32 values may differ by up to
    2^-22·(|a| + |b|), and a value near a rounding boundary then rounds the other way. That
    difference is absolute, not relative to v: under cancellation (a·c ≈ b·s) v is tiny and
    a bound relative to v alone fails. Measured on an H200: Triton's bfloat16 results differ
    from "the float32 formula rounded once" in 0.001–0.002 % of elements, which an FMA in
    a·c − b·s, emulated exactly in float64, reproduces (scripts/gpu_check.py records it).
    """
    x = torch.randn(1, 4, 4096, 64, device=device).to(dtype)
    reference = rl.apply_rope(x.float(), layout=layout)
    out = rl.apply_rope(x, layout=layout).float()
    a, b = (x[..., :32], x[..., 32:]) if layout == "half" else (x[..., 0::2], x[..., 1::2])
    pair = a.float().abs() + b.float().abs()
    pair = torch.cat((pair, pair), -1) if layout == "half" else pair.repeat_interleave(2, -1)
    excess = (out - reference).abs() - half_ulp * reference.abs()
    assert (excess <= 2**-21 * pair).all(), float((excess / pair).max())
    # the old, relative-only form of the test holds too, up to the float32 term
    error = (out - reference).abs() / reference.abs().clamp_min(1.0)
    assert error.max() <= half_ulp * (1 + 2**-12)
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
    long_q = torch.randn(32, 300, 8)  # default positions: the cache grows to the length
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


# --- the angles: what "exact" means (issue 26 item 2, issue 28) ---------------------------

def rotation_in_float64(x, positions, theta):
    """The half-layout rotation in float64 by exact m times the given θ_i: plain float64
    maths, independent of the package."""
    angles = positions.double()[..., None] * theta.double()
    a, b = x.double().chunk(2, dim=-1)
    return torch.cat((a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()),
                     -1)


@pytest.mark.parametrize("backend", ["auto", "reference", "eager", "c"])
def test_integer_positions_past_2_to_the_24_are_exact(backend):
    """m exact and θ_i float32: at 2^24 + 1, 2^25 + 3 … the rotation is the float64 one to a
    few 1e-7, where float32 arithmetic (transformers') is off by radians."""
    if backend == "c" and not _ckernel.available():
        pytest.skip(_ckernel.status())
    positions = torch.tensor([2**24, 2**24 + 1, 2**25 + 3, 2**28 - 7, 2**31 - 1, -(2**24 + 5)])
    x = torch.randn(3, 6, 64)  # 1152 numbers: the one-call C path for "c" and "auto"
    theta = rl.inv_freq(64)
    expected = rotation_in_float64(x, positions, theta)
    got = rl.apply_rope(x, positions, backend=backend)
    assert (got.double() - expected).abs().max() < 2e-6
    big = torch.randn(64, 6, 64)  # past the one-call size: tables
    got = rl.apply_rope(big, positions, backend=backend)
    assert (got.double() - rotation_in_float64(big, positions, theta)).abs().max() < 2e-6
    float32_angles = (positions.float()[:, None] * theta).double()
    exact_angles = positions.double()[:, None] * theta.double()
    assert (float32_angles - exact_angles).abs().max() > 1.0  # what float32 would give


def test_below_2_to_the_24_the_angles_are_transformers_float32_product():
    """Bit for bit: the angle is float32(m)·θ_i in float32, as transformers computes it, and
    its cos and sin are the float32 nearest to the exact values (checked against Python's
    math.cos and math.sin of the same angle, rounded once)."""
    positions = torch.cat((torch.arange(5000), torch.tensor([2**24 - 1, -77, 1_000_003])))
    theta = rl.inv_freq(128, 5e5)
    cos, sin = _angles.cos_sin_table(positions, theta)
    angles = positions.float()[:, None] * theta
    sample = torch.randperm(angles.numel(), generator=torch.Generator().manual_seed(0))[:20000]
    picked = angles.flatten()[sample].tolist()
    assert torch.equal(cos.flatten()[sample], torch.tensor([math.cos(a) for a in picked]))
    assert torch.equal(sin.flatten()[sample], torch.tensor([math.sin(a) for a in picked]))
    x = torch.randn(len(positions), 128)
    assert torch.equal(rl.apply_rope(x, positions, base=5e5, backend="reference"),
                       rope.rotate_reference(x, cos, sin, "half"))
    assert torch.equal(rl.apply_rope(x, positions, base=5e5), rope.rotate_reference(x, cos, sin,
                                                                                   "half"))


def test_pytorch_float32_cos_is_off_by_an_ulp_about_once_in_twenty():
    """The docstring's "about 5 %": torch's float32 cos and sin (transformers' tables)
    against the correctly rounded ones rope_lab uses, over 4096 positions, d = 128."""
    angles = torch.arange(4096).float()[:, None] * rl.inv_freq(128)
    cos, sin = _angles.cos_sin_of(angles, torch.float32)
    differ = torch.cat(((angles.cos() != cos).flatten(), (angles.sin() != sin).flatten()))
    assert 0.02 < differ.double().mean() < 0.08, float(differ.double().mean())
    ulp = torch.finfo(torch.float32).eps
    assert (angles.cos() - cos).abs().max() <= ulp


@pytest.mark.slow
@pytest.mark.versions
def test_theta_is_correctly_rounded_and_transformers_differs_as_documented():
    """apply_rope's docstring: transformers' float32 θ_i differs from rope_lab's in 19 of 64
    pairs at base 10⁴, d = 128, by one unit in the last place each, and cos/sin over
    positions 0 … 8191 by up to 2.4e-4. rope_lab's θ_i is the float32 nearest to the exact
    value (Python's float arithmetic, rounded once)."""
    exact = torch.tensor([10000.0 ** (-i / 64) for i in range(64)], dtype=torch.float64)
    ours = rl.inv_freq(128)
    assert torch.equal(ours, exact.float())
    theirs = 1.0 / (10000.0 ** (torch.arange(0, 128, 2, dtype=torch.int64).float() / 128))
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama import modeling_llama

    from rope_lab.hf import tiny

    config = transformers.LlamaConfig(hidden_size=128, num_attention_heads=1, head_dim=128,
                                      **tiny.rope_config_kwargs(10000.0))
    hf_theta = modeling_llama.LlamaRotaryEmbedding(config=config).inv_freq
    assert torch.equal(hf_theta, theirs)  # the formula above is transformers' own
    differ = ours != hf_theta
    assert int(differ.sum()) == 19
    one_ulp = torch.nextafter(ours, hf_theta) == hf_theta
    assert one_ulp[differ].all()
    assert float(((hf_theta.double() - ours.double()).abs() / ours.double()).max()) < 1.2e-7
    angles = torch.arange(8192).float()[:, None]
    gap = ((angles * hf_theta).cos() - (angles * ours).cos()).abs().max()
    assert 2.3e-4 < float(gap) <= 2.45e-4


def test_float64_positions_with_float32_x_are_the_float64_rotation_rounded_once():
    """The Returns line of apply_rope: with float64 positions the angles, cos, sin and the
    rotation are float64, and a float32 x gets that result rounded once (it used to round
    cos and sin to float32 first: 39 % of outputs differed)."""
    x = torch.randn(3, 257, 64)
    positions = torch.linspace(0, 3000, 257, dtype=torch.float64)
    for layout in ("half", "interleaved"):
        expected = rl.apply_rope(x.double(), positions, layout=layout).float()
        for backend in ("auto", "reference", "eager"):
            got = rl.apply_rope(x, positions, layout=layout, backend=backend)
            assert got.dtype == torch.float32 and torch.equal(got, expected), backend
    # and that rotation is the float64 formula written out independently
    angles = positions[:, None] * rl.inv_freq(64, dtype=torch.float64)
    a, b = x.double().chunk(2, -1)
    by_hand = torch.cat((a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()),
                        -1)
    torch.testing.assert_close(rl.apply_rope(x.double(), positions), by_hand, rtol=0, atol=1e-12)


def test_float64_positions_or_frequencies_give_float64_theta():
    """Issue 28: float64 positions used to widen the angles with θ_i still float32 (0.70 rad
    off at 2^24 + 1). A float64 dtype now means θ_i in float64 too."""
    positions = torch.tensor([2.0**24 + 1, 3.0, 2.0**25 + 7], dtype=torch.float64)
    x = torch.randn(3, 64)
    theta64 = rl.inv_freq(64, dtype=torch.float64)
    expected = rotation_in_float64(x, positions, theta64)
    assert (rl.apply_rope(x, positions).double() - expected).abs().max() < 1e-6
    off = rotation_in_float64(x, positions, rl.inv_freq(64))  # θ_i rounded to float32
    assert (off - expected).abs().max() > 0.1
    got = rl.apply_rope(x, positions.long(), inv_freq=theta64)
    assert (got.double() - expected).abs().max() < 1e-6


def test_a_meta_x_gives_a_meta_result_and_a_meta_positions_names_positions():
    x = torch.empty(2, 3, 5, 8, device="meta")
    for positions in (None, torch.arange(5), torch.arange(5, device="meta"),
                      torch.arange(5.0) / 2, torch.arange(10).reshape(2, 1, 5)):
        out = rl.apply_rope(x, positions, layout="interleaved", rotary_dim=4)
        assert out.device.type == "meta" and out.shape == x.shape
    assert rl.apply_rope_(x, torch.arange(5)) is x
    with pytest.raises(ValueError, match="x.shape\\[:-1\\]"):  # shapes are still checked
        rl.apply_rope(x, torch.arange(4))
    with pytest.raises(ValueError, match="positions is a meta tensor"):
        rl.apply_rope(torch.randn(5, 8), torch.arange(5, device="meta"))


class _ValueReads(torch.utils._python_dispatch.TorchDispatchMode):
    """Records the ops that copy a tensor's value to the host (.item(), bool(), int())."""

    def __init__(self):
        super().__init__()
        self.reads = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ in ("_local_scalar_dense", "item", "equal",
                                            "is_nonzero"):
            self.reads.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("backend", ["auto", "reference", "eager"])
def test_integer_positions_are_never_read_on_the_host(layout, backend, monkeypatch):
    """The ops behind a device sync (a value copied to the host) never run for integer
    positions, default positions or per-batch ones, even past 2^24, on the code a GPU runs;
    float positions are checked (one read, documented). On a CPU, where a read costs no
    sync, the tables may ask once whether a position reaches 2^24 (that shortcut is turned
    off here, as on a GPU, and checked for equal results below)."""
    big = torch.arange(5) + 2**24 - 2
    theta = rl.inv_freq(16)
    with_shortcut = [_angles.cos_sin_table(p, theta) for p in (torch.arange(5), big)]
    monkeypatch.setattr(_angles, "any_past_float32_limit", lambda positions: True)
    without = [_angles.cos_sin_table(p, theta) for p in (torch.arange(5), big)]
    for (cos, sin), (cos_, sin_) in zip(with_shortcut, without, strict=True):
        assert torch.equal(cos, cos_) and torch.equal(sin, sin_)
    x = torch.randn(2, 3, 5, 16)
    calls = [lambda: rl.apply_rope(x, layout=layout, backend=backend),
             lambda: rl.apply_rope(x, torch.arange(5) + 2**24 - 2, layout=layout,
                                   backend=backend),
             lambda: rl.apply_rope(x, torch.arange(10).reshape(2, 1, 5), layout=layout,
                                   backend=backend, rotary_dim=8),
             lambda: rl.apply_rope_(x.clone(), torch.arange(5, dtype=torch.int32),
                                    layout=layout, backend=backend),
             lambda: rl.apply_rope(torch.randn(1, 8, 1, 64), torch.tensor([[[37]]]),
                                   layout=layout, backend=backend)]
    for call in calls:
        call()  # first calls fill the caches (θ, tables): those may compute, not read
        with _ValueReads() as mode:
            call()
        assert mode.reads == [], mode.reads
    with _ValueReads() as mode:
        rl.apply_rope(x, torch.arange(5.0) / 2, layout=layout, backend=backend)
    assert mode.reads  # float positions: finite and below 2^24, checked by one read


def _compiled(function, *args, backend="aot_eager"):
    torch._dynamo.reset()
    return torch.compile(function, fullgraph=True, backend=backend)(*args)


@pytest.mark.parametrize("case", ["no ids", "ids", "per-batch ids past 2^24", "interleaved",
                                  "partial rotary", "float ids", "inv_freq", "bfloat16",
                                  "float64", "in place"])
def test_torch_compile_fullgraph_gives_the_eager_result(case):
    """No graph break: no value read, no cache lookup in the traced code. ("aot_eager" traces
    exactly what inductor would get; one inductor case below compiles it for real.)"""
    x = torch.randn(2, 3, 5, 16)
    ids = torch.arange(5) + 7
    per_batch = torch.stack((ids, ids + 2**24))[:, None, :]
    function, args = {
        "no ids": (lambda x: rl.apply_rope(x), (x,)),
        "ids": (lambda x, p: rl.apply_rope(x, p), (x, ids)),
        "per-batch ids past 2^24": (lambda x, p: rl.apply_rope(x, p), (x, per_batch)),
        "interleaved": (lambda x, p: rl.apply_rope(x, p, layout="interleaved"), (x, per_batch)),
        "partial rotary": (lambda x, p: rl.apply_rope(x, p, rotary_dim=8), (x, per_batch)),
        "float ids": (lambda x, p: rl.apply_rope(x, p), (x, ids / 4)),
        "inv_freq": (lambda x, p, f: rl.apply_rope(x, p, inv_freq=f),
                     (x, per_batch, rl.inv_freq(16) / 4)),
        "bfloat16": (lambda x, p: rl.apply_rope(x, p), (x.bfloat16(), per_batch)),
        "float64": (lambda x, p: rl.apply_rope(x, p), (x.double(), per_batch)),
        "in place": (lambda x, p: rl.apply_rope_(x.clone(), p), (x, per_batch)),
    }[case]
    got = _compiled(function, *args)
    expected = function(*args)
    tolerance = {torch.bfloat16: 2**-7, torch.float64: 1e-12}.get(got.dtype, 1e-6)
    torch.testing.assert_close(got, expected, rtol=tolerance, atol=tolerance)


@pytest.mark.slow
def test_torch_compile_inductor_with_position_ids():
    """One real compile (C++ on a CPU): apply_rope with per-batch ids past 2^24."""
    x = torch.randn(2, 3, 5, 16)
    positions = torch.tensor([[3, 4, 5, 6, 7], [2**24 + 1, 9, 10, 11, 12]])[:, None, :]
    got = _compiled(lambda x, p: rl.apply_rope(x, p), x, positions, backend="inductor")
    torch.testing.assert_close(got, rl.apply_rope(x, positions), rtol=1e-6, atol=1e-6)


# --- tables in: apply_rope(x, cos=..., sin=...) (issue 38 item 3) ----------------------------

def _pair_tables(positions, dim, dtype=torch.float64, base=10_000.0):
    """cos and sin per pair, (..., seq, dim/2), from plain float64 maths."""
    theta = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = positions.double()[..., None] * theta
    return angles.cos().to(dtype), angles.sin().to(dtype)


def _duplicated(table, layout):
    """transformers' convention: one value per feature, in the layout's pairing."""
    if layout == "half":
        return torch.cat((table, table), -1)
    return table.repeat_interleave(2, -1)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("backend", ["auto", "reference", "eager", "c", "complex"])
def test_tables_in_either_convention_equal_the_dense_rotation(layout, backend):
    from dense_oracle import dense_rope  # tests/dense_oracle.py: shares no code with rope_lab

    if backend == "c" and not _ckernel.available():
        pytest.skip(_ckernel.status())
    if backend == "complex" and layout == "half":
        return
    x = torch.randn(2, 3, 7, 16, dtype=torch.float64)
    expected = dense_rope(x, layout)
    cos, sin = _pair_tables(torch.arange(7), 16)
    for tables in ((cos, sin), (_duplicated(cos, layout), _duplicated(sin, layout))):
        got = rl.apply_rope(x, cos=tables[0], sin=tables[1], layout=layout, backend=backend)
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
        y = x.clone()
        assert rl.apply_rope_(y, cos=tables[0], sin=tables[1], layout=layout,
                              backend=backend) is y
        torch.testing.assert_close(y, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_tables_broadcast_over_batch_and_heads_and_carry_the_attention_factor(layout):
    """Per-batch tables (batch, 1, seq, ·) against (batch, heads, seq, dim) x; a factor in
    the tables scales the output (YaRN's mscale as transformers folds it into cos and sin);
    float32 tables give the float32 rotation by exactly those values."""
    positions = torch.tensor([[0, 1, 2, 3, 4], [7, 9, 2**20, 30, 31]])
    x = torch.randn(2, 3, 5, 8)
    cos, sin = _pair_tables(positions, 8, torch.float32)
    factor = 1.3
    for per_pair in (True, False):
        c = cos if per_pair else _duplicated(cos, layout)
        s = sin if per_pair else _duplicated(sin, layout)
        got = rl.apply_rope(x, cos=factor * c[:, None], sin=factor * s[:, None], layout=layout)
        by_positions = rl.apply_rope(x.double(), positions[:, None], layout=layout)
        torch.testing.assert_close(got.double(), factor * by_positions, rtol=0, atol=1e-5)
        reference = rope.rotate_reference(x, factor * cos[:, None], factor * sin[:, None],
                                          layout)
        assert torch.equal(got, reference)


def test_tables_for_partial_rotary_and_16_bit_tables():
    """rotary_dim names r when the tables cover only part of the head; bfloat16 tables (what
    transformers returns for a bfloat16 model) are widened exactly and the rotation is done
    in float32, rounded once."""
    x = torch.randn(4, 6, 12)
    cos, sin = _pair_tables(torch.arange(6), 4, torch.float32)
    expected = rl.apply_rope(x, rotary_dim=4)
    for c, s in ((cos, sin), (torch.cat((cos, cos), -1), torch.cat((sin, sin), -1))):
        got = rl.apply_rope(x, cos=c, sin=s, rotary_dim=4)
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
        assert torch.equal(got[..., 4:], x[..., 4:])
    low = (cos.bfloat16(), sin.bfloat16())
    got = rl.apply_rope(x.bfloat16(), cos=low[0], sin=low[1], rotary_dim=4)
    wide = rope.rotate_reference(x.bfloat16().float(), low[0].float(), low[1].float(), "half")
    assert torch.equal(got, wide.bfloat16())


def test_gradients_flow_into_tables_and_x():
    x = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=True)
    cos, sin = (t.requires_grad_() for t in _pair_tables(torch.arange(5), 6))
    assert torch.autograd.gradcheck(
        lambda x, c, s: rl.apply_rope(x, cos=c, sin=s, layout="interleaved"), (x, cos, sin))
    plain = _pair_tables(torch.arange(5), 6)  # tables without grad: the fast path's backward
    assert torch.autograd.gradcheck(lambda x: rl.apply_rope(x, cos=plain[0], sin=plain[1]),
                                    (x,))


def test_rotary_embedding_takes_tables():
    module = rl.RotaryEmbedding(8, layout="interleaved")
    q, k = torch.randn(2, 2, 4, 5, 12)
    cos, sin = _pair_tables(torch.arange(5) + 3, 8, torch.float32)
    q_rot, k_rot = module(q, k, cos=_duplicated(cos, "interleaved"),
                          sin=_duplicated(sin, "interleaved"))
    by_positions = module(q, k, torch.arange(5) + 3)
    torch.testing.assert_close(q_rot, by_positions[0], rtol=0, atol=1e-6)
    torch.testing.assert_close(k_rot, by_positions[1], rtol=0, atol=1e-6)


@pytest.mark.parametrize("case, message", [
    ("width", r"cos and sin of shape \(7, 5\) fit neither table convention: expected "
              r"\(\.\.\., seq, 16\), one value per feature, duplicated \(transformers\), or "
              r"\(\.\.\., seq, 8\), one value per pair \(flash-attention, vLLM\)"),
    ("sin shape", r"cos and sin must have the same shape and dtype, got cos \(7, 8\)"),
    ("only cos", "pass both cos and sin tables, got only cos"),
    ("rows", r"cos and sin of shape \(6, 8\) give 6 rows for 7 tokens"),
    ("hf batch", r"cos and sin of shape \(2, 7, 16\) are ambiguous .* need cos\[:, None\]"),
    ("other pairing", r"cos of shape \(7, 16\) reads as transformers' duplicated table .* "
                      r"for layout='interleaved' they are c\.repeat_interleave\(2, -1\)"),
    ("positions too", "pass either cos and sin tables or positions, not both"),
    ("inv_freq too", "pass either cos and sin tables or inv_freq, not both"),
    ("integer table", "cos must be a floating-point tensor"),
])
def test_bad_tables_get_one_error_naming_both_conventions(case, message):
    x = torch.randn(2, 3, 7, 16)
    cos, sin = _pair_tables(torch.arange(7), 16, torch.float32)
    kwargs = {"cos": cos, "sin": sin}
    if case == "width":
        kwargs = {"cos": cos[..., :5], "sin": sin[..., :5]}
    elif case == "sin shape":
        kwargs["sin"] = sin[:6]
    elif case == "only cos":
        kwargs = {"cos": cos}
    elif case == "rows":
        kwargs = {"cos": cos[:6], "sin": sin[:6]}
    elif case == "hf batch":
        kwargs = {"cos": torch.cat((cos, cos), -1).expand(2, 7, 16),
                  "sin": torch.cat((sin, sin), -1).expand(2, 7, 16)}
    elif case == "other pairing":
        kwargs = {"cos": torch.cat((cos, cos), -1), "sin": torch.cat((sin, sin), -1),
                  "layout": "interleaved"}
    elif case == "positions too":
        kwargs["positions"] = torch.arange(7)
    elif case == "inv_freq too":
        kwargs["inv_freq"] = rl.inv_freq(16)
    elif case == "integer table":
        kwargs = {"cos": torch.ones(7, 8, dtype=torch.int64), "sin": sin}
    with pytest.raises((ValueError, TypeError), match=message):
        rl.apply_rope(x, **kwargs)


# --- no silent answer from the core (issue 35, item 4) -------------------------------------

def test_a_non_finite_inv_freq_is_refused_on_every_call():
    """The finite check recorded the tensor as checked before checking it: the first call
    raised, the second returned NaN."""
    f = rl.inv_freq(16)
    f[3] = float("nan")
    x = torch.randn(2, 5, 16)
    for _ in range(3):
        with pytest.raises(ValueError, match="inv_freq must all be finite, found nan"):
            rl.apply_rope(x, inv_freq=f)
    f[3] = 0.5  # mended: accepted (and remembered) …
    rl.apply_rope(x, inv_freq=f)
    f[5] = float("inf")  # … until the next write
    with pytest.raises(ValueError, match="found inf"):
        rl.apply_rope(x, inv_freq=f)


@pytest.mark.parametrize("size", ["decode", "cached", "float64"])
def test_rotary_embedding_follows_writes_through_data(size):
    """emb(q, q); emb.inv_freq.data.mul_(0.5); emb(q, q) returned the old rotation (0.77
    away): a write through .data moves no version counter. Every path now rotates by the
    values in the buffer."""
    shape = {"decode": (1, 8, 3, 16), "cached": (2, 8, 2048, 16),
             "float64": (2, 8, 5, 16)}[size]
    q = torch.randn(shape, dtype=torch.float64 if size == "float64" else torch.float32)
    module = rl.RotaryEmbedding(16)
    module(q, q)
    module.inv_freq.data.mul_(0.5)
    halved = rl.inv_freq(16) * 0.5
    expected = rl.apply_rope(q, inv_freq=halved.to(q.dtype))
    torch.testing.assert_close(module(q, q)[0], expected)
    positions = torch.arange(q.shape[-2]) + 3
    torch.testing.assert_close(module(q, q, positions)[0],
                               rl.apply_rope(q, positions, inv_freq=halved.to(q.dtype)))
    cos, _ = module.cos_sin(positions)
    torch.testing.assert_close(cos, (positions[:, None] * halved).cos())
    module.inv_freq.data[0] = float("nan")  # a bad value written the same way is refused
    with pytest.raises(ValueError, match="inv_freq must all be finite"):
        module(q, q)


def test_rotary_embedding_cos_sin_dtype_does_not_depend_on_the_cache():
    """cos_sin(dtype=float16) returned float32 for cached positions, float16 for others; and
    the cached and computed values are now the same numbers."""
    cached = rl.RotaryEmbedding(16, max_seq_len=32)
    small = rl.RotaryEmbedding(16, max_seq_len=1)  # computes every position past 0
    for positions in (torch.arange(4), torch.tensor([[3, 40, 7]]), torch.tensor([2.5])):
        for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            cos, sin = cached.cos_sin(positions, dtype=dtype)
            assert cos.dtype == sin.dtype == dtype, (positions, dtype)
            other = small.cos_sin(positions, dtype=dtype)
            assert torch.equal(cos, other[0]) and torch.equal(sin, other[1])
    with pytest.raises(TypeError, match="dtype must be a floating-point torch.dtype"):
        cached.cos_sin(torch.arange(3), dtype=torch.int64)


def test_rotary_embedding_with_frequencies_and_attention_factor():
    """A scaled variant as transformers builds it: YaRN's frequencies and its attention
    factor, carried into cos_sin and every forward path."""
    from rope_lab import scaling

    freqs, factor = scaling.yarn_inv_freq(16, factor=4.0, original_max_position=64)
    module = rl.RotaryEmbedding(16, inv_freq=freqs, attention_factor=factor)
    assert module.custom_frequencies and factor > 1
    for q in (torch.randn(1, 4, 3, 16), torch.randn(2, 8, 1024, 16)):
        positions = torch.arange(q.shape[-2]) + 5
        expected = factor * rl.apply_rope(q, positions, inv_freq=freqs)
        torch.testing.assert_close(module(q, q, positions)[0], expected)
        torch.testing.assert_close(module(q, q)[0], factor * rl.apply_rope(q, inv_freq=freqs))
    cos, sin = module.cos_sin(torch.arange(6))
    angles = torch.arange(6)[:, None] * freqs
    torch.testing.assert_close(cos, factor * angles.cos())
    with pytest.raises(ValueError, match="attention_factor must be a finite number greater"):
        rl.RotaryEmbedding(16, attention_factor=float("nan"))
    with pytest.raises(ValueError, match=r"inv_freq must have shape \(8,\)"):
        rl.RotaryEmbedding(16, inv_freq=torch.ones(4))


# --- one way down: the path a call takes (issue 38 item 1) ----------------------------------

def _floors() -> dict:
    """Module → floor (0 the top) from the import contract `make lint` enforces."""
    import pathlib

    import tomllib

    pyproject = pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml"
    contract = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"][0]
    return {f"rope_lab.{name.strip()}": floor for floor, layer in enumerate(contract["layers"])
            for name in layer.split("|")}


def _calls_made_by(function) -> list[tuple[str, str, str]]:
    """(caller's module, callee's module, callee) for every call between rope_lab functions
    while ``function`` runs; the caller is the nearest rope_lab frame up the stack."""
    import sys

    calls = []

    def profile(frame, event, arg):
        if event != "call" or not frame.f_globals.get("__name__", "").startswith("rope_lab"):
            return
        caller = frame.f_back
        while caller is not None and not caller.f_globals.get("__name__", "").startswith(
                "rope_lab"):
            caller = caller.f_back
        if caller is not None:
            calls.append((caller.f_globals["__name__"], frame.f_globals["__name__"],
                          frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        function()
    finally:
        sys.setprofile(None)
    return calls


@pytest.mark.parametrize("case", ["decode ids", "ids", "interleaved ids", "float ids",
                                  "per-batch ids, reference", "ids, eager", "inv_freq",
                                  "tables", "in place", "module"])
def test_positions_entering_apply_rope_only_go_down(case):
    """Followed call by call: from apply_rope down to the dispatcher (fast, entered once),
    the backends and the angle rule, never back up a floor nor back into rope.py (on main:
    8 climbs, 15 re-entries of a file already left)."""
    floors = _floors()
    floor = lambda module: floors[".".join(module.split(".")[:2])]  # noqa: E731
    x = torch.randn(2, 4, 16, 32)
    ids = torch.arange(16) + 5
    call = {
        "decode ids": lambda: rl.apply_rope(x[:1, :, :1], ids[:1]),
        "ids": lambda: rl.apply_rope(x, ids),
        "interleaved ids": lambda: rl.apply_rope(x, ids, layout="interleaved"),
        "float ids": lambda: rl.apply_rope(x, ids / 3),
        "per-batch ids, reference": lambda: rl.apply_rope(x, torch.stack((ids, ids + 2**24))[
            :, None], backend="reference"),
        "ids, eager": lambda: rl.apply_rope(x, ids, backend="eager", rotary_dim=16),
        "inv_freq": lambda: rl.apply_rope(x, ids, inv_freq=rl.inv_freq(32) / 4),
        "tables": lambda: rl.apply_rope(x, cos=torch.ones(16, 16), sin=torch.zeros(16, 16)),
        "in place": lambda: rl.apply_rope_(x.clone(), ids),
        "module": lambda: rl.RotaryEmbedding(32)(x, x, ids),
    }[case]
    call()  # caches filled: the path a model takes on every later call
    calls = _calls_made_by(call)
    assert calls, "nothing traced"
    climbs = [c for c in calls if floor(c[1]) < floor(c[0])]
    assert not climbs, climbs
    into_dispatcher = [c for c in calls if c[0] == "rope_lab.rope" and c[1] == "rope_lab.fast"]
    assert len(into_dispatcher) == (2 if case == "module" and not _ckernel.available() else 1), \
        into_dispatcher
    entered = [c[1] for c in calls]
    first = entered.index("rope_lab.fast")
    assert "rope_lab.rope" not in entered[first:], calls[first:]  # never back into the API
