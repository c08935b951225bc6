"""The Triton kernels: compiled on CUDA tensors where there is a GPU, else run by Triton's
interpreter on CPU tensors.

Triton picks the interpreter when a kernel is defined, so without a GPU TRITON_INTERPRET=1 is
set just for the import of rope_lab._triton_rope (nothing else in this process needs it). With
a GPU the module is imported as it is for a user, and the tests run the compiled kernels (the
interpreter accepts what the compiler refuses, and the reverse). Expected values come from
``backend="reference"``, the formula in plain torch ops, from float64 rotations computed here,
and for the rotation itself from a dense rotation matrix built in float64.
"""

from __future__ import annotations

import os
import sys
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


if torch.cuda.is_available() or "rope_lab._triton_rope" in sys.modules:
    from rope_lab import _triton_rope as triton_rope  # as a user gets it
else:
    triton_rope = _import_interpreted()
if triton_rope.INTERPRETED:  # no GPU, or TRITON_INTERPRET=1 set by whoever runs the tests
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
    ids = torch.tensor([[5, 0, 9, 4095, 2**24 + 3, 7, 1, 2, 3], [0, 1, 2, 3, 4, 5, 6, 7, 8]])
    for positions in (None, ids[:, None, :].to(DEVICE)):
        got = rl.apply_rope(x, positions, layout=layout, backend="triton")
        assert got.dtype == dtype and got.device == x.device
        _close(got, rl.apply_rope(x, positions, layout=layout, backend="reference"), dtype)


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


@pytest.mark.slow
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
    from rope_lab import _angles, cost

    theta = _angles.inv_freq_values(rotary_dim or x.shape[-1], 1e4, x.device, torch.float32)
    if out is None:
        counted = cost.count_kernels(fast.rope, x, positions, theta, layout, backend="triton")
        assert "rope_lab Triton kernel" in counted["names"], counted
    return fast.rope(x, positions, theta, layout, out=out, backend="triton")


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


@pytest.mark.slow
def test_positions_kernel_cos_and_sin_within_about_one_ulp():
    """The kernel's own cos/sin (argument reduction in float64, Cephes polynomials): the
    pair (1, 0) rotated by m·θ is (cos, sin); against float64 cos/sin of the same float32
    angle, over 2^16 positions and four speeds."""
    positions = (torch.arange(2**16) * 37 + 11).to(DEVICE)
    theta = torch.tensor([1.0, 0.37, 3e-3, 7.5], device=DEVICE)  # 7.5: angles past 2^19
    x = torch.zeros(len(positions), 8, device=DEVICE)
    x[:, :4] = 1.0
    out = fast.rope(x, positions, theta, "half", backend="triton")
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


def test_positions_kernel_default_positions_and_reuse_in_steps(monkeypatch):
    """No ids: m is the index along seq. Small tiles force every part of the launch shape:
    several row blocks (a ragged last one), several heads per step, several steps per
    program and a ragged last head block, whose steps past the end are masked."""
    monkeypatch.setattr(triton_rope, "_plans", {})
    monkeypatch.setattr(triton_rope, "ANGLES_PER_PROGRAM", 16)
    monkeypatch.setattr(triton_rope, "PAIRS_PER_STEP", 32)
    monkeypatch.setattr(triton_rope, "MAX_STEPS", 4)
    monkeypatch.setattr(triton_rope, "TARGET_PROGRAMS", 1)
    x = _randn(2, 7, 5, 16)  # 2 × 7 heads reuse one angle tile per (seq, pairs)
    theta = rl.inv_freq(16).to(DEVICE)
    plan = triton_rope.plan_positions(x, None, theta, x)
    assert plan.ints[0] == 5 and plan.ints[3] == 2 * 7  # rows; heads × batch, merged
    # rows of 2 (3 blocks, the last half empty), 2 heads a step, 4 steps: 16 ≥ 14 heads
    assert (plan.constants["ROWS"], plan.constants["HEADS"], plan.constants["STEPS"],
            plan.grid) == (2, 2, 4, (3 * 2,))
    for layout in ("half", "interleaved"):
        got = _positions_kernel(x, None, layout)
        _close(got, rl.apply_rope(x, layout=layout, backend="reference"), torch.float32)
        per_batch = torch.tensor([[3], [2**24 + 9]])[:, None, :].to(DEVICE)  # (2, 1, 1)
        decode = _randn(2, 7, 1, 16)
        _close(_positions_kernel(decode, per_batch, layout),
               rl.apply_rope(decode, per_batch, layout=layout, backend="reference"),
               torch.float32)


def test_a_plan_is_never_served_to_another_memory_order_or_dtype():
    """Plans are cached by shape, strides and dtypes: the same shape in another memory
    order, or with ids of another dtype, gets its own plan and the right result."""
    contiguous = _randn(2, 3, 7, 32)
    transposed = _randn(2, 7, 3, 32, seed=1).transpose(1, 2)  # same shape, other strides
    ids = torch.arange(7).to(DEVICE) * 5
    before = len(triton_rope._plans)
    for x in (contiguous, transposed, contiguous):
        for positions in (ids, ids.int()):
            _close(rl.apply_rope(x, positions, backend="triton"),
                   rl.apply_rope(x.contiguous(), positions, backend="reference"),
                   torch.float32)
    assert len(triton_rope._plans) >= min(before + 4, 4)


def test_launch_shape_keeps_tiles_small_and_programs_many():
    """The angle tile stays at most ANGLES_PER_PROGRAM (registers: the H200's finding), a
    step moves at most PAIRS_PER_STEP pairs, and the programs cover every row and head."""
    for n_rows, n_reuse, half in [(4096, 256, 64), (8192, 32, 64), (1, 2048, 64),
                                  (64, 32, 64), (512, 8, 32), (7, 3, 20), (1, 1, 8),
                                  (10**6, 1, 64), (3, 10**6, 128)]:
        shape = triton_rope.launch_shape(n_rows, n_reuse, half)
        tile = shape["ROWS"] * shape["BLOCK_HALF"]
        assert shape["BLOCK_HALF"] >= half and tile <= max(
            triton_rope.ANGLES_PER_PROGRAM, shape["BLOCK_HALF"])
        assert shape["HEADS"] * tile <= max(triton_rope.PAIRS_PER_STEP, tile)
        assert 1 <= shape["STEPS"] <= triton_rope.MAX_STEPS
        row_blocks = -(-n_rows // shape["ROWS"])
        per_program = shape["HEADS"] * shape["STEPS"]
        assert shape["programs"] == row_blocks * -(-n_reuse // per_program)
        assert shape["programs"] * shape["ROWS"] * per_program >= n_rows * n_reuse
    # the training shape: enough programs for a GPU of ~132 SMs, a few each
    train = triton_rope.launch_shape(4096, 256, 64)
    assert train["programs"] >= triton_rope.TARGET_PROGRAMS


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

    def wrong(x, positions, theta, out, plan):
        flipped = triton_rope.Launch(plan.kernel, plan.grid, plan.ints,
                                     {**plan.constants, "NEGATE": not plan.constants["NEGATE"]})
        original(x, positions, theta, out, flipped)

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


def _compile_script(*args):
    """Run tests/triton_compile.py in a fresh process (the interpreter off); skip where
    Triton cannot compile for CUDA at all."""
    import subprocess
    from pathlib import Path

    script = Path(__file__).with_name("triton_compile.py")
    environment = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(script.parents[1]), environment.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, str(script), *args], capture_output=True,
                            text=True, env=environment, timeout=600)
    if result.returncode and not any(word in result.stdout for word in ("FAILED", "SPILLS")):
        pytest.skip(f"Triton cannot compile for CUDA here: {result.stderr.strip()[-300:]}")
    return result


@pytest.mark.slow
def test_every_kernel_compiles_for_a_real_gpu_without_spills():
    """The interpreter is not the compiler: lower each kernel to a cubin for Hopper and Ampere
    (tests/triton_compile.py, no GPU needed), and at the launch shapes the plans choose for
    the issue's shapes ptxas reports no spill and no stack frame. The first H200 run failed
    every compile on a module constant the interpreter had accepted; the second found the
    positions kernel spilling at 2048 angles per program."""
    result = _compile_script()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 B spilled" in result.stdout and "SPILLS" not in result.stdout


@pytest.mark.slow
def test_the_spill_check_can_fail():
    """The same check on a tile 16 × the planned one (8192 angles per program at the
    training shape): ptxas reports spills, and the script says so and fails."""
    result = _compile_script("--angles-per-program", "8192", "--only",
                             "train (8, 32, 4096, 128) bf16")
    assert result.returncode == 1 and "SPILLS" in result.stdout, result.stdout + result.stderr


@pytest.mark.slow
def test_the_direct_launch_hands_triton_s_launcher_what_triton_does():
    """After the first launch of a plan, rope_lab calls the compiled kernel's launcher itself
    (Triton's launch costs ~20 µs of Python): with a stand-in driver, both launches must
    pass the launcher the same arguments (grid, stream, kernel, metadata, every tensor and
    int)."""
    result = _compile_script("--launch-check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("ok ") == 2 or "direct launch is off" in result.stdout


# --- q and k in one launch (RotaryEmbedding.forward on CUDA) ---------------------------------

def _pair(q, k, positions, layout, rotary_dim=None):
    theta = rl.inv_freq(rotary_dim or q.shape[-1]).to(DEVICE)
    return fast.rotate_pair(q, k, positions, theta, layout, backend="triton")


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_q_and_k_in_one_launch_equal_two_calls(layout, dtype):
    """Grouped-query heads (8 q, 2 k), per-batch ids past 2^24, HF's (batch, seq, heads, dim)
    memory, partial rotary, default positions: one launch, each tensor equal to the
    reference formula's (torch's tables, rotated one tensor at a time)."""
    from rope_lab import cost

    q_memory = _randn(2, 5, 8, 32, dtype=dtype)  # (batch, seq, heads, dim) in memory
    k_memory = _randn(2, 5, 2, 32, dtype=dtype, seed=1)
    per_batch = torch.tensor([[0, 1, 2, 3, 4], [9, 2**24 + 1, 70_000, 3, 4]])[:, None, :]
    cases = {
        "(b, h, s, d), per-batch ids": (q_memory.transpose(1, 2).contiguous(),
                                        k_memory.transpose(1, 2).contiguous(), per_batch, None),
        "HF memory, shared ids": (q_memory.transpose(1, 2), k_memory.transpose(1, 2),
                                  torch.arange(5) + 11, None),
        "partial rotary": (q_memory.transpose(1, 2), k_memory.transpose(1, 2), per_batch, 16),
        "default positions": (q_memory.transpose(1, 2), k_memory.transpose(1, 2), None, None),
    }
    for name, (q, k, positions, rotary_dim) in cases.items():
        positions = None if positions is None else positions.to(DEVICE)
        counted = cost.count_kernels(_pair, q, k, positions, layout, rotary_dim)
        assert counted["names"].count("rope_lab Triton kernel") == 1, (name, counted)
        q_out, k_out = _pair(q, k, positions, layout, rotary_dim)
        r = rotary_dim or 32
        for x, got in ((q, q_out), (k, k_out)):
            assert got.shape == x.shape and got.dtype == dtype, name
            _close(got, rl.apply_rope(x.contiguous(), positions, layout=layout, rotary_dim=r,
                                      backend="reference"), dtype)
            assert torch.equal(got[..., r:], x[..., r:]), name


def test_q_and_k_that_cannot_share_a_launch_are_handed_back():
    """Rows that fold differently (here q holds 5 tokens, k 3: their ids differ), or mixed
    dtypes: None, and the caller rotates them one by one."""
    q, k = _randn(1, 2, 5, 16), _randn(1, 2, 3, 16)
    assert _pair(q, k, None, "half") is None
    assert _pair(q, _randn(1, 2, 5, 16).half(), None, "half") is None
    plan = triton_rope.plan_pair(q, k, None, rl.inv_freq(16).to(DEVICE), q.clone(), k.clone())
    assert "do not fold alike" in plan


@pytest.mark.skipif(DEVICE != "cuda", reason="RotaryEmbedding takes one launch on CUDA only")
@pytest.mark.parametrize("positions_given", [True, False])
def test_rotary_embedding_rotates_q_and_k_with_one_launch_on_cuda(positions_given):
    from rope_lab import cost

    module = rl.RotaryEmbedding(32).to(DEVICE)
    q, k = _randn(2, 8, 5, 32, dtype=torch.bfloat16), _randn(2, 2, 5, 32, dtype=torch.bfloat16)
    ids = (torch.tensor([[0, 1, 2, 3, 4], [40, 41, 42, 43, 44]])[:, None, :].to(DEVICE)
           if positions_given else None)
    counted = cost.count_kernels(module, q, k, ids)
    assert counted["kernels"] == 3 and counted["names"].count("rope_lab Triton kernel") == 1
    got_q, got_k = module(q, k, ids)
    _close(got_q, rl.apply_rope(q, ids, backend="reference"), torch.bfloat16)
    _close(got_k, rl.apply_rope(k, ids, backend="reference"), torch.bfloat16)
