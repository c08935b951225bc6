"""decay.py: score curves, the Abel bound, expected scores and the minimum base."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_lab as rl
from rope_lab import decay

dims = st.sampled_from([2, 4, 8, 16, 64])
bases = st.floats(min_value=1.0, max_value=1e6)
layouts = st.sampled_from(["half", "interleaved"])


def _vector(seed: int, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed),
                       dtype=torch.float64)


@settings(max_examples=30, deadline=None)
@given(dim=dims, base=bases, layout=layouts, seed=st.integers(0, 2**31))
def test_score_curve_is_q_transpose_r_delta_k(dim, base, layout, seed):
    q, k = _vector(seed, dim), _vector(seed + 1, dim)
    distances = torch.tensor([0, 1, 7, 300])
    expected = torch.stack([
        q @ rl.rope_matrix(delta, dim, base=base, layout=layout, dtype=torch.float64) @ k
        for delta in distances
    ])
    actual = decay.score_curve(q, k, distances, base=base, layout=layout)
    torch.testing.assert_close(actual, expected, atol=1e-9, rtol=1e-9)


def test_score_curve_only_sees_the_offset():
    q, k = _vector(0, 32), _vector(1, 32)
    m, delta = 37, torch.arange(50)
    rotated_q = rl.apply_rope(q[None], [m])
    rotated_k = rl.apply_rope(k.expand(50, 32), m + delta)
    shifted = (rotated_q * rotated_k).sum(-1)
    torch.testing.assert_close(decay.score_curve(q, k, delta), shifted, atol=1e-9, rtol=0)


def test_score_curve_batches_and_dtypes():
    q = torch.ones(3, 1, 8, dtype=torch.float32)
    k = torch.ones(4, 8, dtype=torch.float64)
    out = decay.score_curve(q, k, range(5))
    assert out.shape == (3, 4, 5) and out.dtype == torch.float64


@settings(max_examples=30, deadline=None)
@given(dim=dims, base=bases, layout=layouts)
def test_all_ones_gives_twice_the_cos_sum(dim, base, layout):
    ones = torch.ones(dim, dtype=torch.float64)
    distances = torch.arange(0, 2000, 37)
    torch.testing.assert_close(
        decay.score_curve(ones, ones, distances, base=base, layout=layout),
        2 * decay.cos_sum(distances, dim, base=base), atol=1e-9, rtol=1e-9)


@settings(max_examples=30, deadline=None)
@given(dim=dims, base=bases, seed=st.integers(0, 2**31))
def test_cos_sum_is_exact_for_q_equal_k_with_unit_pairs(dim, base, seed):
    q = _vector(seed, dim)
    first, second = rl.rope_pairs(dim, "half")
    norms = torch.sqrt(q[first] ** 2 + q[second] ** 2)
    q = q / torch.cat((norms, norms))  # every pair now has length 1
    distances = torch.arange(0, 3000, 101)
    torch.testing.assert_close(decay.score_curve(q, q, distances, base=base),
                               decay.cos_sum(distances, dim, base=base), atol=1e-9, rtol=0)


@pytest.mark.parametrize("distance", [500, 1500])
def test_cos_sum_is_not_a_bound_for_other_keys(distance):
    dim = 64
    q = torch.full((dim,), 2**-0.5, dtype=torch.float64)  # unit pairs
    k = rl.apply_rope(q[None], [-distance])[0]  # unit pairs too: rotation keeps lengths
    score = decay.score_curve(q, k, [distance])[0]
    assert score == pytest.approx(dim / 2)
    assert score > decay.cos_sum([distance], dim)[0] + 10


@settings(max_examples=40, deadline=None)
@given(dim=dims, base=bases, layout=layouts, seed=st.integers(0, 2**31))
def test_abel_bound_holds(dim, base, layout, seed):
    q, k = _vector(seed, 3, dim), _vector(seed + 1, 3, dim)
    distances = torch.arange(0, 4000, 13)
    score = decay.score_curve(q, k, distances, base=base, layout=layout)
    bound = decay.abel_bound(q, k, distances, base=base, layout=layout)
    assert bound.shape == score.shape
    assert bool((score.abs() <= bound * (1 + 1e-12) + 1e-12).all())


def test_abel_curve_values():
    dim = 128
    curve = decay.abel_curve(torch.arange(0, 300), dim)
    assert curve[0] == pytest.approx((dim / 2 + 1) / 2)  # |S_j| = j at Δ = 0
    assert bool((curve <= curve[0] + 1e-12).all())
    assert float(curve[200:].max()) < 0.5 * float(curve[0])  # the RoFormer figure's decay
    # Direct evaluation of (1/(d/2)) Σ_j |Σ_{i<j} e^{iΔθ_i}| at one distance.
    theta = rl.inv_freq(dim, dtype=torch.float64)
    phases = torch.polar(torch.ones(dim // 2, dtype=torch.float64), 57 * theta)
    direct = sum(abs(complex(phases[:j].sum())) for j in range(1, dim // 2 + 1)) / (dim / 2)
    assert float(curve[57]) == pytest.approx(direct, rel=1e-12)


@pytest.mark.parametrize("mode", decay.MODES)
def test_expected_score_and_std_match_monte_carlo(mode):
    dim, draws = 16, 40_000
    distances = torch.tensor([0, 1, 3, 10, 100])
    generator = torch.Generator().manual_seed(5)
    q, k = decay.sample_qk(dim, mode=mode, noise=0.5, samples=draws, generator=generator)
    scores = decay.score_curve(q, k, distances, base=100.0)
    mean = decay.expected_score(distances, dim, base=100.0, mode=mode, noise=0.5)
    std = decay.score_std(distances, dim, base=100.0, mode=mode, noise=0.5)
    # Sample mean within 5 standard errors; sample std within 3 %.
    torch.testing.assert_close(scores.mean(0), mean, atol=float(5 * std.max() / draws**0.5) + 1e-9,
                               rtol=0)
    torch.testing.assert_close(scores.std(0), std, atol=1e-9, rtol=0.03)


def test_expected_scores_have_the_claimed_shapes():
    distances = torch.arange(0, 200)
    assert bool((decay.expected_score(distances, 64, mode="random") == 0).all())
    correlated = decay.expected_score(distances, 64, mode="correlated")
    torch.testing.assert_close(correlated, 2 * decay.cos_sum(distances, 64))
    assert float(decay.score_std(distances, 64, mode="random")[0]) == pytest.approx(8.0)


# --- the base criterion ----------------------------------------------------------------

# Lower bounds for d = 128 as quoted from Men et al. 2024 by kexue.fm post 10122. They were
# not re-checked against the paper's own table (not reachable here), so notebook 05 shows
# only the computed values; rel=0.10 below covers rounding to two digits.
PUBLISHED = {1024: 4.3e3, 4096: 2.7e4, 8192: 8.4e4, 32768: 6.3e5}


@pytest.mark.parametrize("length", sorted(PUBLISHED))
def test_minimum_base_reproduces_the_published_table(length):
    base = decay.minimum_base(length, dim=128)
    assert base == pytest.approx(PUBLISHED[length], rel=0.10)
    assert decay.satisfies_base_criterion(base, length, 128)
    assert not decay.satisfies_base_criterion(base * (1 - 1e-6), length, 128)


def _valid_on_grid(bases, length, dim):
    """Brute force: the criterion for every base of a grid, every m = 0 … L."""
    theta = torch.tensor(bases, dtype=torch.float64)[:, None] ** (
        -torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    m = torch.arange(length + 1, dtype=torch.float64)
    return (torch.cos(m[None, :, None] * theta[:, None, :]).sum(-1) >= 0).all(-1)


@pytest.mark.parametrize("length, dim", [(40, 16), (120, 8), (300, 16)])
def test_no_smaller_base_passes_on_a_fine_grid(length, dim):
    best = decay.minimum_base(length, dim)
    grid = np.exp(np.arange(0.0, math.log(best), 2e-4))
    valid = torch.cat([_valid_on_grid(chunk, length, dim)
                       for chunk in np.array_split(grid, max(1, len(grid) // 2000))])
    assert not bool(valid.any()), f"{grid[int(valid.int().argmax())]} < {best} passes"
    assert decay.satisfies_base_criterion(best, length, dim)


def test_the_criterion_is_not_monotone_in_the_base():
    # Why minimum_base cannot bisect: for L = 4096 a larger base fails again.
    length = 4096
    best = decay.minimum_base(length)
    larger = np.exp(np.linspace(math.log(best * 1.01), math.log(best * 2.5), 400))
    assert any(not decay.satisfies_base_criterion(float(b), length) for b in larger)
    assert decay.satisfies_base_criterion(best, length)
    # The figures quoted in minimum_base's docstring.
    assert round(best) == 26952 and decay.satisfies_base_criterion(26970.0, length)
    assert not any(decay.satisfies_base_criterion(b, length) for b in (27000.0, 28200.0, 39800.0))


def test_minimum_base_small_cases():
    assert decay.minimum_base(1) == 1.0  # cos(θ_i) > 0 for every θ_i ≤ 1
    assert decay.minimum_base(1, 2) == 1.0
    for length in (2, 3, 20):  # d = 4: cos m + cos(m·base^(−1/2)) ≥ 0 needs a large base
        best = decay.minimum_base(length, 4)
        assert decay.satisfies_base_criterion(best, length, 4)
        assert not decay.satisfies_base_criterion(best * (1 - 1e-6), length, 4)


def test_full_table_matches_direct_cosines():
    theta = rl.inv_freq(128, 3e4, dtype=torch.float64)
    for length in (1, 5, 99, 1000):
        direct = torch.cos(torch.arange(length + 1, dtype=torch.float64)[:, None] * theta)
        torch.testing.assert_close(decay._cos_sums_up_to(length, theta), direct.sum(-1),
                                   atol=1e-9, rtol=0)


def test_search_speeds_are_inv_freq():
    # minimum_base's inner loop computes θ_i = exp(−u·2i/d) with NumPy.
    u = math.log(12345.0)
    theta = np.exp(-u * np.arange(0, 128, 2) / 128)
    np.testing.assert_allclose(theta, rl.inv_freq(128, 12345.0, dtype=torch.float64).numpy(),
                               rtol=1e-13)


def test_search_leaves_thread_count_alone():
    before = torch.get_num_threads()
    decay.minimum_base(64, 16)
    assert torch.get_num_threads() == before


# --- errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("call, error, match", [
    (lambda: decay.minimum_base(0), ValueError, "context_length must be a positive integer"),
    (lambda: decay.minimum_base(1024.0), TypeError, "context_length must be an int"),
    (lambda: decay.minimum_base(1024, 7), ValueError, "dim must be a positive even"),
    (lambda: decay.minimum_base(5, 2), ValueError, "with dim = 2 no base meets"),
    (lambda: decay.lowest_cos_sum(-1.0, 10), ValueError, "base must be a finite number"),
    (lambda: decay.cos_sum([[1, 2]], 8), ValueError, r"distances must be 1-D"),
    (lambda: decay.cos_sum([1.0, float("nan")], 8), ValueError, "distances must all be finite"),
    (lambda: decay.score_curve(torch.ones(8), torch.ones(6), [1]), ValueError,
     "same head dimension"),
    (lambda: decay.score_curve(torch.ones(7), torch.ones(7), [1]), ValueError,
     r"q.shape\[-1\] must be a positive even"),
    (lambda: decay.score_curve(torch.ones(8, dtype=torch.int64), torch.ones(8), [1]),
     TypeError, "q must be a floating-point tensor"),
    (lambda: decay.score_curve(torch.ones(8), torch.ones(8), [1], layout="pairs"),
     ValueError, "layout must be one of"),
    (lambda: decay.expected_score([1], 8, mode="uniform"), ValueError, "mode must be one of"),
    (lambda: decay.score_std([1], 8, noise=-1.0), ValueError, "noise must be a finite number"),
    (lambda: decay.sample_qk(8, samples=0), ValueError, "samples must be a positive integer"),
    (lambda: decay.abel_curve([1], 8, base=0.0), ValueError, "base must be a finite number"),
])
def test_errors_name_the_parameter(call, error, match):
    with pytest.raises(error, match=match):
        call()
