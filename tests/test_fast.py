"""Every fast path of apply_rope equals the reference formula (rope.rotate_reference).

Run on the CPU always and on CUDA when present (the ``device`` fixture); the Triton kernel
is checked on CUDA, and through Triton's CPU interpreter when triton is installed here.
"""


import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_lab as rl
from rope_lab import _eager, fast, rope

LAYOUTS = ["half", "interleaved"]
TOLERANCE = {torch.float64: 1e-12, torch.float32: 2e-6}


def tables(seq, rotary_dim, device, dtype=torch.float32, positions=None):
    freqs = rl.inv_freq(rotary_dim, device=device, dtype=dtype)
    positions = torch.arange(seq, device=device) if positions is None else positions
    angles = rl.rope_angles(positions, freqs)
    return angles.cos(), angles.sin()


def assert_matches_reference(x, cos, sin, layout, out=None, tolerance=None):
    expected = rope.rotate_reference(x, cos, sin, layout)
    actual = fast.rotate(x.clone() if out is x else x, cos, sin, layout, out=out)
    tolerance = TOLERANCE[torch.promote_types(x.dtype, cos.dtype)] if tolerance is None \
        else tolerance
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, rtol=tolerance, atol=tolerance)
    return actual


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_default_shape_paths_equal_reference(device, layout, dtype):
    x = torch.randn(2, 4, 33, 64, device=device, dtype=dtype)
    cos, sin = tables(33, 64, device, torch.float64 if dtype == torch.float64 else torch.float32)
    assert_matches_reference(x, cos, sin, layout)
    torch.testing.assert_close(rl.apply_rope(x, layout=layout),
                               rope.rotate_reference(x, cos, sin, layout), rtol=0,
                               atol=TOLERANCE[dtype])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_blocked_path_many_blocks(device, layout, monkeypatch):
    """Tiny blocks force the loop over blocks, including a ragged last block."""
    monkeypatch.setattr(_eager, "BLOCK_BYTES", 3 * 16 * 8)
    monkeypatch.setattr(_eager, "block_bytes", lambda: 3 * 16 * 8)
    monkeypatch.setattr(_eager, "blocking_pays", lambda x: True)
    x = torch.randn(3, 5, 7, 16, device=device, dtype=torch.float64)
    cos, sin = tables(7, 16, device, torch.float64)
    assert_matches_reference(x, cos, sin, layout)
    assert len(list(_eager.block_indices(x.shape[:-1], 16 * 8, _eager.BLOCK_BYTES))) > 5


def test_blocks_cover_every_row_once():
    batch = torch.Size([2, 3, 10])
    seen = torch.zeros(batch)
    for index in _eager.block_indices(batch, row_bytes=100, size=350):
        seen[index] += 1
    assert torch.equal(seen, torch.ones(batch))
    assert list(_eager.block_indices(batch, 100, 10**9)) == [(Ellipsis,)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_rounds_once_like_reference(device, layout, dtype):
    """bf16/fp16 in, float32 inside, one rounding: equal to the reference to half an ulp."""
    x = torch.randn(2, 3, 50, 32, device=device).to(dtype)
    cos, sin = tables(50, 32, device)
    out = fast.rotate(x, cos, sin, layout)
    reference = rope.rotate_reference(x, cos, sin, layout)
    assert out.dtype == dtype
    ulp = 2**-7 if dtype == torch.bfloat16 else 2**-10
    error = (out.float() - reference.float()).abs() / reference.float().abs().clamp_min(1.0)
    assert error.max() <= ulp
    full = rope.rotate_reference(x.float(), cos, sin, layout)
    torch.testing.assert_close(out.float(), full, rtol=ulp, atol=ulp)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_odd_shapes(device, layout):
    cases = [
        torch.randn(1, 2, device=device, dtype=torch.float64),  # seq 1, head dim 2
        torch.randn(3, 1, 8, device=device, dtype=torch.float64),  # seq 1
        torch.randn(4, 9, 2, device=device, dtype=torch.float64),  # head dim 2
        torch.randn(9, 6, device=device, dtype=torch.float64),  # no batch dims
    ]
    for x in cases:
        cos, sin = tables(x.shape[-2], x.shape[-1], device, torch.float64)
        assert_matches_reference(x, cos, sin, layout)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_non_contiguous_inputs(device, layout):
    base = torch.randn(2, 10, 4, 16, device=device, dtype=torch.float64)  # (b, seq, h, d)
    cos, sin = tables(10, 16, device, torch.float64)
    transposed = base.transpose(1, 2)  # (b, h, seq, d) view, as after a projection
    assert_matches_reference(transposed, cos, sin, layout)
    odd_offset = torch.randn(2, 10, 17, device=device, dtype=torch.float64)[..., 1:]
    assert_matches_reference(odd_offset, cos, sin, layout)  # no complex view possible
    strided_features = torch.randn(2, 10, 32, device=device, dtype=torch.float64)[..., ::2]
    assert_matches_reference(strided_features, cos, sin, layout)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_broadcast_positions_and_partial_rotary(device, layout):
    x = torch.randn(2, 3, 5, 12, device=device, dtype=torch.float64)
    positions = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]], device=device)[:, None, :]
    cos, sin = tables(5, 8, device, torch.float64, positions=positions)  # rotary_dim 8 < 12
    out = assert_matches_reference(x, cos, sin, layout)
    assert torch.equal(out[..., 8:], x[..., 8:])
    shared = torch.tensor([3.5], device=device, dtype=torch.float64)  # one position for all
    cos, sin = tables(1, 12, device, torch.float64, positions=shared)
    assert_matches_reference(x, cos, sin, layout)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_in_place_equals_out_of_place(device, layout, dtype):
    x = torch.randn(2, 4, 20, 32, device=device).to(dtype)
    expected = rl.apply_rope(x, layout=layout)
    y = x.clone()
    returned = rope.apply_rope_(y, layout=layout)
    assert returned is y
    torch.testing.assert_close(y, expected, rtol=0, atol=0)
    z = x.clone()
    rope.apply_rope_(z, torch.arange(20, device=device), layout=layout, rotary_dim=16)
    torch.testing.assert_close(z, rl.apply_rope(x, torch.arange(20, device=device),
                                                layout=layout, rotary_dim=16))


def test_in_place_refuses_tensor_that_requires_grad():
    x = torch.randn(3, 4, requires_grad=True)
    with pytest.raises(ValueError, match="requires grad; use apply_rope"):
        rope.apply_rope_(x)
    with pytest.raises(ValueError, match="layout must be one of"):
        rope.apply_rope_(torch.randn(3, 4), layout="neox")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_gradient_is_the_inverse_rotation(device, layout):
    x = torch.randn(2, 6, 8, device=device, dtype=torch.float64, requires_grad=True)
    cos, sin = tables(6, 8, device, torch.float64)
    assert torch.autograd.gradcheck(lambda t: fast.rotate(t, cos, sin, layout), (x,))
    weights = torch.randn(2, 6, 8, device=device, dtype=torch.float64)
    (rl.apply_rope(x, layout=layout) * weights).sum().backward()
    expected = rope.rotate_reference(weights, cos, -sin, layout)  # Rᵀ = R(−θ)
    torch.testing.assert_close(x.grad, expected, rtol=1e-12, atol=1e-12)


def test_learnable_frequencies_use_the_reference_and_get_gradients():
    freqs = rl.inv_freq(8).requires_grad_()
    x = torch.randn(5, 8)
    rl.apply_rope(x, inv_freq=freqs).sum().backward()
    assert freqs.grad is not None and freqs.grad.abs().sum() > 0


def test_cached_tables_work_after_inference_mode():
    x = torch.randn(7, 8, requires_grad=True)
    with torch.inference_mode():
        rl.apply_rope(torch.randn(7, 8))  # fills the cache inside inference mode
    rl.apply_rope(x).sum().backward()  # the cached tables must be usable by autograd
    assert x.grad is not None


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 3), st.integers(1, 9), st.integers(1, 8), st.integers(0, 3),
    st.sampled_from(LAYOUTS), st.integers(0, 2**31 - 1),
)
def test_apply_rope_equals_reference_property(batch, seq, half, tail, layout, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, seq, 2 * (half + tail), generator=generator, dtype=torch.float64)
    cos, sin = tables(seq, 2 * half, "cpu", torch.float64)
    expected = rope.rotate_reference(x, cos, sin, layout)
    actual = rl.apply_rope(x, layout=layout, rotary_dim=2 * half)
    torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_cuda_default_path_equals_cpu_reference(layout, dtype):
    """On a GPU the default (Triton when installed) equals the CPU reference."""
    x = torch.randn(2, 8, 300, 128).to(dtype)
    cos, sin = tables(300, 128, "cpu")
    expected = rope.rotate_reference(x, cos, sin, layout).float()
    actual = rl.apply_rope(x.cuda(), layout=layout).cpu().float()
    ulp = {torch.float32: 1e-5, torch.bfloat16: 2**-7, torch.float16: 2**-10}[dtype]
    torch.testing.assert_close(actual, expected, rtol=ulp, atol=ulp)
    partial = rl.apply_rope(x.cuda(), layout=layout, rotary_dim=64).cpu().float()
    torch.testing.assert_close(partial[..., 64:], x[..., 64:].float(), rtol=0, atol=0)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_reports_whether_triton_runs():
    try:
        import triton  # noqa: F401
    except ImportError:
        assert not fast.triton_available()
    else:
        assert fast.triton_available()


def test_repeated_cos_table_is_built_once_and_follows_its_source():
    cos = torch.rand(5, 4)
    first = _eager.cos_for_both(cos, "half")
    assert _eager.cos_for_both(cos, "half") is first
    cos.mul_(2)  # a changed table must not be served from the cache
    torch.testing.assert_close(_eager.cos_for_both(cos, "half"), torch.cat((cos, cos), -1))
    torch.testing.assert_close(_eager.cos_for_both(cos, "interleaved"),
                               cos.repeat_interleave(2, dim=-1))


def test_derived_tables_are_dropped_with_their_source():
    cos, sin = torch.rand(3, 2), torch.rand(3, 2)
    _eager.complex_rotation(cos, sin)
    key = ("complex", id(cos), id(sin))
    assert key in _eager.derived_cache
    del cos
    assert key not in _eager.derived_cache


def test_blocks_on_cpu_sized_by_thread_count():
    x = torch.randn(2, 3)
    assert _eager.blocking_pays(x)
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert _eager.block_bytes() == _eager.BLOCK_BYTES
        torch.set_num_threads(2)
        assert _eager.block_bytes() == _eager.MULTI_THREAD_BLOCK_BYTES
    finally:
        torch.set_num_threads(previous)


def test_inference_mode_with_explicit_positions_and_frequencies():
    x = torch.randn(2, 5, 8)
    expected = rl.apply_rope(x, torch.arange(5) + 3)
    with torch.inference_mode():
        torch.testing.assert_close(rl.apply_rope(x, torch.arange(5) + 3), expected)
        torch.testing.assert_close(
            rl.apply_rope(x, inv_freq=rl.inv_freq(8), layout="interleaved"),
            rl.apply_rope(x, layout="interleaved"),
        )
        q, _ = rl.RotaryEmbedding(8)(x, x)
        torch.testing.assert_close(q, rl.apply_rope(x))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_the_gpu_path_without_triton_is_four_whole_tensor_kernels(layout, dtype, monkeypatch):
    """CUDA without Triton (issue 26 item 4): no cache-sized blocks (on a GPU they only add
    launches), four kernels computing in float32 and rounding once into out. Run here on a
    CPU by telling the eager path that blocks do not pay."""
    from rope_lab import cost

    monkeypatch.setattr(_eager, "blocking_pays", lambda x: False)
    x = torch.randn(2, 3, 50, 32).to(dtype)
    compute = torch.float64 if dtype == torch.float64 else torch.float32
    cos, sin = tables(50, 32, "cpu", compute)
    reference = rope.rotate_reference(x, cos, sin, layout)
    tolerance = {torch.float64: 1e-12, torch.float32: 2e-6, torch.bfloat16: 2**-7}[dtype]
    got = fast.rotate(x, cos, sin, layout, backend="eager")
    torch.testing.assert_close(got, reference, rtol=tolerance, atol=tolerance)
    y = x.clone()
    fast.rotate(y, cos, sin, layout, out=y, backend="eager")  # in place: same numbers
    assert torch.equal(y, got)
    counted = cost.count_kernels(fast.rotate, x, cos, sin, layout, backend="eager")
    assert counted["names"] == ["mul", "addcmul", "mul", "addcmul"], counted["names"]
    # x read as a and b, out written once, one half-size temporary in the compute dtype
    assert counted["bytes_written"] == x.numel() * (x.element_size() + compute.itemsize)
    partial = fast.rotate(x, cos[..., :8], sin[..., :8], layout, backend="eager")
    torch.testing.assert_close(partial, rope.rotate_reference(x, cos[..., :8], sin[..., :8],
                                                              layout),
                               rtol=tolerance, atol=tolerance)
