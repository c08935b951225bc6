"""RoPE beyond 1D: axial, mixed and M-RoPE tables, the relative property in 2D/3D, and HF."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_lab as rl
from rope_lab import nd

settings.register_profile("rope_lab", max_examples=40, deadline=None)
settings.load_profile("rope_lab")

seeds = st.integers(0, 2**31 - 1)
dims4 = st.integers(1, 6).map(lambda quarter: 4 * quarter)
layouts = st.sampled_from(["half", "interleaved"])
coordinates = st.integers(-500, 500)


def random_tensor(seed, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def score(q, k, p_q, p_k, freqs, layout="half"):
    """⟨R(p_q) q, R(p_k) k⟩ for single vectors q, k (d,) at coordinates p (A,)."""
    rotate = lambda x, p: nd.apply_rope_nd(x[None], torch.tensor([p]), freqs, layout=layout)[0]
    return rotate(q, p_q) @ rotate(k, p_k)


def test_axial_freqs_split_pairs_between_x_and_y():
    table = nd.axial_freqs(16, base=100.0, dtype=torch.float64)
    spectrum = rl.inv_freq(8, 100.0, dtype=torch.float64)
    assert table.shape == (2, 8)
    torch.testing.assert_close(table[0], torch.cat((spectrum, torch.zeros(4, dtype=torch.float64))))
    torch.testing.assert_close(table[1], torch.cat((torch.zeros(4, dtype=torch.float64), spectrum)))


@given(dims4, st.floats(0.0, 2 * math.pi))
def test_mixed_freqs_directions_and_speeds(dim, angle):
    table = nd.mixed_freqs(dim, 10.0, angle, dtype=torch.float64)
    spectrum = rl.inv_freq(dim // 2, 10.0, dtype=torch.float64)
    torch.testing.assert_close(table.norm(dim=0), torch.cat((spectrum, spectrum)))
    quarter = dim // 4
    directions = torch.atan2(table[1], table[0])
    torch.testing.assert_close(directions[:quarter].cos(), torch.full((quarter,), math.cos(angle),
                                                                       dtype=torch.float64))
    # the two groups are perpendicular
    dots = (table[:, :quarter] * table[:, quarter:]).sum(0)
    torch.testing.assert_close(dots, torch.zeros(quarter, dtype=torch.float64))


def test_mixed_freqs_at_angle_zero_is_axial_exactly():
    for dim in (4, 8, 32):
        assert torch.equal(nd.mixed_freqs(dim, 10.0, 0.0), nd.axial_freqs(dim, 10.0))


def test_mrope_freqs_give_each_pair_to_one_axis():
    table = nd.mrope_freqs(16, 10000.0, (2, 3, 3), dtype=torch.float64)
    assert table.shape == (3, 8)
    assert ((table != 0).sum(0) == 1).all()
    assert [(row != 0).sum().item() for row in table] == [2, 3, 3]
    torch.testing.assert_close(table.sum(0), rl.inv_freq(16, 10000.0, dtype=torch.float64))
    # time gets the fastest pairs, width the slowest
    assert table[0].max() == 1.0 and table[2][table[2] > 0].min() == table.sum(0).min()


@given(seeds, dims4, coordinates, coordinates, layouts)
def test_one_axis_is_plain_rope(seed, dim, m, shift, layout):
    x = random_tensor(seed, 3, dim)
    positions = torch.tensor([m, m + shift, m - shift])
    freqs = rl.inv_freq(dim, 500.0, dtype=torch.float64)
    ours = nd.apply_rope_nd(x, positions[:, None], freqs[None], layout=layout)
    torch.testing.assert_close(ours, rl.apply_rope(x, positions, base=500.0, layout=layout),
                               rtol=1e-12, atol=1e-12)


@given(seeds, dims4, st.integers(1, 3), st.lists(coordinates, min_size=9, max_size=9), layouts)
def test_score_depends_only_on_the_offset_for_any_table(seed, dim, axes, numbers, layout):
    q, k = random_tensor(seed, 2, dim)
    freqs = random_tensor(seed + 1, axes, dim // 2)
    p_q, p_k, shift = (numbers[i * 3: i * 3 + axes] for i in range(3))
    plain = score(q, k, p_q, p_k, freqs, layout)
    shifted = score(q, k, [a + s for a, s in zip(p_q, shift, strict=True)],
                    [b + s for b, s in zip(p_k, shift, strict=True)], freqs, layout)
    assert math.isclose(plain.item(), shifted.item(), rel_tol=1e-9, abs_tol=1e-9)
    # and it equals qᵀ R(p_k − p_q) k
    offset = [b - a for a, b in zip(p_q, p_k, strict=True)]
    assert math.isclose(plain.item(), score(q, k, [0] * axes, offset, freqs, layout).item(),
                        rel_tol=1e-9, abs_tol=1e-9)


@given(seeds, dims4)
def test_rotation_keeps_norms(seed, dim):
    x = random_tensor(seed, 12, dim)
    grid = nd.grid_positions(3, 4)
    rotated = nd.apply_rope_nd(x, grid, nd.mixed_freqs(dim, 10.0, 0.7, dtype=torch.float64))
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))


@given(seeds, st.sampled_from([(2, 3, 3), (0, 4, 4), (8, 0, 0), (3, 5, 0)]),
       st.integers(0, 10_000))
def test_mrope_on_text_is_1d_rope_bit_for_bit(seed, section, start):
    x = random_tensor(seed, 2, 5, 16)
    m = torch.arange(start, start + 5)
    ours = nd.apply_rope_nd(x, m[:, None].expand(-1, 3),
                            nd.mrope_freqs(16, 10000.0, section, dtype=torch.float64))
    assert torch.equal(ours, rl.apply_rope(x, m, base=10000.0))


def test_relative_kernel_is_the_score_of_ones():
    freqs = nd.mixed_freqs(8, 10.0, 0.3, dtype=torch.float64)
    grid = nd.grid_positions(4, 5)
    ones = torch.ones(len(grid), 8, dtype=torch.float64)
    scores = (ones[0] * nd.apply_rope_nd(ones, grid, freqs)).sum(-1) / 8
    torch.testing.assert_close(nd.relative_kernel(freqs, grid), scores)
    assert nd.relative_kernel(freqs, [0, 0]) == 1.0


def test_axial_kernel_is_additively_separable_and_mixed_is_not():
    offsets = torch.stack(torch.meshgrid(torch.arange(-5, 6), torch.arange(-5, 6),
                                         indexing="xy"), dim=-1)
    along_x, along_y = offsets.clone(), offsets.clone()
    along_x[..., 1] = 0
    along_y[..., 0] = 0

    def gap(freqs):
        kernel = nd.relative_kernel(freqs, offsets)
        parts = nd.relative_kernel(freqs, along_x) + nd.relative_kernel(freqs, along_y) - 1
        return (kernel - parts).abs().max()

    assert gap(nd.axial_freqs(16, 10.0, dtype=torch.float64)) < 1e-12
    assert gap(nd.mixed_freqs(16, 10.0, math.pi / 4, dtype=torch.float64)) > 0.1


def test_grid_and_raster_positions():
    grid = nd.grid_positions(2, 3)
    assert grid.tolist() == [[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1]]
    assert nd.raster_positions(2, 3)[:, 0].tolist() == list(range(6))


def test_flattened_rope_confuses_row_ends_with_neighbours():
    rows, columns, dim = 4, 5, 8
    q, k = random_tensor(0, 2, dim)
    n = rows * columns
    raster = nd.raster_positions(rows, columns)[:, 0]
    flat = rl.apply_rope(q.expand(n, dim), raster) @ rl.apply_rope(k.expand(n, dim), raster).T
    end_of_row, start_of_next = 1 * columns + columns - 1, 2 * columns
    torch.testing.assert_close(flat[end_of_row, start_of_next], flat[6, 7])
    freqs = nd.axial_freqs(dim, 10000.0, dtype=torch.float64)
    grid = nd.grid_positions(rows, columns)
    axial = nd.apply_rope_nd(q.expand(n, dim), grid, freqs) @ nd.apply_rope_nd(
        k.expand(n, dim), grid, freqs).T
    assert (axial[end_of_row, start_of_next] - axial[6, 7]).abs() > 1e-6


def test_mrope_positions_layout():
    positions = nd.mrope_positions(2, (1, 2, 3), 2)
    assert positions.shape == (10, 3)
    assert positions[:2].tolist() == [[0, 0, 0], [1, 1, 1]]
    assert positions[2:8].tolist() == [[2, 2, 2], [2, 2, 3], [2, 2, 4], [2, 3, 2], [2, 3, 3],
                                       [2, 3, 4]]
    assert positions[8:].tolist() == [[5, 5, 5], [6, 6, 6]]


def test_rope_mixed_module_learns_its_table():
    module = nd.RoPEMixed(8, n_heads=3, angles=torch.tensor([0.0, 1.0, 2.0]))
    torch.testing.assert_close(module.freqs[0].detach(), nd.axial_freqs(8, nd.MIXED_BASE))
    grid = nd.grid_positions(2, 3)
    q, k = torch.randn(2, 2, 3, 6, 8)
    rotated_q, rotated_k = module(q, k, grid)
    assert rotated_q.shape == q.shape and rotated_k.shape == k.shape
    (rotated_q @ rotated_k.transpose(-2, -1)).square().sum().backward()
    assert module.freqs.grad is not None and (module.freqs.grad.abs().sum(dim=(1, 2)) > 0).all()
    head = nd.apply_rope_nd(q[:, 1], grid, module.freqs[1].detach())
    torch.testing.assert_close(rotated_q[:, 1].detach(), head)


def test_dtype_and_device_follow_input(device):
    x = torch.randn(6, 8, device=device, dtype=torch.float16)
    out = nd.apply_rope_nd(x, nd.grid_positions(2, 3, device=device), nd.axial_freqs(8))
    assert out.dtype == torch.float16 and out.device == x.device
    reference = nd.apply_rope_nd(x.double(), nd.grid_positions(2, 3, device=device),
                                 nd.axial_freqs(8, dtype=torch.float64))
    torch.testing.assert_close(out.double(), reference, rtol=1e-3, atol=1e-3)


# --- Hugging Face Qwen2-VL (no weights: a config is enough) ---------------------------------


@pytest.fixture(scope="module")
def hf_compat():
    pytest.importorskip("transformers")
    import hf_compat

    return hf_compat


@pytest.mark.parametrize("section", [(2, 3, 3), (4, 2, 2), (0, 4, 4)])
def test_mrope_matches_hugging_face_qwen2_vl(hf_compat, section):
    heads, dim, theta = 2, 16, 10000.0
    positions = torch.randint(0, 300, (1, 11, 3))
    x = torch.randn(1, heads, 11, dim)
    hf = hf_compat.qwen2_vl_rotate(x, positions.permute(2, 0, 1), theta, section)
    ours = nd.apply_rope_nd(x, positions[:, None], nd.mrope_freqs(dim, theta, section))
    torch.testing.assert_close(ours, hf, rtol=1e-5, atol=1e-5)


def test_interleaved_mrope_deals_the_pairs_out_in_turn():
    """Qwen3-VL: pairs 1, 4, 7, … turn with h, 2, 5, 8, … with w, the rest with t."""
    table = nd.mrope_freqs(16, 10000.0, (4, 2, 2), interleaved=True, dtype=torch.float64)
    owner = [int(table[:, i].nonzero()) for i in range(8)]
    assert owner == [0, 1, 2, 0, 1, 2, 0, 0]
    assert torch.equal(table.sum(0), rl.inv_freq(16, dtype=torch.float64))
    qwen3 = nd.mrope_freqs(128, 5e6, nd.QWEN3_VL_MROPE_SECTION, interleaved=True) != 0
    assert qwen3.sum(1).tolist() == list(nd.QWEN3_VL_MROPE_SECTION)
    with pytest.raises(ValueError, match=r"mrope_section \(2, 3, 3\) cannot be interleaved "
                                         r"over 8 pairs.*\(3, 3, 2\); expected 3·s_h − 1 ≤ 8"):
        nd.mrope_freqs(16, 10000.0, (2, 3, 3), interleaved=True)


@pytest.mark.parametrize("section", [(24, 20, 20), (4, 2, 2), (6, 1, 1)])
def test_interleaved_mrope_matches_hugging_face_qwen3_vl(hf_compat, section):
    heads, dim, theta = 2, 2 * sum(section), 5e6
    positions = torch.randint(0, 300, (1, 11, 3))
    x = torch.randn(1, heads, 11, dim)
    hf, inv = hf_compat.qwen3_vl_rotate(x, positions.permute(2, 0, 1), theta, section)
    # transformers' own θ (its float32 formula), dealt out as rope_lab deals it
    axes = nd.mrope_freqs(dim, theta, section, interleaved=True) != 0
    ours = nd.apply_rope_nd(x, positions[:, None], torch.where(axes, inv, 0.0))
    torch.testing.assert_close(ours, hf, rtol=0, atol=2e-6)
    blocks = nd.mrope_freqs(dim, theta, section) != 0  # Qwen2-VL's blocks differ from it
    assert not torch.allclose(nd.apply_rope_nd(x, positions[:, None],
                                               torch.where(blocks, inv, 0.0)), hf, atol=1e-3)


@pytest.mark.parametrize("section", [(8, 12, 12), (2, 1, 1)])
def test_partial_mrope_matches_hugging_face_glm4v(hf_compat, section):
    """GLM-4.1V: M-RoPE on the first half of each head (rotary_dim), interleaved pairs."""
    heads, rotary_dim, theta = 2, 2 * sum(section), 10000.0
    positions = torch.randint(0, 300, (1, 9, 3))
    x = torch.randn(1, heads, 9, 2 * rotary_dim)
    hf, inv = hf_compat.glm4v_rotate(x, positions.permute(2, 0, 1), theta, section)
    axes = nd.mrope_freqs(rotary_dim, theta, section) != 0
    ours = nd.apply_rope_nd(x, positions[:, None], torch.where(axes, inv, 0.0),
                            layout="interleaved", rotary_dim=rotary_dim)
    torch.testing.assert_close(ours, hf, rtol=0, atol=2e-6)
    assert torch.equal(ours[..., rotary_dim:], x[..., rotary_dim:])


@pytest.mark.parametrize("before, grid_thw, after", [(3, (1, 2, 3), 2), (0, (2, 3, 3), 1),
                                                     (2, (1, 4, 1), 0)])
def test_mrope_positions_match_hugging_face_get_rope_index(hf_compat, before, grid_thw, after):
    hf = hf_compat.qwen2_vl_position_ids(before, grid_thw, after)
    assert hf[:, 0].T.tolist() == nd.mrope_positions(before, grid_thw, after).tolist()


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: nd.axial_freqs(6), ValueError, r"dim must be a multiple of 4 .* got 6"),
        (lambda: nd.axial_freqs(7), ValueError, r"dim must be a positive even integer"),
        (lambda: nd.axial_freqs(8, base=0), ValueError, r"base must be a finite number"),
        (lambda: nd.mixed_freqs(8, angle=math.nan), ValueError,
         r"angle must be a finite number of radians, got nan"),
        (lambda: nd.mixed_freqs(8, angle="45"), ValueError, r"angle must be a finite number"),
        (lambda: nd.mrope_freqs(16, mrope_section=(2, 3, 4)), ValueError,
         r"mrope_section must be three non-negative ints .* summing to dim // 2 = 8, "
         r"got \(2, 3, 4\)"),
        (lambda: nd.mrope_freqs(16, mrope_section=(4, 4)), ValueError, r"mrope_section must"),
        (lambda: nd.mrope_freqs(16, mrope_section=8), ValueError, r"mrope_section must"),
        (lambda: nd.apply_rope_nd(torch.randn(4, 8), torch.zeros(4, 2), torch.ones(2, 3)),
         ValueError,
         r"freqs must be a \(axes, rotary_dim // 2\) = \(A, 4\) tensor, got \(2, 3\)"),
        (lambda: nd.apply_rope_nd(torch.randn(4, 8), torch.zeros(4, 3), torch.ones(2, 4)),
         ValueError, r"positions must have shape \(..., seq, 2\), .* got shape \(4, 3\)"),
        (lambda: nd.apply_rope_nd(torch.randn(4, 8), torch.zeros(5, 2), torch.ones(2, 4)),
         ValueError, r"positions of shape \(5,\) give 5 positions for"),
        (lambda: nd.apply_rope_nd(torch.randn(4, 7), torch.zeros(4, 2), torch.ones(2, 3)),
         ValueError, r"x.shape\[-1\] must be a positive even integer .* got 7"),
        (lambda: nd.apply_rope_nd(torch.ones(4, 8, dtype=torch.long), torch.zeros(4, 2),
                                  torch.ones(2, 4)), TypeError, r"x must be a floating-point"),
        (lambda: nd.grid_positions(0, 3), ValueError, r"height must be a positive integer"),
        (lambda: nd.relative_kernel(torch.ones(2, 4), torch.zeros(3)), ValueError,
         r"offsets must have shape \(..., 2\)"),
        (lambda: nd.mrope_positions(-1, (1, 2, 2)), ValueError,
         r"text_before must be a non-negative int, got -1"),
        (lambda: nd.mrope_positions(1, (1, 0, 2)), ValueError,
         r"grid_thw must be three positive ints \(frames, rows, columns\), got \(1, 0, 2\)"),
        (lambda: nd.mrope_positions(1, (1, 2)), ValueError, r"grid_thw must be three"),
        (lambda: nd.RoPEMixed(6), ValueError, r"dim must be a multiple of 4"),
        (lambda: nd.RoPEMixed(8, n_heads=2, angles=torch.zeros(3)), ValueError,
         r"angles must have shape \(n_heads,\) = \(2,\), got \(3,\)"),
        (lambda: nd.RoPEMixed(8, n_heads=2)(torch.randn(3, 4, 8), torch.randn(3, 4, 8),
                                            torch.zeros(4, 2)), ValueError,
         r"q must have shape \(..., n_heads=2, seq, dim=8\), got \(3, 4, 8\)"),
    ],
)
def test_bad_input_raises_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()
