"""The Triton kernel, run without a GPU: Triton's interpreter executes it on CPU tensors.

The interpreter is chosen when a kernel is defined, so TRITON_INTERPRET=1 is set just for
the import of rope_lab._triton_rope (nothing else in this process needs it). On a machine
with a GPU where the module was already imported for CUDA, the same tests run on CUDA.
Expected values come from ``backend="reference"``, the formula in plain torch ops, and for
the rotation itself from a dense rotation matrix built in float64.
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch
from dense_oracle import dense_rope  # tests/dense_oracle.py

import rope_lab as rl
from rope_lab import fast

pytest.importorskip("triton", reason="triton installs on Linux x86_64 only (make test adds it)")


def _import_interpreted():
    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        from rope_lab import _triton_rope
    finally:
        if previous is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = previous
    return _triton_rope


triton_rope = _import_interpreted()
if triton_rope.INTERPRETED:
    DEVICE = "cpu"
elif torch.cuda.is_available():
    DEVICE = "cuda"
else:
    pytest.skip("the Triton module was imported for CUDA earlier and there is no GPU",
                allow_module_level=True)

# One rounding of a value v in the output dtype moves it by up to 2^-(mantissa bits + 1)·|v|.
TOLERANCE = {torch.float64: 1e-12, torch.float32: 2e-6, torch.bfloat16: 2**-7,
             torch.float16: 2**-10}


def _randn(*shape, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype).to(DEVICE)


def _close(actual, expected, dtype):
    tolerance = TOLERANCE[dtype]
    torch.testing.assert_close(actual.double(), expected.double(), rtol=tolerance,
                               atol=tolerance)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_both_layouts_every_dtype_match_the_reference(layout, dtype):
    x = _randn(2, 3, 9, 16, dtype=dtype)
    got = rl.apply_rope(x, layout=layout, backend="triton")
    assert got.dtype == dtype and got.device == x.device
    _close(got, rl.apply_rope(x, layout=layout, backend="reference"), dtype)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_equals_a_dense_rotation_matrix_in_float64(layout):
    """Independent of the package's formula: R_m x with R_m built entry by entry."""
    x = _randn(1, 2, 6, 8, dtype=torch.float64)
    got = rl.apply_rope(x, layout=layout, backend="triton").cpu()
    expected = dense_rope(x, layout)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize(("dim", "rotary_dim"), [(16, 8), (13, 8), (6, 6), (10, 2)])
def test_partial_rotary_and_odd_widths(layout, dim, rotary_dim):
    """The tail passes through untouched; r/2 that is not a power of two is masked right."""
    x = _randn(2, 2, 5, dim)
    got = rl.apply_rope(x, layout=layout, rotary_dim=rotary_dim, backend="triton")
    _close(got, rl.apply_rope(x, layout=layout, rotary_dim=rotary_dim, backend="reference"),
           torch.float32)
    assert torch.equal(got[..., rotary_dim:], x[..., rotary_dim:])


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_in_place_writes_x_and_moves_its_version(layout):
    x = _randn(2, 3, 7, 16)
    expected = rl.apply_rope(x, layout=layout, backend="reference")
    version = x._version
    assert rl.apply_rope_(x, layout=layout, backend="triton") is x
    _close(x, expected, torch.float32)
    assert x._version > version


def test_strided_and_non_contiguous_inputs():
    base = _randn(2, 7, 3, 32)
    views = {
        "heads and seq transposed": base.transpose(1, 2),  # (batch, seq, heads, dim) memory
        "every other feature": base[..., ::2],  # feature stride 2
        "a slice of the sequence": base.transpose(1, 2)[:, :, 2:5],
        "a column of a wider tensor": base[..., 4:20],
    }
    for name, x in views.items():
        for layout in ("half", "interleaved"):
            got = rl.apply_rope(x, layout=layout, backend="triton")
            expected = rl.apply_rope(x.contiguous(), layout=layout, backend="reference")
            assert got.shape == x.shape, name
            _close(got, expected, torch.float32)


def test_a_sequence_of_one_and_per_batch_positions():
    x = _randn(3, 2, 1, 8)
    _close(rl.apply_rope(x, torch.tensor([41]), backend="triton"),
           rl.apply_rope(x, torch.tensor([41]), backend="reference"), torch.float32)
    x = _randn(3, 2, 5, 8)
    positions = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11], [100, 3, 50, 2, 9]])
    positions = positions[:, None, :].to(DEVICE)  # (batch, 1, seq)
    for layout in ("half", "interleaved"):
        _close(rl.apply_rope(x, positions, layout=layout, backend="triton"),
               rl.apply_rope(x, positions, layout=layout, backend="reference"), torch.float32)


def test_backward_is_the_rotation_the_other_way():
    x = _randn(2, 2, 5, 8, dtype=torch.float64).requires_grad_()
    torch.autograd.gradcheck(lambda t: rl.apply_rope(t, backend="triton"), (x,))
    weights = _randn(2, 2, 5, 8, seed=1)
    x32 = x.detach().float().requires_grad_()
    (rl.apply_rope(x32, backend="triton") * weights).sum().backward()
    reference = x.detach().float().requires_grad_()
    (rl.apply_rope(reference, backend="reference") * weights).sum().backward()
    _close(x32.grad, reference.grad, torch.float32)


def test_a_kernel_that_computes_wrong_numbers_fails_its_self_check(monkeypatch):
    """The first use on a GPU compares Triton with the eager path; here the kernel is made
    to drop the sine term, and the check must say so."""
    assert fast.self_check(triton_rope, torch.device(DEVICE)) is None

    def wrong(x, cos, sin, layout, out):
        triton_rope_rotate(x, cos, torch.zeros_like(sin), layout, out)

    triton_rope_rotate = triton_rope.rotate
    monkeypatch.setattr(triton_rope, "rotate", wrong)
    problem = fast.self_check(triton_rope, torch.device(DEVICE))
    assert problem is not None and "max difference" in problem

    def broken(*args):
        raise RuntimeError("PTX compile failed")

    monkeypatch.setattr(triton_rope, "rotate", broken)
    assert "PTX compile failed" in fast.self_check(triton_rope, torch.device(DEVICE))


def test_failed_self_check_warns_once_and_the_eager_path_serves(monkeypatch):
    monkeypatch.setattr(fast, "self_check", lambda module, device: "simulated mismatch")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fast._start_triton(torch.device(DEVICE)) is False
    assert len(caught) == 1 and "simulated mismatch" in str(caught[0].message)
    assert issubclass(caught[0].category, rl.FastPathWarning)


def test_switched_off_by_environment(monkeypatch):
    monkeypatch.setenv("ROPE_LAB_TRITON", "0")
    assert fast._start_triton(torch.device(DEVICE)) is False
    with pytest.raises(rl.BackendUnavailable, match="ROPE_LAB_TRITON=0"):
        rl.apply_rope(_randn(1, 4, 8), backend="triton")


# --- the one-launch path: angles computed in the kernel from the positions and θ ---------

def _rotation_in_float64(x, positions, theta, layout):
    """Float64 maths with exact m and the given θ (independent of the package)."""
    angles = positions.double()[..., None] * theta.double()
    cos, sin = angles.cos(), angles.sin()
    if layout == "half":
        a, b = x.double().chunk(2, dim=-1)
        return torch.cat((a * cos - b * sin, a * sin + b * cos), -1)
    a, b = x.double()[..., 0::2], x.double()[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)


def _positions_kernel(x, positions, layout="half", rotary_dim=None, out=None):
    """apply_rope through the positions kernel, asserting that it is the one that ran."""
    from rope_lab import cost, rope

    theta = rope._inv_freq(rotary_dim or x.shape[-1], 1e4, x.device, torch.float32)
    if out is None:
        counted = cost.count_kernels(fast.rotate_positions, x, positions, theta, layout,
                                     backend="triton")
        assert "rope_lab Triton kernel" in counted["names"], counted
    return fast.rotate_positions(x, positions, theta, layout, out=out, backend="triton")


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_positions_kernel_near_and_past_2_to_the_24(layout):
    """Below 2^24 transformers' float32 product; at and past it exact m: within a few 1e-7
    of the float64 rotation by exact m·θ_i (float32 θ_i) at any position."""
    positions = torch.tensor([0, 5, 4095, 2**24 - 1, 2**24, 2**24 + 1, 2**25 + 3, 2**28 - 7,
                              2**31 - 1, -(2**24 + 5), -3]).to(DEVICE)
    x = _randn(2, len(positions), 64)
    got = _positions_kernel(x, positions, layout)
    theta = rl.inv_freq(64).to(DEVICE)
    expected = _rotation_in_float64(x, positions, theta, layout)
    small = positions.abs() < 2**24
    # float32 angles below 2^24 carry 2^-24 of the angle (transformers' arithmetic)
    allowance = (positions.abs().double() * 2**-24 * small + 1e-6)[:, None] * 4
    assert ((got.double() - expected).abs() <= allowance).all()
    # and the same numbers as the tables built by torch (cos/sin to about an ulp)
    torch.testing.assert_close(got, rl.apply_rope(x, positions, layout=layout,
                                                  backend="reference"), rtol=0, atol=2e-6)


def test_positions_kernel_cos_and_sin_within_about_one_ulp():
    """The kernel's own cos/sin (argument reduction in float64, Cephes polynomials): the
    pair (1, 0) rotated by m·θ is (cos, sin); against float64 cos/sin of the same float32
    angle, over 2^16 positions and four speeds."""
    positions = (torch.arange(2**16) * 37 + 11).to(DEVICE)
    theta = torch.tensor([1.0, 0.37, 3e-3, 7.5], device=DEVICE)  # 7.5: angles past 2^19
    x = torch.zeros(len(positions), 8, device=DEVICE)
    x[:, :4] = 1.0
    out = fast.rotate_positions(x, positions, theta, "half", backend="triton")
    angles = (positions.float()[:, None] * theta).double()  # below 2^24: the float32 angle
    ulp = 2**-24  # half an ulp of numbers in [0.5, 1)
    assert (out[:, :4].double() - angles.cos()).abs().max() < 2 * ulp * 1.5
    assert (out[:, 4:].double() - angles.sin()).abs().max() < 2 * ulp * 1.5


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_positions_kernel_every_memory_order_and_partial_rotary(layout):
    base = _randn(2, 7, 3, 32)  # (batch, seq, heads, dim) memory
    per_batch = torch.tensor([[0, 1, 2, 3, 4, 5, 6], [9, 70, 2**24 + 1, 3, 4, 8, 1]])
    cases = {
        "transposed, shared ids": (base.transpose(1, 2), torch.arange(7) + 5),
        "transposed, per-batch ids": (base.transpose(1, 2), per_batch[:, None, :]),
        "a slice of the sequence": (base.transpose(1, 2)[:, :, 2:5], torch.tensor([8, 1, 3])),
        "every other feature": (base[..., ::2], torch.arange(3)),
        "full (batch, heads, seq) ids": (base.transpose(1, 2),
                                         torch.arange(42).reshape(2, 3, 7) * 11),
        "int32 ids": (base.transpose(1, 2), torch.arange(7, dtype=torch.int32)),
        "float ids": (base.transpose(1, 2), torch.arange(7.0) / 3),
    }
    for name, (x, positions) in cases.items():
        positions = positions.to(DEVICE)
        for rotary_dim in (None, x.shape[-1] // 2):
            got = rl.apply_rope(x, positions, layout=layout, rotary_dim=rotary_dim,
                                backend="triton")
            expected = rl.apply_rope(x.contiguous(), positions, layout=layout,
                                     rotary_dim=rotary_dim, backend="reference")
            torch.testing.assert_close(got, expected, rtol=0, atol=2e-6, msg=name)
            if rotary_dim:
                assert torch.equal(got[..., rotary_dim:], x[..., rotary_dim:]), name


def test_positions_kernel_default_positions_and_reuse_in_chunks(monkeypatch):
    """No ids: m is the index along seq. A tiny program target splits the heads into
    chunks with a ragged last one, so the loop over the reuse dim is covered."""
    monkeypatch.setattr(triton_rope, "TARGET_PROGRAMS", 3)
    x = _randn(2, 7, 5, 16)  # 7 heads reuse one angle table per (batch, seq)
    for layout in ("half", "interleaved"):
        got = _positions_kernel(x, None, layout)
        _close(got, rl.apply_rope(x, layout=layout, backend="reference"), torch.float32)
        per_batch = torch.tensor([[3], [2**24 + 9]])[:, None, :].to(DEVICE)  # (2, 1, 1)
        decode = _randn(2, 7, 1, 16)
        _close(_positions_kernel(decode, per_batch, layout),
               rl.apply_rope(decode, per_batch, layout=layout, backend="reference"),
               torch.float32)
    plan = triton_rope.plan_positions(x, None, rl.inv_freq(16).to(DEVICE), x)
    sizes, *_, n_reuse, _, _ = plan
    assert n_reuse == 2 * 7  # batch and heads, merged: the positions vary along neither


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_positions_kernel_low_precision_rounds_once(dtype):
    x = _randn(2, 3, 9, 16, dtype=dtype)
    positions = (torch.arange(9) * 1000).to(DEVICE)
    got = rl.apply_rope(x, positions, backend="triton")
    assert got.dtype == dtype
    full = rl.apply_rope(x.float(), positions, backend="reference")
    half_ulp = 2**-8 if dtype == torch.bfloat16 else 2**-11
    if triton_rope.INTERPRETED and dtype == torch.bfloat16:
        half_ulp *= 2  # Triton's interpreter truncates float32 → bfloat16; a GPU rounds
    assert ((got.float() - full).abs() <= half_ulp * full.abs() + 1e-6).all()


def test_positions_kernel_in_place_and_gradients():
    positions = torch.tensor([[4, 5, 2**24 + 2], [0, 90, 7]])[:, None, :].to(DEVICE)
    x = _randn(2, 3, 3, 16)
    expected = rl.apply_rope(x, positions, backend="reference")
    y = x.clone()
    version = y._version
    assert rl.apply_rope_(y, positions, backend="triton") is y
    _close(y, expected, torch.float32)
    assert y._version > version
    # ∂L/∂x = R(−m·θ) ∂L/∂out, computed by the same kernel with the sine negated
    weights = _randn(2, 3, 3, 16, seed=1)
    x32 = x.clone().requires_grad_()
    (rl.apply_rope(x32, positions, backend="triton") * weights).sum().backward()
    theta = rl.inv_freq(16).to(DEVICE)
    expected_grad = _rotation_in_float64(weights, -positions, theta, "half")
    assert (x32.grad.double() - expected_grad).abs().max() < 2e-6
    # and twice: the gradient R(−m·θ)·w is itself differentiable in w, its backward being
    # the forward rotation: ∂/∂w Σ (R(−m·θ) w)·v = R(m·θ) v
    x2, w = x.clone().requires_grad_(), weights.clone().requires_grad_()
    (grad,) = torch.autograd.grad((rl.apply_rope(x2, positions, backend="triton") * w).sum(),
                                  x2, create_graph=True)
    v = _randn(2, 3, 3, 16, seed=2)
    (second,) = torch.autograd.grad((grad * v).sum(), w)
    _close(second, rl.apply_rope(v, positions, backend="reference"), torch.float32)


def test_a_wrong_positions_kernel_fails_the_self_check(monkeypatch):
    """The self-check covers the positions kernel too: here it forgets the sign of sin."""
    assert fast.self_check(triton_rope, torch.device(DEVICE)) is None
    original = triton_rope.rotate_positions

    def wrong(x, positions, theta, layout, out, plan, *, negate=False):
        original(x, positions, theta, layout, out, plan, negate=not negate)

    monkeypatch.setattr(triton_rope, "rotate_positions", wrong)
    problem = fast.self_check(triton_rope, torch.device(DEVICE))
    assert problem is not None and problem.startswith("positions kernel")


def test_positions_kernel_refusals_name_the_reason():
    theta = rl.inv_freq(8).to(DEVICE)
    x = _randn(2, 4, 8)
    assert "float32 angles" in triton_rope.plan_positions(x.double(), None, theta, x.double())
    assert "integer or 16/32-bit float" in triton_rope.plan_positions(
        x, torch.arange(4.0, dtype=torch.float64).to(DEVICE), theta, x)
    assert "contiguous float32 θ" in triton_rope.plan_positions(x, None, theta.double(), x)
    # a named backend says why; float64 x takes the table kernel instead
    _close(rl.apply_rope(x.double(), torch.arange(4).to(DEVICE), backend="triton"),
           rl.apply_rope(x.double(), torch.arange(4).to(DEVICE), backend="reference"),
           torch.float64)


def test_every_kernel_compiles_for_a_real_gpu():
    """The interpreter is not the compiler: lower each kernel to a cubin for Hopper and Ampere
    (tests/triton_compile.py, no GPU needed). The first H200 run failed every compile on a
    module constant the interpreter had accepted."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).with_name("triton_compile.py")
    environment = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(script.parents[1]), environment.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            env=environment, timeout=600)
    if result.returncode and "FAILED" not in result.stdout:
        pytest.skip(f"Triton cannot compile for CUDA here: {result.stderr.strip()[-300:]}")
    assert result.returncode == 0, result.stdout + result.stderr
